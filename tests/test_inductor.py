"""Inductor output-code parser over real CPU torch.compile output and the Triton (GPU) corpus."""

from __future__ import annotations

import re

import pytest
from conftest import SAMPLES, corpus_files
from torch_helpers import compile_torch_seeds

from irscope.parsers import fx_graph, inductor, registry

SEEDS = ("mlp", "activation_chain", "complex_activation", "post_norm_block", "mlp_dead_gate")
CORPUS_INDUCTOR = corpus_files("inductor")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def compiled():
    """{seed: {record kind: payload}} from one TORCH_TRACE'd run of every seed example."""
    payloads = compile_torch_seeds()
    kinds = ("dynamo_output_graph", "aot_inference_graph", "inductor_output_code")
    assert all(len(payloads[k]) == len(SEEDS) for k in kinds)
    return {seed: {k: payloads[k][i] for k in kinds} for i, seed in enumerate(SEEDS)}


def call_body(text: str) -> str:
    """The text of call() (a method of Runner in recent PyTorch)."""
    start = text.index("def call(")
    end = text.find("\nrunner = ", start)
    return text[start:end if end > 0 else None]


@pytest.mark.parametrize("seed", SEEDS)
def test_launch_counts_match_the_call_body(compiled, seed):
    text = compiled[seed]["inductor_output_code"]
    code = inductor.parse(text)
    body = call_body(text)
    kernel_calls = len(re.findall(r"^\s+cpp_fused_\w+\(", body, re.MULTILINE))
    extern = len(re.findall(r"^\s+extern_kernels\.\w+\(", body, re.MULTILINE))
    assert code.kernels_launched == kernel_calls + extern == code.totals["kernels_launched"]
    assert code.totals["extern_calls"] == extern
    assert code.totals["kernels_generated"] == text.count("= async_compile.cpp_pybinding(")
    assert code.buffers_allocated == body.count("= empty_strided_cpu(")
    for kernel in code.kernels:
        assert kernel.backend == "cpp" and kernel.kind == "cpp"
        assert 'extern "C"' in kernel.source and kernel.source.rstrip().endswith("}")
    assert not code.diagnostics


def test_six_eager_ops_become_one_kernel(compiled):
    graph = fx_graph.parse(compiled["complex_activation"]["dynamo_output_graph"])
    assert graph.totals["calls"] == 6  # tanh, sigmoid, exp, mul, relu, add
    code = inductor.parse(compiled["complex_activation"]["inductor_output_code"])
    assert code.kernels_launched == 1 and code.totals["kernels_generated"] == 1
    (kernel,) = code.kernels
    assert set(kernel.fused_ops) == {"tanh", "sigmoid", "exp", "mul", "relu", "add"}


def test_dead_matmul_is_traced_then_dropped(compiled):
    dynamo = fx_graph.parse(compiled["mlp_dead_gate"]["dynamo_output_graph"])
    assert dynamo.histogram["operator.matmul"] == 3
    assert any(loc.node == "unused" and "gating1" in loc.code for loc in dynamo.locations)
    aot = fx_graph.parse(compiled["mlp_dead_gate"]["aot_inference_graph"])
    assert aot.histogram["torch.ops.aten.mm.default"] == 2
    code = inductor.parse(compiled["mlp_dead_gate"]["inductor_output_code"])
    assert code.extern_calls == {"mm": 2}
    assert [launch.kind for launch in code.launch_sequence] == ["extern", "kernel", "extern"]


def test_post_norm_block_fuses_gelu_and_layer_norm(compiled):
    code = inductor.parse(compiled["post_norm_block"]["inductor_output_code"])
    ops = {op for kernel in code.kernels for op in kernel.fused_ops}
    assert {"gelu", "native_layer_norm"} <= ops
    assert code.kernels_launched == len(code.launch_sequence) == 4


@pytest.mark.parametrize("path", CORPUS_INDUCTOR, ids=[p.name for p in CORPUS_INDUCTOR])
def test_corpus_output_code(path):
    text = path.read_text()
    code = inductor.parse(text)
    assert registry.detect(text, path.name) == "inductor_output_code"
    assert code.totals["kernels_generated"] == len(re.findall(r"^\w+ = async_compile\.", text,
                                                             re.MULTILINE))
    runs = len(re.findall(r"^\s+\w+\.run\(", text, re.MULTILINE))
    assert code.totals["generated_launches"] >= runs
    externs = re.findall(r"^\s+extern_kernels\.", text, re.MULTILINE)
    assert code.totals["extern_calls"] >= len(externs)
    for kernel in code.kernels:
        decorator = re.search(r"@triton_heuristics\.(\w+)\(", kernel.source)
        if decorator:
            assert kernel.backend == "triton" and kernel.kind == decorator.group(1)
        assert kernel.source.strip()
    assert not code.diagnostics


def test_triton_source_nodes_name_the_aten_ops(corpus):
    code = inductor.parse((corpus / "inductor" / "tlparse_trace_simple_line629_output_code.py")
                          .read_text())
    by_name = {k.name: k for k in code.kernels}
    fused = by_name["triton_poi_fused_baz_gelu_native_dropout_1"]
    assert fused.fused_ops == ("native_dropout", "gelu", "baz")
    assert fused.source_nodes == ("input_1", "out", "out_1")
    assert [l.name for l in code.launch_sequence] == [
        "aten.randint.low_out", "triton_poi_fused_native_dropout_0",
        "triton_poi_fused_baz_gelu_native_dropout_1", "test.baz.default"]


def test_source_nodes_cover_the_kernel_they_precede_and_the_launch_below(corpus):
    text = (corpus / "inductor" / "tlparse_trace_simple_line629_output_code.py").read_text()
    code = inductor.parse(text)
    lines = text.splitlines()
    fused = next(k for k in code.kernels if k.name == "triton_poi_fused_baz_gelu_native_dropout_1")
    closing = next(i + 1 for i in range(fused.line, len(lines)) if lines[i].startswith("'''"))
    for number in range(fused.line, closing + 1):
        assert code.line_nodes[number] == fused.source_nodes, number
    launch = next(l for l in code.launch_sequence if l.name == fused.name).line
    comment = max(i + 1 for i in range(launch) if "Source Nodes: [" in lines[i])
    names = tuple(re.search(r"Source Nodes: \[(.*?)\]", lines[comment - 1])[1].split(", "))
    assert all(code.line_nodes[n] == names for n in range(comment, launch + 1))
    assert closing + 1 not in code.line_nodes  # the blank line after the kernel ends it


def test_kernel_names_split_back_into_aten_ops():
    assert inductor.split_fused_name("cpp_fused__softmax_0") == ("_softmax",)
    assert inductor.split_fused_name("triton_per_fused_add_native_layer_norm_3") == (
        "add", "native_layer_norm")
    assert inductor.split_fused_name("triton_tem_fused_0") == ()


def test_truncated_output_code_keeps_kernels_and_warns():
    text = (SAMPLES / "inductor" / "complex_activation.output_code.py").read_text()
    code = inductor.parse(text[: text.index("#pragma omp for")])
    assert [k.name for k in code.kernels] == ["cpp_fused_add_exp_mul_relu_sigmoid_tanh_0"]
    assert any("not closed" in d.message for d in code.diagnostics)


@pytest.mark.parametrize("text", ["", "def call(args):\n    pass\n", "\x00\x01",
                                  "x = async_compile.triton('x', '''"])
def test_odd_input_never_raises(text):
    assert inductor.parse(text).kind == "inductor_output_code"
