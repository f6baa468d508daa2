"""A Dynamo compile's stages as one pipeline of graphs: pre-grad -> joint -> forward and
backward (AOT, then post-grad) -> output code, and which lines of two of them are the same
FX node (one pipeline: by name) or linked by the provenance graph's records (across)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from irscope.read.provenance import CODE_KINDS, FILE_COMMENT, FX, SOURCE, Node, ProvenanceGraph
from irscope.read.provenance_build import AOT_ROLES, torch_layout
from irscope.store import Stage

PRE, JOINT, CODE = "pre", "joint", "code"
MAX_DEPTH = 2  # record edges walked from a line to another graph's nodes


@dataclass
class Pipeline:
    """One torch unit's graph stages: the pipeline each belongs to (``lineage``: "pre",
    "joint", a role, or "code"), their order, and the stage of the provenance graph whose FX
    nodes stand for each pipeline (``spines``)."""

    graph: ProvenanceGraph
    parsed: Callable[[Stage], object]
    lineage: dict[int, str] = field(default_factory=dict)
    roles: dict[int, str] = field(default_factory=dict)  # stage id -> its role, where one
    spines: dict[str, list[int]] = field(default_factory=dict)  # lineage -> spine stage ids
    nexts: dict[int, list[Stage]] = field(default_factory=dict)
    prevs: dict[int, list[Stage]] = field(default_factory=dict)

    def link(self, chain: Sequence[Stage]) -> None:
        for before, after in zip(chain, chain[1:]):
            self.nexts.setdefault(before.id, []).append(after)
            self.prevs.setdefault(after.id, []).append(before)

    def neighbours(self, stage: Stage, step: int) -> list[Stage]:
        return (self.nexts if step > 0 else self.prevs).get(stage.id, [])

    def role_of(self, stage: Stage) -> str:
        return self.roles.get(stage.id, "")

    # -- the nodes of a line, the lines of nodes --------------------------------------------
    def nodes_at(self, stage: Stage, line: int) -> list[Node]:
        """The provenance graph's nodes for 1-based ``line``: its own, or (a graph the
        provenance graph holds no nodes of) the same-named nodes of its pipeline's spine."""
        own = self.graph.nodes_at(stage.id, line)
        if own or self.is_spine(stage):
            return own
        names = self.names_at(stage, line)
        return [node for spine in self.spines.get(self.lineage.get(stage.id, ""), ())
                for name, node in self.graph.named(spine).items() if name in names]

    def is_spine(self, stage: Stage) -> bool:
        return stage.id in self.graph.spans or self.lineage.get(stage.id) == CODE

    def names_at(self, stage: Stage, line: int) -> set[str]:
        """FX node names printed at ``line``: the node's line, or its `# File:` comment."""
        parsed = self.parsed(stage)
        node_lines = getattr(parsed, "node_lines", None) or {}
        named = {name for name, at in node_lines.items() if at == line}
        if named:
            return named
        where = (getattr(parsed, "line_locations", None) or {}).get(line)
        if where is None:
            return set()
        below = sorted((at, name) for name, at in node_lines.items() if at > line)
        group = set()
        for at, name in below:  # the nodes under the comment, up to the next comment
            if parsed.line_locations.get(at) != where:
                break
            group.add(name)
        return group

    def lines_in(self, nodes: Sequence[Node], target: Stage) -> list[int]:
        """1-based lines of ``target`` that show ``nodes`` (its own nodes, or by name)."""
        if self.is_spine(target):  # the node's own line, not the comments above it
            return sorted({node.line for node in nodes if node.stage_id == target.id})
        spines = set(self.spines.get(self.lineage.get(target.id, ""), ()))
        names = {node.name for node in nodes if node.kind == FX and node.stage_id in spines}
        node_lines = getattr(self.parsed(target), "node_lines", None) or {}
        return sorted({node_lines[name] for name in names if name in node_lines})

    # -- matching two stages -------------------------------------------------------------
    def related_lines(self, starts: list[Node], stage: Stage, target: Stage) -> list[int]:
        """Lines of ``target`` that are ``starts``: the same nodes within one pipeline, else
        the nearest nodes the records link them to."""
        wanted = self.wanted(target)
        same = [n for n in starts if n.stage_id in wanted]
        if same:
            return self.lines_in(same, target)
        return self.lines_in(self.nearest(starts, wanted), target)

    def wanted(self, target: Stage) -> set[int]:
        """The stage ids whose nodes stand for ``target``'s lines."""
        if self.is_spine(target):
            return {target.id}
        return set(self.spines.get(self.lineage.get(target.id, ""), ()))

    def nearest(self, starts: list[Node], wanted: set[int]) -> list[Node]:
        """Nodes of ``wanted`` stages the fewest record edges away from ``starts`` (not
        through a source line or a kernel: those join everything that shares them)."""
        seen = set(starts)
        frontier = list(starts)
        for _ in range(MAX_DEPTH):
            following = []
            for node in frontier:
                for edge in (*self.graph.downstream(node), *self.graph.upstream(node)):
                    other = edge.dst if edge.src == node else edge.src
                    if other in seen or other.kind not in (FX, *CODE_KINDS):
                        continue
                    seen.add(other)
                    following.append(other)
            hits = [n for n in following if n.stage_id in wanted]
            if hits:
                return hits
            frontier = following
        return []

    def same_source_lines(self, starts: list[Node], target: Stage) -> list[int]:
        """Lines of ``target`` whose nodes come from the same `# File:` source line as
        ``starts``: where no record links two graphs (a backward's nodes and the forward's)."""
        wanted = self.wanted(target)
        sources = {e.src for n in starts for e in self.graph.upstream(n) if e.src.kind == SOURCE
                   and e.via == FILE_COMMENT}
        nodes = [e.dst for s in sources for e in self.graph.downstream(s)
                 if e.dst.stage_id in wanted and e.via == FILE_COMMENT]
        return self.lines_in(nodes, target)


def torch_pipeline(stages: Sequence[Stage], graph: ProvenanceGraph,
                   parsed: Callable[[Stage], object]) -> Pipeline:
    """The pipeline of one torch unit's stages (see ``Pipeline``)."""
    layout = torch_layout(stages)
    pipeline = Pipeline(graph, parsed)
    pre = list(layout.pre_stages)
    joint = list(layout.joint_stages)
    for stage in pre:
        pipeline.lineage[stage.id] = PRE
    pipeline.spines[PRE] = [layout.pre.id] if layout.pre is not None else []
    for stage in joint:
        pipeline.lineage[stage.id] = JOINT
    pipeline.link(pre)
    pipeline.link(joint)
    aot = {s.name.split("#")[0]: s for s in layout.ordered if s.kind == "aot_graph"}
    for group in layout.groups:
        role = graph.roles.get(group.code.id, "")
        lineage = f"{role or 'graph'}:{group.code.id}"
        chain = [s for s in (aot.get(AOT_ROLES.get(role, "")),) if s is not None]
        chain += list(group.post_stages) + [group.code]
        for stage in chain[:-1]:
            pipeline.lineage[stage.id] = lineage
            pipeline.roles[stage.id] = role
        pipeline.lineage[group.code.id] = CODE
        pipeline.roles[group.code.id] = role
        post = graph.post_of.get(group.code.id)
        pipeline.spines[lineage] = [post] if post is not None else []
        pipeline.spines.setdefault(JOINT, []).extend(pipeline.spines[lineage])
        pipeline.link(chain)
        heads = joint or pre
        if heads and chain:
            pipeline.link([heads[-1], chain[0]])
    if pre and joint:
        pipeline.link([pre[-1], joint[0]])
    return pipeline
