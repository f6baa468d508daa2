"""Profiler traces read into rows, checked against the trace's own events counted by json.load."""

from __future__ import annotations

import gzip
import io
import json
from collections import Counter
from decimal import Decimal

import pytest
from conftest import SAMPLES

from irscope.parsers import profile_trace, registry, xplane
from irscope.parsers._profile import ProfileTrace

PROFILE = SAMPLES / "profile"
KINETO = PROFILE / "gpt2_small.trace.json.gz"
JAX_TRACE = PROFILE / "flax_step.trace.json.gz"
JAX_XPLANE = PROFILE / "flax_step.xplane.pb"
TRUNCATED = PROFILE / "truncated_kernels.trace.json"
KINETO_GPU = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}


def raw(path) -> dict:
    """The whole trace by json.load, numbers as Decimal so times stay exact."""
    with gzip.open(path, "rt") if path.suffix == ".gz" else open(path) as fh:
        return json.load(fh, parse_float=Decimal)


def ns(microseconds) -> int:
    """Nanoseconds, rounded: jax.profiler writes binary noise (``1.4079999999999999``)."""
    return int((Decimal(microseconds) * 1000).to_integral_value())


def read(path) -> ProfileTrace:
    with open(path, "rb") as fh:
        return profile_trace.read(fh)


@pytest.fixture(scope="module")
def kineto() -> tuple[ProfileTrace, list[dict]]:
    return read(KINETO), raw(KINETO)["traceEvents"]


def test_kineto_rows_are_the_traces_gpu_events(kineto):
    trace, events = kineto
    gpu = [e for e in events if e.get("cat") in KINETO_GPU]
    kernels = [e for e in gpu if e["cat"] == "kernel"]
    assert (len(trace.kernels), len(trace.memory_ops)) == (len(kernels), len(gpu) - len(kernels))
    assert (len(kernels), len(gpu)) == (384, 387)
    assert [(k.name, k.start_ns, k.duration_ns, k.correlation, k.stream, k.device, k.grid,
             k.block, k.registers, k.shared_memory) for k in trace.kernels] == [
        (e["name"], ns(e["ts"]), ns(e["dur"]), e["args"]["correlation"], e["args"]["stream"],
         e["args"]["device"], tuple(e["args"]["grid"]), tuple(e["args"]["block"]),
         e["args"]["registers per thread"], e["args"]["shared memory"]) for e in kernels]
    assert [(m.kind, m.bytes) for m in trace.memory_ops] == [
        (KINETO_GPU[e["cat"]], e["args"]["bytes"]) for e in gpu if e["cat"] != "kernel"]
    assert trace.kernel_time_ns == sum(ns(e["dur"]) for e in kernels) == 1_269_153
    assert (trace.window_start_ns, trace.window_end_ns) == (
        min(ns(e["ts"]) for e in gpu), max(ns(e["ts"]) + ns(e["dur"]) for e in gpu))
    assert trace.histogram == dict(sorted(Counter(e["name"] for e in kernels).items(),
                                          key=lambda item: (-item[1], item[0])))
    assert not trace.diagnostics


def test_kineto_trace_level_facts(kineto):
    trace, _ = kineto
    document = raw(KINETO)
    assert trace.profiler == "torch.profiler"
    assert trace.details["cupti_version"] == str(document["cupti_version"]) == "130001"
    (device,) = trace.devices
    (props,) = document["deviceProperties"]
    assert (device.name, device.sm_count, device.compute_capability, device.memory_bytes) == (
        props["name"], props["numSms"], f"{props['computeMajor']}.{props['computeMinor']}",
        props["totalGlobalMem"]) == ("NVIDIA H100 80GB HBM3", 132, "9.0", 85017493504)


def test_every_kineto_launch_has_the_call_and_op_that_made_it(kineto):
    """Each GPU event's launch call (same correlation id) and the op that holds the call (same
    External id) as the trace links them, against the parser's interval sweep."""
    trace, events = kineto
    calls = {e["args"]["correlation"]: e for e in events
             if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e["args"]}
    ops = {e["args"]["External id"]: e["name"] for e in events
           if e.get("cat") in ("cpu_op", "user_annotation")}
    external = {e["args"]["correlation"]: e["args"]["External id"] for e in events
                if e.get("cat") in KINETO_GPU}
    rows = trace.kernels + trace.memory_ops
    assert all(row.correlation in calls and row.cpu is not None for row in rows)
    assert [(row.cpu.launcher, row.cpu.thread, row.cpu.op) for row in rows] == [
        (calls[row.correlation]["name"], calls[row.correlation]["tid"],
         ops[external[row.correlation]]) for row in rows]
    assert trace.totals["kernels_with_cpu_context"] == len(trace.kernels)


def test_kineto_contexts_name_the_graph_compile_and_phase(kineto):
    """Forward launches sit in their Dynamo region; backward ones take their forward's compile
    id through autograd's sequence number; every graph key is one the trace's ranges name."""
    trace, events = kineto
    keys = {e["name"].split()[3] for e in events if e.get("cat") == "cpu_op"
            and e["name"].startswith("## Call CompiledFxGraph ")}
    rows = trace.kernels + trace.memory_ops
    assert {row.cpu.graph_key for row in rows} - {None} == keys and len(keys) == 4
    by_identity = Counter((row.cpu.phase, row.cpu.compile_id, row.cpu.graph_key is not None,
                           row.cpu.annotation) for row in rows)
    assert by_identity == {
        ("forward", "1/0", True, None): 81, ("forward", "3/0", True, None): 9,
        ("backward", "1/0", True, None): 252, ("backward", "3/0", True, None): 3,
        ("backward", "1/0", False, None): 15,  # zero-filled gradients of AOT's backward wrapper
        (None, None, False, "Optimizer.step#AdamW.step"): 24, (None, None, False, None): 3}
    for row in rows:  # a graph's launches are numbered in the order the graph call makes them
        assert (row.cpu.launch_index is None) == (row.cpu.graph_key is None)


def test_jax_trace_rows_are_its_stream_events():
    trace, document = read(JAX_TRACE), raw(JAX_TRACE)
    events = document["traceEvents"]
    gpu_pid = next(e["pid"] for e in events if e.get("name") == "process_name"
                   and e["args"]["name"] == "/device:GPU:0")
    streams = {e["tid"] for e in events if e.get("name") == "thread_name"
               and e["pid"] == gpu_pid and e["args"]["name"].startswith("Stream #")}
    kernels = [e for e in events if e.get("ph") == "X" and e["pid"] == gpu_pid
               and e["tid"] in streams]
    assert trace.profiler == "jax.profiler" and len(trace.kernels) == len(kernels) == 84
    assert [(k.name, k.start_ns, k.duration_ns, k.hlo_module, k.hlo_op, k.graph_node)
            for k in trace.kernels] == [
        (e["name"], ns(e["ts"]), ns(e["dur"]), e["args"]["hlo_module"], e["args"]["hlo_op"],
         int(e["args"]["cuda_graph_node_id"])) for e in kernels]
    assert trace.kernel_time_ns == sum(ns(e["dur"]) for e in kernels)
    assert (trace.window_start_ns, trace.window_end_ns) == (
        min(ns(e["ts"]) for e in kernels), max(ns(e["ts"]) + ns(e["dur"]) for e in kernels))
    launches = {int(e["args"]["correlation_id"]): e["name"] for e in events if e.get("ph") == "X"
                and e["pid"] != gpu_pid and "correlation_id" in e.get("args", {})}
    assert len(launches) == 4  # one CUDA graph launch per step replays its 21 kernels
    assert [k.cpu.launcher for k in trace.kernels] == [launches[k.correlation]
                                                       for k in trace.kernels]
    assert all("jit_step:XLA GPU module" in k.cpu.stack for k in trace.kernels)


def test_xplane_holds_the_same_kernels_with_program_ids_and_the_device():
    from_json, from_pb = read(JAX_TRACE), read(JAX_XPLANE)
    assert (from_json.file_format, from_pb.file_format) == ("chrome_trace", "xplane")

    def facts(k):
        return (k.name, k.start_ns, k.duration_ns, k.grid, k.block, k.registers,
                k.shared_memory, k.hlo_module, k.hlo_op, k.graph_node, k.correlation,
                k.cpu.launcher, k.cpu.stack)

    assert [facts(k) for k in from_pb.kernels] == [facts(k) for k in from_json.kernels]
    assert {k.program_id for k in from_pb.kernels} == {131719}  # module_131719.jit_step
    assert {k.program_id for k in from_json.kernels} == {None}
    (device,) = from_pb.devices
    assert (device.name, device.sm_count, device.compute_capability) == (
        "NVIDIA H100 80GB HBM3", 132, "9.0")
    assert from_pb.details["jax_version"] == "0.11.2" and not from_pb.diagnostics


def test_streamed_text_is_read_alike_at_any_chunk_size(monkeypatch):
    """Values cut by a chunk's end (inside a number, a string, an escape) are read again."""
    text = gzip.decompress(JAX_TRACE.read_bytes()).decode()
    whole = profile_trace.parse(text)
    monkeypatch.setattr(profile_trace, "CHUNK", 61)
    assert profile_trace.read(io.BytesIO(text.encode())) == whole
    assert profile_trace.read(io.StringIO(text)) == whole
    assert registry.detect(text) == "profile_trace"


def test_results_survive_their_json_form(kineto):
    trace, _ = kineto
    assert ProfileTrace.from_json(trace.to_json()) == trace
    from_pb = read(JAX_XPLANE)
    assert registry.from_json("profile_trace", from_pb.to_json()) == from_pb


def test_truncated_trace_keeps_what_came_before_the_cut():
    trace = read(TRUNCATED)
    (diagnostic,) = trace.diagnostics
    assert "truncated" in diagnostic.message and diagnostic.severity == "warning"
    assert len(trace.kernels) == 10 and all(k.cpu is not None for k in trace.kernels)


@pytest.mark.parametrize("cut", [0.3, 0.6, 0.95])
def test_cut_gzip_stream_gives_a_diagnostic(cut):
    data = KINETO.read_bytes()
    trace = profile_trace.read(io.BytesIO(data[:int(len(data) * cut)]))
    messages = [d.message for d in trace.diagnostics]
    assert sum("gzip stream ends early" in m for m in messages) == 1  # said once, not twice
    assert any("truncated" in m for m in messages)
    assert len(trace.kernels) <= 384


@pytest.mark.parametrize("data", [b"", b"\x00\x01garbage", b"[1, 2", b'{"traceEvents": 3}',
                                  b'{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": "x"}]}',
                                  "\u00e9\u00e8".encode("latin-1"), b'{"a": [1, 2]}'])
def test_garbage_gives_diagnostics_not_exceptions(data):
    trace = profile_trace.read(io.BytesIO(data))
    assert trace.diagnostics and not trace.kernels
    pb = xplane.read(io.BytesIO(data))  # as if its name said XSpace
    assert pb.diagnostics and not pb.kernels


@pytest.mark.parametrize("cut", [100, 20000, 39000])
def test_cut_xplane_gives_a_diagnostic(cut):
    trace = profile_trace.read(io.BytesIO(JAX_XPLANE.read_bytes()[:cut]))
    assert any("ends inside a message" in d.message for d in trace.diagnostics)


class _Unseekable(io.BytesIO):
    """A pipe's view of a file: read only forwards."""

    def seekable(self) -> bool:
        return False


@pytest.mark.parametrize("path", [KINETO, JAX_XPLANE], ids=["gzip", "xplane"])
def test_unseekable_streams_read_alike(path):
    data = path.read_bytes()
    assert profile_trace.read(io.BufferedReader(_Unseekable(data))) == read(path)
