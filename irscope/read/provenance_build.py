"""The provenance graph built from a run's stages, one function per kind of unit: Dynamo and
Inductor graphs, user Triton kernels, JAX/XLA modules, Thunder functions."""

from __future__ import annotations

import bisect
import dataclasses
import os
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from irscope.analysis.op_names import launch_name
from irscope.errors import IrscopeError
from irscope.read.provenance import (ATEN_MAPPING, CALLER_FRAME, DEFINED, DUMPED, FILE_COMMENT,
                                     FUSED, FUSION, FUSION_IR, FX, KERNEL, KERNEL_DEF,
                                     KERNEL_TO_POST, LAUNCH, LAUNCHES, LINE, LOCATION,
                                     NODE_MAPPING, OP, REGION, REGION_CALL, SOURCE,
                                     SOURCE_NODES, STACK_LINE, STACK_TRACE, UNFUSED, Node,
                                     ProvenanceGraph)
from irscope.read.view import RunView
from irscope.store import Relation, Stage, Unit

OUTPUT_CODE = "inductor_output_code"
PROVENANCE = "inductor_provenance"
# the graph whose node names an output code's Source Nodes name (its first present)
PRE_GRAD = ("dynamo_output_graph", "before_pre_grad_graph", "after_pre_grad_graph",
            "inductor_pre_grad_graph")
# the graph whose node names its ATen mapping names, filed before it (its first present)
POST_GRAD = ("inductor_post_grad_graph", "after_post_grad_graph", "before_post_grad_graph")
# the graphs of one pipeline: a node keeps its name from one to the next
PRE_LINEAGE = ("dynamo_output_graph", "optimize_ddp_split_graph", "before_pre_grad_graph",
               "inductor_pre_grad_graph", "after_pre_grad_graph", "before_recompile_pre_grad",
               "after_recompile_pre_grad")
JOINT_LINEAGE = ("aot_joint_graph", "before_joint_graph", "after_joint_graph")
POST_LINEAGE = ("before_post_grad_graph", "inductor_post_grad_graph", "after_post_grad_graph",
                "before_recompile_post_grad", "after_recompile_post_grad")
AOT_ROLES = {"forward": "aot_forward_graph", "backward": "aot_backward_graph",
             "inference": "aot_inference_graph"}
XLA_KINDS = ("jaxpr", "stablehlo", "hlo_before_opt", "hlo_after_opt")
KINDS = ("fx_graph", "aot_graph", OUTPUT_CODE, PROVENANCE, "python_source", "ttir",
         "thunder_trace", *XLA_KINDS)
FUSION_STAGE_KINDS = ("ttir", "ttgir", "llir", "ptx", "sass")
NO_RECORDS = ("{count} of {total} output codes hold no Inductor provenance records (compiled "
              "without INDUCTOR_PROVENANCE=1, or loaded from Inductor's cache, which logs them "
              "empty): their kernels are linked by the output code's comments alone, and a "
              "line is found where it is an FX node's innermost frame")


def add_units(view: RunView, graph: ProvenanceGraph) -> None:
    """Every unit's nodes and edges into ``graph``."""
    build = _Build(view, graph)
    by_unit = view.stages_by_unit(KINDS)
    launched = {r.dst for r in build.relations}
    for unit in view.units():
        stages = by_unit.get(unit.id, ())
        if not stages:
            continue
        if unit.framework == "torch":
            build.torch_unit(unit, stages)
        elif unit.framework == "thunder":
            build.thunder_unit(unit, stages)
        elif unit.framework in ("triton", "pallas") and unit.id not in launched:
            build.user_kernel(unit, stages)
        if any(s.kind in XLA_KINDS for s in stages):
            build.xla_unit(unit, view.stages(unit.id))
    if build.codes and build.codes_without_records:
        graph.notes.append(NO_RECORDS.format(count=build.codes_without_records,
                                             total=build.codes))


class _Build:
    """What one build reads once: the launches relations, and each blob's parsed lines."""

    def __init__(self, view: RunView, graph: ProvenanceGraph):
        self.view, self.graph = view, graph
        self.relations = view.relations("launches")
        self.links: dict[int, list[Relation]] = defaultdict(list)
        for relation in self.relations:
            self.links[relation.src].append(relation)
        self.fx_rows: dict[str, list[tuple]] = {}  # blob -> each node's line, comment, where
        self.texts: dict[str, list[str]] = {}
        self.codes = self.codes_without_records = 0

    def parsed(self, stage: Stage) -> Any:
        try:
            return self.view.parsed(stage)
        except IrscopeError:
            return None
        except Exception:  # noqa: BLE001  one odd stage never stops the graph
            return None

    def lines(self, stage: Stage) -> list[str]:
        if stage.blob not in self.texts:
            try:
                self.texts[stage.blob] = self.view.read_text(stage).splitlines()
            except IrscopeError:
                self.texts[stage.blob] = []
        return self.texts[stage.blob]

    # -- Dynamo and Inductor ------------------------------------------------------------
    def fx_nodes(self, unit: Unit, stage: Stage | None) -> dict[str, Node]:
        """The FX nodes of one graph stage by name, with their `# File:` edges and spans
        (each node's line, and the comment above it)."""
        if stage is None:
            return {}
        if stage.blob not in self.fx_rows:
            self.fx_rows[stage.blob] = _fx_rows(self.parsed(stage))
        nodes: dict[str, Node] = {}
        graph = self.graph
        for name, line, comment, where in self.fx_rows[stage.blob]:
            node = nodes[name] = Node(FX, unit.id, stage.id, name, line)
            graph.span(node, line)
            if comment:
                graph.span(node, comment)
            if where is not None:
                graph.add(Node(SOURCE, name=where[0], line=where[1]), node, FILE_COMMENT)
        return nodes

    def torch_unit(self, unit: Unit, stages: list[Stage]) -> None:
        layout = torch_layout(stages)
        pre_nodes = self.fx_nodes(unit, layout.pre)
        if layout.pre is not None:
            self.graph.pre_of[unit.id] = layout.pre.id
        for group in layout.groups:
            self.output_code(unit, layout.ordered, group.code, group.post, group.records,
                             pre_nodes)

    def output_code(self, unit: Unit, ordered: list[Stage], code: Stage, post: Stage | None,
                    records: list[Stage], pre_nodes: dict[str, Node]) -> None:
        parsed = self.parsed(code)
        if parsed is None or not hasattr(parsed, "launch_sequence"):
            return
        graph = self.graph
        role = parsed.role or ""
        graph.roles[code.id] = role
        self.codes += 1
        post = post_graph(ordered, post, role)
        post_nodes = self.fx_nodes(unit, post)
        if post is not None:
            graph.post_of[code.id] = post.id
        first, second = lookup_order(role, post_nodes, pre_nodes)

        def resolve(name: str) -> Node | None:
            """A Source Nodes name, looked up in ``lookup_order``."""
            return first.get(name) or second.get(name)

        lines = self.lines(code)
        kernel_units = self.kernel_units(unit, code, parsed)
        defs: dict[str, Node] = {}
        for order, kernel in enumerate(parsed.kernels):
            node = defs[kernel.name] = Node(KERNEL_DEF, unit.id, code.id, kernel.name,
                                            kernel.line)
            graph.span(node, _comment_start(lines, kernel.line),
                       kernel.line + kernel.source.count("\n") + 1)
            for name in kernel.source_nodes:
                if (source := resolve(name)) is not None:
                    graph.add(source, node, SOURCE_NODES)
            for name, atens in kernel.aten_nodes.items():
                source = resolve(name) if name else None
                for aten in atens:
                    if (target := post_nodes.get(aten)) is not None:
                        graph.add(target, node, ATEN_MAPPING)
                        if source is not None and source.stage_id != target.stage_id:
                            graph.add(source, target, ATEN_MAPPING)
            for kernel_id in kernel_units.get(order, ()):
                graph.add(node, Node(KERNEL, kernel_id), LAUNCHES)
        launches: dict[str, Node] = {}
        for launch in parsed.launch_sequence:
            node = Node(LAUNCH, unit.id, code.id, launch_name(launch), launch.line)
            graph.span(node, _comment_start(lines, launch.line, launch=True), launch.line)
            for name in launch.nodes:
                if (source := resolve(name)) is not None:
                    graph.add(source, node, SOURCE_NODES)
            defined = defs.get(launch.name) if launch.kind == "kernel" else None
            if defined is not None:
                graph.add(defined, node, DEFINED)
                for edge in graph.downstream(defined):
                    if edge.dst.kind == KERNEL:
                        graph.add(node, edge.dst, LAUNCHES)
            if launch.handle:
                launches[launch.handle] = node
        held = False
        for stage in records:
            record = self.parsed(stage)
            if record is None:
                continue
            held = held or bool(record.kernel_stacks or record.kernel_to_post)
            self.node_mappings(record, pre_nodes, post_nodes, launches)
            for handle, stacks in record.kernel_stacks.items():
                if (target := launches.get(handle)) is None:
                    continue  # a record of another graph's launch (the log keeps them all)
                for stack in stacks:
                    for index, frame in enumerate(stack):
                        path, _, number = frame.rpartition(":")
                        if number.isdigit():
                            graph.add(Node(SOURCE, name=path, line=int(number)), target,
                                      STACK_TRACE if index == len(stack) - 1 else CALLER_FRAME)
        self.codes_without_records += not held
        self.by_stack_line(post, post_nodes, [*launches.values(), *defs.values()])

    def by_stack_line(self, post: Stage | None, post_nodes: dict[str, Node],
                      places: list[Node]) -> None:
        """A launch whose only record is its stack trace (a backward's C++ kernel: Inductor
        writes no node mapping for a backward) gets the nodes of its own post-grad graph
        whose `# File:` line is the trace's innermost frame."""
        graph = self.graph
        if post is None:
            return
        at_line: dict[tuple[str, int], list[Node]] = defaultdict(list)
        for name, _line, _comment, where in self.fx_rows.get(post.blob, ()):
            if where is not None and name in post_nodes:
                at_line[where].append(post_nodes[name])
        for place in places:
            upstream = graph.upstream(place)
            if any(e.src.kind == FX for e in upstream):
                continue
            for edge in upstream:
                if edge.via == STACK_TRACE:
                    for node in at_line.get((edge.src.name, edge.src.line), ()):
                        graph.add(node, place, STACK_LINE)

    def node_mappings(self, record, pre_nodes: dict[str, Node], post_nodes: dict[str, Node],
                      launches: dict[str, Node]) -> None:
        graph = self.graph
        for name, targets in record.pre_to_post.items():
            if (source := pre_nodes.get(name)) is not None:
                for target in filter(None, map(post_nodes.get, targets)):
                    graph.add(source, target, NODE_MAPPING)
        for handle, names in record.kernel_to_post.items():
            if (launch := launches.get(handle)) is not None:
                for source in filter(None, map(post_nodes.get, names)):
                    graph.add(source, launch, KERNEL_TO_POST)

    def kernel_units(self, unit: Unit, code: Stage, parsed) -> dict[int, list[int]]:
        """Kernel index in the output code -> the kernel units compiled from it, as the
        "launches" relations record them (older runs: by the kernel's module file)."""
        found: dict[int, list[int]] = defaultdict(list)
        relations = self.links.get(unit.id, ())
        for relation in relations:
            if relation.attrs.get("output_code") == code.name and isinstance(
                    relation.attrs.get("order"), int):
                found[relation.attrs["order"]].append(relation.dst)
        if found or not relations:
            return found
        for order, kernel in enumerate(parsed.kernels):
            base = os.path.basename(kernel.path) if kernel.path else None
            for relation in relations:
                linked = self.graph.units.get(relation.dst)
                if linked is not None and base and linked.source_file and \
                        os.path.basename(linked.source_file) == base:
                    found[order].append(relation.dst)
        return found

    # -- a hand-written Triton kernel -------------------------------------------------
    def user_kernel(self, unit: Unit, stages: list[Stage]) -> None:
        """Each line of the kernel's Python source feeds the kernel; the line it sits at in
        its file is placed by the kernel's `def` in its IR locations."""
        source = next((s for s in stages if s.kind == "python_source"), None)
        ir = next((s for s in stages if s.kind == "ttir"), None)
        if source is None or ir is None or not unit.source_file:
            return
        lines = self.lines(source)
        name = unit.name.split("-")[0]
        at = next((i for i, text in enumerate(lines)
                   if text.lstrip().startswith((f"def {name}(", "def "))), None)
        def_line = _def_line(self.parsed(ir), unit.source_file)
        if at is None or def_line is None:
            return
        kernel = Node(KERNEL, unit.id)
        held = self.graph.held.setdefault(unit.source_file, {})
        for index, text in enumerate(lines):
            held.setdefault(def_line + index - at, text)
            if index >= at and text.strip() and not text.lstrip().startswith("#"):
                self.graph.add(Node(SOURCE, name=unit.source_file,
                                    line=def_line + index - at), kernel, LOCATION)

    # -- JAX / XLA ------------------------------------------------------------------------
    def xla_unit(self, unit: Unit, stages: list[Stage]) -> None:
        graph = self.graph
        by_suffix: dict[str, list[Stage]] = defaultdict(list)
        for stage in stages:
            if " · " in stage.name and stage.kind in FUSION_STAGE_KINDS:
                by_suffix[stage.name.rsplit(" · ", 1)[1]].append(stage)
        for stage in stages:
            if stage.kind not in XLA_KINDS:
                continue
            parsed = self.parsed(stage)
            if parsed is None:
                continue
            located: dict[int, Node] = {}
            for line, where in (getattr(parsed, "locations", None) or {}).items():
                path, _, number = where.rpartition(":")
                if number.isdigit():
                    node = located[line] = Node(LINE, unit.id, stage.id, "", line)
                    graph.span(node, line)
                    graph.add(Node(SOURCE, name=path, line=int(number)), node, LOCATION)
            if stage.kind != "hlo_after_opt":
                continue
            spans = {c.name: c.lines for c in getattr(parsed, "computations", ())}
            for fusion in getattr(parsed, "fusions", ()):
                node = Node(FUSION, unit.id, stage.id, fusion.name, fusion.line)
                graph.span(node, fusion.line)
                first, last = spans.get(fusion.calls, (0, 0))
                if first:
                    graph.span(node, first, last)
                for line in (fusion.line, *(range(first, last + 1) if first else ())):
                    if line in located:
                        graph.add(located[line], node, FUSED)
                for dumped in by_suffix.get(fusion.name, ()):
                    graph.add(node, Node(FUSION_IR, unit.id, dumped.id, fusion.name), DUMPED)
            for op in getattr(parsed, "unfused", ()):
                if op.line in located:
                    node = Node(OP, unit.id, stage.id, op.name, op.line)
                    graph.span(node, op.line)
                    graph.add(located[op.line], node, UNFUSED)

    # -- Thunder --------------------------------------------------------------------------
    def thunder_unit(self, unit: Unit, stages: list[Stage]) -> None:
        graph = self.graph
        relations = self.links.get(unit.id, ())
        for stage in stages:
            parsed = self.parsed(stage)
            if parsed is None or stage.kind != "thunder_trace":
                continue
            for line, where in (getattr(parsed, "line_locations", None) or {}).items():
                path, _, number = where.rpartition(":")
                if number.isdigit():
                    node = Node(LINE, unit.id, stage.id, "", line)
                    graph.span(node, line)
                    graph.add(Node(SOURCE, name=path, line=int(number)), node, LOCATION)
            role = _execution_role(stage.name)
            if role is None:
                continue
            for fusion in getattr(parsed, "fusions", ()):
                node = Node(REGION, unit.id, stage.id, fusion.name, fusion.line)
                graph.span(node, fusion.line, fusion.line + fusion.ops)
                graph.roles[stage.id] = role
                for relation in relations:
                    if relation.attrs.get("region") == fusion.name and \
                            relation.attrs.get("role", role) == role:
                        graph.add(node, Node(KERNEL, relation.dst), REGION_CALL)


@dataclass(frozen=True)
class CodeGroup:
    """One output code with the graphs filed for it: its post-grad stages (the last one the
    names its ATen mapping uses, ``post``) and its provenance records."""

    code: Stage
    post: Stage | None
    post_stages: tuple[Stage, ...]
    records: tuple[Stage, ...]


@dataclass(frozen=True)
class TorchLayout:
    """A Dynamo compile's stages as the graph reads them: in filing order, the pre-grad graph
    that Source Nodes name, the stages of each pipeline (pre-grad, joint) and the output codes."""

    ordered: tuple[Stage, ...]
    pre: Stage | None
    pre_stages: tuple[Stage, ...]
    joint_stages: tuple[Stage, ...]
    groups: tuple[CodeGroup, ...]


def torch_layout(stages) -> TorchLayout:
    """Group a torch unit's stages (any order) by the output code each was filed for."""
    ordered = tuple(sorted(stages, key=lambda s: s.id))
    fx = [s for s in ordered if s.kind in ("fx_graph", "aot_graph")]
    pending: list[Stage] = []
    groups: list[CodeGroup] = []
    for stage in ordered:
        name = base_name(stage)
        if stage.kind == "fx_graph" and name in POST_LINEAGE:
            pending.append(stage)
        elif stage.kind == OUTPUT_CODE:
            post = _first_named(pending, POST_GRAD)
            groups.append(CodeGroup(stage, post, tuple(pending), ()))
            pending = []
        elif stage.kind == PROVENANCE and groups:
            groups[-1] = dataclasses.replace(groups[-1], records=groups[-1].records + (stage,))
    return TorchLayout(ordered, _first_named(fx, PRE_GRAD),
                       tuple(s for s in fx if base_name(s) in PRE_LINEAGE),
                       tuple(s for s in fx if base_name(s) in JOINT_LINEAGE), tuple(groups))


def post_graph(ordered, post: Stage | None, role: str) -> Stage | None:
    """The post-grad graph of an output code of ``role``: ``post``, the one filed for it, else
    (no post-grad dump) the AOT graph of its role."""
    if post is None and role in AOT_ROLES:
        post = _first_named([s for s in ordered if s.kind == "aot_graph"], (AOT_ROLES[role],))
    return post


def lookup_order(role: str, post: Any, pre: Any) -> tuple[Any, Any]:
    """Where an output code's Source Nodes names are looked up, first place first (the post-
    and pre-grad graphs, or their nodes): a backward's own post-grad graph, then the pre-grad
    graph (a node it recomputes); the other way round for a forward."""
    return (post, pre) if role == "backward" else (pre, post)


def source_node_graphs(stages, code: Stage, role: str) -> tuple[Stage, ...]:
    """The graphs whose nodes the Source Nodes of output code ``code`` name, in
    ``lookup_order``."""
    layout = torch_layout(stages)
    group = next((g for g in layout.groups if g.code.id == code.id), None)
    post = post_graph(layout.ordered, group.post if group else None, role)
    return tuple(s for s in lookup_order(role, post, layout.pre) if s is not None)


def base_name(stage: Stage) -> str:
    """A stage's name without the ``#2`` of a second stage of that name."""
    return stage.name.split("#")[0]


def _fx_rows(parsed) -> list[tuple[str, int, int, tuple[str, int] | None]]:
    """(node, line, line of its `# File:` comment or 0, (file, line) or None) per node."""
    if parsed is None or not hasattr(parsed, "node_lines"):
        return []
    where_of = {loc.node: (loc.file, loc.line) for loc in parsed.locations}
    node_at = set(parsed.node_lines.values())
    comments = sorted(line for line in parsed.line_locations if line not in node_at)
    rows = []
    for name, line in parsed.node_lines.items():
        comment = 0
        if name in where_of:
            index = bisect.bisect_left(comments, line) - 1
            comment = comments[index] if index >= 0 else 0
        rows.append((name, line, comment, where_of.get(name)))
    return rows


def _first_named(stages, names: tuple[str, ...]) -> Stage | None:
    for name in names:
        for stage in stages:
            if base_name(stage) == name:
                return stage
    return None


def _comment_start(lines: list[str], line: int, launch: bool = False) -> int:
    """The first line of the comments just above 1-based ``line`` (a launch's also take the
    `stream0 = get_raw_stream(0)` between them and it)."""
    start = line
    while start > 1:
        text = lines[start - 2].strip() if start - 2 < len(lines) else ""
        if not (text.startswith("#") or (launch and "get_raw_stream(" in text)):
            break
        start -= 1
    return start


def _def_line(parsed, source_file: str) -> int | None:
    """A kernel's `def` line in its file: the first line its IR is located at there (Triton
    gives the function the location of its `def`)."""
    base = os.path.basename(source_file)
    numbers = []
    for where in (getattr(parsed, "locations", None) or {}).values():
        path, _, number = where.rpartition(":")
        if os.path.basename(path) == base and number.isdigit() and int(number) > 0:
            numbers.append(int(number))
    return min(numbers) if numbers else None


def _execution_role(stage_name: str) -> str | None:
    """ "forward execution" (or "compile 2: forward execution") -> "forward"."""
    name = stage_name.rsplit(": ", 1)[-1]
    for role in ("forward", "backward"):
        if name == f"{role} execution":
            return role
    return None
