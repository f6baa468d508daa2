"""Measured time joined to the run: every profiled launch to the unit that accounts for it.

The run's profiler traces (``profile`` units, ``irscope.ingest.profile``) are read back as
launch signatures and each is joined by identity, never by a name alone:

- an Inductor launch by its graph call: the FX graph cache key of ``## Call CompiledFxGraph
  <key> ##`` names the output code (the TORCH_TRACE logs each output code, then the cache
  artifact holding that key, with the same compile id), the launch's place in that graph
  call names the very line of ``call()`` (its ``launch_sequence``); a Triton kernel then joins
  the Triton unit the graph is linked to under that kernel name, the compiled configuration
  told apart by the launch's block, registers and shared memory, else by the autotuner's
  record, else by the launch's grid (``analysis/grids.py``); an extern kernel (a cuBLAS
  GEMM, attention, an aten op, a collective) stays under its graph and line;
- a Triton kernel launched outside a graph (a user's kernel) by its name and resources;
- an XLA launch by its module (the jax unit of that name, the XLA program id where the unit
  records it) and its fusion: the HLO op, or for a kernel replayed from a CUDA graph the
  thunk of its graph node in the module's thunk sequence, whose kernel must be the launch's;
- an nvFuser kernel by its name among the run's nvFuser units.

A launch nothing accounts for is a row of its own (origin ``unjoined``) saying what launched
it; nothing is dropped, so the rows' kernel time is the traces' own total.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from irscope.analysis.figures import unit_figures
from irscope.analysis.grids import (block_grid, block_sizes, element_counts, launch_grid,
                                    passed_arguments)
from irscope.analysis.launches import Signature, decode_table, held_by, signatures
from irscope.analysis.op_names import is_view, launch_name, profiler_op, recorded_launch
from irscope.parsers._profile import CpuContext
from irscope.analysis.timing import UNJOINED, KernelTime, RunTime, UnitTime
from irscope.analysis.work import Work, extern_work, inductor_estimates
from irscope.ingest.profile import PROBLEMS as TRACE_PROBLEMS
from irscope.parsers.ptx import program_strides
from irscope.read.autotune import autotune_times
from irscope.read.provenance import Hit, kernel_sources, launch_sources, op_sources
from irscope.read.provenance_build import source_node_graphs
from irscope.read.view import RunView
from irscope.store import Run, Stage, Unit

PROFILE = "profile"
LAUNCHES = "launches"
OUTPUT_CODE = "inductor_output_code"
CACHE_RECORDS = ("fx_graph_cache_miss", "fx_graph_cache_hit")
THUNK_SEQUENCE = "thunk_sequence_after_thunk_passes.txt"
THUNK_METADATA = "thunk_metadata.txt"
# "    009: kCustomKernel [prev=006 (3) | next=013 (4)] input_reduce_fusion_4 grid: [4, 1, 1]"
THUNK_KERNEL = re.compile(r"^\s+(\d+): k\w+ \[[^\]]*\] (\S+) grid:", re.M)
# thunk_info {\n profile_annotation: "input_reduce_fusion.2"\n thunk_id: 11\n }
THUNK_INFO = re.compile(r'profile_annotation: "([^"]+)"\s+thunk_id: (\d+)')
# "x_0-94bbd7fb" -> "x_0": a second compile of one kernel is filed with a hash suffix
HASH_SUFFIX = re.compile(r"-[0-9a-f]{6,}$")
STEP_RANGE = "ProfilerStep#"


def read_time(run: RunView | Run) -> RunTime | None:
    """The run's measured time joined to its units, or None when it holds no profiler trace."""
    view = RunView.of(run)
    return view.derived("time", lambda: _join(view))


def time_share(time: RunTime | None, unit_id: int) -> float | None:
    """A unit's share of the run's measured GPU time; None where it has none."""
    if time is None or unit_id not in time.units or not time.kernel_time_ns:
        return None
    return time.units[unit_id].total_ns / time.kernel_time_ns


def lines_share(time: RunTime | None, graph_id: int, output_code: str,
                lines: tuple[int, ...]) -> float | None:
    """The share of the run's measured GPU time spent in the kernels a graph's output code
    launches at ``lines``; None where none of them was timed."""
    if time is None or not time.kernel_time_ns:
        return None
    spent = [time.by_line[key] for line in lines
             if (key := (graph_id, output_code, line)) in time.by_line]
    return sum(spent) / time.kernel_time_ns if spent else None


@dataclass(frozen=True)
class _Target:
    """What a launch signature joins to (a KernelTime's identity, without its times)."""

    origin: str
    how: str
    unit: Unit | None = None
    graph: Unit | None = None
    phase: str | None = None
    output_code: str | None = None
    line: int | None = None
    op: str | None = None
    work: Work | None = None
    candidates: int = 1
    nodes: tuple[str, ...] = ()
    recorded_op: str | None = None


def source_lines(run: RunView | Run, kernel: KernelTime, callers: bool = False
                 ) -> tuple[tuple[str, int], ...]:
    """The user source lines (path, line) a timed kernel was made from, by the provenance
    graph: an Inductor launch's by its output code's ``call()`` line, an XLA kernel's by its
    fusion (or the instruction run outside any fusion), any other by its kernel unit; with
    the caller frames of kernel stack traces when ``callers``. A kernel made from several
    lines is made from each."""
    view = RunView.of(run)
    if kernel.kind != "kernel" or not kernel.joined:
        return ()
    if kernel.graph_id is not None and kernel.line is not None:
        stage = _output_codes(view).get((kernel.graph_id, kernel.output_code))
        found = launch_sources(view, stage, kernel.line, callers) if stage else {}
    elif kernel.origin == "xla" and kernel.unit_id is not None and kernel.op:
        found = op_sources(view, kernel.unit_id, kernel.op, callers)
    elif kernel.unit_id is not None:
        found = kernel_sources(view, kernel.unit_id, callers)
    else:
        found = {}
    return tuple(found)


def _output_codes(view: RunView) -> dict[tuple[int, str], int]:
    """(graph unit, output code's name) -> its stage id."""
    return view.derived("timing.output_codes", lambda: {
        (s.unit_id, s.name): s.id for s in view.stages(kinds=(OUTPUT_CODE,))})


def hit_time(run: RunView | Run, hit: Hit) -> tuple[int, int] | None:
    """The measured time (ns) and launches of what a source line's ``hit`` runs: the kernels
    launched at its line of an output code, its user kernel's configurations, its XLA fusion
    or instruction, its Thunder region's kernels; None where the run measured none of it."""
    view = RunView.of(run)
    time = read_time(view)
    if time is None:
        return None
    places = view.derived("timing.places", lambda: _places(view, time))
    node = hit.node
    if hit.graph is not None and node.kind == "launch":
        keys = [("launch", node.stage_id, node.line)]
    elif node.kind in ("fusion", "op"):
        keys = [("op", node.unit_id, node.name)]
    else:
        keys = [("unit", unit.id) for unit in hit.kernels]
    found = [places[key] for key in keys if key in places]
    if not found:
        return None
    return sum(ns for ns, _ in found), sum(launches for _, launches in found)


def _places(view: RunView, time: RunTime) -> dict[tuple, tuple[int, int]]:
    """Measured (ns, launches) by where the kernels ran: a graph's output-code line, an XLA
    unit's fusion or instruction, a kernel unit launched outside any graph."""
    found: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
    codes = _output_codes(view)
    for kernel in time.kernels:
        if kernel.kind != "kernel" or not kernel.joined:
            continue
        if kernel.graph_id is not None:
            key = ("launch", codes.get((kernel.graph_id, kernel.output_code)), kernel.line)
        elif kernel.origin == "xla":
            key = ("op", kernel.unit_id, kernel.op)
        else:
            key = ("unit", kernel.unit_id)
        found[key][0] += kernel.total_ns
        found[key][1] += kernel.launches
    return {key: (ns, launches) for key, (ns, launches) in found.items()}


def _join(view: RunView) -> RunTime | None:
    traces = view.units(PROFILE)
    if not traces:
        return None
    join = _Joiner(view)
    rows: dict[tuple, list] = {}
    units: dict[int, list] = defaultdict(lambda: [0, 0, defaultdict(int)])
    ranks: dict[int, int] = defaultdict(int)
    steps: dict[int, int] = defaultdict(int)
    problems, windows, devices = [], [], []
    trace_total = window = 0
    for trace in traces:
        table = _table(view, trace, problems)
        if table is None:
            continue
        found = trace.attrs.get(TRACE_PROBLEMS)  # what was wrong with the trace when filed
        problems += [f"{trace.name}: {problem}" for problem in
                     (found if isinstance(found, list) else ()) if isinstance(problem, str)]
        rank = trace.attrs.get("rank")
        trace_total += table.kernel_time_ns
        if table.window_start_ns is not None and table.window_end_ns is not None:
            window += table.window_end_ns - table.window_start_ns
        if isinstance(trace.attrs.get("window"), Mapping):
            windows.append(dict(trace.attrs["window"]))
        devices += [d.get("name", "") for d in table.devices if d.get("name")]
        for sig in signatures(table):
            target = join.target(sig, rank)
            device = table.device_name(sig.device)
            key = (target.origin, target.unit.id if target.unit else None,
                   target.graph.id if target.graph else None, target.output_code, target.line,
                   target.op, sig.name, sig.kind, target.phase, rank, device,
                   target.how if target.origin == UNJOINED else None)
            row = rows.get(key)
            if row is None:
                rows[key] = row = [target, sig, rank, device, 0, 0, None, 0, {}]
            row[4] += sig.launches
            row[5] += sig.total_ns
            row[6] = sig.min_ns if row[6] is None else min(row[6], sig.min_ns)
            row[7] = max(row[7], sig.max_ns)
            row[8][sig] = sig.launches
            if sig.kind != "kernel":
                continue
            for owner in {u.id for u in (target.unit, target.graph) if u is not None}:
                held = units[owner]
                held[0] += sig.total_ns
                held[1] += sig.launches
                if target.phase and owner == (target.graph.id if target.graph else None):
                    held[2][target.phase] += sig.total_ns
            ranks[rank if rank is not None else 0] += sig.total_ns
            if sig.context is not None and sig.context.step is not None:
                steps[sig.context.step] += sig.total_ns
    kernels = sorted((_row(*row) for row in rows.values()),
                     key=lambda k: (k.kind != "kernel", -k.total_ns, k.name))
    total = sum(k.total_ns for k in kernels if k.kind == "kernel")
    unjoined = sum(k.total_ns for k in kernels if k.kind == "kernel" and not k.joined)
    return RunTime(tuple(kernels), total, trace_total, unjoined, window, len(traces),
                   tuple(dict.fromkeys(devices)),
                   {unit: UnitTime(ns, count, dict(phases))
                    for unit, (ns, count, phases) in units.items()},
                   dict(ranks), dict(sorted(steps.items())), tuple(windows), tuple(problems))


def _table(view: RunView, trace: Unit, problems: list[str]):
    stages = [s for s in view.stages(trace.id) if s.kind == LAUNCHES]
    if not stages:
        problems.append(f"{trace.name}: no launches stage")
        return None
    try:
        return decode_table(view.read_blob(stages[0].blob))
    except (ValueError, OSError) as exc:
        problems.append(f"{trace.name}: launches unreadable ({exc})")
        return None


def _row(target: _Target, sig: Signature, rank, device, launches: int, total: int, low,
         high: int, shapes: dict) -> KernelTime:
    """A kernel row: its target, times over every signature of it, and its commonest shape."""
    common = max(shapes, key=shapes.get)
    return KernelTime(
        sig.name, sig.kind, target.origin, target.how, launches, total, low or 0, high,
        target.unit.id if target.unit else None, target.unit.name if target.unit else None,
        target.unit.framework if target.unit else None,
        target.graph.id if target.graph else None, target.graph.name if target.graph else None,
        target.phase, target.output_code, target.line, target.op, rank, device, common.grid,
        common.block, common.registers, common.shared, target.work, target.candidates,
        target.nodes, target.recorded_op)


class _Joiner:
    """The run's identities, read once each when a launch first needs them."""

    def __init__(self, view: RunView):
        self.view = view
        self.memo: dict[tuple, _Target] = {}
        self.thunk_tables: dict[int, tuple[dict[int, str], dict[int, str]]] = {}
        self.blocks: dict[int, dict[str, int]] = {}

    def target(self, sig: Signature, rank: int | None) -> _Target:
        key = (sig.kind, sig.name, sig.context, sig.grid, sig.block, sig.registers, sig.shared,
               sig.hlo_module, sig.hlo_op, sig.program_id, sig.graph_node, rank)
        found = self.memo.get(key)
        if found is None:
            found = self.memo[key] = self._target(sig, rank)
        return found

    def _target(self, sig: Signature, rank: int | None) -> _Target:
        context = sig.context
        if sig.hlo_module is not None or sig.program_id is not None:
            return self._xla(sig, rank)
        if context is not None and context.graph_key is not None:
            graph = self.graphs.find(context, rank)
            if graph is not None:
                return self._inductor(sig, context, graph)
            return _Target(UNJOINED, f"graph call {context.graph_key} names no output code "
                                     "the run holds")
        if sig.kind == "kernel":
            found = self._outside_graph(sig, rank)
            if found is not None:
                return found
        return _Target(UNJOINED, _launched_by(context), phase=context and context.phase,
                       **_profiled_op(context and context.op))

    # -- Inductor ----------------------------------------------------------------------------
    @cached_property
    def graphs(self) -> _Graphs:
        return _Graphs(self.view)

    @cached_property
    def tuned(self) -> dict:
        return autotune_times(self.view)

    def _inductor(self, sig: Signature, context: CpuContext, graph: _Graph) -> _Target:
        code, launch = graph.code, None
        if context.launch_index is not None and 0 <= context.launch_index < len(
                code.launch_sequence):
            launch = code.launch_sequence[context.launch_index]
        line_nodes = getattr(code, "line_nodes", {})
        base = dict(graph=graph.unit, phase=graph.role or context.phase,
                    output_code=graph.stage.name)
        defined = {k.name: k for k in code.kernels}
        name = sig.name
        if name not in defined and launch is not None and _compiles_as(
                defined.get(launch.name), name):
            name = launch.name  # unique kernel names off: every kernel's symbol is `triton_`
        if sig.kind == "kernel" and name in defined:
            kernel = defined[name]
            here = launch if launch is not None and launch.name == name else None
            line = here.line if here is not None else \
                next((l.line for l in code.launch_sequence if l.name == name), None)
            units = graph.triton_units(self.view).get(name, [])
            work = inductor_estimates(kernel.source)
            if not units:
                return _Target("triton", "graph call -> output code kernel (its Triton compile "
                                         "is not in the run)", graph.unit, line=line,
                               work=work, **base)
            unit, candidates, how = _pick(units, sig, self.tuned, lambda alike: self._by_grid(
                alike, sig, graph, kernel, here))
            return _Target("triton", "graph call -> output code kernel -> Triton unit" + how,
                           unit, line=line, work=work, candidates=candidates,
                           nodes=graph.computing(self.view, line_nodes.get(line, ())), **base)
        if launch is None:
            return _Target("extern", "graph call (its place in call() not known)", graph.unit,
                           **_profiled_op(held_by(context)), **base)
        work = graph.extern_work(self.view).get(launch.line) if launch.kind == "extern" else None
        op = _profiled_op(held_by(context)) if launch.kind == "kernel" else dict(
            op=launch_name(launch), recorded_op=recorded_launch(launch))
        return _Target("extern", "graph call -> call() line", graph.unit, line=launch.line,
                       work=work if sig.kind == "kernel" else None,
                       nodes=graph.computing(self.view, line_nodes.get(launch.line, ()),
                                             generated=launch.kind == "kernel"), **op, **base)

    def _by_grid(self, units: list[Unit], sig: Signature, graph: _Graph, kernel,
                 launch) -> list[Unit]:
        """Those of ``units`` (one kernel's compiles, alike in their resources) whose grid over
        the element counts the output code passes (at the launch's line, else at each line
        launching the kernel) is the grid the launch recorded; none where any compile's grid
        cannot be worked out."""
        if sig.grid is None or not block_grid(kernel.source):
            return []
        lines = graph.lines(self.view)
        runs = [launch] if launch is not None else [
            l for l in graph.code.launch_sequence if l.name == kernel.name]
        counts = [element_counts(passed_arguments(kernel.source, lines[run.line - 1],
                                                  kernel.name))
                  for run in runs if 0 < run.line <= len(lines)]
        if not counts or None in counts:
            return []
        found = []
        for unit in units:
            grids = {launch_grid(c, self.block_sizes(unit)) for c in counts}
            if None in grids:
                return []
            if tuple(sig.grid) in grids:
                found.append(unit)
        return found

    def block_sizes(self, unit: Unit) -> dict[str, int]:
        """A Triton compile's block size on each grid axis: its constexprs', else what its
        PTX shows each program moves on."""
        if unit.id not in self.blocks:
            ptx = [s for s in self.view.stages(unit.id) if s.kind == "ptx"]
            strides = program_strides(self.view.read_text(ptx[0])) if ptx else {}
            self.blocks[unit.id] = block_sizes(unit.attrs.get("constexprs"), strides)
        return self.blocks[unit.id]

    # -- outside any graph ---------------------------------------------------------------
    @cached_property
    def kernel_units(self) -> dict[str, list[Unit]]:
        """Triton and nvFuser units by the kernel name they compile."""
        found: dict[str, list[Unit]] = defaultdict(list)
        for unit in self.view.units("triton"):
            found[HASH_SUFFIX.sub("", unit.name)].append(unit)
        for unit in self.view.units("nvfuser"):
            found["nvfuser_" + unit.name.rsplit(" ", 1)[-1]].append(unit)
        return found

    def _outside_graph(self, sig: Signature, rank) -> _Target | None:
        units = [u for u in self.kernel_units.get(_kernel_symbol(sig.name), ())
                 if _of_rank(u, rank)]
        if not units:
            return None
        if units[0].framework == "nvfuser":
            regions = [u for u in units if sig.context is not None
                       and any(u.attrs.get("region") in s for s in sig.context.stack)]
            units = regions or units
            return _Target("nvfuser", "kernel name" + (
                f" ({len(units)} regions compile it alike)" if len(units) > 1 else ""),
                units[0], candidates=len(units))
        unit, candidates, how = _pick(units, sig, self.tuned)
        return _Target("triton", "kernel name -> Triton unit, by its resources" + how, unit,
                       candidates=candidates)

    # -- XLA -----------------------------------------------------------------------------
    @cached_property
    def modules(self) -> dict[str, list[Unit]]:
        found: dict[str, list[Unit]] = defaultdict(list)
        for unit in self.view.units("jax"):
            if unit.attrs.get("xla_module") is not None:
                found[unit.name.split(" (")[0]].append(unit)
        return found

    def _xla(self, sig: Signature, rank) -> _Target:
        module = sig.hlo_module
        units = [u for u in self.modules.get(module or "", ()) if _of_rank(u, rank)]
        if not units:
            return _Target(UNJOINED, f"XLA module {module or sig.program_id} is not in the run")
        numbered = [u for u in units if u.attrs.get("xla_module") == sig.program_id]
        thunks = [(u, self._thunk(u, sig)) for u in (numbered or units)]
        named = [(u, fusion) for u, fusion in thunks if fusion]
        if sig.graph_node is not None and sig.hlo_op and sig.hlo_op.startswith("command_buffer"):
            if named:
                unit, fusion = named[0]
                return _Target("xla", "XLA module -> CUDA graph node -> thunk -> fusion", unit,
                               op=fusion, candidates=len(named))
            return _Target("xla", "XLA module (the command buffer's thunks are not in the "
                                  "run)", (numbered or units)[0], op=sig.hlo_op,
                           candidates=len(numbered or units))
        unit = (numbered or units)[0]
        return _Target("xla", "XLA module -> HLO op", unit, op=sig.hlo_op,
                       candidates=len(numbered or units))

    def _thunk(self, unit: Unit, sig: Signature) -> str | None:
        """The fusion a command buffer's node ``sig.graph_node`` runs, when the module's thunk
        sequence has the launch's kernel there (node n of the graph is thunk n+1)."""
        if sig.graph_node is None:
            return None
        kernels, fusions = self.thunks(unit.id)
        thunk = (sig.graph_node & 0xFFFFFFFF) + 1
        return fusions.get(thunk) if kernels.get(thunk) == sig.name else None

    def thunks(self, unit_id: int) -> tuple[dict[int, str], dict[int, str]]:
        """Thunk number -> kernel name, and -> the fusion it runs, of a module's dump."""
        if unit_id not in self.thunk_tables:
            texts = {s.name: s for s in self.view.stages(unit_id)
                     if s.name in (THUNK_SEQUENCE, THUNK_METADATA)}
            kernels = fusions = {}
            if len(texts) == 2:
                kernels = {int(i): n for i, n in THUNK_KERNEL.findall(
                    self.view.read_text(texts[THUNK_SEQUENCE]))}
                fusions = {int(i): n for n, i in THUNK_INFO.findall(
                    self.view.read_text(texts[THUNK_METADATA]))}
            self.thunk_tables[unit_id] = (kernels, fusions)
        return self.thunk_tables[unit_id]


@dataclass
class _Graph:
    """One output code of a graph unit, known by the FX graph cache key it was logged with;
    what the join reads of it is read once, when first asked for."""

    unit: Unit
    stage: Stage
    code: object  # parsers.inductor.OutputCode
    kernels: dict[str, list[Unit]] | None = field(default=None, repr=False)
    work: dict[int, Work] | None = field(default=None, repr=False)
    text: str | None = field(default=None, repr=False)
    split: list[str] | None = field(default=None, repr=False)
    targets: dict[str, str] | None = field(default=None, repr=False)

    @property
    def role(self) -> str | None:
        return getattr(self.code, "role", None)

    def triton_units(self, view: RunView) -> dict[str, list[Unit]]:
        """Kernel name -> the Triton units this graph launches under that name (from this
        output code where the link says which)."""
        if self.kernels is None:
            self.kernels = defaultdict(list)
            for relation in view.relations("launches"):
                if relation.src != self.unit.id:
                    continue
                unit = view.unit_by_id(relation.dst)
                code = relation.attrs.get("output_code")
                if unit.framework == "triton" and code in (None, self.stage.name):
                    self.kernels[HASH_SUFFIX.sub("", unit.name)].append(unit)
        return self.kernels

    def source(self, view: RunView) -> str:
        if self.text is None:
            self.text = view.read_text(self.stage)
        return self.text

    def lines(self, view: RunView) -> list[str]:
        if self.split is None:
            self.split = self.source(view).splitlines()
        return self.split

    def computing(self, view: RunView, nodes: tuple[str, ...],
                  generated: bool = True) -> tuple[str, ...]:
        """Those of ``nodes`` (a call() line's Source Nodes) that compute: the views its
        kernel reads through (``view``, ``permute``, ``getitem``) left out, as their graph's
        targets say. Where only views are named, a ``generated`` kernel copies them (they are
        its nodes); an extern call's op is then left unnamed by Inductor's record (`[view_28,
        permute_9, ]` of an addmm), and none is its node."""
        if self.targets is None:
            self.targets = {}
            for stage in reversed(source_node_graphs(view.stages(self.unit.id), self.stage,
                                                     self.role or "")):
                try:
                    self.targets.update(getattr(view.parsed(stage), "node_targets", {}))
                except Exception:  # noqa: BLE001  an unreadable graph leaves its nodes as named
                    continue
        kept = tuple(n for n in nodes if not is_view(self.targets.get(n, "")))
        return kept or (nodes if generated else ())

    def extern_work(self, view: RunView) -> dict[int, Work]:
        if self.work is None:
            self.work = extern_work(self.source(view))
        return self.work


class _Graphs:
    """FX graph cache key -> the output codes logged with it (one per rank or recompile)."""

    def __init__(self, view: RunView):
        self.by_key: dict[str, list[_Graph]] = defaultdict(list)
        for unit in view.units("torch"):
            pending: Stage | None = None
            for stage in sorted(view.stages(unit.id), key=lambda s: s.id):
                if stage.kind == OUTPUT_CODE:
                    pending = stage
                elif stage.name.startswith(CACHE_RECORDS) and pending is not None:
                    key = _cache_key(view, stage)
                    if key is not None:
                        try:
                            code = view.parsed(pending)
                        except Exception:  # noqa: BLE001  an unreadable code joins nothing
                            continue
                        self.by_key[key].append(_Graph(unit, pending, code))
                    pending = None

    def find(self, context: CpuContext, rank: int | None) -> _Graph | None:
        found = self.by_key.get(context.graph_key or "", [])
        if len(found) > 1:
            found = [g for g in found if _of_rank(g.unit, rank)] or found
        if len(found) > 1 and context.compile_id:
            found = [g for g in found
                     if g.unit.attrs.get("compile_id") == context.compile_id] or found
        return found[0] if found else None


def _cache_key(view: RunView, stage: Stage) -> str | None:
    try:
        record = json.loads(view.read_text(stage))
    except (ValueError, RecursionError, OSError):
        return None
    key = record.get("key") if isinstance(record, dict) else None
    return key if isinstance(key, str) else None


def _of_rank(unit: Unit, rank: int | None) -> bool:
    """Whether ``unit`` is ``rank``'s (a unit of no rank, or shared by the ranks, is any's)."""
    own = unit.attrs.get("rank")
    return rank is None or own is None or own == rank


def _kernel_symbol(name: str) -> str:
    """A kernel's name as its unit is named: nvFuser's mangled symbol
    ``_ZN11CudaCodeGen29nvfuser_pointwise_f0_c1_r0_g1...`` as ``nvfuser_pointwise_f0_c1_r0_g1``."""
    match = re.search(r"(nvfuser_\w+?_f\d+_c\d+_r\d+_g\d+)", name)
    return match.group(1) if match else name


def _compiles_as(kernel, symbol: str) -> bool:
    """Whether the output code's ``kernel`` compiles to the GPU symbol ``symbol``: its Triton
    function is defined under that name (Inductor names every kernel's function `triton_`
    when unique kernel names are off, and the output code's name for it differs)."""
    return kernel is not None and kernel.backend == "triton" and \
        re.search(rf"^def {re.escape(symbol)}\(", kernel.source, re.MULTILINE) is not None


def _pick(units: list[Unit], sig: Signature, tuned: Mapping,
          by_grid: Callable[[list[Unit]], list[Unit]] | None = None) -> tuple[Unit, int, str]:
    """The compiled configuration among ``units`` (one kernel's) that the launch ran: the one
    whose block (num_warps x 32 threads), registers and shared memory are the launch's, else
    among those the one the autotuner chose (once it has chosen, the kernel launches that
    configuration alone), else the one whose grid the launch's is (``by_grid``: those of
    them), else the first, a guess the count of those alike says is one (no record of the
    choice: ``irscope.read.autotune.unchosen_candidates``). Returns it, how many remain alike,
    and how."""
    fitting = [u for u in units if _fits(u, sig)] or units
    if len(fitting) == 1:
        return fitting[0], 1, ""
    best = [u for u in fitting
            if u.attrs.get("autotune_best") or (u.id in tuned and tuned[u.id].best)]
    if len(best) == 1:
        return best[0], 1, f" (of {len(fitting)} alike, the autotuner's choice)"
    gridded = by_grid(fitting) if by_grid is not None else []
    if len(gridded) == 1:
        return gridded[0], 1, f" (of {len(fitting)} alike, the one whose block sizes give " \
                              "the launch's grid)"
    return fitting[0], len(fitting), f" ({len(fitting)} configurations alike: the first taken)"


def _fits(unit: Unit, sig: Signature) -> bool:
    """Whether the launch's resources are those of ``unit``'s compile. CUPTI reports the
    registers a launch was given, which is the cubin's count or that count rounded up to the
    allocation unit of 8 (at least 16); its shared memory is the dynamic part Triton asks for
    (or, by some drivers' count, the cubin's whole)."""
    warps = unit.attrs.get("num_warps")
    if sig.block and isinstance(warps, int) and sig.block[0] != warps * 32:
        return False
    records = unit_figures(unit, ()).kernels
    record = records[0] if len(records) == 1 else None
    if record is None:
        return True
    if sig.registers is not None and record.registers is not None and sig.registers not in (
            record.registers, max(16, -(-record.registers // 8) * 8)):
        return False
    return sig.shared is None or sig.shared in (record.shared_dynamic_bytes, record.shared_bytes)


# What an unjoined launch's "launched by" starts with when the profiler saw its CPU side
OUTSIDE_GRAPHS = "outside any compiled graph: "


def _launched_by(context: CpuContext | None) -> str:
    """Why a launch is unjoined: what launched it, outside any compiled graph."""
    if context is None:
        return "no CPU launch recorded for it"
    ranges = [s for s in context.stack if not s.startswith(STEP_RANGE)]
    where = context.annotation if context.annotation and not context.annotation.startswith(
        STEP_RANGE) else (ranges[-1] if ranges else context.launcher)
    phase = f"{context.phase} " if context.phase else ""
    return f"{OUTSIDE_GRAPHS}{phase}{profiler_op(where)}"


def _profiled_op(name: str | None) -> dict[str, str]:
    """The op a profiler range names (``aten::mm``), as irscope spells it (``aten.mm``), and as
    the range does."""
    return dict(op=profiler_op(name), recorded_op=name) if name else {}
