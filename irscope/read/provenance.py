"""The provenance graph of a run: which line of the user's code became which FX nodes, kernels
and IR, built from the compilers' own records and read once per view.

Nodes are typed places: a line of a source file, an FX node of one graph stage (identity is
(unit, stage, node): names repeat across graphs), an output code's kernel definition or launch
line, a kernel unit, a located line of a JAX or Thunder stage, an XLA fusion and the stages of
its kernel IR, an instruction of optimized HLO that runs outside any fusion, a Thunder fusion
region. Edges point from the user's code towards the machine
and name the record that says so (`# File:` comments, Source Nodes comments, Inductor's
provenance artifacts, HLO metadata, the "launches" relations). The lines inside one kernel
(kernel source -> TTIR -> ... -> PTX -> SASS) are linked by their own locations (MLIR `loc`,
LLVM `!dbg`, PTX `.loc`, SASS line info) and are read on demand per kernel
(``irscope.browse.locations``), not held here.
"""

from __future__ import annotations

import os
from collections import defaultdict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple

from irscope.read.autotune import compiles_key
from irscope.read.view import RunView
from irscope.store import Unit

SOURCE = "source"  # a line of a user's file: name is the path as recorded, line the line
FX = "fx"  # an FX node of a graph stage
KERNEL_DEF = "kernel_def"  # an output code's kernel definition (its source and comments)
LAUNCH = "launch"  # an output code's launch line in call(): a kernel, extern or fallback
KERNEL = "kernel"  # a kernel unit (Triton, C++, nvFuser)
LINE = "line"  # a located line of a jaxpr, StableHLO, HLO or Thunder trace stage
FUSION = "fusion"  # an XLA fusion instruction (and its fused computation) of optimized HLO
FUSION_IR = "fusion_ir"  # a stage of one fusion's emitted kernel IR (TTIR, LLVM IR, PTX)
OP = "op"  # an instruction of optimized HLO that runs outside any fusion (a dot, a custom call)
REGION = "region"  # a Thunder fusion region's call in an execution trace
CODE_KINDS = (KERNEL_DEF, LAUNCH)
# what the user reaches from a line: the places that run on the device
TARGET_KINDS = frozenset({LAUNCH, KERNEL, FUSION, FUSION_IR, OP, REGION})

# records, as edges name them
FILE_COMMENT = "# File: comment"
SOURCE_NODES = "Source Nodes comment"
ATEN_MAPPING = "Source node to ATen node mapping"
NODE_MAPPING = "Inductor provenance (node mappings)"
KERNEL_TO_POST = "Inductor provenance (kernel to post-grad nodes)"
STACK_TRACE = "Inductor provenance (kernel stack trace)"
CALLER_FRAME = "Inductor provenance (kernel stack trace, caller frame)"
STACK_LINE = "kernel stack trace's line, the nodes of its graph there"
LAUNCHES = "launches"
DEFINED = "defined in the output code"
LOCATION = "source location"
FUSED = "fused computation"
DUMPED = "the fusion's dump"
UNFUSED = "unfused instruction"
REGION_CALL = "fusion region"


class Node(NamedTuple):
    """A place of the graph (see the module docstring); ``line`` is 1-based, 0 for none.
    A named tuple: a large run's graph holds hundreds of thousands, hashed as tuples are."""

    kind: str
    unit_id: int = 0
    stage_id: int = 0
    name: str = ""
    line: int = 0


class Edge(NamedTuple):
    """``src`` (nearer the user's code) became ``dst`` (nearer the machine), by ``via``."""

    src: Node
    dst: Node
    via: str


# Edge(src, dst, via) without the named tuple's Python-level __new__: a large run adds 100,000s
_edge = partial(tuple.__new__, Edge)


@dataclass(frozen=True)
class Hit:
    """A device place a source line feeds: a launch (or kernel definition) of an output code
    with the kernel units it runs, a user kernel, an XLA fusion or a Thunder region."""

    node: Node
    graph: Unit | None  # the unit whose code launches it (None for a user kernel)
    role: str  # "forward", "backward", "inference" or ""
    kernels: tuple[Unit, ...]  # the kernel units it runs (autotuned configurations: several)
    records: tuple[str, ...]  # the records that lead there


@dataclass
class ProvenanceGraph:
    """Every edge of a run, indexed both ways, with the lines each node spans in its stage."""

    edges: list[Edge] = field(default_factory=list)
    # stage id -> (first line, last line, node), 1-based and inclusive
    spans: defaultdict[int, list[tuple[int, int, Node]]] = field(
        default_factory=lambda: defaultdict(list))
    roles: dict[int, str] = field(default_factory=dict)  # output code stage id -> role
    pre_of: dict[int, int] = field(default_factory=dict)  # torch unit -> its pre-grad graph
    post_of: dict[int, int] = field(default_factory=dict)  # output code -> its post-grad graph
    units: dict[int, Unit] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what the run lacks, for the user
    # path -> 1-based line -> text, of the source the run itself holds (a kernel's function)
    held: dict[str, dict[int, str]] = field(default_factory=dict)
    _out: defaultdict[Node, list[Edge]] = field(default_factory=lambda: defaultdict(list))
    _in: defaultdict[Node, list[Edge]] = field(default_factory=lambda: defaultdict(list))
    _files: dict[str, set[str]] = field(default_factory=dict)  # base name -> paths
    _lines: dict[str, dict[int, Node]] = field(default_factory=dict)  # path -> line -> node

    def add(self, src: Node, dst: Node, via: str) -> None:
        edge = _edge((src, dst, via))
        self.edges.append(edge)
        self._out[src].append(edge)
        self._in[dst].append(edge)
        if src.kind == SOURCE:
            lines = self._lines.get(src.name)
            if lines is None:
                lines = self._lines[src.name] = {}
                self._files.setdefault(os.path.basename(src.name), set()).add(src.name)
            lines.setdefault(src.line, src)

    def span(self, node: Node, first: int, last: int | None = None) -> None:
        self.spans[node.stage_id].append((first, first if last is None else last, node))

    # -- reading ---------------------------------------------------------------------
    def __bool__(self) -> bool:
        return bool(self.edges)

    def downstream(self, node: Node) -> list[Edge]:
        return self._out.get(node, ())

    def upstream(self, node: Node) -> list[Edge]:
        return self._in.get(node, ())

    def nodes_at(self, stage_id: int, line: int) -> list[Node]:
        """The nodes whose span in ``stage_id`` holds 1-based ``line``."""
        return list(dict.fromkeys(n for first, last, n in self.spans.get(stage_id, ())
                                  if first <= line <= last))

    def nodes_at_lines(self, stage_id: int, lines: Iterable[int]) -> list[Node]:
        """The nodes whose own line (not their comments) is one of ``lines``."""
        wanted = set(lines)
        return [n for _, _, n in self.spans.get(stage_id, ()) if n.line in wanted]

    def named(self, stage_id: int) -> dict[str, Node]:
        """The FX nodes of one graph stage by name."""
        return {n.name: n for _, _, n in self.spans.get(stage_id, ()) if n.kind == FX}

    def lines_of(self, node: Node) -> list[int]:
        """The 1-based lines ``node`` spans in its own stage."""
        return sorted({line for first, last, n in self.spans.get(node.stage_id, ()) if n == node
                       for line in range(first, last + 1)})

    def files(self) -> list[str]:
        """Every source path the records name."""
        return sorted({p for paths in self._files.values() for p in paths})

    def paths_named(self, name: str) -> list[str]:
        """The recorded paths that are ``name``: the same path, or a unique base name, or a
        path ending in it (``gpt2/modeling_gpt2.py``)."""
        every = self.files()
        if name in every:
            return [name]
        if "/" not in name and "\\" not in name:
            return sorted(self._files.get(name, ()))
        absolute = os.path.abspath(name)
        if absolute in every:
            return [absolute]
        tail = "/" + name.lstrip("./")
        return [p for p in every if p.endswith(tail)]

    def source_nodes(self, path: str, line: int | None = None) -> list[Node]:
        """The graph's nodes for lines of ``path`` (one line, or all)."""
        lines = self._lines.get(path, {})
        if line is not None:
            return [lines[line]] if line in lines else []
        return [lines[number] for number in sorted(lines)]

    def reach(self, starts: Iterable[Node], down: bool = True,
              through: Callable[[Node], bool] | None = None) -> dict[Node, tuple[str, ...]]:
        """Every node reachable from ``starts`` (downstream or upstream), with the records
        on the first path found; ``through(node)`` False stops the walk at that node."""
        seen: dict[Node, tuple[str, ...]] = {}
        queue = deque((node, ()) for node in starts)
        while queue:
            node, records = queue.popleft()
            for edge in (self._out if down else self._in).get(node, ()):
                other = edge.dst if down else edge.src
                if other in seen:
                    continue
                seen[other] = records + (edge.via,) if edge.via not in records else records
                if through is None or through(other):
                    queue.append((other, seen[other]))
        return seen


def provenance_graph(view: RunView) -> ProvenanceGraph:
    """The run's graph, built once per view."""
    return view.derived("provenance", lambda: build_graph(view))


def build_graph(view: RunView) -> ProvenanceGraph:
    """Build the graph from every unit's stages (parsed through the view's cache)."""
    from irscope.read.provenance_build import add_units

    graph = ProvenanceGraph()
    graph.units = {u.id: u for u in view.units()}
    add_units(view, graph)
    return graph


# -- queries: what front ends (and measured time) read ---------------------------------

def source_hits(view: RunView, path: str, line: int, callers: bool = True) -> list[Hit]:
    """The device places line ``line`` of ``path`` feeds, forward and backward, each with the
    records that lead there; ``callers`` False leaves out kernels reached only because the line
    is a caller frame of their stack traces."""
    graph = provenance_graph(view)
    starts = graph.source_nodes(path, line)
    reached = graph.reach(starts, through=lambda n: n.kind not in (KERNEL, FUSION_IR))
    if not callers:
        reached = {n: r for n, r in reached.items() if r != (CALLER_FRAME,)}
    for node in [n for n in reached if n.kind == LAUNCH]:
        stacks = {(e.src.name, e.src.line) for e in graph.upstream(node)
                  if e.via in (STACK_TRACE, CALLER_FRAME)}
        if stacks and (path, line) not in stacks:  # Inductor's own record of this launch
            del reached[node]  # names other lines: its comments listed more nodes than it runs
    return _hits(view, graph, reached)


def hits_by_line(view: RunView, path: str, callers: bool = True) -> dict[int, list[Hit]]:
    """Every line of ``path`` the records name, with the device places it feeds."""
    graph = provenance_graph(view)
    return {node.line: found for node in graph.source_nodes(path)
            if (found := source_hits(view, path, node.line, callers))}


def kernel_sources(view: RunView, unit_id: int, callers: bool = False
                   ) -> dict[tuple[str, int], tuple[str, ...]]:
    """The source lines behind a kernel unit (every launch of it), with the records; caller
    frames of stack traces only when ``callers``."""
    graph = provenance_graph(view)
    return sources_of(graph, [Node(KERNEL, unit_id)], callers)


def launch_sources(view: RunView, stage_id: int, line: int, callers: bool = False
                   ) -> dict[tuple[str, int], tuple[str, ...]]:
    """The source lines behind the output-code launch (or kernel definition) at 1-based
    ``line`` of output-code stage ``stage_id``."""
    graph = provenance_graph(view)
    code = [n for n in graph.nodes_at(stage_id, line) if n.kind in CODE_KINDS]
    return sources_of(graph, code, callers)


def op_sources(view: RunView, unit_id: int, name: str, callers: bool = False
               ) -> dict[tuple[str, int], tuple[str, ...]]:
    """The source lines behind the XLA fusion (or instruction run outside any fusion) named
    ``name`` in the optimized HLO of the jax unit ``unit_id``."""
    graph = provenance_graph(view)
    places = view.derived("provenance.xla_places", lambda: _xla_places(graph))
    return sources_of(graph, places.get((unit_id, name), []), callers)


def _xla_places(graph: ProvenanceGraph) -> dict[tuple[int, str], list[Node]]:
    """(unit, name) -> the fusion and unfused-instruction nodes of that name."""
    found: dict[tuple[int, str], list[Node]] = defaultdict(list)
    for spans in graph.spans.values():
        for _, _, node in spans:
            if node.kind in (FUSION, OP) and node not in found[(node.unit_id, node.name)]:
                found[(node.unit_id, node.name)].append(node)
    return found


def fx_nodes_of(view: RunView, node: Node) -> list[Node]:
    """The FX nodes (each of its own graph stage) behind a launch, kernel definition or kernel
    unit."""
    graph = provenance_graph(view)
    starts = [node] + [e.dst for e in graph.downstream(node) if e.dst.kind == LAUNCH]
    reached = graph.reach(starts, down=False, through=lambda n: n.kind != SOURCE)
    return sorted((n for n in reached if n.kind == FX), key=lambda n: (n.stage_id, n.line))


def sources_of(graph: ProvenanceGraph, starts: list[Node], callers: bool = False
               ) -> dict[tuple[str, int], tuple[str, ...]]:
    """The source lines upstream of ``starts``, with the records on the way; the caller
    frames of kernel stack traces only when ``callers``."""
    found: dict[tuple[str, int], tuple[str, ...]] = {}
    for node, records in graph.reach(starts, down=False).items():
        if node.kind == SOURCE and (callers or CALLER_FRAME not in records[-1:]):
            found.setdefault((node.name, node.line), records)
    return dict(sorted(found.items()))


def _hits(view: RunView, graph: ProvenanceGraph, reached: dict[Node, tuple[str, ...]]
          ) -> list[Hit]:
    """Launches (and their kernels), kernel definitions that were never launched, user
    kernels, fusions and regions among ``reached``, one hit each."""
    hits: list[Hit] = []
    user_kernels: dict[tuple[str, str | None], list[tuple[Unit, tuple[str, ...]]]] = {}
    launched_defs: set[Node] = set()
    for node, records in reached.items():
        if node.kind == LAUNCH:
            launched_defs.update(e.src for e in graph.upstream(node) if e.src.kind == KERNEL_DEF)
    for node, records in reached.items():
        if node.kind in (LAUNCH, KERNEL_DEF, REGION, FUSION, OP) and not (
                node.kind == KERNEL_DEF and (node in launched_defs or any(
                    e.dst.kind == LAUNCH for e in graph.downstream(node)))):
            kernels = tuple({e.dst.unit_id: graph.units[e.dst.unit_id]
                             for e in graph.downstream(node)
                             if e.dst.kind == KERNEL and e.dst.unit_id in graph.units}.values())
            graph_unit = graph.units.get(node.unit_id)
            hits.append(Hit(node, graph_unit, graph.roles.get(node.stage_id, ""), kernels,
                            records))
        elif node.kind == KERNEL and not any(e.src.kind in (LAUNCH, KERNEL_DEF, REGION)
                                             for e in graph.upstream(node)):
            unit = graph.units.get(node.unit_id)  # a user kernel: no graph launches it
            if unit is not None:  # its configurations (an autotuner's compiles): one kernel
                user_kernels.setdefault(compiles_key(unit), []).append((unit, records))
    for compiles in user_kernels.values():
        compiles.sort(key=lambda found: found[0].id)
        first, records = compiles[0]
        hits.append(Hit(Node(KERNEL, first.id), None, "", tuple(u for u, _ in compiles),
                        records))
    return sorted(hits, key=_hit_order)


def _hit_order(hit: Hit) -> tuple:
    return (hit.graph.id if hit.graph else 1 << 60, hit.node.stage_id, hit.node.line,
            hit.node.name)
