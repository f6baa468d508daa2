"""FX graph parser over the FX graphs inside real TORCH_TRACE logs and the committed samples."""

from __future__ import annotations

import re

import pytest
from conftest import SAMPLES, corpus_files
from torch_helpers import read_trace_payloads

from irscope.parsers import fx_graph, registry

GRAPH_RECORDS = ("dynamo_output_graph", "aot_forward_graph", "aot_backward_graph",
                 "aot_inference_graph", "aot_joint_graph")
TRACE_LOGS = [p for p in corpus_files("torch_logs") if p.name.startswith("torch_trace_")]
# An independent count: node lines that call an operator overload.
ATEN_NODE = re.compile(r'^\s+\w+(?:: "[^"]*")? = torch\.ops\.[\w.]+\(', re.MULTILINE)


def graphs_in(log):
    return [(kind, text) for kind, _, text in read_trace_payloads(log) if kind in GRAPH_RECORDS]


@pytest.mark.parametrize("log", TRACE_LOGS, ids=[p.name for p in TRACE_LOGS])
def test_graphs_in_real_traces_count_their_operator_nodes(log):
    for kind, text in graphs_in(log):
        graph = fx_graph.parse(text)
        calls = sum(n for target, n in graph.histogram.items() if target.startswith("torch.ops."))
        assert calls == len(ATEN_NODE.findall(text)), kind
        assert graph.totals["placeholders"] >= 1 and graph.totals["outputs"] >= 1
        assert graph.totals["nodes"] == graph.totals["instructions"] == (
            graph.totals["calls"] + graph.totals["placeholders"] + graph.totals["outputs"])
        assert registry.detect(text) == "fx_graph" and not graph.diagnostics


def test_dynamo_graph_keeps_source_lines_per_node():
    graph = fx_graph.parse((SAMPLES / "fx" / "mlp_dead_gate.dynamo_graph.txt").read_text())
    assert graph.placeholders == ("L_x_", "L_gating1_", "L_w1_", "L_w2_")
    assert dict(graph.histogram) == {"operator.matmul": 3, "torch.relu": 1}
    by_node = {loc.node: loc for loc in graph.locations}
    assert by_node["unused"].line == 40 and by_node["unused"].function == "mlp_dead_gate"
    assert by_node["relu"].code == "return torch.relu(x @ w1) @ w2"


def test_aot_backward_graph_with_multiline_signature():
    graph = fx_graph.parse((SAMPLES / "fx" / "complex_activation.aot_backward_graph.txt")
                           .read_text())
    assert graph.placeholders == ("primals_1", "tangents_1")
    assert graph.histogram["torch.ops.aten.mul.Tensor"] >= 4
    assert graph.totals["aten_ops"] == graph.totals["calls"]


def test_printed_graph_nodes_are_read_too():
    text = ("graph():\n    %x : [num_users=1] = placeholder[target=x]\n"
            "    %mul : [num_users=1] = call_function[target=torch.ops.aten.mul.Tensor]"
            "(args = (%x, 2), kwargs = {})\n    return mul\n")
    graph = fx_graph.parse(text)
    assert graph.histogram == {"torch.ops.aten.mul.Tensor": 1} and graph.placeholders == ("x",)


@pytest.mark.parametrize("text", ["", "class GraphModule(torch.nn.Module):\n    def forward(self",
                                  "x = = =", "\x00"])
def test_odd_input_never_raises(text):
    assert fx_graph.parse(text).kind == "fx_graph"
