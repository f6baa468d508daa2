"""The figures irscope shows, computed once: per kernel, per output code, per unit and per run.

Every front end (the inspect summary, ``ls``, reports, diffs and gates, the TUI) reads these
records rather than picking figures out of parser JSON itself, so one figure has one meaning
everywhere:

- a graph's kernels generated / launched / extern calls are summed over its distinct output
  codes (forward, backward, inference), each counted once whatever the number of sources;
- spills are the bytes ptxas reports, never STL/LDL traffic (local arrays are not spills);
- shared memory is one figure, per block: static plus the dynamic shared memory asked for at
  launch, with both parts kept;
- run totals are sums over distinct graphs and kernels.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .kernels import KernelRecord

if TYPE_CHECKING:  # annotations only: the parser module loads on the first parse
    from irscope.parsers.inductor import OutputCode

ROLES = ("forward", "backward", "inference")
EVENT_FIGURES = {"graph_break": "graph_breaks", "recompile": "recompiles",
                 "compile_failure": "compile_failures"}


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value)


@dataclass(frozen=True)
class OutputCodeFigures:
    """One Inductor output code of a graph: its role and what its call() does."""

    stage: str
    role: str | None
    kernels_generated: int
    kernels_launched: int  # every launch in call(): generated kernels, extern and fallback calls
    extern_calls: int

    @property
    def label(self) -> str:
        return self.role or self.stage


def output_code_figures(stage_name: str, parsed: OutputCode) -> OutputCodeFigures:
    """From the output-code parser's result."""
    totals = parsed.totals
    role = parsed.role
    return OutputCodeFigures(stage=stage_name, role=role if role in ROLES else None,
                             kernels_generated=_int(totals.get("kernels_generated")) or 0,
                             kernels_launched=_int(totals.get("kernels_launched")) or 0,
                             extern_calls=_int(totals.get("extern_calls")) or 0)


@dataclass(frozen=True)
class UnitFigures:
    """A unit's figures: its output codes, its kernels' resources and its events."""

    unit_id: int
    name: str
    framework: str
    output_codes: tuple[OutputCodeFigures, ...] = ()
    kernels: tuple[KernelRecord, ...] = ()
    events: Mapping[str, int] = field(default_factory=dict)
    launch_links: int = 0  # kernel units this graph is linked to

    @property
    def is_graph(self) -> bool:
        return bool(self.output_codes)

    def _sum(self, attr: str) -> int | None:
        if not self.output_codes:
            return None
        return sum(getattr(code, attr) for code in self.output_codes)

    @property
    def kernels_generated(self) -> int | None:
        return self._sum("kernels_generated")

    @property
    def kernels_launched(self) -> int | None:
        return self._sum("kernels_launched")

    @property
    def extern_calls(self) -> int | None:
        return self._sum("extern_calls")

    def _peak(self, attr: str):
        values = [getattr(k, attr) for k in self.kernels if getattr(k, attr) is not None]
        return max(values) if values else None

    @property
    def registers(self) -> int | None:
        return self._peak("registers")

    @property
    def shared_bytes(self) -> int | None:
        return self._peak("shared_bytes") if self.kernels else None

    @property
    def spill_bytes(self) -> int | None:
        values = [k.spill_bytes for k in self.kernels if k.spill_bytes is not None]
        return sum(values) if values else None

    @property
    def occupancy(self) -> float | None:
        """The lowest occupancy of the unit's kernels (the one that limits it)."""
        values = [k.occupancy for k in self.kernels if k.occupancy is not None]
        return min(values) if values else None

    @property
    def occupancy_limiter(self) -> str | None:
        lowest = self.occupancy
        return next((k.occupancy_limiter for k in self.kernels if k.occupancy == lowest), None)

    def headline(self) -> dict[str, float]:
        """The unit's figures by name, only those it has (the names reports and gates use)."""
        out: dict[str, float] = {}
        for name in ("kernels_generated", "kernels_launched", "extern_calls", "registers",
                     "shared_bytes", "occupancy"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.spill_bytes is not None:
            out["spills"] = self.spill_bytes
        if self.kernels:
            out["shared_static_bytes"] = max(k.shared_static_bytes for k in self.kernels)
            out["shared_dynamic_bytes"] = max(k.shared_dynamic_bytes for k in self.kernels)
            frames = [k.stack_frame_bytes for k in self.kernels if k.stack_frame_bytes is not None]
            if frames:
                out["stack_frame_bytes"] = max(frames)
        for code in self.output_codes:  # each output code's own, labelled by its role
            if code.role and len(self.output_codes) > 1:
                out[f"{code.role}.kernels_generated"] = code.kernels_generated
                out[f"{code.role}.kernels_launched"] = code.kernels_launched
        if self.launch_links and "kernels_launched" not in out:
            out["kernels_launched"] = self.launch_links
        out.update(self.events)
        return out


@dataclass(frozen=True)
class RunFigures:
    """Run totals, each summed over distinct graphs and kernels."""

    units: tuple[UnitFigures, ...]
    unplaced_events: Mapping[str, int] = field(default_factory=dict)  # of no unit

    @property
    def graphs(self) -> tuple[UnitFigures, ...]:
        return tuple(u for u in self.units if u.is_graph)

    @property
    def kernels_generated(self) -> int:
        return sum(u.kernels_generated or 0 for u in self.graphs)

    @property
    def kernels_launched(self) -> int:
        return sum(u.kernels_launched or 0 for u in self.graphs)

    def event_total(self, figure: str) -> int:
        return (sum(u.events.get(figure, 0) for u in self.units)
                + self.unplaced_events.get(figure, 0))

    @property
    def recompiles(self) -> int:
        """Recompilations: compiles with a failed guard, however many guards failed."""
        return sum(1 for u in self.units if u.events.get("recompiles"))


def unit_figures(unit, output_codes: Iterable[tuple[str, str, OutputCode]],
                 events: Mapping[str, int] = {}, launch_links: int = 0) -> UnitFigures:
    """A unit's figures. ``output_codes``: (identity key, stage name, parsed result) of each
    output-code stage; stages with a key seen before (another source of the same code) are
    counted once."""
    seen: set[str] = set()
    codes = []
    for key, stage_name, parsed in output_codes:
        if key in seen:
            continue
        seen.add(key)
        codes.append(output_code_figures(stage_name, parsed))
    attrs = unit.attrs if isinstance(unit.attrs, Mapping) else {}
    resources = attrs.get("resources")
    metadata = {k: attrs[k] for k in ("shared", "num_warps", "target", "arch") if k in attrs}
    if isinstance(attrs.get("metadata"), Mapping):
        metadata = {**attrs["metadata"], **metadata}
    kernels = tuple(KernelRecord.from_entry(str(name), entry, metadata)
                    for name, entry in (resources.items() if isinstance(resources, Mapping)
                                        else ()) if isinstance(entry, Mapping))
    return UnitFigures(unit.id, unit.name, unit.framework, tuple(codes), kernels,
                       dict(events), launch_links)


def count_events(events: Iterable) -> dict[int | None, dict[str, int]]:
    """Unit id -> {graph_breaks, recompiles, compile_failures}: how many of each it has."""
    counts: dict[int | None, Counter] = {}
    for event in events:
        figure = EVENT_FIGURES.get(event.kind)
        if figure:
            counts.setdefault(event.unit_id, Counter())[figure] += 1
    return {unit: dict(c) for unit, c in counts.items()}
