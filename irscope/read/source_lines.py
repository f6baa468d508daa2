"""Per source line, what it feeds: launches by role, distinct kernel units and their
instructions; the rows of the source view, `where FILE` and the report's source-line table."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from irscope.read.autotune import chosen_configuration
from irscope.read.provenance import (CALLER_FRAME, DEFINED, KERNEL, Hit, hits_by_line,
                                     provenance_graph, sources_of)
from irscope.read.view import RunView
from irscope.store import Stage, Unit

COUNTED_KINDS = ("sass", "ptx", "llir")  # a kernel's instructions: the first held


@dataclass(frozen=True)
class LineRow:
    """What one source line feeds: its hits, the launches by role, the distinct kernel units
    (one configuration of an autotuned kernel) and their instructions (SASS, else PTX, else
    LLVM IR, as each kernel holds them)."""

    path: str
    line: int
    hits: tuple[Hit, ...]
    forward: int = 0
    backward: int = 0
    inference: int = 0
    other: int = 0  # user kernels, XLA fusions and unfused instructions, Thunder regions
    kernels: int | None = 0  # None: unknown (launches no record places, see unsourced_launches)
    instructions: int | None = 0  # None: unknown (that, or a kernel with no code counted)
    gpu_time_ns: int | None = None  # measured (inspect --profile): the kernels it feeds

    def summary(self) -> str:
        """`2 fwd · 3 bwd · 4 kernels · 1,234 instr`, for the gutter and `where FILE`."""
        parts = [f"{n} {word}" for n, word in ((self.forward, "fwd"), (self.backward, "bwd"),
                                              (self.inference, "inf"), (self.other, "other"))
                 if n]
        if self.kernels:
            parts.append(f"{self.kernels} kernel{'s' * (self.kernels != 1)}")
        if self.instructions:
            parts.append(f"{self.instructions:,} instr")
        if self.gpu_time_ns:
            parts.append(f"{self.gpu_time_ns / 1000:,.1f} µs")
        return " · ".join(parts)

    @property
    def with_callees(self) -> bool:
        """Whether the line counts the kernels of the code it calls too: some of its hits it
        reaches only as a caller frame of their stack traces (``callers`` False drops them)."""
        return any(hit.records == (CALLER_FRAME,) for hit in self.hits)

    def label(self) -> str:
        """What `where FILE` and the source view say of the line: its summary, and ``(with
        callees)`` where it counts the kernels of the code it calls."""
        return self.summary() + ("  (with callees)" if self.with_callees else "")


def line_rows(view: RunView, path: str, callers: bool = True) -> dict[int, LineRow]:
    """Each line of ``path`` that feeds something, with its figures; ``callers`` False counts
    only what a line does itself (not the kernels of the code it calls)."""
    count = kernel_instructions(view)
    times = line_times(view, callers)
    unknown = unsourced_launches(view).launches > 0
    rows = {}
    for line, hits in hits_by_line(view, path, callers).items():
        roles = [hit.role if hit.graph is not None else "" for hit in hits]
        units = {(chosen := chosen_configuration(view, hit.kernels)).id: chosen
                 for hit in hits if hit.kernels}
        counted = {role: roles.count(role) for role in ("forward", "backward", "inference")}
        instructions = [count(unit) for unit in units.values()]
        rows[line] = LineRow(path, line, tuple(hits), **counted,
                             other=len(hits) - sum(counted.values()),
                             kernels=None if unknown else len(units),
                             instructions=None if unknown or None in instructions
                             else sum(instructions),
                             gpu_time_ns=times.get((path, line)))
    return rows


def line_times(view: RunView, callers: bool = True) -> dict[tuple[str, int], int]:
    """Measured GPU time (ns) per source line (``inspect --profile``): each kernel row's time
    to the lines it was made from (with the lines that call them when ``callers``); empty for
    a run with no profile."""
    def build() -> dict[tuple[str, int], int]:
        from irscope.read.timing import read_time, source_lines

        measured = read_time(view)
        totals: dict[tuple[str, int], int] = {}
        for kernel in measured.kernels if measured is not None else ():
            for key in source_lines(view, kernel, callers):
                totals[key] = totals.get(key, 0) + kernel.total_ns
        return totals

    return view.derived(f"line times {callers}", build)


def run_line_rows(view: RunView) -> list[LineRow]:
    """Every source line of the run that feeds a kernel by itself (innermost frames), the
    most kernels, then the most instructions, first."""
    rows = [row for path in provenance_graph(view).files()
            for row in line_rows(view, path, callers=False).values()]
    return sorted(rows, key=lambda r: (-(r.kernels or 0), -(r.instructions or 0), r.path,
                                       r.line))


def kernel_instructions(view: RunView):
    """A function giving a kernel unit's instruction count (None where it holds no code
    counted: a C++ kernel), each unit read once per view."""
    memo: dict[int, int | None] = view.derived("kernel_instructions", dict)

    def count(unit: Unit) -> int | None:
        if unit.id not in memo:
            counted = view.derived("kernel_instructions.stages",
                                   lambda: view.stages_by_unit(COUNTED_KINDS))
            memo[unit.id] = _instructions(view, counted.get(unit.id, []))
        return memo[unit.id]
    return count


def _instructions(view: RunView, stages: list[Stage]) -> int | None:
    for kind in COUNTED_KINDS:
        for stage in stages:
            if stage.kind == kind:
                try:
                    total = view.totals(stage).get("instructions")
                except Exception:  # noqa: BLE001  an odd stage counts nothing
                    total = None
                if isinstance(total, (int, float)):
                    return int(total)
    return None


@dataclass(frozen=True)
class Unsourced:
    """Launches of generated kernels that no record leads to from a source line (an output
    code that names no FX node for them), of all such launches, and the frameworks of the
    kernels they run. Where there are any, no line's kernel count is known."""

    launches: int = 0
    of: int = 0
    frameworks: tuple[str, ...] = ()


def unsourced_launches(view: RunView) -> Unsourced:
    """The run's launches of generated kernels with no record of a source line."""
    def build() -> Unsourced:
        graph = provenance_graph(view)
        launches = {edge.dst for edge in graph.edges if edge.via == DEFINED}
        unsourced = [node for node in launches if not sources_of(graph, [node], callers=True)]
        frameworks = {graph.units[edge.dst.unit_id].framework for node in unsourced
                      for edge in graph.downstream(node)
                      if edge.dst.kind == KERNEL and edge.dst.unit_id in graph.units}
        return Unsourced(len(unsourced), len(launches), tuple(sorted(frameworks)))

    return view.derived("unsourced launches", build)


def unknown_note(view: RunView, rows: Iterable[LineRow]) -> str:
    """Why some of ``rows``' kernel or instruction counts are unknown, and what records them;
    empty where every one is known."""
    missing = unsourced_launches(view)
    if missing.launches:
        why = ("Inductor's C++ output code writes no Source Nodes comment above its kernels' "
               "launches" if "cpp" in missing.frameworks else
               "their output code names no FX node for them")
        return (f"Kernels and Instructions unknown: no record links {missing.launches} of "
                f"{missing.of} launches of generated kernels to a source line ({why}); Fwd, "
                f"Bwd and Inf count the launches that have one. `irscope inspect "
                f"--provenance` records each launch's source (INDUCTOR_PROVENANCE=1).")
    if any(row.instructions is None for row in rows):
        return ("Instructions unknown where one of a line's kernels has no SASS, PTX or LLVM "
                "IR in the run to count (a C++ kernel has none).")
    return ""
