"""Following a line of one stage to the matching lines of the next or previous stage: by the
provenance graph across a compile's graphs (pre-grad, joint, forward, backward, post-grad,
output code) and units (graph -> kernel -> graph), by source locations inside a kernel (kernel
source -> TTIR -> ... -> SASS). Pure over a run's view: the TUI's keys call these from a worker.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from irscope.browse.follow_pipeline import Pipeline, torch_pipeline
from irscope.browse.launches import (kernel_at, launch_line, launched_unit,
                                     output_code_kernels)
from irscope.browse.locations import (LineLocations, def_line_of, first_code_line, is_ir,
                                      line_locations, neighbour_stage, node_keys, normal_key,
                                      python_location, python_source_locations)
from irscope.browse.tree import stage_title
from irscope.errors import IrscopeError
from irscope.parsers.base import Diagnostic, ParseResult
from irscope.read.autotune import chosen_configuration
from irscope.read.provenance import (CODE_KINDS, FUSION, FUSION_IR, KERNEL, LAUNCH, REGION,
                                     Hit, Node, ProvenanceGraph, provenance_graph, sources_of)
from irscope.read.view import RunView
from irscope.store import Stage, Unit

KERNEL_IR = ("ttir", "ttgir", "llir", "ptx")  # stages whose locations place a kernel's `def`
OUTPUT_CODE = "inductor_output_code"
NO_GRAPH = ("this run holds no provenance records for it: following by source locations "
            "alone")
NO_LINE_INFO = ("the SASS carries no line info: its cubin was compiled without it (ptxas "
                "-lineinfo; Triton leaves it out under TRITON_DISABLE_LINE_INFO=1), or it was "
                "disassembled without it (a run filed before irscope kept it)")


@dataclass(frozen=True)
class Choice:
    """One place following may land on, when there are several: a label for the picker, the
    stage, its matching lines (0-based) and the line to open it at."""

    label: str
    stage: Stage
    lines: tuple[int, ...]
    cursor: int


@dataclass(frozen=True)
class SourceLines:
    """A Python source to show: its title, its lines and the line to open it at (1-based
    ``number`` in the file, 0-based ``cursor`` in ``lines``); ``path`` is the file as the
    run's records name it."""

    title: str
    lines: list[str]
    number: int
    cursor: int | None = None
    path: str = ""


@dataclass(frozen=True)
class FollowResult:
    """Where following a line lands: the stage (None: nowhere, or several ``choices`` for a
    picker), the lines that match, what to tell the user, the line to put the cursor on; or
    the user's ``source`` line, for the source view."""

    target: Stage | None
    lines: tuple[int, ...]
    note: str
    cursor: int = 0
    choices: tuple[Choice, ...] = ()
    source: SourceLines | None = None


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
        self._pipelines: dict[int, Pipeline] = {}
        self.source: object = view  # what the caller made this follower of (its cache key)

    @classmethod
    def of(cls, view: RunView) -> Follower:
        """A follower over every unit and stage of ``view``, in pipeline order (the app
        passes the units and stages it loaded instead)."""
        stages: dict[int, list[Stage]] = {}
        for stage in sorted(view.stages(), key=lambda s: (s.position, s.id)):
            stages.setdefault(stage.unit_id, []).append(stage)
        return cls(view, {u.id: u for u in view.units()}, stages)

    @property
    def graph(self) -> ProvenanceGraph:
        return provenance_graph(self.view)

    # -- following --------------------------------------------------------------------
    def follow(self, stage: Stage, line: int, step: int,
               came_from: Sequence[int] = ()) -> FollowResult:
        """Line ``line`` (0-based) of ``stage`` followed one stage on (``step`` 1) or back
        (-1); ``came_from``: the units visited before, latest last (back to the graph we came
        from first)."""
        if stage.kind == OUTPUT_CODE and step > 0:
            return self.into_kernel(stage, line)
        pipeline = self.pipeline(stage.unit_id)
        if pipeline is not None and stage.id in pipeline.lineage:
            found = self.graph_step(pipeline, stage, line, step)
            if found is not None:
                return found
        found = self.fusion_step(stage, line, step) or self.region_step(stage, line, step)
        if found is not None:
            return found
        target = neighbour_stage(self.stages_by_unit.get(stage.unit_id, ()), stage, step)
        if target is None and step < 0:
            return self.to_graph(stage, came_from)
        if target is None:
            target = self.linked_stage(stage, step)
        if target is None:
            return FollowResult(None, (), f"no {'next' if step > 0 else 'previous'} stage")
        return self.same_source(stage, line, target)

    def same_source(self, stage: Stage, line: int, target: Stage, prefix: str = ""
                    ) -> FollowResult:
        """The lines of ``target`` from the same source as ``line`` of ``stage``."""
        keys = self.locations_of(stage).same_source(line)
        target_locations = self.locations_of(target)
        start = first_code_line(target.kind, self.lines_of(target))
        if not target_locations.index:
            why = (NO_LINE_INFO if target.kind == "sass" else
                   f"{stage_title(target)} carries no line information")
            return FollowResult(target, (), f"{prefix}{why}: opened at its first instruction",
                                start)
        if not keys:
            return FollowResult(target, (), f"{prefix}line {line + 1} carries no source "
                                "location; opened the stage at its start", start)
        hits = tuple(target_locations.find(keys))
        files = sorted({normal_key(k) for k in keys if not k.startswith("node ")})
        shown = ", ".join(files[:3] or sorted(keys)[:3])
        note = (f"{len(hits)} lines from {shown}" if hits
                else f"{shown} does not appear in {stage_title(target)}")
        return FollowResult(target, hits, prefix + note, hits[0] if hits else start)

    # -- across a compile's graphs, by the provenance graph ---------------------------------
    def pipeline(self, unit_id: int) -> Pipeline | None:
        unit = self.units.get(unit_id)
        if unit is None or unit.framework != "torch":
            return None
        if unit_id not in self._pipelines:
            self._pipelines[unit_id] = torch_pipeline(
                self.stages_by_unit.get(unit_id, ()), self.graph, self.fx_parsed)
        return self._pipelines[unit_id]

    def graph_step(self, pipeline: Pipeline, stage: Stage, line: int, step: int
                   ) -> FollowResult | None:
        """One step along a compile's pipeline of graphs; None leaves it to the locations
        (a stage the graph holds nothing of)."""
        graph = self.graph
        starts = pipeline.nodes_at(stage, line + 1)
        targets = pipeline.neighbours(stage, step)
        if not targets:
            if step < 0 and starts:  # before the first graph: the user's line
                found = sorted(sources_of(graph, starts))
                if found:
                    path, number = found[0]
                    more = f" (and {len(found) - 1} more lines)" if len(found) > 1 else ""
                    return FollowResult(None, (), f"{path}:{number}{more}",
                                        source=SourceLines(path, [], number, path=path))
                return FollowResult(None, (), "this node carries no source line")
            return None
        if not graph:
            return self.same_source(stage, line, targets[0], NO_GRAPH + "; ")
        if not starts:
            return FollowResult(targets[0], (), f"line {line + 1} is no FX node or launch: "
                                f"opened {stage_title(targets[0])} at its start")
        choices, fallback = [], False
        for target in targets:
            lines = pipeline.related_lines(starts, stage, target)
            if not lines:
                lines = pipeline.same_source_lines(starts, target)
                fallback = fallback or bool(lines)
            if lines:
                cursor = self.first_launch(target, lines) - 1
                choices.append(Choice(self.label(target, pipeline), target,
                                      tuple(n - 1 for n in lines), cursor))
        if not choices:
            names = ", ".join(sorted({n.name for n in starts})[:3])
            return FollowResult(targets[0], (), f"{names}: no record links it to "
                                f"{stage_title(targets[0])}; opened at its start")
        how = " (no record links them: matched by their source line)" if fallback else ""
        return self.chosen(choices, how)

    def first_launch(self, target: Stage, lines: list[int]) -> int:
        """The line to open an output code at: its first launch among ``lines``."""
        if target.kind != OUTPUT_CODE:
            return lines[0]
        launches = {n.line for n in self.graph.nodes_at_lines(target.id, lines)
                    if n.kind == LAUNCH}
        return next((line for line in lines if line in launches), lines[0])

    def label(self, stage: Stage, pipeline: Pipeline | None = None) -> str:
        unit = self.units.get(stage.unit_id)
        role = pipeline.role_of(stage) if pipeline else ""
        return f"{unit.name if unit else '?'} · {stage_title(stage, role)}"

    @staticmethod
    def chosen(choices: list[Choice], how: str = "") -> FollowResult:
        """One choice: go there; several: the picker."""
        if len(choices) == 1:
            only = choices[0]
            count = len(only.lines)
            return FollowResult(only.stage, only.lines,
                                f"{only.label}: {count} line{'s' * (count != 1)}{how}",
                                only.cursor)
        return FollowResult(None, (), f"{len(choices)} places{how}: pick one",
                            choices=tuple(choices))

    # -- across units: graph -> kernel -> graph --------------------------------------------
    def into_kernel(self, stage: Stage, line: int) -> FollowResult:
        """From an output code line to the kernel units it launches or defines."""
        graph = self.graph
        code = [n for n in graph.nodes_at(stage.id, line + 1) if n.kind in CODE_KINDS]
        if code:
            units = {e.dst.unit_id: self.units[e.dst.unit_id] for n in code
                     for e in graph.downstream(n)
                     if e.dst.kind == KERNEL and e.dst.unit_id in self.units}
            if not units:
                name = code[0].name
                what = ("an extern call (a library kernel)" if code[0].kind == LAUNCH and
                        not any(e.src.kind == "kernel_def" for e in graph.upstream(code[0]))
                        else "a kernel this run holds no unit of")
                return FollowResult(None, (), f"{name} is {what}")
            unit = chosen_configuration(self.view, list(units.values()))
            choice = self.kernel_choice(unit, stage, line)
            if choice is None:
                return FollowResult(None, (), f"{code[0].name} has no stage to open")
            more = (f" (1 of {len(units)} compiled configurations: the panel lists them)"
                    if len(units) > 1 else "")
            return FollowResult(choice.stage, (), f"{choice.label}{more}", choice.cursor)
        return self.into_kernel_by_name(stage, line)

    def kernel_choice(self, unit: Unit, code: Stage | None = None, line: int = 0
                      ) -> Choice | None:
        """A kernel unit's first IR stage; from its definition in an output code, at the
        same line of its Python source."""
        stages = [s for s in self.stages_by_unit.get(unit.id, ()) if is_ir(s)]
        if not stages:
            return None
        target, cursor = stages[0], 0
        if code is not None and target.kind == "python_source":
            lines = self.lines_of(code)
            kernels = output_code_kernels(lines)
            kernel = kernel_at(kernels, lines, line)
            if kernel is not None and kernel.first <= line < kernel.end:
                body = lines[kernel.first:kernel.end]
                def_at = next((i for i, text in enumerate(body)
                               if text.lstrip().startswith(f"def {kernel.name}")), None)
                if def_at is not None:
                    cursor = max(line - kernel.first - def_at, 0)
        return Choice(f"{unit.name} · {stage_title(target)}", target, (), cursor)

    def into_kernel_by_name(self, stage: Stage, line: int) -> FollowResult:
        """A run the graph holds nothing of: the kernel the line names, by its module."""
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
        choice = self.kernel_choice(unit, stage, line) if unit else None
        if choice is None:
            return FollowResult(None, (), f"{kernel.name} is not in this run")
        return FollowResult(choice.stage, (), f"{kernel.name} ({unit.name})", choice.cursor)

    def to_graph(self, stage: Stage, came_from: Sequence[int] = ()) -> FollowResult:
        """From a kernel's first stage back to the lines that launch it: output code launches,
        Thunder regions; the graph we came from first."""
        graph = self.graph
        kernel = Node(KERNEL, stage.unit_id)
        places = [e.src for e in graph.upstream(kernel) if e.src.kind in (LAUNCH, REGION)] or \
                 [e.src for e in graph.upstream(kernel) if e.src.kind == "kernel_def"]
        by_stage: dict[int, list[int]] = {}
        for node in places:
            by_stage.setdefault(node.stage_id, []).append(node.line)
        stages = {s.id: s for unit_id in {n.unit_id for n in places}
                  for s in self.stages_by_unit.get(unit_id, ())}
        choices = [Choice(self.label(stages[sid]), stages[sid], tuple(n - 1 for n in lines),
                          lines[0] - 1) for sid, lines in sorted(by_stage.items())
                   if sid in stages]
        for unit_id in reversed(came_from):  # back to the graph we came from
            mine = [c for c in choices if c.stage.unit_id == unit_id]
            if mine:
                choices = mine
                break
        unit = self.units.get(stage.unit_id)
        if choices:
            found = self.chosen(choices)
            return FollowResult(found.target, found.lines, f"launches of {unit.name if unit else '?'}"
                                f" · {found.note}", found.cursor, found.choices)
        return self.to_graph_by_name(stage, came_from)

    def to_graph_by_name(self, stage: Stage, came_from: Sequence[int] = ()) -> FollowResult:
        """A run the graph holds nothing of: the output code of a graph that launches it."""
        graphs = [r.src for r in self.view.relations("launches") if r.dst == stage.unit_id]
        for unit_id in reversed(came_from):
            if unit_id in graphs:
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

    def hit_choice(self, hit: Hit) -> Choice | None:
        """Where a source line's hit opens: its kernel's first stage, else (an extern call)
        its launch line, or an XLA fusion's kernel IR."""
        label = hit_label(hit)
        unit = chosen_configuration(self.view, hit.kernels) if hit.kernels else None
        if unit is not None and unit.id in self.units:
            choice = self.kernel_choice(self.units[unit.id])
            if choice is not None:
                return Choice(label, choice.stage, (), choice.cursor)
        stages = self.stages_by_unit.get(hit.node.unit_id, ())
        if hit.node.kind == FUSION:
            dumped = {e.dst.stage_id for e in self.graph.downstream(hit.node)
                      if e.dst.kind == FUSION_IR}
            first = next((s for s in stages if s.id in dumped and is_ir(s)), None)
            if first is not None:
                return Choice(label, first, (), 0)
        stage = next((s for s in stages if s.id == hit.node.stage_id), None)
        if stage is None:
            return None
        line = max(hit.node.line - 1, 0)
        return Choice(label, stage, (line,), line)

    # -- XLA fusions and Thunder regions ---------------------------------------------------
    def fusion_step(self, stage: Stage, line: int, step: int) -> FollowResult | None:
        """Optimized HLO's fusion -> the stages of its kernel IR, and back; a fusion's stages
        step among themselves (``ptx · fusion.2`` -> its SASS), never into another fusion's."""
        graph = self.graph
        stages = self.stages_by_unit.get(stage.unit_id, ())
        if " · " in stage.name and stage.kind not in ("hlo_after_opt",):
            fusion = stage.name.rsplit(" · ", 1)[1]
            own = [s for s in stages if s.name.endswith(" · " + fusion) and is_ir(s)]
            if len(own) < 2 and step > 0 or stage not in own:
                return None if stage not in own else FollowResult(None, (), "no next stage")
            at = own.index(stage) + step
            if 0 <= at < len(own):
                return self.same_source(stage, line, own[at])
            hlo = [n for n in graph.upstream(Node(FUSION_IR, stage.unit_id, stage.id, fusion))
                   if n.src.kind == FUSION]
            if not hlo:
                return None
            target = next((s for s in stages if s.id == hlo[0].src.stage_id), None)
            lines = graph.lines_of(hlo[0].src)
            if target is None or not lines:
                return None
            return FollowResult(target, tuple(n - 1 for n in lines),
                                f"fusion {fusion} in {stage_title(target)}", lines[0] - 1)
        if stage.kind != "hlo_after_opt" or step < 0:
            return None
        fusions = [n for n in graph.nodes_at(stage.id, line + 1) if n.kind == FUSION]
        choices = []
        for fusion in fusions:
            dumped = {e.dst.stage_id for e in graph.downstream(fusion) if e.dst.kind == FUSION_IR}
            first = next((s for s in stages if s.id in dumped and is_ir(s)), None)
            if first is not None:
                choices.append(Choice(f"{fusion.name} · {stage_title(first)}", first, (),
                                      first_code_line(first.kind, self.lines_of(first))))
        return self.chosen(choices) if choices else None

    def region_step(self, stage: Stage, line: int, step: int) -> FollowResult | None:
        """A Thunder fusion region's call -> the nvFuser kernels it compiled."""
        if stage.kind != "thunder_trace" or step < 0:
            return None
        graph = self.graph
        regions = [n for n in graph.nodes_at(stage.id, line + 1) if n.kind == REGION]
        units = {e.dst.unit_id: self.units[e.dst.unit_id] for n in regions
                 for e in graph.downstream(n) if e.dst.unit_id in self.units}
        choices = [c for c in (self.kernel_choice(u) for u in units.values()) if c]
        return self.chosen(choices) if choices else None

    # -- the Python source behind a line ------------------------------------------------
    def python_source(self, stage: Stage, line: int) -> SourceLines | str:
        """The Python source line behind ``line`` of ``stage``: from the run's own source
        stage when it holds one, else from the file on this machine; a string says why
        there is none."""
        if stage.kind == "python_source":
            return "this stage is the Python source"
        keys = self.locations_of(stage).at(line)
        pipeline = self.pipeline(stage.unit_id)
        if pipeline is not None and stage.id in pipeline.lineage:  # by the graph: an FX
            starts = pipeline.nodes_at(stage, line + 1)  # node's name alone names no place
            found = sources_of(self.graph, starts)
            keys = frozenset(f"{path}:{number}" for path, number in found) or keys
        nodes = node_keys(keys)
        for graph_stage in self.stages_by_unit.get(stage.unit_id, ()):  # Inductor code names
            if nodes and graph_stage.kind in ("fx_graph", "aot_graph"):  # FX nodes
                graph_locations = self.locations_of(graph_stage)
                for number in graph_locations.find(nodes):
                    keys = keys | graph_locations.at(number)
        files = [k for k in sorted(keys) if not k.startswith("node ")]
        own = self.own_source(stage.unit_id, files)
        if own is not None:
            return own
        found = python_location(keys)
        if found is None:  # not on this machine: the lines the run's records name
            named = self.graph.files()
            found = next(((path, int(number)) for path, _, number in
                          (key.rpartition(":") for key in files)
                          if path in named and number.isdigit()), None)
            if found is not None:
                return SourceLines(found[0], [], found[1], path=found[0])
            return ("no Python source line for this line (the run keeps no source stage "
                    "for it)")
        path, number = found
        lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
        return SourceLines(path, lines, number, path=path)

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
                                   int(key.rpartition(":")[2]), hits[0], unit.source_file)
        return None

    # -- reading ------------------------------------------------------------------------
    def lines_of(self, stage: Stage) -> list[str]:
        return self.view.read_text(stage).splitlines()

    def fx_parsed(self, stage: Stage) -> ParseResult:
        return parsed_quietly(self.view, stage)

    def locations_of(self, stage: Stage, text: str | None = None) -> LineLocations:
        """Where each line of ``stage`` comes from; ``text``: the stage's, when already read."""
        if stage.kind == "python_source":
            return self.python_locations(stage)
        key = (stage.blob, stage.kind)
        if key not in self.locations:
            self.locations[key] = line_locations(
                stage.kind, self.view.read_text(stage) if text is None else text,
                lambda: parsed_quietly(self.view, stage))
        return self.locations[key]

    def python_locations(self, stage: Stage) -> LineLocations:
        """A kernel's Python source stage holds its function (from the `def`, or with its
        decorators, or its whole module): its lines map to the module's lines by the `def`
        line its IR stages name."""
        unit = self.units.get(stage.unit_id)
        if unit is None or not unit.source_file:
            return LineLocations()
        lines = self.lines_of(stage)
        name = unit.name.rsplit("-", 1)[0] if "-" in unit.name else unit.name
        at = next((i for i, text in enumerate(lines) if text.lstrip().startswith(
            f"def {name}(")), None)
        if at is None:
            at = next((i for i, text in enumerate(lines) if text.lstrip().startswith("def ")), 0)
        for ir in self.stages_by_unit.get(stage.unit_id, ()):
            if ir.kind in KERNEL_IR:
                def_line = def_line_of(self.locations_of(ir), unit.source_file)
                if def_line is not None:
                    return python_source_locations(unit.source_file, def_line - at, len(lines))
        return LineLocations()


def hit_label(hit: Hit) -> str:
    """`backward  [1/0] forward · triton_poi_fused_add_4 (line 1452) · 2 kernels`."""
    what = hit.node.name or (hit.kernels[0].name if hit.kernels else "?")
    where = f"{hit.graph.name} · " if hit.graph else ""
    extra = (f" · {len(hit.kernels)} configurations" if len(hit.kernels) > 1 else
             "" if hit.kernels or hit.node.kind != LAUNCH else " · extern call")
    line = f" (line {hit.node.line})" if hit.node.line else ""
    return f"{hit.role or 'kernel':<9} {where}{what}{line}{extra}"


def parsed_quietly(view: RunView, stage: Stage) -> ParseResult:
    """The parser's result, or one naming the failure: one odd stage never stops a reader."""
    try:
        return view.parsed(stage)
    except IrscopeError as exc:
        message = str(exc).removeprefix(f"{view.path}: ")
    except Exception as exc:  # noqa: BLE001  a missing or failing parser module
        message = f"no analysis: {exc}"
    return ParseResult(stage.kind, diagnostics=(Diagnostic(0, message),))
