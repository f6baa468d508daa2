"""What one line of a user's file became at each stage: the FX nodes it is the innermost frame
of, the launches and kernels it feeds (forward, backward), and each kernel's IR lines and SASS
instructions that carry it; `irscope where` prints it."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from irscope.browse.locations import LineLocations, line_locations
from irscope.read.autotune import chosen_configuration
from irscope.read.source_lines import kernel_instructions
from irscope.read.timing import hit_time
from irscope.errors import IrscopeError
from irscope.read.provenance import (DUMPED, FILE_COMMENT, FUSION, FX, LINE, LOCATION, Hit,
                                     provenance_graph, source_hits)
from irscope.read.view import RunView
from irscope.store import Unit

KERNEL_STAGES = ("python_source", "ttir", "ttgir", "llir", "ptx", "sass", "cpp_kernel",
                 "cuda_source")


class NoSuchLine(IrscopeError):
    """The file is not one the run's records name, or names ambiguously."""


@dataclass(frozen=True)
class StageLines:
    """The lines of one IR stage of a kernel that carry the source line (for a generated
    kernel, whose IR is located in its own module: every located line), as 1-based ranges."""

    kind: str
    name: str
    lines: int
    ranges: tuple[tuple[int, int], ...]
    note: str = ""

    def text(self) -> str:
        shown = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in self.ranges[:6])
        more = f", … ({len(self.ranges)} ranges)" if len(self.ranges) > 6 else ""
        return f"{self.lines} lines ({shown}{more})" if self.lines else self.note


@dataclass(frozen=True)
class KernelLines:
    """A kernel unit, or an XLA fusion (``module``: the unit whose HLO holds it, since each
    module names its fusions afresh), and its IR lines that carry the source line."""

    unit: str
    instructions: int | None  # None: no SASS, PTX or LLVM IR to count (a C++ kernel)
    stages: tuple[StageLines, ...]
    module: str = ""


@dataclass(frozen=True)
class WhereRow:
    """One launch, kernel definition, user kernel, fusion or region the line feeds."""

    role: str
    graph: str
    stage: str
    line: int
    name: str
    kind: str
    records: tuple[str, ...]
    kernels: tuple[KernelLines, ...] = ()
    gpu_time_us: float | None = None  # measured (inspect --profile): what it ran, all launches
    gpu_launches: int | None = None


@dataclass(frozen=True)
class FxRow:
    """The FX nodes (a graph) or located lines (a jaxpr, StableHLO, HLO, trace) of one stage
    whose innermost frame is the source line."""

    unit: str
    stage: str
    role: str
    nodes: tuple[tuple[str, int], ...]  # (node, its 1-based line)
    kind: str = ""  # the stage's kind: fx_graph, jaxpr, hlo_after_opt...


@dataclass(frozen=True)
class Where:
    path: str
    line: int
    text: str | None
    fx: tuple[FxRow, ...] = ()
    rows: tuple[WhereRow, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    kernels: int = 0  # distinct kernels: a kernel compiled in several configurations is one
    configurations: int = 0  # the compiled kernel units among them

    def to_json(self) -> dict:
        from irscope.parsers.base import to_jsonable

        return to_jsonable(self)


def resolve_file(view: RunView, name: str) -> str:
    """The recorded path ``name`` means: a path, or a unique file name."""
    graph = provenance_graph(view)
    found = graph.paths_named(name)
    if len(found) == 1:
        return found[0]
    if not found:
        count = len(graph.files())
        hint = (f"the run's records name {count} file{'s' * (count != 1)} (`irscope where RUN "
                f"--files` lists {'them' if count != 1 else 'it'})" if count
                else "the run holds no provenance records")
        raise NoSuchLine(f"{name}: no file of that name in the run's records; {hint}")
    raise NoSuchLine(f"{name} names {len(found)} files: " + ", ".join(found[:5])
                     + (" …" if len(found) > 5 else "") + "; give more of the path")


def where(view: RunView, path: str, line: int, ranges: bool = True) -> Where:
    """What line ``line`` of ``path`` (a recorded path) became; ``ranges`` False leaves
    the kernels' IR lines out (they read each kernel's stages)."""
    graph = provenance_graph(view)
    units = graph.units
    stages = {s.id: s for s in view.stages(kinds=("fx_graph", "aot_graph",
                                                  "inductor_output_code", "thunder_trace",
                                                  "jaxpr", "stablehlo", "hlo_before_opt",
                                                  "hlo_after_opt"))}
    fx: dict[int, list[tuple[str, int]]] = {}
    for source in graph.source_nodes(path, line):
        for edge in graph.downstream(source):
            if (edge.dst.kind == FX and edge.via == FILE_COMMENT) or edge.dst.kind == LINE:
                fx.setdefault(edge.dst.stage_id, []).append((edge.dst.name, edge.dst.line))
    fx_rows = tuple(FxRow(units[stages[sid].unit_id].name, stages[sid].name,
                          graph.roles.get(_code_of(graph, sid), ""), tuple(sorted(
                              nodes, key=lambda n: n[1])), stages[sid].kind)
                    for sid, nodes in sorted(fx.items()) if sid in stages)
    count = kernel_instructions(view)
    rows = []
    memo: dict[int, KernelLines] = {}
    hits = source_hits(view, path, line)
    for hit in hits:
        stage = stages.get(hit.node.stage_id)
        kernels = []
        for unit in hit.kernels:
            if unit.id not in memo:
                memo[unit.id] = KernelLines(unit.name, count(unit), _kernel_lines(
                    view, unit, path, line, hit) if ranges else ())
            kernels.append(memo[unit.id])
        if hit.node.kind == FUSION and ranges:  # its kernel IR: whole stages of the unit
            kernels.append(_fusion_lines(view, graph, hit))
        ns, launches = hit_time(view, hit) or (None, None)
        measured = (None if ns is None else round(ns / 1000, 3), launches)
        rows.append(WhereRow(hit.role, hit.graph.name if hit.graph else "",
                             stage.name if stage else "", hit.node.line, hit.node.name
                             or (hit.kernels[0].name if hit.kernels else ""), hit.node.kind,
                             hit.records, tuple(kernels), *measured))
    notes = list(graph.notes)
    held = graph.held.get(path, {})
    lines = None if line in held else _file_lines(path)
    if not rows and not fx_rows:
        if lines is not None and line > len(lines):
            notes.append(f"{os.path.basename(path)}:{line} is past the end of the file "
                         f"({len(lines)} lines)")
        else:
            notes.append(f"{os.path.basename(path)}:{line} is no FX node's innermost frame, "
                         "and no kernel's stack trace names it (a line that calls the code "
                         "doing the work: try the lines it calls)")
    text = held.get(line) or (lines[line - 1] if lines and line <= len(lines) else None)
    kernels = {chosen_configuration(view, hit.kernels).id for hit in hits if hit.kernels}
    return Where(path, line, text, fx_rows, tuple(rows), tuple(notes), len(kernels),
                 len({unit.id for hit in hits for unit in hit.kernels}))


def _fusion_lines(view: RunView, graph, hit: Hit) -> KernelLines:
    """An XLA fusion's emitted kernel IR: the stages XLA dumped for it, each whole."""
    dumped = {e.dst.stage_id for e in graph.downstream(hit.node) if e.via == DUMPED}
    stages = []
    for stage in view.stages(hit.node.unit_id):
        if stage.id in dumped:
            count = len(view.read_text(stage).splitlines())
            stages.append(StageLines(stage.kind, stage.name, count, ((1, count),)))
    return KernelLines(hit.node.name, 0, tuple(stages), graph.units[hit.node.unit_id].name)


def _code_of(graph, stage_id: int) -> int:
    """The output code whose post-grad graph ``stage_id`` is (for its role)."""
    return next((code for code, post in graph.post_of.items() if post == stage_id), 0)


def _file_lines(path: str) -> list[str] | None:
    """The lines of the file at ``path`` on this machine, None where it cannot be read."""
    try:
        if os.path.isfile(path):
            from irscope.files import read_artifact

            return read_artifact(path, "a Python source file").splitlines()
    except IrscopeError:
        return None
    return None


def _kernel_lines(view: RunView, unit: Unit, path: str, line: int, hit: Hit
                  ) -> tuple[StageLines, ...]:
    """Each IR stage's lines that carry ``path:line`` (a user kernel), or every located line
    (a generated kernel: its IR is located in its own module, one source for all of it)."""
    key = f"{path}:{line}"
    own = LOCATION in hit.records  # the user's line is in the kernel's own source
    found = []
    for stage in view.stages(unit.id):
        if stage.kind not in KERNEL_STAGES or stage.kind in ("python_source", "cpp_kernel",
                                                             "cuda_source"):
            continue
        try:
            text = view.read_text(stage)
            locations = line_locations(stage.kind, text, lambda: view.parsed(stage))
        except Exception:  # noqa: BLE001  an odd stage shows no lines
            continue
        lines = _located(locations, key if own else None)
        note = ("no line info (compiled or disassembled without it)"
                if stage.kind == "sass" and not locations.index else "no located line")
        found.append(StageLines(stage.kind, stage.name, len(lines), _ranges(lines), note))
    return tuple(found)


def _located(locations: LineLocations, key: str | None) -> list[int]:
    if key is not None:
        return [n + 1 for n in locations.find(frozenset({key}))]
    return [n + 1 for n, keys in enumerate(locations.lines) if keys]


def _ranges(lines: Sequence[int]) -> tuple[tuple[int, int], ...]:
    out: list[list[int]] = []
    for number in sorted(lines):
        if out and number == out[-1][1] + 1:
            out[-1][1] = number
        else:
            out.append([number, number])
    return tuple((a, b) for a, b in out)

