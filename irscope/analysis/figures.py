"""The figures irscope shows, computed once: per kernel, per output code, per unit and per run.

Every front end (the inspect summary, ``ls``, reports, diffs and gates, the TUI) reads these
records rather than picking figures out of parser JSON itself, so one figure has one meaning
everywhere:

- a graph's kernels generated / launched / extern calls are summed over its distinct output
  codes, and over those of each role (forward, backward, inference: the DDP optimizer's
  buckets are parts of one role), each counted once whatever the number of sources;
- spills are the bytes ptxas reports, never STL/LDL traffic (local arrays are not spills);
- shared memory is one figure, per block: static plus the dynamic shared memory asked for at
  launch, with both parts kept;
- a run's counts are sums over distinct graphs and kernels; a quantity of one block or
  thread (registers, shared memory, stack frame, spills) is the largest over kernels, with the
  kernel that has it; occupancy is the lowest and the mean weighted by launches
  (``roll_up``), all over the kernels that run: autotuning candidates another configuration
  beat are kept and shown but left out (``lost_candidates``). docs/figures.md lists them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, is_dataclass, replace
from functools import lru_cache
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
    autotune_lost: bool = False  # a configuration autotuning compiled and did not choose
    launches: int = 0  # a kernel's launches per call of the graphs that launch it

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
        """ptxas's spill bytes per thread (stores and loads) of the kernel that spills most."""
        return self._peak("spill_bytes")

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
        if len(self.output_codes) > 1:  # each role's, over every output code of that role
            for code in self.output_codes:
                if code.role:
                    for figure in ("kernels_generated", "kernels_launched"):
                        key = f"{code.role}.{figure}"
                        out[key] = out.get(key, 0) + getattr(code, figure)
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
                 events: Mapping[str, int] = {}, launch_links: int = 0,
                 autotune_lost: bool = False, launches: int = 0) -> UnitFigures:
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
    kernels = unit_kernels(unit.attrs if isinstance(unit.attrs, Mapping) else {})
    return UnitFigures(unit.id, unit.name, unit.framework, tuple(codes), kernels,
                       dict(events), launch_links, autotune_lost, launches)


def unit_kernels(attrs: Mapping[str, Any]) -> tuple[KernelRecord, ...]:
    """The kernel records a unit keeps (``attrs["resources"]``), read with its launch
    metadata."""
    resources = attrs.get("resources")
    metadata = {k: attrs[k] for k in ("shared", "num_warps", "target", "arch") if k in attrs}
    if isinstance(attrs.get("metadata"), Mapping):
        metadata = {**attrs["metadata"], **metadata}
    return tuple(KernelRecord.from_entry(str(name), entry, metadata)
                 for name, entry in (resources.items() if isinstance(resources, Mapping)
                                     else ()) if isinstance(entry, Mapping))


def lost_candidates(compiles: Iterable[tuple[int, tuple, bool, tuple[KernelRecord, ...]]]
                    ) -> frozenset[int]:
    """The compiles autotuning tried and did not run, of ``(unit id, kernel key, chosen,
    kernel records)`` rows: where several compiles share a kernel key (a kernel's name,
    module and rank), those autotuning did not choose when it chose one (Inductor's
    ``.best_config``), and those that cannot launch at all (a block needs more shared memory,
    registers or threads than the GPU has)."""
    groups: dict[tuple, list] = {}
    for row in compiles:
        groups.setdefault(row[1], []).append(row)
    lost = set()
    for rows in groups.values():
        if len(rows) < 2:
            continue
        chosen = any(row[2] for row in rows)
        for unit_id, _, best, kernels in rows:
            unlaunchable = any(k.occupancy_limiter == "unlaunchable" for k in kernels)
            if unlaunchable or (chosen and not best):
                lost.add(unit_id)
    return frozenset(lost)


# How a run combines what its units report, by a figure's last name part: a quantity of one
# block or thread is the largest over kernels, occupancy the lowest (and its launch-weighted
# mean as ``occupancy.mean``), every other figure a count summed over units.
LARGEST = frozenset({"registers", "spills", "shared_bytes", "shared_static_bytes",
                     "shared_dynamic_bytes", "stack_frame_bytes", "stack_bytes", "local_bytes",
                     "const_bytes", "threads_per_block", "barriers"})
LOWEST = frozenset({"occupancy"})
MEAN = "mean"
COUNTS = frozenset({"lint", "passes", "op", "category"})  # name parts of figures that count


@lru_cache(maxsize=1 << 16)  # asked once per figure of every unit: 10,000s of names
def combining(figure: str) -> str:
    """How a run combines ``figure`` over its units: "largest", "lowest" or "sum"."""
    parts = figure.split(".")
    if COUNTS.intersection(parts[:-1]):
        return "sum"
    return "largest" if parts[-1] in LARGEST else "lowest" if parts[-1] in LOWEST else "sum"


@dataclass(frozen=True)
class RunRollup:
    """A run's figures from its units' (``roll_up``): each value, and for a largest or
    lowest one the unit that has it."""

    values: Mapping[str, float]
    set_by: Mapping[str, str]


def roll_up(units: Iterable[tuple[str, Mapping[str, float], int]]) -> RunRollup:
    """Combine ``(unit name, figures, launches)`` rows into run figures (see LARGEST,
    LOWEST): a tie goes to the unit whose name sorts first, whatever order units come in;
    the mean weighs each unit by its launches (one at least: a kernel compiled was
    launched)."""
    values: dict[str, float] = {}
    set_by: dict[str, str] = {}
    weighted: dict[str, list[float]] = {}
    for name, figures, launches in units:
        for figure, value in figures.items():
            how = combining(figure)
            old = values.get(figure)
            if how != "sum":
                better = old is None or (value > old if how == "largest" else value < old)
                if better or (value == old and name < set_by[figure]):
                    values[figure], set_by[figure] = value, name
                if how == "lowest":
                    total = weighted.setdefault(figure, [0.0, 0.0])
                    total[0] += value * max(launches, 1)
                    total[1] += max(launches, 1)
            else:
                values[figure] = value if old is None else old + value
    for figure, (total, weight) in weighted.items():
        values[f"{figure}.{MEAN}"] = round(total / weight, 4)
    return RunRollup(values, set_by)


def count_events(events: Iterable) -> dict[int | None, dict[str, int]]:
    """Unit id -> {graph_breaks, recompiles, compile_failures}: how many of each it has. A
    unit is one compile, so it is one recompilation however many guards failed (each is a
    ``recompile`` event); an event of no unit is one of each."""
    counts: dict[int | None, Counter] = {}
    for event in events:
        figure = EVENT_FIGURES.get(event.kind)
        if figure:
            counts.setdefault(event.unit_id, Counter())[figure] += 1
    for unit, counted in counts.items():
        if unit is not None and counted.get("recompiles"):
            counted["recompiles"] = 1
    return {unit: dict(c) for unit, c in counts.items()}


def one_per_recompile(events: Iterable) -> list:
    """``events`` with the ``recompile`` events of one unit (one per failed guard) folded
    into the first, whose ``reason`` lists every failed guard (``data["guards"]`` counts
    them): a recompilation is one compile whatever the number of its guards that failed."""
    events = list(events)
    reasons: dict[int, list[str]] = {}
    for event in events:
        if event.kind == "recompile" and event.unit_id is not None:
            reasons.setdefault(event.unit_id, []).append(
                " ".join(str((event.data or {}).get("reason") or "").split()))
    out, seen = [], set()
    for event in events:
        if event.kind != "recompile" or event.unit_id is None:
            out.append(event)
        elif event.unit_id not in seen:
            seen.add(event.unit_id)
            guards = [r for r in reasons[event.unit_id] if r] or [""]
            data = {**(event.data or {}), "reason": "; ".join(guards), "guards": len(guards)}
            out.append(replace(event, data=data) if is_dataclass(event) else (event.kind, data))
    return out
