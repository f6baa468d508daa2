"""`irscope report` over real runs: figures against the parsers, the schema, every format."""

from __future__ import annotations

import csv
import io
import json
import re
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from report_helpers import file_triton, schema_errors, triton_run

from irscope.parsers import registry
from irscope.reports.common import Rendering
from irscope.reports import csv_report, markdown, table
from irscope.reports.build import build_report
from irscope.read.stage_counts import CODE_KINDS
from irscope.reports.records import report_from_json, report_to_json
from irscope.store import Run

SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "irscope" / "reports"
                     / "schema.json").read_text())
# %12 = ttg.convert_layout %11 : tensor<...>      %3 = tt.load %2 : tensor<...>
TTGIR_OP = re.compile(r"^\s*(?:%[\w#:,\s%]+=\s*)?\"?(ttg\.convert_layout|tt\.load|"
                      r"ttng\.warp_group_dot)\b", re.MULTILINE)
# @%p1 ld.global.v4.b32 { %r1, ... }, [ %rd1 + 0 ];      st.global.b16 [ %rd9 + 0 ], { %rs1 };
PTX_GLOBAL = re.compile(r"^\s*(?:@!?%p\d+\s+)?((?:ld|st)\.global[\w.:]*)", re.MULTILINE)
HOSTILE = '<script>alert("x")</script>|&amp;'


@pytest.fixture(scope="module")
def run_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("report") / "triton"
    run = triton_run(path)
    file_triton(run, "layernorm_gelu_kernel", name=HOSTILE)
    run.close()
    return path


@pytest.fixture(scope="module")
def report(run_path):
    with Run.open(run_path) as run:
        return build_report(run)


def test_every_figure_is_the_parsers_own(run_path, report):
    """Histogram, totals and categories of each stage record equal a fresh parse of its text."""
    with Run.open(run_path) as run:
        for unit in run.units():
            record = next(u for u in report.units if u.name == unit.name)
            kept = [s for s in run.stages(unit.id)
                    if registry.get(s.kind).module or s.kind in CODE_KINDS]
            assert [s.name for s in record.stages] == [s.name for s in kept]
            assert "cubin" in [s.kind for s in kept]  # kept, unparsed, so a diff sees it change
            for stage, rec in zip(kept, record.stages):
                assert (rec.digest, rec.size) == (stage.blob, stage.size)
                if stage.kind == "cubin":
                    assert not rec.histogram and not rec.totals
                    continue
                fresh = registry.parse(stage.kind, run.read_text(stage)).to_json()
                assert dict(rec.histogram) == fresh["histogram"]
                numeric = {k: v for k, v in fresh["totals"].items()
                           if isinstance(v, (int, float)) and not isinstance(v, bool)}
                assert dict(rec.totals) == numeric
                assert dict(rec.categories) == fresh.get("categories", {})


def test_ttgir_op_counts_match_an_independent_count(run_path, report):
    """tt.load, the wgmma dot and ttg.convert_layout counted by a regex over the TTGIR text."""
    with Run.open(run_path) as run:
        for unit in run.units():
            text = run.read_text(run.stage(unit, "ttgir"))
            expected = Counter(TTGIR_OP.findall(text))
            figures = next(u for u in report.units if u.name == unit.name).figures()
            for op in ("tt.load", "ttng.warp_group_dot", "ttg.convert_layout"):
                assert figures.get(f"ttgir.op.{op}", 0) == expected[op], (unit.name, op)
            if "ttgir.layout_conversions" in figures:
                assert figures["ttgir.layout_conversions"] == expected["ttg.convert_layout"]


def test_ptx_global_memory_ops_match_an_independent_count(run_path, report):
    """Every ld.global*/st.global* opcode counted by a regex over the PTX text."""
    with Run.open(run_path) as run:
        for unit in run.units():
            expected = Counter(PTX_GLOBAL.findall(run.read_text(run.stage(unit, "ptx"))))
            figures = next(u for u in report.units if u.name == unit.name).figures()
            counted = {name.removeprefix("ptx.op."): value for name, value in figures.items()
                       if name.startswith(("ptx.op.ld.global", "ptx.op.st.global"))}
            assert counted == dict(expected) and sum(expected.values()) > 0, unit.name


def test_matmul_has_a_dot_and_the_run_totals_add_up(report):
    matmul = next(u for u in report.units if u.name == "matmul_kernel").figures()
    assert matmul["ttgir.op.ttng.warp_group_dot"] == 1
    run_figures = report.figures()
    for name in ("ttgir.instructions", "ttir.op.tt.load"):
        assert run_figures[name] == sum(u.figures().get(name, 0) for u in report.units)
    assert report.totals == {"units": 4, "graph_breaks": 0, "recompiles": 0}


def test_a_second_report_reads_the_run_figures_back(run_path, report, monkeypatch):
    """A report of an unchanged run reads its records and run figures back from the run
    (kept there by the first): the same figures as its units combined again."""
    def built_again(*args):
        raise AssertionError("the records were built again")

    monkeypatch.setattr("irscope.reports.build._records", built_again)
    with Run.open(run_path) as run:
        again = build_report(run)
    assert again.unit_rollup is not None
    assert again.figures() == replace(again, unit_rollup=None).figures() == report.figures()


@pytest.mark.parametrize("filters", [{}, {"stages": ["ptx"], "unit_pattern": "kernel"}])
def test_a_second_report_reads_no_unit(run_path, report, monkeypatch, filters):
    """The count of stages and the kernels by origin of an unchanged run's report are kept
    with its records: a second report (of the same filters) lists no unit but the profiler
    traces it asks for, and says what the first said. A report of other filters counts its
    own."""
    with Run.open(run_path) as run:
        first = build_report(run, **filters)
    units = Run.units

    def profiles_only(run, framework=None):
        assert framework == "profile", "the units were read"
        return units(run, framework)

    monkeypatch.setattr(Run, "units", profiles_only)
    with Run.open(run_path) as run:
        again = build_report(run, **filters)
    assert (again.stage_count, again.kernels) == (first.stage_count, first.kernels)
    assert first.stage_count.units == len(first.units) > 0
    if filters:
        assert first.stage_count.left_out > 0 and first.stage_count != report.stage_count
    else:
        assert first.stage_count == report.stage_count and first.kernels == report.kernels


def test_json_follows_the_schema_and_reads_back(run_path, cli, tmp_path):
    result = cli("report", run_path, "--format", "json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["schema"] == "irscope.report/1"
    assert schema_errors(doc, SCHEMA) == []
    again = report_from_json(doc)
    assert [u.figures() for u in again.units] == \
        [u.figures() for u in report_from_json(report_to_json(again)).units]
    out = tmp_path / "r.json"
    assert cli("report", run_path, "-o", out).returncode == 0  # format from the extension
    assert json.loads(out.read_text()) == doc


def test_schema_rejects_what_it_should(report):
    doc = report_to_json(report)
    assert schema_errors({**doc, "schema": "irscope.report/2"}, SCHEMA)
    broken = json.loads(json.dumps(doc))
    broken["units"][0]["stages"][0]["histogram"]["tt.load"] = "two"
    assert schema_errors(broken, SCHEMA)


def test_csv_is_one_row_per_unit_stage_and_figure(report):
    rows = list(csv.DictReader(io.StringIO(csv_report.render_report(report))))
    keys = [(r["unit"], r["stage_name"], r["section"], r["key"]) for r in rows]
    assert len(keys) == len(set(keys))
    for unit in report.units:
        for stage in unit.stages:
            ops = {r["key"]: int(r["value"]) for r in rows
                   if r["unit"] == unit.name and r["stage_name"] == stage.name
                   and r["section"] == "op"}
            assert ops == dict(stage.histogram)
    assert {r["unit"] for r in rows} == {u.name for u in report.units}


def test_markdown_has_tables_and_a_details_block_per_unit(report):
    text = markdown.render_report(report)
    assert text.count("<details>") == len(report.units) == text.count("</details>")
    assert "| Unit | Framework |" in text
    assert "<script>" not in text and "&lt;script&gt;" in text
    for line in text.splitlines():  # every table row has the header's column count
        if line.startswith("| Op | Count |"):
            assert line.count("|") == 3


def test_html_is_self_contained_and_escapes_names(run_path, cli, tmp_path):
    out = tmp_path / "report.html"
    result = cli("report", run_path, "--format", "html", "-o", out)
    assert result.returncode == 0, result.stderr
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert page.lower().count("<script") == 1  # the table sorter
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;|&amp;amp;" in page
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", page, re.I)
    assert "http:" not in page.lower() and "https:" not in page.lower()
    assert page.count('<svg class="bars"') > 10  # the op bar charts are drawn inline


@pytest.mark.parametrize("width", [60, 100, 160])
def test_table_fits_the_width(report, width):
    text = table.render_report(report, Rendering(width))
    assert max(len(line) for line in text.splitlines()) <= width
    assert "matmul_kernel" in text


def test_filters_by_stage_family_and_unit(run_path, cli):
    result = cli("report", run_path, "--json", "--stage", "ttgir,ptx", "--unit", "mat*")
    doc = json.loads(result.stdout)
    assert [u["name"] for u in doc["units"]] == ["matmul_kernel"]
    assert {s["kind"] for s in doc["units"][0]["stages"]} <= {"ttgir", "ptx"}
    assert doc["stages"] == ["ttgir", "ptx"]


def test_table_is_the_default_on_stdout_and_missing_runs_fail_cleanly(run_path, cli, tmp_path):
    result = cli("report", run_path)
    assert result.returncode == 0 and "Op counts per stage" in result.stdout
    missing = cli("report", tmp_path / "nope")
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
    assert missing.stderr.startswith("irscope: error:")


def test_events_and_launches_become_unit_and_run_figures(tmp_path):
    """Graph breaks and recompiles are counted per unit and for the run (unit-less ones too)."""
    run = triton_run(tmp_path / "events")
    with run.transaction() as w:
        graph = w.add_unit("[0/0] f", "torch")
        for kernel in run.units("triton"):
            w.add_relation(graph, "launches", kernel.id)
        w.add_event("graph_break", {"reason": "print"}, graph)
        w.add_event("recompile", {"reason": "size"}, graph)
        w.add_event("graph_break", {"reason": "unknown frame"})
    report = build_report(run)
    unit = next(u for u in report.units if u.name == "[0/0] f")
    assert unit.headline == {"kernels_launched": 3, "graph_breaks": 1, "recompiles": 1}
    assert report.totals["graph_breaks"] == 2 and report.totals["recompiles"] == 1


def test_a_markdown_summary_fits_a_pull_request_comment(cli, tmp_path):
    """`report --format md --summary --against BASE`: at most 60 lines with the headline
    figures, GPU time, the top kernels, the problems and what changed since BASE."""
    import shutil

    gpu = Path(__file__).parents[1] / "samples" / "gpu"
    run, base = (shutil.copytree(gpu / name, tmp_path / name)
                 for name in ("torch_profile", "gpt2_provenance"))
    result = cli("report", run, "--format", "md", "--summary", "--against", base)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) <= 60
    text = result.stdout
    assert "63 units" in text and "3 graph breaks" in text and "**GPU time**" in text
    assert "**Top kernels by GPU time**" in text and "| fmha_cutlassB" in text
    assert "### Problems (11)" in text and "ignore_logging_functions" in text
    assert "**Against gpt2_provenance**" in text and "| Unit | Figure | Before | After" in text
    full = cli("report", run, "--format", "md").stdout
    assert len(full.splitlines()) > 500 and "### Problems (11)" in full
    refused = cli("report", run, "--summary")
    assert refused.returncode != 0 and "--format md" in refused.stderr


@pytest.mark.slow
def test_source_lines_of_a_cpu_run_without_provenance_are_unknown_not_zero(tmp_path, cli):
    """torch 2.13's C++ output code writes no Source Nodes comment above a C++ kernel's launch
    (checked here on the output codes themselves): no record links those launches to a line,
    so every line's kernels and instructions are unknown (null, "?"), and each format says why
    and what records them; the extern calls' comments still place the lines."""
    from torch_helpers import torch_dumps

    from irscope.ingest import ingest
    from irscope.parsers import inductor

    run = Run.create(tmp_path / "run")
    ingest(run, [torch_dumps() / "trace"])
    codes = [inductor.parse(run.read_text(stage))
             for stage in run.stages(kinds=["inductor_output_code"])]
    generated = [l for code in codes for l in code.launch_sequence if l.kind == "kernel"]
    assert generated and not any(l.nodes or l.handle for l in generated)
    run.close()
    doc = json.loads(cli("report", tmp_path / "run", "--json").stdout)
    assert doc["source_lines"] and all(row["kernels"] is None and row["instructions"] is None
                                       for row in doc["source_lines"])
    assert f"{len(generated)} of {len(generated)} launches" in doc["source_lines_note"]
    assert "--provenance" in doc["source_lines_note"]
    assert schema_errors(doc, SCHEMA) == []
    markdown_text = cli("report", tmp_path / "run", "--format", "md").stdout
    assert re.search(r"\| \? \| \? \|$", markdown_text, re.M) and "Source Nodes" in markdown_text
    page = tmp_path / "report.html"
    cli("report", tmp_path / "run", "--format", "html", "-o", page)
    assert '<td class="n">?</td>' in page.read_text() and "--provenance" in page.read_text()
    path = doc["source_lines"][0]["path"].rsplit(":", 1)[0]
    lines = cli("where", tmp_path / "run", path)  # the file's lines, as `where FILE` lists them
    assert lines.returncode == 0 and "Kernels and Instructions unknown" in lines.stderr
    listed = json.loads(cli("where", tmp_path / "run", path, "--json").stdout)
    assert all(row["kernels"] is None for row in listed["lines"])
    assert "--provenance" in listed["note"]


def test_occupancy_reads_as_lint_says_it_and_counts_read_as_english(cli, tmp_path):
    """matmul_kernel's occupancy is 0.1875 (lint: 19%): the units' tables say 19%, not 0.188;
    one recompile is "1 recompile"."""
    import shutil

    gpu = Path(__file__).parents[1] / "samples" / "gpu"
    kernels = shutil.copytree(gpu / "triton_kernels", tmp_path / "kernels")
    page = tmp_path / "report.html"
    cli("report", kernels, "--format", "html", "-o", page)
    for text in (cli("report", kernels, "--format", "md").stdout, page.read_text()):
        assert "19%" in text and "0.188" not in text
    graphs = shutil.copytree(gpu / "torch_placeholder_names", tmp_path / "graphs")
    summary = cli("report", graphs, "--format", "md", "--summary").stdout
    assert "2 graphs" in summary and re.search(r"\b1 recompile$", summary, re.M)


def test_a_jax_units_fusions_are_its_optimized_modules_not_one_fusions_own():
    """jax_profile's jit_step holds its optimized HLO (21 fusions) and the HLO of each of its 5
    Triton GEMM fusions (``hlo · gemm_fusion_dot.N``, one fusion each): the unit's `fusions`
    is the module's (it was the last fusion's, 1); layout conversions, which only the fusions'
    Triton IR counts, are still the unit's, summed over its fusions."""
    from conftest import GPU_SAMPLES

    with Run.open(GPU_SAMPLES / "jax_profile", read_only=True) as run:
        unit = next(u for u in build_report(run).units if u.name == "jit_step")
    whole = next(s for s in unit.stages if s.kind == "hlo_after_opt")
    assert unit.headline["fusions"] == whole.total("fusions") == 21
    assert unit.headline["layout_conversions"] == sum(
        s.total("layout_conversions") for s in unit.stages if s.name.startswith("ttir · "))
