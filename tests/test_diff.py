"""`irscope diff` over real runs: unit matching, figure deltas, formats and --fail-on exit codes."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest
from kernels import compile_aot
from conftest import run_main
from report_helpers import file_triton, schema_errors, triton_run

from irscope.reports.common import Rendering
from irscope.reports import csv_report, html, markdown, table
from irscope.reports.diff import FigureDelta, diff_reports
from irscope.reports.gates import Violation, evaluate, parse_gate
from irscope.reports.build import build_report
from irscope.store import Run

SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "irscope" / "reports"
                     / "schema.json").read_text())
SMALL_TILES = {"constexprs": (("BLOCK_M", 64), ("BLOCK_N", 64), ("BLOCK_K", 32)), "num_warps": 8}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, Path]:
    """A: add, softmax, matmul (128x128 tiles, 4 warps), an Inductor-style indexed name and a
    kernel that B drops. B: the same with matmul at 64x64 tiles on 8 warps, the indexed name
    renumbered, softmax renamed at the same source line, and a new kernel (A's dropped one
    has no source location, so nothing pairs them)."""
    root = tmp_path_factory.mktemp("diff")
    a, b = root / "before", root / "after"
    run_a = triton_run(a)
    file_triton(run_a, "add_kernel", name="triton_poi_fused_add_0", num_warps=2)
    file_triton(run_a, "layernorm_gelu_kernel", name="removed_kernel", located=False)
    run_b = Run.create(b, {"name": "after"})
    file_triton(run_b, "add_kernel")
    file_triton(run_b, "softmax_kernel", name="softmax_kernel_v2")
    file_triton(run_b, "matmul_kernel", **SMALL_TILES)
    file_triton(run_b, "add_kernel", name="triton_poi_fused_add_3", num_warps=2)
    file_triton(run_b, "layernorm_gelu_kernel")
    run_a.close()
    run_b.close()
    return a, b


@pytest.fixture(scope="module")
def diff(runs):
    with Run.open(runs[0]) as a, Run.open(runs[1]) as b:
        return diff_reports(build_report(a), build_report(b))


def by_name(diff, name):
    return next(u for u in diff.units if name in (u.a and u.a.name, u.b and u.b.name))


def test_units_are_matched_by_name_index_and_source_location(diff):
    how = {u.name: (u.status, u.matched_by) for u in diff.units}
    assert how == {
        "add_kernel": ("matched", "name"),
        "softmax_kernel -> softmax_kernel_v2": ("matched", "source location"),
        "matmul_kernel": ("matched", "name"),
        "triton_poi_fused_add_0 -> triton_poi_fused_add_3": ("matched", "normalized name"),
        "removed_kernel": ("removed", None),
        "layernorm_gelu_kernel": ("added", None),
    }
    assert (diff.count("matched"), diff.count("added"), diff.count("removed")) == (4, 1, 1)


def test_identical_compiles_have_no_changes(diff):
    for name in ("add_kernel", "softmax_kernel", "triton_poi_fused_add_0"):
        unit = by_name(diff, name)
        assert unit.changes == () and unit.stages_changed == ()


def test_matmul_deltas_are_the_difference_of_the_parsed_figures(diff):
    """Smaller tiles: fewer PTX instructions, a narrower wgmma, 8 warps; deltas are B - A."""
    unit = by_name(diff, "matmul_kernel")
    changes = {d.name: d for d in unit.changes}
    a, b = unit.a.figures(), unit.b.figures()
    for name, delta in changes.items():
        assert (delta.a, delta.b) == (a.get(name, delta.a), b.get(name, delta.b))
    assert (changes["ttgir.num_warps"].a, changes["ttgir.num_warps"].b) == (4, 8)
    assert changes["ptx.instructions"].delta < 0
    wide = "ptx.op.wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"
    assert (changes[wide].a, changes[wide].b) == (4, 0)  # absent op of a present stage: 0
    narrower = [d for name, d in changes.items() if name.startswith("ptx.op.wgmma") and d.b]
    assert len(narrower) == 1 and narrower[0].a == 0
    assert {"ttir", "ttgir", "llir", "ptx"} <= set(unit.stages_changed)


def test_gates_find_the_offending_rows(diff):
    rows = evaluate(parse_gate("ttgir.num_warps increased"), diff)
    assert [(r.unit, r.delta.a, r.delta.b) for r in rows] == \
        [("matmul_kernel", 4, 8), ("(run total)", 18, 22)]  # 4+4+4+2+4 -> 4+4+8+2+4
    assert evaluate(parse_gate("ptx.instructions > +0%"), diff) == []
    added = evaluate(parse_gate("ttgir.num_warps >= 4"), diff)  # absolute: added units count
    assert {r.unit for r in added} == {"add_kernel", "softmax_kernel -> softmax_kernel_v2",
                                       "matmul_kernel", "layernorm_gelu_kernel", "(run total)"}


def test_cli_exit_codes(runs, cli):
    a, b = runs
    failing = cli("diff", a, b, "--format", "json", "--fail-on", "ptx.instructions < -10%",
                  "--fail-on", "fusions increased")
    assert failing.returncode == 1, failing.stderr
    assert "irscope: error: gate failed: ptx.instructions < -10%: matmul_kernel: " \
           "ptx.instructions" in failing.stderr
    doc = json.loads(failing.stdout)
    assert [g["unit"] for g in doc["gates"]] == ["matmul_kernel", "(run total)"]
    assert schema_errors(doc, SCHEMA) == []
    assert "fusions" in failing.stderr and "neither side reports" in failing.stderr

    passing = cli("diff", a, b, "--fail-on", "ptx.instructions increased")
    assert passing.returncode == 0, passing.stderr
    assert "matmul_kernel" in passing.stdout

    malformed = cli("diff", a, b, "--fail-on", "ptx.spills >> 0")
    assert malformed.returncode == 2 and malformed.stdout == ""
    assert malformed.stderr.splitlines() == [
        "irscope: error: --fail-on 'ptx.spills >> 0': unexpected '>' at column 13",
        "  ptx.spills >> 0",
        "              ^ expected a number or a relative change such as +10%"]


def test_json_validates_and_reports_diff_like_runs(runs, cli, tmp_path):
    a, b = runs
    for side, path in (("a", a), ("b", b)):
        assert cli("report", path, "-o", tmp_path / f"{side}.json").returncode == 0
    from_runs = json.loads(cli("diff", a, b, "--json").stdout)
    from_reports = json.loads(cli("diff", tmp_path / "a.json", tmp_path / "b.json",
                                  "--json").stdout)
    assert schema_errors(from_runs, SCHEMA) == []
    assert from_runs["summary"] == {"matched": 4, "added": 1, "removed": 1}
    assert from_reports["units"] == from_runs["units"]
    assert from_reports["totals"] == from_runs["totals"]


def test_single_artifacts_diff_as_one_unit_each(cli, tmp_path):
    for name, options in (("a.ptx", {}), ("b.ptx", SMALL_TILES)):
        (tmp_path / name).write_text(compile_aot("matmul_kernel", **options)["ptx"])
    result = cli("diff", tmp_path / "a.ptx", tmp_path / "b.ptx", "--json",
                 "--fail-on", "ptx.instructions decreased")
    assert result.returncode == 1
    doc = json.loads(result.stdout)
    assert doc["summary"] == {"matched": 1, "added": 0, "removed": 0}
    assert doc["units"][0]["matched_by"] == "single artifact"
    changes = {c["figure"]: c for c in doc["units"][0]["changes"]}
    assert changes["ptx.instructions"]["delta"] < 0
    garbage = tmp_path / "notes.txt"
    garbage.write_text("just some words\n")
    refused = cli("diff", garbage, tmp_path / "b.ptx")
    assert refused.returncode == 1 and "neither a run" in refused.stderr
    future = tmp_path / "future.json"
    future.write_text(json.dumps({"schema": "irscope.report/9", "units": []}))
    newer = cli("diff", future, tmp_path / "b.ptx")
    assert newer.returncode == 1 and "not an irscope.report/1 document" in newer.stderr


def test_every_format_renders_the_diff(diff):
    assert "matmul_kernel" in table.render_diff(diff, Rendering(100))
    for width in (60, 80, 120):
        text = table.render_diff(diff, Rendering(width))
        assert max(len(line) for line in text.splitlines()) <= width
    assert "(run total)" in text and "matmul_kernel" in text
    rows = list(csv.DictReader(io.StringIO(csv_report.render_diff(diff))))
    matmul = [r for r in rows if r["unit_a"] == "matmul_kernel"]
    assert len(matmul) == len(by_name(diff, "matmul_kernel").changes)
    assert {r["status"] for r in rows} == {"total", "matched", "added", "removed"}
    gate = parse_gate("g > 0")
    held = Violation(gate.text, "(run total)", FigureDelta("g", 0.0, 1.0))
    md = markdown.render_diff(diff, Rendering(violations=(held,)))
    assert "### Failed gates" in md and md.count("<details>") == 1
    page = html.render_diff(diff)
    assert "http" not in page and "<script" not in page


SAMPLES = Path(__file__).resolve().parents[1] / "samples"


def test_committed_ttgir_samples_show_mma_becoming_wgmma(cli):
    """sm_80 -> sm_90 TTGIR of the same matmul: tt.dot (mma v2) becomes ttng.warp_group_dot."""
    a = SAMPLES / "mlir" / "matmul_kernel.sm80.ttgir"
    b = SAMPLES / "mlir" / "matmul_kernel.sm90.ttgir"
    result = cli("diff", a, b, "--json", "--fail-on", "ttgir.op.ttng.warp_group_dot > 0")
    assert result.returncode == 1, result.stderr
    unit = json.loads(result.stdout)["units"][0]
    changes = {c["figure"]: (c["a"], c["b"]) for c in unit["changes"]}
    for op in ("tt.dot", "ttng.warp_group_dot", "ttg.local_load"):
        pattern = re.compile(rf"\b{re.escape(op)}\b")
        assert changes[f"ttgir.op.{op}"] == (len(pattern.findall(a.read_text())),
                                             len(pattern.findall(b.read_text())))
    assert changes["ttgir.op.tt.dot"] == (1, 0)
    assert changes["ttgir.op.ttng.warp_group_dot"] == (0, 1)


def test_committed_hlo_samples_show_the_fusion_xla_made(cli):
    """HLO of complex_activation before and after XLA's CPU pipeline: one fusion appears."""
    hlo = SAMPLES / "hlo"
    a = hlo / "jit_complex_activation.before_optimizations.txt"
    b = hlo / "jit_complex_activation.cpu_after_optimizations.txt"
    fusions = len(re.findall(r"= \S+ fusion\(", b.read_text()))
    result = cli("diff", a, b, "--format", "csv", "--fail-on", "fusions increased")
    assert result.returncode == 1 and "fusions 0 -> 1" in result.stderr
    rows = {r["figure"]: r for r in csv.DictReader(io.StringIO(result.stdout))
            if r["status"] == "matched"}
    assert int(rows["fusions"]["b"]) == fusions == 1


def test_runs_that_differ_only_in_where_their_caches_were_are_unchanged(tmp_path, cli):
    """One kernel compiled from two folders (as two runs compile from their own caches):
    its TTIR, TTGIR, LLVM IR and PTX differ in every location's path (and the PTX in its
    DWARF bytes); `irscope diff` counts no stage changed, `--exact` counts them all."""
    a, b = tmp_path / "cold", tmp_path / "warm"
    for path, portable in ((a, False), (b, True)):
        run = Run.create(path, {"name": path.name})
        file_triton(run, "softmax_kernel", portable=portable)
        run.close()
    cold, warm = compile_aot("softmax_kernel"), compile_aot("softmax_kernel", portable=True)
    assert all(cold[kind] != warm[kind] for kind in ("ttir", "ttgir", "llir", "ptx"))
    exact = json.loads(cli("diff", a, b, "--json", "--exact").stdout)["units"][0]
    assert {"ttir", "ttgir", "llir", "ptx"} <= set(exact["stages_changed"])
    normal = json.loads(cli("diff", a, b, "--json").stdout)["units"][0]
    assert set(normal["stages_changed"]) <= {"cubin"}  # its disassembly compares, where made
    cubins = json.loads(cli("diff", a, b, "--json", "--stage", "cubin").stdout)["units"][0]
    assert cubins["stages_changed"] == normal["stages_changed"]  # SASS read, though left out
    text = cli("diff", a, b).stdout
    assert "4 stages" not in text and "ttir" not in text


def test_normalized_lines_are_each_line_normalized_alone():
    """A stage's lines are normalized as one text: no pattern reaches across a line's end
    (a `!dbg` closing one line and the `!42` opening the next stay apart), DWARF sections
    are blanked, and the lines keep their count and order."""
    from irscope.analysis.normalize import normalized, normalized_lines

    lines = ["  %r12 = add.s32 %r3, 1; !dbg", "!42 = !{}",
             "  call @triton_poi_fused_add_6(%x_3) !dbg !9",
             "/tmp/cap/inductor_cache/fk/cfk3x6abcdefghijklmnopqrstu4.py:12",
             "\t.section\t.debug_info", "\t.b8 47", "\t.section\t.text", "  R120 = P0", ""]
    expected, debug = [], False
    for line in lines:
        if line.strip().startswith(".section"):
            debug = ".debug" in line
        expected.append("" if debug else normalized(line).strip())
    assert normalized_lines(lines) == expected
    assert expected[1] == "!42 = !{}" and expected[5] == "" and expected[7] == "R# = P#"
    assert normalized_lines([]) == []


def test_a_gate_on_a_figure_irscope_never_reports_is_a_usage_error(runs, tmp_path):
    """A misspelt figure fails before any output, naming the closest figures; a figure a run
    can hold but neither does (no HLO here: no fusions) is a warning, and the diff passes."""
    a, b = runs
    misspelt = run_main("diff", a, b, "-f", "json", "--fail-on", "ptx.spils > 0", cwd=tmp_path)
    assert (misspelt.returncode, misspelt.stdout) == (2, "")
    assert misspelt.stderr.splitlines() == [
        "irscope: error: --fail-on 'ptx.spils > 0': no figure is named 'ptx.spils' "
        "(closest: ptx.spills, lint.spills, spills)"]
    absent = run_main("diff", a, b, "-f", "json", "--fail-on", "fusions > 0", cwd=tmp_path)
    assert absent.returncode == 0 and absent.stderr.splitlines() == [
        "irscope: warning: --fail-on 'fusions > 0': neither side reports a figure named "
        "'fusions'"]


def test_a_unit_of_several_stages_of_a_kind_has_the_kinds_figures(tmp_path):
    """XLA files LLVM IR per fusion: the unit's llir.* figures combine its LLVM IR stages
    (counts summed), so that `llir.instructions increased` gates it; each stage keeps its
    figures under its own name."""
    modules = [(SAMPLES / "llir" / name).read_text()
               for name in ("add_kernel.sm80.llir", "softmax_kernel.sm90.llir")]
    for side, stages in (("a", modules[:1]), ("b", modules)):
        with Run.create(tmp_path / side, {"name": side}) as run:
            with run.transaction() as w:
                unit = w.add_unit("jit_step", "jax")
                for index, text in enumerate(stages):
                    w.add_stage(unit, "llir", text, name=f"ir-with-opt · fusion.{index}")
    with Run.open(tmp_path / "b") as run:
        figures = build_report(run).units[0].figures()
    apart = [figures[f"ir-with-opt · fusion.{i}.instructions"] for i in range(2)]
    assert figures["llir.instructions"] == sum(apart) and min(apart) > 0
    gated = run_main("diff", tmp_path / "a", tmp_path / "b", "-f", "json", "--fail-on",
                     "llir.instructions increased", cwd=tmp_path)
    assert gated.returncode == 1, gated.stderr
    assert f"jit_step: llir.instructions {apart[0]} -> {sum(apart)}" in gated.stderr


def test_a_kinds_figures_count_each_piece_once_and_graph_snapshots_make_none(tmp_path):
    """A fusion's LLVM IR before and after optimization is one piece in two versions: the
    kind's figures count the last version alone. Snapshots of one FX graph after each pass
    (which of them PyTorch writes depends on its cache state) make no fx_graph.* figure."""
    before, after = [(SAMPLES / "llir" / name).read_text()
                     for name in ("add_kernel.sm80.llir", "softmax_kernel.sm90.llir")]
    graph = SAMPLES / "fx" / "mlp_dead_gate.dynamo_graph.txt"
    with Run.create(tmp_path / "run", {"name": "run"}) as run:
        with run.transaction() as w:
            unit = w.add_unit("jit_step", "jax")
            w.add_stage(unit, "llir", before, name="ir-no-opt · fusion.0")
            w.add_stage(unit, "llir", after, name="ir-with-opt · fusion.0")
            torch_unit = w.add_unit("[0/0] mlp", "torch")
            for name in ("before_pre_grad_graph", "after_pre_grad_graph"):
                w.add_stage(torch_unit, "fx_graph", graph.read_text(), name=name)
    with Run.open(tmp_path / "run") as run:
        jax_unit, torch_unit = (u.figures() for u in build_report(run).units)
    assert jax_unit["llir.instructions"] == jax_unit["ir-with-opt · fusion.0.instructions"]
    assert jax_unit["ir-no-opt · fusion.0.instructions"] != jax_unit["llir.instructions"]
    assert "after_pre_grad_graph.nodes" in torch_unit
    assert not [name for name in torch_unit if name.startswith("fx_graph.")]
