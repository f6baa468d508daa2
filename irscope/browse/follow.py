"""Following a line of one stage to the lines of the next or previous stage that come from the
same source, across the "launches" relations between a graph and its kernels; and the Python
source line behind a line. Pure over a run's view: the TUI's keys call these from a worker.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from irscope.browse.launches import kernel_at, launch_line, launched_unit, output_code_kernels
from irscope.browse.locations import (LineLocations, def_line_of, first_code_line, is_ir,
                                      line_locations, neighbour_stage, node_keys, normal_key,
                                      python_location, python_source_locations)
from irscope.browse.tree import stage_title
from irscope.errors import IrscopeError
from irscope.parsers.base import Diagnostic, ParseResult
from irscope.read.view import RunView
from irscope.store import Stage, Unit

KERNEL_IR = ("ttir", "ttgir", "llir", "ptx")  # stages whose locations place a kernel's `def`
OUTPUT_CODE = "inductor_output_code"


@dataclass(frozen=True)
class FollowResult:
    """Where following a line lands: the stage (None: nowhere), the lines that match, what
    to tell the user, and the line to put the cursor on."""

    target: Stage | None
    lines: tuple[int, ...]
    note: str
    cursor: int = 0


@dataclass(frozen=True)
class SourceLines:
    """A Python source to show: its title, its lines and the line to open it at (1-based
    ``number`` in the file, 0-based ``cursor`` in ``lines``)."""

    title: str
    lines: list[str]
    number: int
    cursor: int | None = None


class Follower:
    """Follows lines over one view of a run. ``units`` and ``stages_by_unit`` are the
    run's as the app loaded them; ``locations`` is a cache of line locations by (blob,
    kind), shared between calls (it holds plain data, so any thread may fill it)."""

    def __init__(self, view: RunView, units: Mapping[int, Unit],
                 stages_by_unit: Mapping[int, Sequence[Stage]],
                 locations: dict[tuple[str, str], LineLocations] | None = None):
        self.view = view
        self.units = units
        self.stages_by_unit = stages_by_unit
        self.locations = {} if locations is None else locations

    # -- following --------------------------------------------------------------------
    def follow(self, stage: Stage, line: int, step: int,
               came_from: Sequence[int] = ()) -> FollowResult:
        """Line ``line`` of ``stage`` followed one stage on (``step`` 1) or back (-1);
        ``came_from``: the units visited before, latest last (back to the graph we came
        from first)."""
        if stage.kind == OUTPUT_CODE and step > 0:
            return self.into_kernel(stage, line)
        target = neighbour_stage(self.stages_by_unit.get(stage.unit_id, ()), stage, step)
        if target is None and step < 0:
            return self.to_graph(stage, came_from)
        if target is None:
            target = self.linked_stage(stage, step)
        if target is None:
            return FollowResult(None, (), f"no {'next' if step > 0 else 'previous'} stage")
        return self.same_source(stage, line, target)

    def same_source(self, stage: Stage, line: int, target: Stage) -> FollowResult:
        """The lines of ``target`` from the same source as ``line`` of ``stage``."""
        keys = self.locations_of(stage).same_source(line)
        target_locations = self.locations_of(target)
        start = first_code_line(target.kind, self.lines_of(target))
        if not target_locations.index:
            return FollowResult(target, (), f"{stage_title(target)} carries no line "
                                "information: opened at its first instruction", start)
        if not keys:
            return FollowResult(target, (), f"line {line + 1} carries no source location; "
                                "opened the stage at its start", start)
        hits = tuple(target_locations.find(keys))
        files = sorted({normal_key(k) for k in keys if not k.startswith("node ")})
        shown = ", ".join(files[:3] or sorted(keys)[:3])
        note = (f"{len(hits)} lines from {shown}" if hits
                else f"{shown} does not appear in {stage_title(target)}")
        return FollowResult(target, hits, note, hits[0] if hits else start)

    def into_kernel(self, stage: Stage, line: int) -> FollowResult:
        """From an output code line to the kernel it launches or defines."""
        lines = self.lines_of(stage)
        kernels = output_code_kernels(lines)
        kernel = kernel_at(kernels, lines, line)
        if kernel is None:
            return FollowResult(None, (), f"line {line + 1} names no kernel: put the cursor "
                                f"on a launch (.run) of one of {len(kernels)}")
        linked = [self.units[r.dst] for r in sorted(
            (r for r in self.view.relations("launches") if r.src == stage.unit_id),
            key=lambda r: r.attrs.get("order", 0)) if r.dst in self.units]
        unit = launched_unit(kernel, linked) or launched_unit(kernel, list(self.units.values()))
        stages = [s for s in self.stages_by_unit.get(unit.id, ()) if is_ir(s)] if unit else []
        if not stages:
            return FollowResult(None, (), f"{kernel.name} is not in this run")
        target = stages[0]
        cursor = 0
        if target.kind == "python_source" and kernel.first <= line < kernel.end:
            body = lines[kernel.first:kernel.end]
            def_at = next((i for i, text in enumerate(body)
                           if text.lstrip().startswith(f"def {kernel.name}")), None)
            if def_at is not None:
                cursor = max(line - kernel.first - def_at, 0)
        return FollowResult(target, (), f"{kernel.name} ({unit.name})", cursor)

    def to_graph(self, stage: Stage, came_from: Sequence[int] = ()) -> FollowResult:
        """From a kernel's first stage back to the output code launching it."""
        graphs = [r.src for r in self.view.relations("launches") if r.dst == stage.unit_id]
        for unit_id in reversed(came_from):
            if unit_id in graphs:  # the graph we came from first
                graphs.insert(0, unit_id)
                break
        for unit_id in graphs:
            code = next((s for s in self.stages_by_unit.get(unit_id, ())
                         if s.kind == OUTPUT_CODE), None)
            if code is not None:
                unit = self.units[stage.unit_id]
                at = launch_line(output_code_kernels(self.lines_of(code)), unit)
                return FollowResult(code, (), f"{self.units[unit_id].name} launches "
                                    f"{unit.name}", at or 0)
        return FollowResult(None, (), "no previous stage")

    def linked_stage(self, stage: Stage, step: int) -> Stage | None:
        """Across a "launches" relation: graph → first kernel stage, kernel → graph's last."""
        relations = self.view.relations("launches")
        linked = ([r.dst for r in relations if r.src == stage.unit_id] if step > 0
                  else [r.src for r in relations if r.dst == stage.unit_id])
        for unit_id in linked:
            text_stages = [s for s in self.stages_by_unit.get(unit_id, ()) if is_ir(s)]
            if text_stages:
                return text_stages[0] if step > 0 else text_stages[-1]
        return None

    # -- the Python source behind a line ------------------------------------------------
    def python_source(self, stage: Stage, line: int) -> SourceLines | str:
        """The Python source line behind ``line`` of ``stage``: from the run's own source
        stage when it holds one, else from the file on this machine; a string says why
        there is none."""
        if stage.kind == "python_source":
            return "this stage is the Python source"
        keys = self.locations_of(stage).at(line)
        nodes = node_keys(keys)
        for graph in self.stages_by_unit.get(stage.unit_id, ()):  # Inductor code names FX
            if nodes and graph.kind in ("fx_graph", "aot_graph"):  # nodes
                graph_locations = self.locations_of(graph)
                for number in graph_locations.find(nodes):
                    keys = keys | graph_locations.at(number)
        files = [k for k in sorted(keys) if not k.startswith("node ")]
        own = self.own_source(stage.unit_id, files)
        if own is not None:
            return own
        found = python_location(keys)
        if found is None:
            return ("no Python source line for this line (the run keeps no source stage "
                    "for it)")
        path, number = found
        lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
        return SourceLines(path, lines, number)

    def own_source(self, unit_id: int, files: list[str]) -> SourceLines | None:
        """The unit's Python source stage at the line of one of ``files`` it holds: read from
        the run, so it works wherever the run is opened."""
        unit = self.units.get(unit_id)
        source = next((s for s in self.stages_by_unit.get(unit_id, ())
                       if s.kind == "python_source"), None)
        if unit is None or source is None or not unit.source_file:
            return None
        locations = self.locations_of(source)
        for key in files:
            hits = locations.find(frozenset({key}))
            if hits:
                return SourceLines(f"{unit.source_file} (from the run)", self.lines_of(source),
                                   int(key.rpartition(":")[2]), hits[0])
        return None

    # -- reading ------------------------------------------------------------------------
    def lines_of(self, stage: Stage) -> list[str]:
        return self.view.read_text(stage).splitlines()

    def locations_of(self, stage: Stage) -> LineLocations:
        if stage.kind == "python_source":
            return self.python_locations(stage)
        key = (stage.blob, stage.kind)
        if key not in self.locations:
            self.locations[key] = line_locations(stage.kind, self.view.read_text(stage),
                                                 parsed_quietly(self.view, stage))
        return self.locations[key]

    def python_locations(self, stage: Stage) -> LineLocations:
        """A kernel's Python source stage holds its function from the `def`: its lines map to
        the module's lines from the `def` line its IR stages name."""
        unit = self.units.get(stage.unit_id)
        if unit is None or not unit.source_file:
            return LineLocations()
        for ir in self.stages_by_unit.get(stage.unit_id, ()):
            if ir.kind in KERNEL_IR:
                def_line = def_line_of(self.locations_of(ir), unit.source_file)
                if def_line is not None:
                    return python_source_locations(unit.source_file, def_line,
                                                   len(self.lines_of(stage)))
        return LineLocations()


def parsed_quietly(view: RunView, stage: Stage) -> ParseResult:
    """The parser's result, or one naming the failure: one odd stage never stops a reader."""
    try:
        return view.parsed(stage)
    except IrscopeError as exc:
        message = str(exc).removeprefix(f"{view.path}: ")
    except Exception as exc:  # noqa: BLE001  a missing or failing parser module
        message = f"no analysis: {exc}"
    return ParseResult(stage.kind, diagnostics=(Diagnostic(0, message),))
