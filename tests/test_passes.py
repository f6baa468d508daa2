"""Pass by pass: MLIR pass dumps split while read, per-pass figures checked against independent
counts, real Triton AOT compiles and jax.jit dumps with --passes, Inductor's graph passes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from conftest import GPU_SAMPLES, ROOT, SAMPLES

from irscope.analysis.passes import compare, listing, op_count
from irscope.parsers import mlir_passes, registry
from irscope.read.passes import pass_texts, unit_passes
from irscope.store import Run

KERNELS = SAMPLES / "scripts" / "triton_kernels.py"
ADD_SIGNATURE = "x_ptr=*fp32,y_ptr=*fp32,out_ptr=*fp32,n=i32"
# independent counts: an MLIR op is `name.op` after an optional `%x = `, or the module
MLIR_OP_LINE = re.compile(r'^\s*(%\S+( = |, ))?"?[a-z_]+\.[a-z_.0-9]+|^\s*module\b')
# an HLO instruction: `%x = type opcode(` or `ROOT %x = ...`
HLO_INSTRUCTION = re.compile(r"^\s*(ROOT )?%\S+ = ")
# an FX node: `relu: "f32[..]" = torch.ops.aten.relu.default(mm)`, `mm: "f32[..]" = x @ w`
FX_CALL = re.compile(r'^ +[a-z_][a-z_0-9]*: "')
# the emitters' pass logs in the H100 JAX sample run
XLA_LOGS = ("mlir-passes.log", "triton-to-llvm.txt", "xtile-to-triton.txt")


def independent(text: str, pattern: re.Pattern) -> int:
    return sum(1 for line in text.splitlines() if pattern.search(line))


def xla_logs():
    """(unit, stage name, text) of every emitter pass log in samples/gpu/jax_cuda."""
    with Run.open(GPU_SAMPLES / "jax_cuda", read_only=True) as run:
        return [(u.name, s.name, run.read_text(s)) for u in run.units()
                for s in run.stages(u.id) if s.name.endswith(XLA_LOGS)]


# -- the parser ----------------------------------------------------------------------------
def test_xla_emitter_logs_split_into_one_snapshot_per_header():
    logs = xla_logs()
    assert {name.rsplit(".", 2)[-2] for _, name, _ in logs} >= {"mlir-passes", "triton-to-llvm",
                                                                "xtile-to-triton"}
    for unit, name, text in logs:
        headers = text.count("// -----// IR Dump ")
        problems: list = []
        snapshots = list(mlir_passes.split(iter(text.splitlines(True)), problems))
        assert len(snapshots) == headers > 0, (unit, name)
        assert not [p for p in problems if p.severity == "error"], (unit, name, problems)
        assert all(s.when == "before" and s.text.strip() for s in snapshots)
        assert registry.detect(text) == "mlir_passes"
    scopes = {s.scope for _, _, text in logs for s in mlir_passes.split(text.splitlines(), [])}
    assert "func.func @loop_exponential_fusion" in scopes  # function-scoped passes kept apart


def test_truncated_and_foreign_dumps_are_diagnosed_not_raised():
    _, _, text = next(log for log in xla_logs() if log[1].endswith("mlir-passes.log"))
    cut = text[: len(text) // 2]
    result = registry.parse("mlir_passes", cut)
    assert any(d.severity == "warning" and "truncated" in d.message for d in result.diagnostics)
    nothing = registry.parse("mlir_passes", "just some text\n{ not IR")
    assert nothing.totals["passes"] == 0
    assert any("not an MLIR pass dump" in d.message for d in nothing.diagnostics)


def test_op_counts_match_the_mlir_parser_and_a_plain_regex():
    """The figures' fast count agrees with the full MLIR parser's op histogram and with an
    independent regex on every snapshot of a real XLA Triton pipeline."""
    for _, name, text in xla_logs():
        if not name.endswith("xtile-to-triton.txt"):
            continue
        for snap in mlir_passes.split(text.splitlines(), []):
            counted = op_count(snap.text, "mlir")
            assert counted == independent(snap.text, MLIR_OP_LINE), snap.name
            assert counted == sum(registry.parse("ttir", snap.text).histogram.values()), snap.name


# -- Triton --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def triton_passes(tmp_path_factory):
    out = tmp_path_factory.mktemp("passes") / "run"
    done = subprocess.run(
        [sys.executable, "-m", "irscope", "compile", f"{KERNELS}::add_kernel", "--signature",
         ADD_SIGNATURE, "--constexpr", "BLOCK=1024", "--arch", "sm_90a", "--passes", "-o",
         str(out), "--json"], capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"},
        timeout=600)
    assert done.returncode == 0, done.stderr
    return out, json.loads(done.stdout)["rows"][0]["unit"]


def test_triton_compile_keeps_every_pass_from_ttir_to_llvm(triton_passes):
    path, unit_name = triton_passes
    with Run.open(path, read_only=True) as run:
        unit = run.unit(unit_name)
        passes = unit_passes(run, unit)
        names = [r.name for r in passes.rows]
        assert names[0] == "InlinerPass" and "ConvertTritonToTritonGPU" in names
        assert "ConvertTritonGPUToLLVM" in names and names[-1] == "LLVMDIScope"
        shown = listing(passes.rows)
        assert 0 < shown.changed < shown.total and shown.folded == shown.total - shown.changed \
            - shown.unknown
        assert passes.rows[-1].changed is None  # the dump stops before the last pass's output
        timed = [r for r in passes.rows if r.seconds is not None]  # MLIR_ENABLE_TIMING's report
        assert len(timed) >= len(passes.rows) - 3 and all(r.seconds >= 0 for r in timed)
        for row in passes.rows:
            if not row.changed:
                continue
            before, after = pass_texts(run, unit, row)
            assert before and after and before != after
            assert row.ops_before == independent(before, MLIR_OP_LINE), row.name
            assert row.op_delta == independent(after, MLIR_OP_LINE) - independent(
                before, MLIR_OP_LINE), row.name
        lowering = next(r for r in passes.rows if r.name == "ConvertTritonGPUToLLVM")
        assert lowering.op_delta > 100  # every tt op became many llvm ops
        # unchanged passes keep no IR of their own: one stage per change, plus the input
        kept = [s for s in run.stages(unit.id) if s.kind == "pass_ir"]
        assert len(kept) == shown.changed + 1


def test_passes_command_lists_folds_and_diffs(triton_passes, cli):
    path, unit = triton_passes
    listed = cli("passes", path, unit)
    assert listed.returncode == 0, listed.stderr
    assert "ConvertTritonGPUToLLVM" in listed.stdout and "InlinerPass" not in listed.stdout
    assert re.search(r"\d+ changed nothing \(folded", listed.stdout)
    data = json.loads(cli("passes", path, unit, "--all", "--json").stdout)
    assert data["total"] == len(data["passes"]) and data["folded"] == 0
    index = next(p["index"] for p in data["passes"] if p["name"] == "ConvertTritonGPUToLLVM")
    diff = cli("passes", path, unit, str(index))
    assert diff.returncode == 0 and diff.stdout.startswith("--- before ConvertTritonGPUToLLVM")
    assert "+    llvm." in diff.stdout or "+  llvm.func" in diff.stdout
    report = cli("report", path, "--format", "md")
    assert "### Passes" in report.stdout and "ConvertTritonGPUToLLVM" in report.stdout
    html = cli("report", path, "--format", "html")
    assert "<h2>Passes that changed the IR</h2>" in html.stdout
    assert "<td>ConvertTritonGPUToLLVM</td>" in html.stdout
    figures = json.loads(cli("report", path, "--format", "json").stdout)["units"][0]["figures"]
    assert figures["passes.changed"] == data["changed"] and figures["passes.total"] == data["total"]


def test_a_unit_without_passes_says_so(cli):
    done = cli("passes", GPU_SAMPLES / "jax_cuda", "jit_mlp")
    assert done.returncode == 1
    assert done.stderr.strip().endswith(
        "(Inductor's graph passes come with its trace)") and "Traceback" not in done.stderr
    assert "has no passes filed" in done.stderr


def test_a_truncated_pass_dump_is_a_warning_not_a_traceback(triton_passes, cli, tmp_path):
    from irscope.collectors import triton_aot  # noqa: F401  (the worker that wrote the dump)

    path, unit = triton_passes
    with Run.open(path, read_only=True) as run:
        kept = [run.read_text(s) for s in run.stages(run.unit(unit).id) if s.kind == "pass_ir"]
    dump = tmp_path / "cut.mlir-passes.log"
    header = "// -----// IR Dump Before {} ({}) ('builtin.module' operation) //----- //\n"
    dump.write_text(header.format("CSEPass", "cse") + kept[0] + header.format(
        "SymbolDCEPass", "symbol-dce") + kept[1][: len(kept[1]) // 2])
    done = cli("ingest", "--passes", dump, "-o", tmp_path / "run")
    assert done.returncode == 0, done.stderr
    assert "truncated" in done.stderr and "Traceback" not in done.stderr
    listed = cli("passes", tmp_path / "run", "add_kernel", "--all", "--json")
    data = json.loads(listed.stdout)
    assert [p["name"] for p in data["passes"]] == ["CSEPass"] and data["unknown"] == 1
    assert any("truncated" in d for d in data["diagnostics"])


# -- XLA -----------------------------------------------------------------------------------
def test_jax_jit_on_the_cpu_files_hlo_after_each_pass(tmp_path, cli):
    dump = tmp_path / "dump"
    script = ("import jax, jax.numpy as jnp\n"
              "print(jax.jit(lambda x, y: jnp.tanh(x @ y + 1.0).sum())"
              "(jnp.ones((8, 8)), jnp.ones((8, 8))))\n")
    env = {**os.environ, "XLA_FLAGS": f"--xla_dump_to={dump} --xla_dump_hlo_pass_re=.*",
           "JAX_PLATFORMS": "cpu"}
    subprocess.run([sys.executable, "-c", script], check=True, env=env, capture_output=True)
    assert cli("ingest", dump, "-o", tmp_path / "run").returncode == 0
    with Run.open(tmp_path / "run", read_only=True) as run:
        unit = run.unit("jit__lambda")
        rows = unit_passes(run, unit).rows
        files = sorted(p.name for p in dump.iterdir() if re.search(r"\.\d{4}\..*after_", p.name)
                       and ".jit__lambda." in p.name)
        assert len(rows) == len(files)  # one pass per file XLA wrote
        fusion = next(r for r in rows if r.name == "fusion")
        before, after = pass_texts(run, unit, fusion)
        assert fusion.changed and "kind=kLoop" in after and "kind=kLoop" not in before
        assert fusion.op_delta == independent(after, HLO_INSTRUCTION) - independent(
            before, HLO_INSTRUCTION)
        assert not [s for s in run.stages(unit.id) if s.kind == "text"
                    and re.match(r"\d{4}\.", s.name)]  # no pass file left as a text stage


def test_an_xla_gpu_dump_files_its_emitter_logs_pass_by_pass(tmp_path, cli):
    """The H100 dump's files written back as XLA named them: each emitter log becomes a
    pipeline of the module's unit, no longer a text stage."""
    dump = tmp_path / "dump"
    dump.mkdir()
    with Run.open(GPU_SAMPLES / "jax_cuda", read_only=True) as run:
        unit = run.unit("jit_activation_chain")
        for stage in run.stages(unit.id):
            if stage.kind == "hlo_before_opt" or stage.name.endswith(XLA_LOGS):
                suffix = "before_optimizations.txt" if stage.kind == "hlo_before_opt" \
                    else stage.name
                (dump / f"module_0001.jit_activation_chain.{suffix}").write_bytes(
                    run.read_blob(stage.blob))
    plain = cli("ingest", dump, "-o", tmp_path / "plain", "--json")
    assert plain.returncode == 0, plain.stderr
    with Run.open(tmp_path / "plain", read_only=True) as run:  # not asked for: left out
        kinds = {s.kind for s in run.stages(run.unit("jit_activation_chain").id)}
        assert kinds == {"hlo_before_opt"}
    done = cli("ingest", "--passes", dump, "-o", tmp_path / "run")
    assert done.returncode == 0, done.stderr
    listed = json.loads(cli("passes", tmp_path / "run", "jit_activation_chain", "--all",
                            "--json").stdout)
    log = (dump / "module_0001.jit_activation_chain.loop_exponential_fusion.mlir-passes.log")
    assert listed["total"] == log.read_text().count("// -----// IR Dump Before ")
    assert {p["pipeline"] for p in listed["passes"]} == {"loop_exponential_fusion · mlir-passes"}
    with Run.open(tmp_path / "run", read_only=True) as run:
        kinds = {s.kind for s in run.stages(run.unit("jit_activation_chain").id)}
    assert "text" not in kinds and {"pass_list", "pass_ir", "hlo_before_opt"} <= kinds


def test_xla_emitter_pass_logs_are_filed_as_pipelines(tmp_path):
    from irscope.ingest.passes import file_mlir_dump

    unit_name, name, text = next(log for log in xla_logs()
                                 if log[1].endswith("triton-to-llvm.txt"))
    with Run.create(tmp_path / "run", {"name": "logs"}) as run:
        with run.transaction() as writer:
            unit = writer.add_unit(unit_name, "jax")
            file_mlir_dump(writer, unit, name, iter(text.splitlines(True)))
        rows = unit_passes(run, run.unit(unit_name)).rows
    assert len(rows) == text.count("// -----// IR Dump Before ")
    assert any(r.changed and r.op_delta for r in rows)


# -- Inductor ------------------------------------------------------------------------------
def test_inductor_graph_passes_from_the_h100_sample_trace():
    with Run.open(GPU_SAMPLES / "torch_cuda", read_only=True) as run:
        unit = run.unit("[0/0] mlp")
        rows = unit_passes(run, unit).rows
        assert [r.name for r in rows] == ["pre_grad", "joint", "post_grad"]
        for row in rows:
            before, after = pass_texts(run, unit, row)
            assert row.ops_before == independent(before, FX_CALL)
            assert row.ops_after == independent(after, FX_CALL)


@pytest.mark.slow
def test_inductor_graph_passes_of_a_real_torch_compile(tmp_path, cli):
    trace = tmp_path / "trace"
    script = ("import torch\n"
              "w = torch.randn(16, 16, requires_grad=True)\n"
              "f = torch.compile(lambda x: torch.relu(x @ w * 2.0 + 1.0).sum())\n"
              "f(torch.randn(4, 16)).backward()\n")
    subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                   env={**os.environ, "TORCH_TRACE": str(trace),  # a cold compile: a
                        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache")},  # hit runs no pass
                   cwd=ROOT)
    assert cli("ingest", trace, "-o", tmp_path / "run").returncode == 0
    with Run.open(tmp_path / "run", read_only=True) as run:
        unit = next(u for u in run.units("torch") if u.name.startswith("[0/0]"))
        rows = unit_passes(run, unit).rows
        # training: post-grad passes run on the forward and on the backward graph
        assert [r.name for r in rows] == ["pre_grad", "post_grad", "post_grad#2"]
        for row in rows:
            before, after = pass_texts(run, unit, row)
            assert row.op_delta == independent(after, FX_CALL) - independent(before, FX_CALL)
    done = cli("passes", tmp_path / "run", unit.name, "--all")
    assert done.returncode == 0 and "post_grad" in done.stdout


def test_timing_reports_are_split_off_and_matched_to_their_passes(tmp_path):
    from irscope.ingest.passes import file_mlir_dump

    header = "// -----// IR Dump Before {} ({}) ('builtin.module' operation) //----- //\n"
    rule = "===" + "-" * 73 + "===\n"
    dump = (header.format("CSEPass", "cse") + "module {\n  %0 = arith.constant 1 : i32\n"
            "  %1 = arith.constant 1 : i32\n}\n" + header.format("SymbolDCEPass", "symbol-dce")
            + "module {\n  %0 = arith.constant 1 : i32\n}\n" + rule
            + "                         ... Execution time report ...\n" + rule
            + "  Total Execution Time: 0.0030 seconds\n\n  ----Wall Time----  ----Name----\n"
            + "    0.0020 ( 66.7%)  CSEPass\n    0.0000 (  0.0%)    (A) DominanceInfo\n"
            + "    0.0010 ( 33.3%)  SymbolDCEPass\n    0.0030 (100.0%)  Total\n")
    problems: list = []
    items = list(mlir_passes.split(dump.splitlines(), problems))
    assert [type(i).__name__ for i in items] == ["Snapshot", "Snapshot", "TimingReport"]
    assert items[1].text == "module {\n  %0 = arith.constant 1 : i32\n}\n"  # no report in it
    assert items[2].entries == (("CSEPass", 0.002, 0), ("SymbolDCEPass", 0.001, 0))
    with Run.create(tmp_path / "run", {"name": "t"}) as run:
        with run.transaction() as writer:
            file_mlir_dump(writer, writer.add_unit("k", "triton"), "triton", dump.splitlines())
        rows = unit_passes(run, run.unit("k")).rows
    assert [(r.name, r.seconds, r.changed, r.op_delta) for r in rows] == [
        ("CSEPass", 0.002, True, -1), ("SymbolDCEPass", 0.001, None, None)]


def test_the_cap_on_kept_ir_is_said_and_passes_stay_listed(tmp_path, monkeypatch):
    from irscope.ingest.passes import file_mlir_dump

    _, name, text = next(log for log in xla_logs() if log[1].endswith("triton-to-llvm.txt"))
    monkeypatch.setenv("IRSCOPE_PASS_BYTES", "100000")
    with Run.create(tmp_path / "run", {"name": "cap"}) as run:
        with run.transaction() as writer:
            file_mlir_dump(writer, writer.add_unit("k", "jax"), name, text.splitlines())
        passes = unit_passes(run, run.unit("k"))
        kept = sum(s.size for s in run.stages(run.unit("k").id) if s.kind == "pass_ir")
    assert kept <= 100000
    assert len(passes.rows) == text.count("// -----// IR Dump Before ")
    assert any("IRSCOPE_PASS_BYTES" in d for d in passes.diagnostics)
    changed = [r for r in passes.rows if r.changed]
    assert changed[-1].stage is None and changed[0].stage  # figures kept, IR past the cap not


def test_ir_over_the_cap_is_named_and_the_snapshots_around_it_kept(tmp_path, monkeypatch, cli):
    """The largest snapshot of a real emitter log is dropped under a cap one byte short of
    it: the snapshot before it and the one after it (smaller) keep their IR, the warning
    names the pass, its size and the cap, and the diffs that would need the dropped IR say
    so instead of diffing against nothing."""
    from irscope.ingest.passes import file_mlir_dump
    from irscope.read.passes import unkept_ir

    _, name, text = next(log for log in xla_logs() if log[1].endswith("triton-to-llvm.txt"))

    def filed(folder: str):
        run = Run.create(tmp_path / folder, {"name": folder})
        with run.transaction() as writer:
            file_mlir_dump(writer, writer.add_unit("k", "jax"), name, text.splitlines())
        return run, unit_passes(run, run.unit("k"))

    _, whole = filed("whole")
    sizes = {r.stage: s.size for r in whole.rows if r.stage
             for s in _.stages(_.unit("k").id) if s.name == r.stage}
    largest = max((r for r in whole.rows if r.stage), key=lambda r: sizes[r.stage])
    before = sum(sizes[r.stage] for r in whole.rows if r.stage and r.index < largest.index)
    before += sum(s.size for s in _.stages(_.unit("k").id) if s.name.endswith(" · input"))
    cap = before + sizes[largest.stage] - 1
    monkeypatch.setenv("IRSCOPE_PASS_BYTES", str(cap))
    run, capped = filed("capped")
    rows = {r.index: r for r in capped.rows}
    dropped = rows[largest.index]
    assert dropped.stage is None and dropped.dropped == sizes[largest.stage]
    assert rows[largest.index].before  # the IR it received is kept
    later = [r for r in capped.rows if r.changed and r.index > largest.index]
    assert later[0].stage  # and the IR the next pass left, smaller than the cap's rest
    warnings = [d for d in capped.diagnostics if largest.name in d]
    assert f"{sizes[largest.stage]:,} bytes" in warnings[0] and f"{cap:,} bytes" in warnings[0]
    assert "left by ConvertTritonGPUToLLVM" in unkept_ir(capped.rows, later[0])
    assert "was not kept" in unkept_ir(capped.rows, dropped)
    out = cli("passes", run.path, "k", str(later[0].index))
    assert out.returncode == 0 and "was not kept" in out.stderr and not out.stdout


def test_compare_counts_moved_lines_and_ignores_locations():
    before = '%0 = tt.load %p : f32 loc(#loc1)\n%1 = arith.addf %0, %0 : f32 loc(#loc2)\n'
    after = '%0 = tt.load %p : f32 loc(#loc7)\n'
    change = compare(before, after, "mlir")
    assert (change.added, change.removed, change.op_delta) == (0, 1, -1)
