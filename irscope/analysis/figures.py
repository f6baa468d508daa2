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

from .occupancy import occupancy

if TYPE_CHECKING:  # annotations only: the parser module loads on the first parse
    from irscope.parsers.inductor import OutputCode

ROLES = ("forward", "backward", "inference")
EVENT_FIGURES = {"graph_break": "graph_breaks", "recompile": "recompiles",
                 "compile_failure": "compile_failures"}


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value)


def _arch(value: Any) -> int | None:
    """90 from 90, "90", "sm90", "sm_90a" or Triton's {"arch": 90} target."""
    if isinstance(value, Mapping):
        value = value.get("arch")
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        digits = "".join(ch for ch in value.split("sm")[-1] if ch.isdigit())
        return int(digits) if digits else None
    return None


@dataclass(frozen=True)
class KernelFigures:
    """One compiled GPU kernel's resources: what ptxas, cuobjdump and the launch metadata say."""

    name: str
    arch: int | None = None
    registers: int | None = None
    spill_store_bytes: int | None = None  # ptxas's; None when no PTX was assembled
    spill_load_bytes: int | None = None
    stack_frame_bytes: int | None = None
    local_store_bytes: int | None = None  # STL/LDL bytes in the SASS: spills and local arrays
    local_load_bytes: int | None = None
    shared_static_bytes: int = 0  # declared in the cubin
    shared_dynamic_bytes: int = 0  # asked for at launch (Triton's metadata "shared")
    threads_per_block: int | None = None
    occupancy: float | None = None
    occupancy_limiter: str | None = None

    @property
    def shared_bytes(self) -> int:
        """Shared memory one block takes: static plus dynamic."""
        return self.shared_static_bytes + self.shared_dynamic_bytes

    @property
    def spill_bytes(self) -> int | None:
        if self.spill_store_bytes is None:
            return None
        return self.spill_store_bytes + (self.spill_load_bytes or 0)


def kernel_figures(name: str, entry: Mapping[str, Any],
                   metadata: Mapping[str, Any]) -> KernelFigures:
    """A kernel's figures from its stored resource entry and its unit's launch metadata.

    Entries filed before spills came from ptxas carry STL/LDL counts under ``spill_*`` and
    static shared memory under ``shared_bytes``: those counts are kept as local traffic, not
    as spills. Occupancy is computed here, so every reader gets the same one.
    """
    new_style = "shared_static_bytes" in entry
    static = _int(entry.get("shared_static_bytes" if new_style else "shared_bytes")) or 0
    dynamic = _int(entry.get("shared_dynamic_bytes" if new_style else "dynamic_shared_bytes"))
    if dynamic is None:
        dynamic = _int(metadata.get("shared")) or 0
    arch = _arch(entry.get("arch")) or _arch(metadata.get("target")) or _arch(
        metadata.get("arch"))
    registers = _int(entry.get("registers"))
    threads = _int(entry.get("threads_per_block"))
    if threads is None and _int(metadata.get("num_warps")):
        threads = _int(metadata.get("num_warps")) * 32
    card = None
    if arch and threads and registers is not None:
        card = occupancy(arch, threads, registers, static + dynamic)
    local_store = entry.get("local_store_bytes", None if new_style else entry.get("spill_stores"))
    local_load = entry.get("local_load_bytes", None if new_style else entry.get("spill_loads"))
    return KernelFigures(
        name=name, arch=arch, registers=registers,
        spill_store_bytes=_int(entry.get("spill_store_bytes")),
        spill_load_bytes=_int(entry.get("spill_load_bytes")),
        stack_frame_bytes=_int(entry.get("stack_frame_bytes", entry.get("stack_bytes"))),
        local_store_bytes=_int(local_store), local_load_bytes=_int(local_load),
        shared_static_bytes=static, shared_dynamic_bytes=dynamic, threads_per_block=threads,
        occupancy=round(card.ratio, 4) if card else None,
        occupancy_limiter=card.limiter if card else None)


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
    kernels: tuple[KernelFigures, ...] = ()
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
    kernels = tuple(kernel_figures(str(name), entry, metadata)
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
