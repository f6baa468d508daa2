"""Rows every profiler-trace parser gives, and the CPU timeline naming who launched each kernel."""

from __future__ import annotations

import bisect
import re
from array import array
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .base import Diagnostic, ParseResult, sorted_histogram

# "## Call CompiledFxGraph fppf3r7u7lx6vzntszid2ms4fnp4p5z67f6zz2ax7cea23xjk2ic ##"
GRAPH_CALL_RE = re.compile(r"## Call CompiledFxGraph (\S+) ##")
# "Torch-Compiled Region: 1/0" (compiled autograd: "Torch-Compiled Region: !0/1/0")
REGION_RE = re.compile(r"Torch-Compiled Region: (\S+)")
# "ProfilerStep#12"
STEP_RE = re.compile(r"ProfilerStep#(\d+)$")
# XProf's kernel details: "regs:50 static_shared:0 dynamic_shared:4096 grid:64,1,1 block:128,1,1"
KERNEL_DETAIL_RE = re.compile(r"(\w+):(\S+)")
# "size:1024" in XProf's memcpy or memset details
SIZE_RE = re.compile(r"\bsize:(\d+)")

# what a CPU range is, read once from its name and category when it is added
OP, ANNOTATION, PYTHON, GRAPH, REGION, FORWARD, BACKWARD, STEP = range(8)
PHASES = {"CompiledFunction": FORWARD, "CompiledFunctionBackward": BACKWARD}


@dataclass(frozen=True, slots=True)
class CpuContext:
    """The CPU side of one launch: the call that made it and what was open around that call.

    ``stack`` holds the ranges (ops, annotations) open on the launching thread, innermost first;
    ``python_stack`` the Python frames when the profiler recorded them. The identities are read
    from those ranges: ``graph_key`` is the FX graph cache key of the Inductor output code that
    ran (``## Call CompiledFxGraph <key> ##``), ``launch_index`` which of the ranges directly
    inside that graph call launched it, counting only those that launch GPU work (0 for the
    first: the output code's call() makes its launches in this order), ``compile_id`` the
    innermost Dynamo region (a backward takes its forward's, matched by autograd's sequence
    number), ``phase`` forward or backward, ``annotation`` the innermost user annotation,
    ``step`` the profiler step.
    """

    thread: int
    launcher: str
    stack: tuple[str, ...] = ()
    python_stack: tuple[str, ...] = ()
    graph_key: str | None = None
    launch_index: int | None = None
    compile_id: str | None = None
    phase: str | None = None
    annotation: str | None = None
    step: int | None = None

    @property
    def op(self) -> str | None:
        """The innermost range around the launch call: the op that launched the kernel."""
        return self.stack[0] if self.stack else None


@dataclass(frozen=True, slots=True)
class GpuEvent:
    """One activity on a GPU stream: a kernel run, a memcpy or a memset, times in ns.

    ``shared_memory`` is bytes per block, static and dynamic together; ``bytes`` the size of a
    copy or fill. XLA's records add the HLO module, the HLO op (the fusion, or the command
    buffer that replayed it), the program id (the module's number in an XLA dump) and the CUDA
    graph node. ``cpu`` is None when the trace holds no CPU call with this correlation id.
    """

    kind: str
    name: str
    device: int
    stream: int
    start_ns: int
    duration_ns: int
    correlation: int | None = None
    grid: tuple[int, ...] | None = None
    block: tuple[int, ...] | None = None
    registers: int | None = None
    shared_memory: int | None = None
    bytes: int | None = None
    hlo_module: str | None = None
    hlo_op: str | None = None
    program_id: int | None = None
    graph_node: int | None = None
    cpu: CpuContext | None = None


@dataclass(frozen=True)
class DeviceInfo:
    """A GPU as the trace describes it; ``properties`` keeps every other field it recorded."""

    id: int
    name: str = ""
    sm_count: int | None = None
    compute_capability: str | None = None
    memory_bytes: int | None = None
    properties: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ProfileTrace(ParseResult):
    """A profiler's trace: every GPU activity with its launch context, and trace-level facts.

    ``window_start_ns``/``window_end_ns`` bound the first and last GPU activity;
    ``kernel_time_ns`` is the sum of kernel durations as the trace records them. ``histogram``
    maps a kernel name to its launches.
    """

    profiler: str = ""
    file_format: str = ""  # "chrome_trace" (JSON) or "xplane" (jax.profiler's protobuf)
    details: Mapping[str, str] = field(default_factory=dict)
    devices: tuple[DeviceInfo, ...] = ()
    kernels: tuple[GpuEvent, ...] = ()
    memory_ops: tuple[GpuEvent, ...] = ()
    window_start_ns: int | None = None
    window_end_ns: int | None = None
    kernel_time_ns: int = 0


def role_of(name: str, category: int = OP) -> tuple[int, str | int | None]:
    """What a range named ``name`` is (``category``: OP, ANNOTATION or PYTHON) and the identity
    it carries: a graph key, a compile id, a step number."""
    if category == ANNOTATION and name.startswith("ProfilerStep#"):  # record_function's
        match = STEP_RE.match(name)
        return (STEP, int(match.group(1))) if match else (ANNOTATION, None)
    if category != OP:
        return category, None
    if name.startswith("## Call CompiledFxGraph"):
        match = GRAPH_CALL_RE.match(name)
        return (GRAPH, match.group(1)) if match else (OP, None)
    if name.startswith("Torch-Compiled Region"):
        match = REGION_RE.match(name)
        return (REGION, match.group(1)) if match else (OP, None)
    if name in PHASES:
        return PHASES[name], None
    if name.startswith("ProfilerStep#"):
        match = STEP_RE.match(name)
        return (STEP, int(match.group(1))) if match else (OP, None)
    return OP, None


class _Columns:
    """One thread's ranges (start, end, label, sequence number) and launch calls (start,
    correlation, launcher label) as integer columns: a few bytes per event, not an object."""

    __slots__ = ("tid", "starts", "ends", "labels", "sequences", "call_starts",
                 "call_correlations", "call_launchers")

    def __init__(self, tid: int):
        self.tid = tid
        self.starts, self.ends = array("q"), array("q")
        self.labels, self.sequences = array("q"), array("q")
        self.call_starts, self.call_correlations = array("q"), array("q")
        self.call_launchers = array("q")


class Timeline:
    """CPU ranges and launch calls gathered while a trace is read, resolved into contexts.

    A profiler records GPU work with a correlation id, and the CPU call that launched it
    (``cudaLaunchKernel``, ``cuLaunchKernel``, ``cuGraphLaunch``) with the same id on the
    thread that made it. The ranges open on that thread around the call (an aten op,
    ``## Call CompiledFxGraph <key> ##``, ``Torch-Compiled Region: 1/0``,
    ``CompiledFunctionBackward``, a user annotation, Python frames) say which compiled unit
    launched it. Ranges and calls are kept in integer columns while the trace is read and
    resolved once at the end: per thread, ranges sorted by start and calls by time, one sweep
    with a stack of open ranges, O(n log n) rather than a scan per launch.
    """

    def __init__(self):
        self._labels: dict[tuple[str, int], int] = {}
        self._label_rows: list[tuple[str, int, Any]] = []  # (name, role, identity)
        self._threads: dict[Any, _Columns] = {}
        self._steps: list[tuple[int, int, int]] = []  # (start, end, step) on any thread
        self.calls = 0

    def _label(self, name: str, category: int) -> int:
        index = self._labels.get((name, category))
        if index is None:
            index = self._labels[(name, category)] = len(self._label_rows)
            self._label_rows.append((name, *role_of(name, category)))
        return index

    def _columns(self, thread: Any, tid: Any) -> _Columns:
        columns = self._threads.get(thread)
        if columns is None:
            columns = self._threads[thread] = _Columns(tid if isinstance(tid, int) else 0)
        return columns

    def add_range(self, thread: Any, tid: Any, start: int, end: int, name: str,
                  category: int = OP, sequence: int = -1) -> None:
        """A CPU range [start, end] ns on ``thread`` (any hashable key; ``tid`` is shown)."""
        columns = self._columns(thread, tid)
        label = self._label(name, category)
        columns.starts.append(start)
        columns.ends.append(end)
        columns.labels.append(label)
        columns.sequences.append(sequence)
        if self._label_rows[label][1] == STEP:
            self._steps.append((start, end, self._label_rows[label][2]))

    def add_call(self, correlation: int, thread: Any, tid: Any, start: int, launcher: str) -> None:
        """The CPU call that launched the GPU work of ``correlation``, made at ``start`` ns."""
        columns = self._columns(thread, tid)
        columns.call_starts.append(start)
        columns.call_correlations.append(correlation)
        columns.call_launchers.append(self._label(launcher, OP))
        self.calls += 1

    def contexts(self) -> dict[int, CpuContext]:
        """Correlation id -> the context of its launch call, equal contexts shared.

        A launch made on a thread that marks no step (autograd's backward thread, XLA's
        launch threads) takes the step open on any thread when it was made."""
        forward_regions: dict[int, str | None] = {}
        found = [(columns, self._sweep(columns, forward_regions))
                 for columns in self._threads.values()]
        contexts: dict[int, CpuContext] = {}
        interned: dict[tuple, CpuContext] = {}
        rows = self._label_rows
        steps = sorted(self._steps)
        step_starts = [start for start, _, _ in steps]
        for columns, nodes in found:
            for index, node, launch_index in nodes:
                launcher = rows[columns.call_launchers[index]][0]
                key = (columns.tid, launcher) + self._identity(node, launch_index,
                                                                forward_regions)
                if steps and (len(key) < 3 or key[-1] is None):
                    key = _with_step(key, steps, step_starts, columns.call_starts[index])
                context = interned.get(key)
                if context is None:
                    context = interned[key] = CpuContext(*key)
                contexts[columns.call_correlations[index]] = context
        return contexts

    def _sweep(self, columns: _Columns, forward_regions: dict) -> list[tuple]:
        """(call index, innermost open range, launch index) for each call of one thread: ranges
        sorted by start (outer first on ties), calls by time, one pass with a stack of open
        ranges. The range directly inside a graph call that holds a call takes the graph call's
        next launch index the first time one of its calls is met."""
        starts, ends, labels, sequences = (columns.starts, columns.ends, columns.labels,
                                           columns.sequences)
        order = sorted(range(len(starts)), key=ends.__getitem__, reverse=True)
        order.sort(key=starts.__getitem__)
        call_starts = columns.call_starts
        rows = self._label_rows
        stack: list[_Open] = []
        found = []
        position, count = 0, len(order)
        for call in sorted(range(len(call_starts)), key=call_starts.__getitem__):
            time = call_starts[call]
            while position < count and starts[order[position]] <= time:
                index = order[position]
                position += 1
                start = starts[index]
                while stack and stack[-1].end < start:
                    stack.pop()
                stack.append(_Open(ends[index], labels[index], rows[labels[index]],
                                   sequences[index], stack[-1] if stack else None,
                                   forward_regions))
            while stack and stack[-1].end < time:
                stack.pop()
            node = stack[-1] if stack else None
            child = node.holder() if node is not None else None
            if child is not None and child.launches is None:
                child.launches = child.parent.launches
                child.parent.launches += 1
            found.append((call, node, child.launches if child is not None else None))
        return found

    def _identity(self, node: _Open | None, launch_index: int | None,
                  forward_regions: dict) -> tuple:
        """The context fields after (thread, launcher) for the innermost open range ``node``."""
        if node is None:
            return ()
        if node.names is None:
            ops, frames = [], []
            walk = node
            while walk is not None:
                name, role = self._label_rows[walk.label][:2]
                (frames if role == PYTHON else ops).append(name)
                walk = walk.parent
            node.names = (tuple(ops), tuple(frames))
        graph_key, compile_id, phase, sequence, annotation, step = node.identity
        if phase == BACKWARD and compile_id is None:
            compile_id = forward_regions.get(sequence)
        phase_name = {FORWARD: "forward", BACKWARD: "backward"}.get(phase)
        return (*node.names, graph_key, launch_index, compile_id, phase_name, annotation, step)


_NO_IDENTITY = (None, None, None, -1, None, None)


def _with_step(key: tuple, steps: list, starts: list[int], time: int) -> tuple:
    """``key`` (a context's fields) with the step whose range holds ``time``, if one does."""
    at = bisect.bisect_right(starts, time) - 1
    if at < 0 or steps[at][1] < time:
        return key
    if len(key) < 3:  # a call inside no range: no identity fields yet
        key = key + ((), (), None, None, None, None, None, None)
    return key[:-1] + (steps[at][2],)


class _Open:
    """A range open on the sweep's stack, with what a launch inside it inherits.

    ``identity`` (graph key, compile id, phase, sequence, annotation, step) is the parent's
    with this range's own part laid over it, so a launch reads it in O(1); ``names`` caches
    the stack of names once a launch asks. ``graph_child`` is the range directly inside a graph
    call that holds this one; ``launches`` counts a graph call's launch indexes given out, and
    holds a graph child's own index once it has launched something.
    """

    __slots__ = ("end", "label", "role", "parent", "identity", "names", "graph_child",
                 "launches")

    def __init__(self, end: int, label: int, row: tuple, sequence: int, parent: _Open | None,
                 forward_regions: dict):
        self.end, self.label, self.parent, self.names = end, label, parent, None
        self.role = role = row[1]
        inherited = parent.identity if parent is not None else _NO_IDENTITY
        self.identity = inherited if role in (OP, PYTHON) else _laid_over(
            inherited, role, row[2], row[0], sequence, forward_regions)
        # an ancestor, never itself: the parse runs with the cyclic collector paused
        self.graph_child = parent.holder() if parent is not None else None
        self.launches = 0 if role == GRAPH else None

    def holder(self) -> _Open | None:
        """The range directly inside a graph call that holds this one (itself, maybe)."""
        if self.parent is not None and self.parent.role == GRAPH:
            return self
        return self.graph_child


def _laid_over(inherited: tuple, role: int, value: Any, name: str, sequence: int,
               forward_regions: dict) -> tuple:
    """The identity inside a range of ``role`` (not a plain op) within ``inherited``."""
    graph_key, compile_id, phase, seq, annotation, step = inherited
    if role == GRAPH:
        graph_key = value
    elif role == REGION:
        compile_id = value
    elif role in (FORWARD, BACKWARD):
        phase, seq = role, sequence
        if role == FORWARD and sequence >= 0:
            forward_regions[sequence] = compile_id
    elif role == ANNOTATION:
        annotation = name
    elif role == STEP:
        step = value
    return graph_key, compile_id, phase, seq, annotation, step


def finish(kind: str, profiler: str, file_format: str, details: Mapping[str, str], devices,
           kernels: list,
           memory_ops: list, diagnostics: list[Diagnostic], extra_totals=None) -> ProfileTrace:
    """The frozen result, with the window, the kernel time and the headline totals."""
    activities = kernels + memory_ops
    window_start = min((e.start_ns for e in activities), default=None)
    window_end = max((e.start_ns + e.duration_ns for e in activities), default=None)
    kernel_time = sum(e.duration_ns for e in kernels)
    with_cpu = sum(1 for e in kernels if e.cpu is not None)
    totals = {"kernels": len(kernels), "memory_ops": len(memory_ops),
              "kernel_time_ns": kernel_time, "kernels_with_cpu_context": with_cpu,
              "window_ns": (window_end - window_start) if activities else 0,
              **(extra_totals or {})}
    return ProfileTrace(kind=kind, histogram=sorted_histogram(e.name for e in kernels),
                        totals=totals, diagnostics=tuple(diagnostics), profiler=profiler,
                        file_format=file_format, details=dict(details), devices=tuple(devices), kernels=tuple(kernels),
                        memory_ops=tuple(memory_ops), window_start_ns=window_start,
                        window_end_ns=window_end, kernel_time_ns=kernel_time)


def as_int(value: Any) -> int | None:
    """An integer written as a number or a string; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return None
    return None


_DIMS: dict[Any, tuple[int, ...]] = {}


def dims(value: Any) -> tuple[int, ...] | None:
    """A grid or block, ``[128, 1, 1]`` or ``"128,1,1"``, as one shared tuple per distinct value."""
    key = tuple(value) if isinstance(value, list) else value
    shape = _DIMS.get(key)
    if shape is None:
        parts = value if isinstance(value, list) else str(value).split(",")
        try:
            shape = tuple(int(p) for p in parts)
        except (TypeError, ValueError):
            return None
        _DIMS[key] = shape
    return shape


def xprof_fields(name: str, device: int, stream: int, start: int, duration: int,
                 stats: Mapping[str, Any], intern: Callable[[str], str]) -> tuple:
    """``GpuEvent``'s fields but its CPU context, for a GPU event of jax.profiler (XProf) read
    from its stats, which its Chrome trace and its protobuf name alike: kernel_details,
    memcpy_details, memset_details, hlo_module, hlo_op, program_id, cuda_graph_node_id,
    correlation_id."""
    details = stats.get("kernel_details")
    fields = dict(KERNEL_DETAIL_RE.findall(details)) if isinstance(details, str) else {}
    kind = ("memcpy" if "memcpy_details" in stats else
            "memset" if "memset_details" in stats else "kernel")
    size = SIZE_RE.search(str(stats.get("memcpy_details") or stats.get("memset_details") or ""))
    shared = [as_int(fields.get(k)) for k in ("static_shared", "dynamic_shared")]
    module, op = stats.get("hlo_module"), stats.get("hlo_op")
    return (kind, name, device, stream, start, duration, as_int(stats.get("correlation_id")),
            dims(fields["grid"]) if "grid" in fields else None,
            dims(fields["block"]) if "block" in fields else None,
            as_int(fields.get("regs")),
            sum(s for s in shared if s is not None) if fields else None,
            int(size.group(1)) if size else None,
            intern(module) if isinstance(module, str) and module else None,
            intern(op) if isinstance(op, str) and op else None,
            as_int(stats.get("program_id")), as_int(stats.get("cuda_graph_node_id")))


def gpu_events(rows: list[tuple], contexts: Mapping[int, CpuContext]
               ) -> tuple[list[GpuEvent], list[GpuEvent]]:
    """(kernels, memory ops) from rows of ``GpuEvent``'s fields but its context (the
    correlation id seventh), each given the context of its launch call; ``rows`` is emptied."""
    kernels, memory_ops = [], []
    rows.reverse()
    while rows:
        fields = rows.pop()
        (kernels if fields[0] == "kernel" else memory_ops).append(
            GpuEvent(*fields, contexts.get(fields[6])))
    return kernels, memory_ops
