"""Each profiled launch joined by identity to its output code, kernel and line, or XLA fusion."""

from __future__ import annotations

import gzip
import json
import re
import tarfile
from collections import Counter

from conftest import SAMPLES

from irscope.parsers import hlo, inductor, profile_trace

PROFILE = SAMPLES / "profile"
# V1126 20:33:01.301000 479 torch/_inductor/graph.py:2575] {"inductor_output_code": ...
ENVELOPE = re.compile(r"^[VIWEFD]\d{4} [\d:.]+ +\d+ [^\]]*\] (\{.*)$")
# "    009: kCustomKernel [prev=006 (3) | next=013 (4)] input_reduce_fusion_4 grid: [4, 1, 1]"
THUNK_KERNEL = re.compile(r"^\s+(\d+): k\w+ \[[^\]]*\] (\S+) grid:", re.M)
# thunk_info {\n profile_annotation: "input_reduce_fusion.2"\n thunk_id: 11\n }
THUNK_INFO = re.compile(r'profile_annotation: "([^"]+)"\s+thunk_id: (\d+)')


def output_codes_by_key() -> dict[str, tuple[str, str, inductor.OutputCode]]:
    """FX graph cache key -> (compile id, hit or miss, parsed output code): the TORCH_TRACE
    logs each output code, then its fx_graph_cache_hit/miss artifact naming the key, with the
    same compile id (on a hit the code is loaded from the cache and logged the same way)."""
    text = gzip.decompress((PROFILE / "gpt2_small.torch_trace.log.gz").read_bytes()).decode()
    records, pending, codes = [], {}, {}
    for line in text.splitlines():
        match = ENVELOPE.match(line)
        if match:
            records.append((json.loads(match.group(1)), []))
        elif line.startswith("\t") and records:
            records[-1][1].append(line[1:])
    for envelope, payload in records:
        compile_id = f"{envelope.get('frame_id')}/{envelope.get('frame_compile_id')}"
        artifact = envelope.get("artifact", {}).get("name", "")
        if "inductor_output_code" in envelope:
            pending[compile_id] = "\n".join(payload)
        elif artifact.startswith("fx_graph_cache_"):
            key = json.loads("\n".join(payload))["key"]
            codes[key] = (compile_id, artifact, inductor.parse(pending.pop(compile_id)))
    return codes


def extern_op(launch: inductor.Launch) -> str:
    """The aten op an extern call or fallback of call() runs: extern_kernels.mm -> aten::mm,
    torch.ops.aten._scaled_dot_product_efficient_attention.default -> aten::_scaled_..."""
    return "aten::" + (launch.name if launch.kind == "extern" else launch.name.split(".")[-2])


def test_every_inductor_launch_joins_its_output_code_kernel_and_call_line():
    codes = output_codes_by_key()
    assert {key: (cid, how, code.role) for key, (cid, how, code) in codes.items()} == {
        "fppf3r7u7lx6vzntszid2ms4fnp4p5z67f6zz2ax7cea23xjk2ic": ("1/0", "fx_graph_cache_miss",
                                                                "forward"),
        "fylxr5gsqcy6hqhcelyzxzbtukmh3htducemufuapqoghyiemg6s": ("1/0", "fx_graph_cache_miss",
                                                                "backward"),
        "fnbp7cq5muymdmycp5x5zl4egfyq76ctbh3z3oic4phw3nqtuggl": ("3/0", "fx_graph_cache_miss",
                                                                "forward"),
        "fvnxqifu5qcocefpirsuk2sfmdtlmg2glpbdaz5nvmigzrqeydfp": ("3/0", "fx_graph_cache_miss",
                                                                "backward")}
    with open(PROFILE / "gpt2_small.trace.json.gz", "rb") as fh:
        trace = profile_trace.read(fh)
    joined, time = Counter(), Counter()
    for row in trace.kernels + trace.memory_ops:
        cpu = row.cpu
        if cpu.graph_key is None:
            kind = "unjoined: " + (cpu.annotation or f"{cpu.phase or 'eager'} {cpu.stack[-1]}")
        else:
            compile_id, _, code = codes[cpu.graph_key]
            assert (compile_id, code.role) == (cpu.compile_id, cpu.phase)
            launch = code.launch_sequence[cpu.launch_index]  # the call() line that launched it
            held_by = cpu.stack[cpu.stack.index(f"## Call CompiledFxGraph {cpu.graph_key} ##") - 1]
            if row.name.startswith("triton_"):
                assert row.name in {k.name for k in code.kernels}
                assert launch.kind == "kernel" and launch.name == row.name == held_by
                kind = "triton"
            else:
                assert launch.kind in ("extern", "fallback") and extern_op(launch) == held_by
                kind = f"extern {row.kind}"
        joined[kind] += 1
        time[kind] += row.duration_ns
    assert joined == {"triton": 180, "extern kernel": 162, "extern memcpy": 3,
                      "unjoined: Optimizer.step#AdamW.step": 24,
                      "unjoined: backward autograd::engine::evaluate_function: "
                      "CompiledFunctionBackward": 15, "unjoined: eager aten::ones_like": 3}
    assert sum(time.values()) - time["extern memcpy"] == trace.kernel_time_ns


def test_every_xla_launch_joins_its_module_and_fusion():
    with tarfile.open(PROFILE / "flax_step.xla_dump.tar.gz") as tar:
        dump = {m.name: tar.extractfile(m).read().decode() for m in tar.getmembers()}
    module_number = {int(re.match(r"module_(\d+)\.", name).group(1)) for name in dump}
    text = {name.split(".jit_step.")[1]: body for name, body in dump.items()}
    thunk_kernels = {int(i): name for i, name in
                     THUNK_KERNEL.findall(text["thunk_sequence_after_thunk_passes.txt"])}
    thunk_fusions = {int(i): name for name, i in THUNK_INFO.findall(text["thunk_metadata.txt"])}
    fusions = {f.name for f in hlo.parse(text["sm_9.0a_gpu_after_optimizations.txt"]).fusions}
    with open(PROFILE / "flax_step.xplane.pb", "rb") as fh:
        trace = profile_trace.read(fh)
    joined = Counter()
    for row in trace.kernels:
        assert {row.program_id} == module_number  # module_131719.jit_step
        assert row.hlo_op == "command_buffer_1"  # replayed by a CUDA graph: the buffer, not the op
        thunk = (row.graph_node & 0xFFFFFFFF) + 1  # node n of the graph: the buffer's thunk n+1
        assert thunk_kernels[thunk] == row.name
        fusion = thunk_fusions[thunk]
        assert fusion in fusions
        joined["named after its fusion" if fusion.replace(".", "_") == row.name
               else "a kernel another fusion reuses"] += 1
    assert joined == {"named after its fusion": 76, "a kernel another fusion reuses": 8}
