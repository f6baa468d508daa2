"""The source view: a user's file as the run's records name it, each line with the kernels it
feeds (forward and backward) and their instruction counts, and the files a run can show so."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from irscope.errors import IrscopeError
from irscope.files import read_artifact
from irscope.parsers.base import LIBRARY_PATH_RE
from irscope.read.provenance import Hit, hits_by_line, provenance_graph
from irscope.read.view import RunView
from irscope.store import Stage, Unit

COUNTED_KINDS = ("sass", "ptx", "llir", "cpp_kernel")  # a kernel's instructions: the first held


@dataclass(frozen=True)
class LineRow:
    """What one source line feeds: its hits, the launches by role, the distinct kernel units
    and their instructions (SASS, else PTX, else LLVM IR, as each kernel holds them)."""

    line: int
    hits: tuple[Hit, ...]
    forward: int = 0
    backward: int = 0
    other: int = 0  # inference graphs, user kernels, XLA fusions, Thunder regions
    kernels: int = 0
    instructions: int = 0

    def summary(self) -> str:
        """`2 fwd · 3 bwd · 4 kernels · 1,234 instr`, for the gutter and the report."""
        parts = [f"{n} {word}" for n, word in ((self.forward, "fwd"), (self.backward, "bwd"),
                                              (self.other, "other")) if n]
        if self.kernels:
            parts.append(f"{self.kernels} kernel{'s' * (self.kernels != 1)}")
        if self.instructions:
            parts.append(f"{self.instructions:,} instr")
        return " · ".join(parts)


@dataclass(frozen=True)
class SourceView:
    """A file to show: the path the records name it by, a title saying where its text came
    from, its lines, and per 1-based line what it feeds."""

    path: str
    title: str
    lines: tuple[str, ...]
    rows: Mapping[int, LineRow] = field(default_factory=dict)


def source_files(view: RunView) -> list[str]:
    """The files the run's records name, the user's own (outside library folders) first."""
    files = provenance_graph(view).files()
    return sorted(files, key=lambda p: (bool(LIBRARY_PATH_RE.search(p)), p))


def source_view(view: RunView, path: str, disk: bool = True) -> SourceView | str:
    """``path`` (as the records name it) with its rows; its text from the run when a unit's
    source stage holds it, else from this machine when ``disk``; a string says why not."""
    graph = provenance_graph(view)
    if path not in graph.files():
        return f"{path}: the run's records name no such file"
    rows = line_rows(view, path)
    held = graph.held.get(path)
    if held:
        lines = tuple(held.get(number, "") for number in range(1, max(held) + 1))
        return SourceView(path, f"{path} (from the run: the kernels it compiled)", lines, rows)
    why = "files are not read here" if not disk else "it is not on this machine"
    if disk and os.path.isfile(path):
        try:
            text = read_artifact(path, "a Python source file")
            return SourceView(path, f"{path} (from this machine)", tuple(text.splitlines()),
                              rows)
        except IrscopeError as exc:
            why = str(exc).removeprefix(f"{path}: ")
    if not rows:
        return f"{path}: the run holds no copy of it and {why}"
    return SourceView(path, f"{path} (its text: the run holds no copy and {why})",
                      ("",) * max(rows), rows)


def line_rows(view: RunView, path: str) -> dict[int, LineRow]:
    """Each line of ``path`` that feeds something, with its figures."""
    counts = kernel_instructions(view)
    rows = {}
    for line, hits in hits_by_line(view, path).items():
        roles = [hit.role for hit in hits if hit.graph is not None]
        units = {unit.id: unit for hit in hits for unit in hit.kernels[:1]}
        rows[line] = LineRow(line, tuple(hits), roles.count("forward"), roles.count("backward"),
                             len(hits) - roles.count("forward") - roles.count("backward"),
                             len(units), sum(counts(unit) for unit in units.values()))
    return rows


def kernel_instructions(view: RunView):
    """A function giving a kernel unit's instruction count, each unit read once per view."""
    memo: dict[int, int] = view.derived("kernel_instructions", dict)

    def count(unit: Unit) -> int:
        if unit.id not in memo:
            memo[unit.id] = _instructions(view, view.stages(unit.id))
        return memo[unit.id]
    return count


def _instructions(view: RunView, stages: list[Stage]) -> int:
    for kind in COUNTED_KINDS:
        for stage in stages:
            if stage.kind == kind:
                try:
                    total = view.parsed(stage).totals.get("instructions")
                except Exception:  # noqa: BLE001  an odd stage counts nothing
                    total = None
                if isinstance(total, (int, float)):
                    return int(total)
    return 0
