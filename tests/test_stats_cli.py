"""`irscope stats FILE`: kind detection, JSON shape, the human table and one-line errors."""

from __future__ import annotations

import json
import re

import pytest
from conftest import SAMPLES

HLO_AFTER = SAMPLES / "hlo" / "jit_complex_activation.cpu_after_optimizations.txt"
OUTPUT_CODE = SAMPLES / "inductor" / "mlp_dead_gate.output_code.py"


def stats_json(cli, path, *extra):
    result = cli("stats", path, "--json", *extra)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_inductor_json_has_launches_and_extern_calls(cli):
    data = stats_json(cli, OUTPUT_CODE)
    text = OUTPUT_CODE.read_text()
    assert data["kind"] == "inductor_output_code"
    assert data["extern_calls"] == {"mm": text.count("extern_kernels.mm(")}
    assert data["kernels_launched"] == data["totals"]["kernels_launched"] == 3
    assert data["diagnostics"] == [] and data["histogram"]["extern_kernels.mm"] == 2
    assert all("source" not in kernel for kernel in data["kernels"])


def test_hlo_json_names_fusions_and_detects_after_optimizations(cli):
    data = stats_json(cli, HLO_AFTER)
    assert data["kind"] == "hlo_after_opt"
    assert [f["kind"] for f in data["fusions"]] == ["kLoop"]
    assert data["histogram"]["fusion"] == HLO_AFTER.read_text().count(" fusion(")


MEMORY_REPORT = "hlo/jit_post_norm_block.cpu_after_optimizations-memory-usage-report.txt"


def test_hlo_picks_up_the_buffer_assignment_beside_it(cli):
    data = stats_json(cli, SAMPLES / "hlo" / "jit_mlp_dead_gate.cpu_after_optimizations.txt")
    report = SAMPLES / "hlo" / "jit_mlp_dead_gate.cpu_after_optimizations-buffer-assignment.txt"
    sizes = re.findall(r"^allocation \d+: size (\d+)", report.read_text(), re.MULTILINE)
    assert data["memory"]["total_bytes"] == data["totals"]["total_bytes"] == sum(map(int, sizes))


@pytest.mark.parametrize("sample,kind", [("jaxpr/control_flow.jaxpr", "jaxpr"),
                                         ("fx/mlp_dead_gate.dynamo_graph.txt", "fx_graph"),
                                         (MEMORY_REPORT, "memory_usage")])
def test_kind_is_detected(cli, sample, kind):
    assert stats_json(cli, SAMPLES / sample)["kind"] == kind


def test_kind_option_overrides_detection(cli):
    data = stats_json(cli, SAMPLES / "fx" / "mlp_dead_gate.dynamo_graph.txt", "--kind", "aot_graph")
    assert data["kind"] == "aot_graph" and data["totals"]["placeholders"] == 4


def test_human_table_lists_totals_and_top_ops_without_colour(cli):
    result = cli("stats", OUTPUT_CODE)
    assert result.returncode == 0 and "\x1b[" not in result.stdout
    assert "kernels_launched" in result.stdout and "extern_kernels.mm" in result.stdout
    assert re.search(r"kernels_launched\s*│\s*3", result.stdout)


def test_truncated_file_warns_and_strict_fails(cli):
    path = SAMPLES / "hlo" / "truncated_computation.hlo"
    relaxed = cli("stats", path)
    assert relaxed.returncode == 0 and "not closed" in relaxed.stderr
    strict = cli("stats", path, "--strict")
    assert strict.returncode == 1 and "Traceback" not in strict.stderr


def test_bad_inputs_are_one_line_errors(cli, tmp_path):
    empty = tmp_path / "empty.hlo"
    empty.write_text("")
    binary = tmp_path / "garbage.bin"
    binary.write_bytes(bytes(range(256)) * 8)
    for path, words in [(tmp_path / "missing.hlo", "no such file"), (tmp_path, "directory"),
                        (empty, "empty"), (binary, "binary")]:
        result = cli("stats", path)
        assert result.returncode == 1, path
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and str(path) in lines[0] and words in lines[0]


def test_unknown_kind_exits_2_and_lists_kinds(cli):
    result = cli("stats", OUTPUT_CODE, "--kind", "nonsense")
    assert result.returncode == 2
    assert all(word in result.stderr for word in ("nonsense", "jaxpr", "hlo_after_opt"))


def test_stats_summarizes_a_torch_trace_and_torch_logs(cli, tmp_path):
    """A compile log is no single IR: stats files it and reads the run's roll-ups."""
    import tarfile

    from conftest import GPU_SAMPLES

    with tarfile.open(GPU_SAMPLES / "dumps" / "trust_torch.tar.gz") as archive:
        archive.extractall(tmp_path, filter="data")
    trace = next((tmp_path / "w" / "trace").glob("*.log"))
    for path, kind in ((trace, "torch_trace"), (tmp_path / "w" / "logs.txt", "torch_logs")):
        done = cli("stats", path, "--json")
        assert done.returncode == 0, done.stderr
        figures = json.loads(done.stdout)
        text = path.read_text()
        # [0/1] [__output_code] Output code:   /   {"inductor_output_code": ..., "frame_id": 0,
        if kind == "torch_logs":
            compiles = set(re.findall(r"\[(\d+/\d+)\] \[__output_code\] Output code:", text))
        else:
            compiles = set(re.findall(r'\{"inductor_output_code".*?"frame_id": (\d+), '
                                      r'"frame_compile_id": (\d+)', text))
        assert figures["kind"] == kind and figures["graphs"] == len(compiles) == 4
        assert figures["recompiles"] == 2
        roles = sorted(row["role"] for row in figures["kernels_launched_per_call"])
        assert roles == ["backward", "backward", "forward", "forward", "inference", "inference"]
        table = cli("stats", path)
        assert table.returncode == 0 and "kernels_generated" in table.stdout
