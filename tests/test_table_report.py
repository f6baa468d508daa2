"""The terminal report at a terminal's width: every row one line, long names cut in the middle."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from irscope.reports.common import Rendering
from irscope.reports import json_report, markdown, table
from irscope.reports.common import middle
from irscope.reports.build import build_report
from irscope.reports.records import Report, StageRecord, UnitRecord
from irscope.reports.common import COMPILE_TIME_SHOWN, SOURCE_LINES_SHOWN
from irscope.store import Run

SAMPLES = Path(__file__).parent.parent / "samples" / "gpu"


def rows(text: str) -> list[str]:
    """The body rows of every table (lines between the header rule and the bottom rule)."""
    out, inside = [], False
    for line in text.splitlines():
        if line.startswith("┡"):
            inside = True
        elif line.startswith("└"):
            inside = False
        elif inside:
            out.append(line)
    return out


@pytest.mark.parametrize("sample", ["torch_cuda", "triton_kernels", "jax_cuda"])
@pytest.mark.parametrize("width", [80, 120])
def test_every_row_is_one_line_at_the_terminals_width(sample, width):
    with Run.open(SAMPLES / sample) as run:
        report = build_report(run)
    text = table.render_report(report, Rendering(width))
    assert max(len(line) for line in text.splitlines()) <= width
    stages = sum(len(u.stages) for u in report.units)
    expected = len(report.units) + (stages if stages <= table.MAX_STAGE_ROWS else 0)
    expected += sum(len(u.passes) for u in report.units)  # the passes that changed the IR
    expected += min(len(report.source_lines), SOURCE_LINES_SHOWN)  # the busiest source lines
    expected += min(len(report.compile_time), COMPILE_TIME_SHOWN)  # the slowest compiles
    assert len(rows(text)) == expected


def test_long_names_are_cut_in_the_middle_and_kept_whole_elsewhere():
    name = "triton_per_fused_native_layer_norm_1-1991bdd6" * 2 + "\x1b[31m"
    report = Report("r", None, (UnitRecord(name, "triton", stages=(
        StageRecord("ptx", "ptx", {"mov.u32": 3}, {"instructions": 3}),),
        headline={"registers": 32}),), {"units": 1})
    text = table.render_report(report, Rendering(80))
    assert "per_native" in text and "…" in text and "1991bdd6␛[31m" in text
    assert "\x1b" not in text and len(rows(text)) == 2
    doc = json.loads(json_report.render_report(report))
    assert doc["units"][0]["name"] == name  # whole, the escape as JSON's \u001b
    assert name[:-5] in markdown.render_report(report)


def test_middle_keeps_both_ends():
    assert middle("abcdefghij", 5) == "ab…ij"
    assert middle("abc", 5) == "abc"
    assert len(middle("x" * 100, 17)) == 17


@pytest.mark.parametrize("width", [80, 120])
def test_a_diff_is_one_line_a_row_too(width):
    from irscope.reports.diff import diff_reports

    with Run.open(SAMPLES / "torch_cuda") as a, Run.open(SAMPLES / "torch_cuda_bf16") as b:
        diff = diff_reports(build_report(a), build_report(b))
    text = table.render_diff(diff, Rendering(width))
    assert max(len(line) for line in text.splitlines()) <= width
    changes = sum(len(u.changes) for u in diff.units) + len(
        [d for d in diff.totals if ".op." not in d.name])
    assert len(rows(text)) == len(diff.units) + changes


def test_at_80_columns_the_kernels_rows_show_their_figures():
    """The profiled GPT-2 at 80 columns: the figure columns kept are those most rows have
    (time, registers, spills), not graph columns that read "-" on every kernel's row."""
    with Run.open(SAMPLES / "torch_profile") as run:
        text = table.render_report(build_report(run), Rendering(80))
    units = text[text.index("torch_profile: 63 units"):]
    header = next(line for line in units.splitlines() if "Unit" in line)
    assert "GPU µs" in header and "Regs" in header and "Kernels" not in header
    titles = [cell.strip() for cell in header.split("┃")[1:-1]]
    kernels = [[cell.strip() for cell in line.split("│")[1:-1]]
               for line in units.splitlines() if "│ triton " in line]
    assert len(kernels) > 40
    assert all(re.fullmatch(r"\d+", row[titles.index("Regs")]) for row in kernels)
    timed = [row for row in kernels if row[titles.index("GPU µs")] != "-"]
    assert len(timed) >= 25  # the configurations launched (the others never ran)
    assert all(len(line) <= 80 for line in text.splitlines())


def test_a_piped_table_keeps_every_column_and_whole_names(monkeypatch, tmp_path):
    """Written to a pipe with COLUMNS unset, the table is as wide as it needs (as ls's
    listing is): every figure column and every name whole; COLUMNS=80 still fits 80."""
    from conftest import run_main
    from irscope.reports.common import unit_columns

    with Run.open(SAMPLES / "torch_cuda") as run:
        report = build_report(run)
    titles = {title for _, title in unit_columns(report)}

    def header(text: str) -> set[str]:
        return {cell.strip() for cell in next(line for line in text.splitlines()
                                              if "┃ Unit" in line).split("┃")[1:-1]}

    monkeypatch.delenv("COLUMNS", raising=False)
    piped = run_main("report", SAMPLES / "torch_cuda", cwd=tmp_path).stdout
    assert titles <= header(piped) and all(u.name in piped for u in report.units)
    monkeypatch.setenv("COLUMNS", "80")
    narrow = run_main("report", SAMPLES / "torch_cuda", cwd=tmp_path).stdout
    assert not titles <= header(narrow) and max(map(len, narrow.splitlines())) <= 80


def test_names_cut_to_fit_still_tell_their_rows_apart():
    """XLA's LLVM IR before and after optimization of each fusion, and Inductor's two
    provenance records of one graph: stage titles and figure names that share their start
    and end read apart at 100 and at 80 columns."""
    from irscope.reports.diff import diff_reports

    fusions = ("add_tanh_fusion", "multiply_add_fusion.1", "multiply_subtract_fusion.1")
    stages = tuple(StageRecord("llir", f"{when} · {fusion}", {"add": n}, {"instructions": n})
                   for n, fusion in enumerate(fusions, 1) for when in ("ir-no-opt", "ir-with-opt"))
    before = Report("a", None, (UnitRecord("jit_train_step", "jax", stages=stages),), {})
    for width in (80, 100):
        cells = [line.split("│")[2].strip() for line in rows(table.render_report(
            before, Rendering(width)))]
        shown = [cell for cell in cells if cell != "jax"]  # the stage table's, not the unit's
        assert len(shown) == len(set(shown)) == 6 and "…" in "".join(shown), shown
    records = ("inductor_provenance_tracking_kernel_stack_traces",
               "inductor_provenance_tracking_node_mappings")
    graphs = [UnitRecord("[0/0] forward", "torch", stages=tuple(
        StageRecord("inductor_provenance", f"{name}#{i}", {}, {"kernels": i + n})
        for name in records for i in (1, 2))) for n in (0, 1)]
    diff = diff_reports(*(Report(side, None, (graph,), {}) for side, graph in zip("ab", graphs)))
    for width in (60, 80):
        figures = [tuple(cell.strip() for cell in line.split("│")[1:3]) for line in rows(
            table.render_diff(diff, Rendering(width))) if "matched" not in line]
        assert len(figures) == len(set(figures)) == 8, figures  # (unit, figure) apart
