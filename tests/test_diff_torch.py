"""The seed MLP under torch.compile on CPU in float32 and bfloat16, ingested and diffed."""

from __future__ import annotations

import json
import re

import pytest
from report_helpers import output_code, trace_mlp

from irscope.ingest import ingest
from irscope.reports.diff import diff_reports
from irscope.reports.build import build_report
from irscope.store import Run

pytestmark = pytest.mark.slow

# extern_kernels.mm(arg0_1, arg1_1, out=buf0)
EXTERN_MM = re.compile(r"^\s+extern_kernels\.mm\(", re.MULTILINE)
# auto tmp1 = at::vec::convert<float,2,at::BFloat16,1>(tmp0);
VEC_CONVERT = re.compile(r"at::vec::convert<")


@pytest.fixture(scope="module")
def mlp_runs(tmp_path_factory):
    """{dtype: (run path, output code)} for one CPU compile of seed_torch.mlp per dtype."""
    root = tmp_path_factory.mktemp("mlp")
    traces = {dtype: root / f"trace-{dtype}" for dtype in ("float32", "bfloat16")}
    trace_mlp(traces)
    runs = {}
    for dtype, trace in traces.items():
        run = Run.create(root / dtype, {"name": f"mlp-{dtype}"})
        ingest(run, [trace])
        run.close()
        (code,) = output_code(trace)
        runs[dtype] = (root / dtype, code)
    return runs


def test_report_counts_match_the_output_code(mlp_runs):
    """One generated C++ kernel (the relu), two extern GEMMs, three launches per call."""
    for path, code in mlp_runs.values():
        with Run.open(path) as run:
            report = build_report(run)
        mlp = next(u for u in report.units if u.name == "[0/0] mlp")
        assert mlp.headline["extern_calls"] == len(EXTERN_MM.findall(code)) == 2
        assert mlp.headline["kernels_generated"] == 1
        assert mlp.headline["kernels_launched"] == 3
        assert mlp.figures()["inductor_output_code.op.relu"] == 1
        assert {u.name for u in report.units} >= {"[0/0] mlp", "cpp_fused_relu_0"}


def test_fp32_to_bf16_keeps_the_kernels_and_changes_every_stage_text(mlp_runs, cli):
    """Observed on CPU Inductor: the bf16 compile has the same graph ops, the same single
    fused relu kernel and the same two extern mm calls, so no figure changes; what changes
    is the text of every stage (dtypes) and the C++ kernel, which in bf16 converts to float
    and back (at::vec::convert) where the fp32 one computes directly."""
    (a, code32), (b, code16) = mlp_runs["float32"], mlp_runs["bfloat16"]
    assert len(VEC_CONVERT.findall(code32)) == 0 and len(VEC_CONVERT.findall(code16)) == 2
    with Run.open(a) as run_a, Run.open(b) as run_b:
        diff = diff_reports(build_report(run_a), build_report(run_b))
    assert diff.count("added") == diff.count("removed") == 0
    units = {u.name: u for u in diff.units}
    mlp, kernel = units["[0/0] mlp"], units["cpp_fused_relu_0"]
    assert (mlp.matched_by, kernel.matched_by) == ("name", "name")
    # a figure both compiles report is unchanged; which optional pass dumps PyTorch writes
    # (after_joint_graph, ...) depends on its cache state, so one-sided figures are skipped
    both = [c for c in mlp.changes + kernel.changes if c.a is not None and c.b is not None]
    assert both == []
    assert {"inductor_output_code", "aot_inference_graph", "dynamo_output_graph"} <= \
        set(mlp.stages_changed)
    assert kernel.stages_changed == ("cpp_kernel",)

    gates = ["kernels_generated changed", "extern_calls changed", "kernels_launched increased"]
    result = cli("diff", a, b, "--json", *(f"--fail-on={g}" for g in gates))
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["gates"] == [] and doc["summary"]["matched"] == len(diff.units)
