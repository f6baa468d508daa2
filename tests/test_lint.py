"""`irscope lint`: every rule fires on one real compile and stays quiet on another.

Inputs are the committed H100 runs (samples/gpu), the raw dumps of one H100 process, Triton
compiles made here ahead of time for sm_90a (`irscope compile`), the seed models under
torch.compile on the CPU, and jax.jit on the CPU with an XLA dump.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from conftest import GPU_SAMPLES, SAMPLES, run_cli
from irscope.analysis.figures import UnitFigures
from irscope.analysis.lint import (RULE_IDS, RULES, LintInput, Rule, StageInput,
                                   extern_round_trip, xla_thread_local_buffer)
from irscope.ingest import ingest
from irscope.parsers import inductor
from irscope.reports.build import build_report
from irscope.read.lint import read_findings
from irscope.store import Run

KERNELS = SAMPLES / "scripts" / "triton_kernels.py"
DOCS = Path(__file__).resolve().parents[1] / "docs" / "lint.md"
MATMUL_SIGNATURE = ("a_ptr=*fp16:16,b_ptr=*fp16:16,c_ptr=*fp16:16,M=i32:16,N=i32:16,K=i32:16,"
                    "stride_am=i32:16,stride_bk=i32:16,stride_cm=i32:16")
UNIT_STRIDES = ("--constexpr", "stride_ak=1", "--constexpr", "stride_bn=1",
                "--constexpr", "stride_cn=1")
# A product of two fp32 tiles at a chosen input precision ("ieee" lowers to FMA).
FP32_DOT_KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def fp32_dot_kernel(a_ptr, b_ptr, c_ptr, K, BLOCK: tl.constexpr, PRECISION: tl.constexpr):
    rows = tl.arange(0, BLOCK)
    a = a_ptr + rows[:, None] * K + rows[None, :]
    b = b_ptr + rows[:, None] * BLOCK + rows[None, :]
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    for k in range(0, K, BLOCK):
        acc += tl.dot(tl.load(a), tl.load(b), input_precision=PRECISION)
        a += BLOCK
        b += BLOCK * BLOCK
    tl.store(c_ptr + rows[:, None] * BLOCK + rows[None, :], acc)
'''
# A softmax (a reduction feeding elementwise fusions on XLA:CPU) and a plain elementwise chain.
XLA_PROGRAM = '''
import os, sys
os.environ["XLA_FLAGS"] = "--xla_dump_to=" + sys.argv[1]
import jax, jax.numpy as jnp

def softmax(x):
    e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
    return e / jnp.sum(e, axis=-1, keepdims=True)

def elementwise(x):
    return jnp.tanh(x) * 2.0 + 1.0

jax.jit(softmax)(jnp.ones((256, 512))).block_until_ready()
jax.jit(elementwise)(jnp.ones((256, 512))).block_until_ready()
'''


def sample(name: str) -> Run:
    return Run.open(GPU_SAMPLES / name, read_only=True)


def compile_run(out: Path, target: str, *args: str) -> Run:
    done = run_cli("compile", target, *args, "--arch", "sm_90a", "-j", "2", "-o", out)
    assert done.returncode == 0, done.stderr
    return Run.open(out)


@pytest.fixture(scope="module")
def matmul_sweep(tmp_path_factory):
    """matmul_kernel with 16-row tiles for sm_90a: num_stages 1 and 4 x maxnreg 64 and 255."""
    pytest.importorskip("triton")
    return compile_run(tmp_path_factory.mktemp("lint") / "matmul", f"{KERNELS}::matmul_kernel",
                       "--signature", MATMUL_SIGNATURE, *UNIT_STRIDES,
                       "--constexpr", "BLOCK_M=16", "--constexpr", "BLOCK_N=128",
                       "--constexpr", "BLOCK_K=64", "--sweep", "num_stages=1,4",
                       "--sweep", "maxnreg=64,255")


@pytest.fixture(scope="module")
def dot_sweep(tmp_path_factory):
    """An fp32 tile product at input precision ieee and tf32, for sm_90a."""
    pytest.importorskip("triton")
    folder = tmp_path_factory.mktemp("lint")
    (folder / "lint_kernels.py").write_text(FP32_DOT_KERNEL)
    return compile_run(folder / "dot", f"{folder / 'lint_kernels.py'}::fp32_dot_kernel",
                       "--signature", "a_ptr=*fp32:16,b_ptr=*fp32:16,c_ptr=*fp32:16,K=i32:16",
                       "--constexpr", "BLOCK=64", "--sweep", "PRECISION=ieee,tf32")


@pytest.fixture(scope="module")
def unaligned_add(tmp_path_factory):
    """add_kernel with pointers not known to be aligned, in one-warp blocks, for sm_90a."""
    pytest.importorskip("triton")
    return compile_run(tmp_path_factory.mktemp("lint") / "add", f"{KERNELS}::add_kernel",
                       "--signature", "x_ptr=*fp32,y_ptr=*fp32,out_ptr=*fp32,n=i32",
                       "--constexpr", "BLOCK=256", "--num-warps", "1")


@pytest.fixture(scope="module")
def trust_run(tmp_path_factory):
    """The raw dumps of one H100 process (samples/gpu/dumps), filed as `irscope ingest` does."""
    folder = tmp_path_factory.mktemp("trust")
    with tarfile.open(GPU_SAMPLES / "dumps" / "trust_torch.tar.gz") as archive:
        archive.extractall(folder, filter="data")
    run = Run.create(folder / "run")
    ingest(run, [folder / "w"])
    return run


@pytest.fixture(scope="module")
def torch_run(tmp_path_factory):
    """The seed models under torch.compile on the CPU, with recompiles and a graph break."""
    pytest.importorskip("torch")
    from torch_helpers import torch_dumps

    dumps = torch_dumps()
    run = Run.create(tmp_path_factory.mktemp("torch") / "run")
    ingest(run, [dumps / "trace", dumps / "trace_gb"])
    return run


@pytest.fixture(scope="module")
def xla_run(tmp_path_factory):
    """A softmax and an elementwise chain under jax.jit on the CPU, from their XLA dump."""
    pytest.importorskip("jax")
    folder = tmp_path_factory.mktemp("xla")
    subprocess.run([sys.executable, "-c", XLA_PROGRAM, str(folder / "dump")], check=True,
                   capture_output=True, timeout=600, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    run = Run.create(folder / "run")
    ingest(run, [folder / "dump"])
    return run


SLOW = {"matmul_sweep", "dot_sweep", "unaligned_add", "trust_run", "torch_run", "xla_run"}
# rule -> ((source of a unit it fires on, name fragments), (source of one it does not))
CASES = {
    "spills": (("matmul_sweep", "num_stages=1,maxnreg=64"),
               ("matmul_sweep", "num_stages=4,maxnreg=255")),
    "local_memory": (("trust_run", "triton_poi_fused_add_cos_mul_sin_0"),
                     ("trust_run", "triton_poi_fused_gelu_1")),
    "occupancy_registers": (("triton_kernels", "matmul_kernel"),
                            ("triton_kernels", "add_kernel")),
    "occupancy_shared": (("matmul_sweep", "num_stages=4,maxnreg=255"),
                         ("matmul_sweep", "num_stages=1,maxnreg=255")),
    "occupancy_block_size": (("unaligned_add", "add_kernel"), ("triton_kernels", "add_kernel")),
    "dot_no_tensor_core": (("dot_sweep", "PRECISION=ieee"), ("dot_sweep", "PRECISION=tf32")),
    "dot_mma_sync_on_hopper": (("matmul_sweep", "num_stages=4,maxnreg=255"),
                               ("triton_kernels", "matmul_kernel")),
    "dot_not_pipelined": (("matmul_sweep", "num_stages=1,maxnreg=255"),
                          ("matmul_sweep", "num_stages=4,maxnreg=255")),
    "layout_conversions": (("trust_run", "triton_per_fused_native_layer_norm_0-275e3dc0"),
                           ("triton_kernels", "matmul_kernel")),
    "unvectorized_access": (("triton_kernels", "softmax_kernel"),
                            ("triton_kernels", "add_kernel")),
    "graph_break": (("torch_run", "] f"), ("torch_run", "] activation_chain")),
    "recompile": (("trust_run", "[1/1] sincos"), ("trust_run", "[1/0] sincos")),
    "extern_round_trip": (("torch_cuda", "[0/0] mlp"), ("torch_cuda", "complex_activation")),
    "xla_unfused_reduction": (("xla_run", "jit_softmax"), ("jax_cuda", "jit_post_norm_block")),
}


def _run(source: str, request) -> Run:
    return request.getfixturevalue(source) if source in SLOW else sample(source)


def _unit(run: Run, fragment: str):
    """The unit named ``fragment``, else the one unit whose name contains it."""
    matches = [u for u in run.units() if u.name == fragment] or [
        u for u in run.units() if fragment in u.name]
    assert len(matches) == 1, (fragment, [u.name for u in run.units()])
    return matches[0]


def _findings(run: Run, unit, rule: str) -> list:
    return [f for f in read_findings(run, [unit]) if f.rule == rule]


def _params():
    for rule, (fires, quiet) in CASES.items():
        slow = {fires[0], quiet[0]} & SLOW
        yield pytest.param(rule, id=rule, marks=[pytest.mark.slow] if slow else [])


@pytest.mark.parametrize("rule", list(_params()))
def test_rule_fires_on_one_real_compile_and_not_another(rule, request):
    (source, fragments), (quiet_source, quiet_fragments) = CASES[rule]
    run = _run(source, request)
    found = _findings(run, _unit(run, fragments), rule)
    assert found, f"{rule} found nothing on {fragments}"
    assert all(f.message and f.severity in ("warning", "info") for f in found)
    quiet = _run(quiet_source, request)
    assert not _findings(quiet, _unit(quiet, quiet_fragments), rule)


@pytest.mark.slow
def test_thread_local_buffers_fire_above_the_limit_only(xla_run):
    """XLA:CPU keeps reduction accumulators thread-local (4 bytes each): under the default
    1 KiB limit the rule is quiet; with a limit of 4 bytes the same real dump fires."""
    unit = _unit(xla_run, "jit_softmax")
    assert not _findings(xla_run, unit, "xla_thread_local_buffer")
    low = Rule("xla_thread_local_buffer", "warning", "", lambda u: xla_thread_local_buffer(u, 4))
    found = read_findings(xla_run, [unit], [low])
    assert found and found[0].figures["largest_bytes"] == 4 and found[0].lines


def test_every_rule_is_tested_and_documented():
    assert set(CASES) | {"xla_thread_local_buffer"} == set(RULE_IDS)
    headings = re.findall(r"^## (\w+)$", DOCS.read_text(), re.M)
    assert headings == list(RULE_IDS)
    assert len(set(RULE_IDS)) == len(RULES)


# -- what the findings say ---------------------------------------------------------------
def test_occupancy_finding_names_the_numbers_and_the_register_target():
    run = sample("triton_kernels")
    (finding,) = _findings(run, run.unit("matmul_kernel"), "occupancy_registers")
    assert finding.figures["registers"] == 168 and finding.figures["occupancy"] == 0.1875
    assert finding.figures["registers_for_next_block"] == 128
    assert "3 blocks of 128 threads" in finding.message and "at most 128" in finding.message


def test_unvectorized_access_points_at_ptx_lines_and_the_source_line():
    run = sample("triton_kernels")
    (finding,) = _findings(run, run.unit("softmax_kernel"), "unvectorized_access")
    ptx = run.read_text(run.stage(run.unit("softmax_kernel"), "ptx")).splitlines()
    assert all(re.search(r"\b(ld|st)\.global\.b32\b", ptx[n - 1]) for n in finding.lines)
    assert finding.figures["scalar_instructions"] == 16
    assert any(s.endswith("triton_kernels.py:23") for s in finding.sources)


def test_extern_round_trip_points_at_both_calls():
    run = sample("torch_cuda")
    unit = run.unit("[0/0] mlp")
    (finding,) = _findings(run, unit, "extern_round_trip")
    code = run.read_text(run.stage(unit, "inductor_output_code")).splitlines()
    first, second = finding.lines
    assert "extern_kernels.mm(" in code[first - 1]
    assert "triton_poi_fused_relu_0.run(" in code[second - 1]


def test_extern_round_trip_follows_the_result_buffer_into_the_kernel_that_reads_it():
    """A CPU backward: the pairs are those where a C++ kernel's inputs name the extern's `out=`
    buffer or a view or reuse of it (buf13 read as buf18 at 352), never an extern and the next
    kernel that reads something else (mm_1 at 300, kernel at 304); C++ kernels get no kind and
    no Triton advice."""
    text = (SAMPLES / "inductor" / "mlp_attention_backward.output_code.py").read_text()
    stage = StageInput("inductor_output_code", "inductor_output_code", inductor.parse(text),
                       text)
    found = list(extern_round_trip(LintInput(UnitFigures(1, "backward", "torch"),
                                             stages=(stage,))))
    assert [f.lines for f in found] == [(307, 334), (311, 316), (321, 334), (326, 334),
                                        (342, 352)]
    code = text.splitlines()
    for finding in found:
        written = re.search(r"out=(buf\d+)", code[finding.lines[0] - 1]).group(1)
        aliases = {written} | set(re.findall(rf"(buf\d+) = reinterpret_tensor\({written}\b", text))
        assert aliases & set(re.findall(r"buf\d+", code[finding.lines[1] - 1]))
    assert all("(pointwise)" not in f.message and "Triton" not in f.message for f in found)
    assert "C++ GEMM template" in found[-1].message


@pytest.mark.slow
def test_graph_break_finding_names_what_dynamo_could_not_trace(torch_run):
    """Dynamo's explanation (the call it met, by name), as the problems list shows it, not its
    generic "attempting to trace CALL" reason."""
    (finding,) = _findings(torch_run, _unit(torch_run, "] f"), "graph_break")
    assert "builtin operator `print`" in finding.message, finding.message


@pytest.mark.slow
def test_spills_are_ptxas_figures_with_sass_lines(matmul_sweep):
    unit = _unit(matmul_sweep, "num_stages=1,maxnreg=64")
    (finding,) = _findings(matmul_sweep, unit, "spills")
    assert finding.figures["spill_store_bytes"] == unit.attrs["ptxas"]["matmul_kernel"]["spill_store_bytes"]
    sass = matmul_sweep.read_text(matmul_sweep.stage(unit, "sass")).splitlines()
    assert all(re.search(r"\b(STL|LDL)\b", sass[n - 1]) for n in finding.lines)


# -- the command ---------------------------------------------------------------------------
def test_lint_lists_findings_with_rule_ids_and_exits_0():
    done = run_cli("lint", GPU_SAMPLES / "triton_kernels")
    assert done.returncode == 0, done.stderr
    assert "occupancy_registers" in done.stdout and "matmul_kernel" in done.stdout
    assert "docs/lint.md#unvectorized_access" in done.stdout
    assert "\x1b[" not in done.stdout  # NO_COLOR is set by run_cli
    assert "2 findings" in done.stderr


def test_lint_json_and_strict():
    done = run_cli("lint", GPU_SAMPLES / "torch_cuda", "--json", "--strict")
    assert done.returncode == 1
    data = json.loads(done.stdout)
    assert data["counts"] == {"lint.extern_round_trip": 3}
    assert {f["unit"] for f in data["findings"]} == {"[0/0] mlp", "[3/0] post_norm_block",
                                                    "[4/0] mlp_dead_gate"}
    clean = run_cli("lint", GPU_SAMPLES / "jax_cuda", "--strict")
    assert clean.returncode == 0 and "no findings" in clean.stderr


def test_lint_rule_and_unit_filters():
    done = run_cli("lint", GPU_SAMPLES / "triton_kernels", "--json", "--rule",
                   "unvectorized_access", "--unit", "softmax")
    assert [f["rule"] for f in json.loads(done.stdout)["findings"]] == ["unvectorized_access"]
    bad = run_cli("lint", GPU_SAMPLES / "triton_kernels", "--rule", "no_such_rule")
    assert bad.returncode == 2 and "--list-rules" in bad.stderr


# -- reports and gates ---------------------------------------------------------------------
def test_report_counts_findings_as_lint_figures():
    report = build_report(sample("torch_cuda"))
    by_name = {u.name: u for u in report.units}
    assert by_name["[0/0] mlp"].figures()["lint.extern_round_trip"] == 1
    assert "lint.extern_round_trip" not in by_name["[2/0] complex_activation"].figures()
    assert report.figures()["lint.extern_round_trip"] == 3


def test_report_json_run_figures_sum_the_units_lint_and_passes_as_diff_does(tmp_path):
    """docs/figures.md: a run's lint.<rule> and passes.* are its units' summed, in the JSON
    report's run figures as in the run total `diff` compares."""
    shutil.copytree(GPU_SAMPLES / "torch_cuda", tmp_path / "run")
    done = run_cli("report", tmp_path / "run", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    totals = build_report(Run.open(tmp_path / "run")).figures()
    for key in ("lint.extern_round_trip", "passes.total", "kernels_launched"):
        summed = sum(u["figures"].get(key, 0) for u in doc["units"] if not u.get("candidate"))
        assert doc["figures"][key] == summed == totals[key] > 0, key


@pytest.mark.slow
def test_diff_gate_on_a_lint_figure(matmul_sweep, tmp_path):
    base = tmp_path / "base.json"
    done = run_cli("report", GPU_SAMPLES / "triton_kernels", "--json", "-o", base)
    assert done.returncode == 0, done.stderr
    assert "lint.occupancy_registers" in json.loads(base.read_text())["units"][1]["figures"]
    worse = run_cli("diff", base, matmul_sweep.path, "--fail-on", "lint.spills increased")
    assert worse.returncode == 1
    assert "lint.spills 0 -> 2" in worse.stderr and "(run total)" in worse.stderr
    better = run_cli("diff", matmul_sweep.path, base, "--fail-on", "lint.spills increased")
    assert better.returncode == 0 and "neither side reports" not in better.stderr


def test_the_whole_runs_findings_are_linted_once_per_view(monkeypatch):
    """A report (of the units it shows), its export and the problems they list each ask
    for findings: one view lints each unit once, whichever asks first; chosen units get
    their own findings, the same as in the whole run's."""
    import irscope.read.lint as read_lint
    from irscope.read.figures import read_run_figures
    from irscope.read.view import RunView

    linted = []
    lint = read_lint.lint_unit
    monkeypatch.setattr(read_lint, "lint_unit", lambda *a: linted.append(1) or lint(*a))
    view = RunView(sample("torch_cuda"))
    first = read_findings(view)
    once = len(linted)
    assert read_findings(view) == first and len(linted) == once > 0 and first
    flagged = {f.unit for f in first}
    units = [u for u in view.units() if u.framework == "triton" or u.name in flagged][1:]
    names = {u.name for u in units}
    chosen = read_findings(view, units)
    assert len(linted) == once  # kept from the whole run's
    facts = lambda found: sorted((f.unit, f.rule, f.message) for f in found)  # noqa: E731
    assert facts(chosen) == facts(f for f in first if f.unit in names) and chosen

    linted.clear()
    view = RunView(sample("torch_cuda"))  # a report's units first, then the whole run
    assert facts(read_findings(view, units)) == facts(chosen)
    assert read_findings(view) == first and len(linted) == once
    lost = sum(f.autotune_lost for f in read_run_figures(view).units)
    assert read_findings(view, candidates=True) and len(linted) == once + lost


