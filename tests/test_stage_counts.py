"""One count of a run's units and stages in every front end: the TUI's header, `irscope ls`,
the inspect summary and the report (text, Markdown, HTML, JSON) say how many stages the units
shown hold, how many of them the report records, and what the others are; the list of runs
counts the same units."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from conftest import run_main
from tui_helpers import copy_sample, synchronous, until

from irscope.read.stage_counts import hidden_text, shown_stage_count
from irscope.read.summary import read_summary
from irscope.reports.build import build_report
from irscope.reports.summary import to_text
from irscope.store import Run
from irscope.store.units import shown_units

# The committed runs' stages by hand: what the report records and what it leaves out.
# gpt2_provenance: PyTorch's cache and compile records, the graph-break reasons (text);
# jax_profile: 35 eager ops hidden, the XLA dump's other files, a cost analysis, the measured
# launches; thunder_cuda: nvFuser's CUDA sources are compiled code and reported.
EXPECTED = {
    "gpt2_provenance": ("14 units", "111 stages (89 reported; 19 metadata, 3 text)"),
    "jax_profile": ("2 units", "94 stages (79 reported; 13 text, 1 cost analysis, "
                               "1 launch table)"),
    "thunder_cuda": ("5 units", "28 stages (25 reported; 3 text)"),
}


def _by_hand(run: Run) -> tuple[int, Counter]:
    """The shown units' stages, raw records aside, and the kinds of those the report lacks."""
    shown, _ = shown_units(run.units())
    report = build_report(run)
    held = Counter(s.kind for u in shown for s in run.stages(u.id) if s.kind != "raw")
    recorded = Counter(s.kind for u in report.units for s in u.stages)
    return sum(held.values()), held - recorded


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_front_end_counts_the_same_stages(name, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # the table's title on one line
    run_path = copy_sample(name, tmp_path / name)
    units, stages = EXPECTED[name]
    line = f"{units}, {stages}"
    with Run.open(run_path) as run:
        total, left_out = _by_hand(run)
        report = build_report(run)
        summary = to_text(read_summary(run))
    count = report.stage_count
    assert count.stages == total and count.reported == sum(len(u.stages) for u in report.units)
    assert dict(count.others) == dict(left_out)  # exactly the stages the report lacks
    assert count.units == len(report.units)
    assert f"  {stages}\n" in summary
    for form in ("table", "md", "html"):
        shown = run_main("report", run_path, "--format", form, cwd=tmp_path).stdout
        assert f"{name}: {line}" in shown, form
    doc = json.loads(run_main("report", run_path, "--format", "json", cwd=tmp_path).stdout)
    assert (doc["stage_count"]["stages"], doc["stage_count"]["reported"]) == (
        count.stages, count.reported)
    assert run_main("ls", run_path, cwd=tmp_path).stdout.splitlines()[-1] == line
    # the list of runs counts the units the others show (it counted jax_profile's 35 eager
    # ops among 37 units), and names the hidden ones as ls does
    listed = run_main("runs", "--root", tmp_path, cwd=tmp_path)
    assert listed.stdout.splitlines()[1].split()[2] == str(count.units)
    hidden = json.loads(run_main("runs", "--root", tmp_path, "--json", cwd=tmp_path).stdout)
    assert [(r["units"], r["hidden_units"]) for r in hidden] == [(count.units,
                                                                  count.hidden_units)]
    if count.hidden_units:
        shown = run_main("ls", run_path, cwd=tmp_path).stderr
        assert hidden_text(count.hidden_units) in shown and \
            f"{name} {hidden_text(count.hidden_units)}" in listed.stderr


@synchronous
async def test_the_tui_header_counts_what_the_report_counts(tmp_path):
    """It counted every unit's stages, eager ops and metadata among them (jax_profile: 37
    units and 234 stages, where the report had 2 units and 79 stages); it now says what the
    report leaves out, and on a narrow terminal at least how many it reports."""
    from irscope.tui.app import IrscopeApp

    run_path = copy_sample("jax_profile", tmp_path / "jax_profile")
    app = IrscopeApp(run_path)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: app.counted is not None and app.checked)
        units, stages = EXPECTED["jax_profile"]
        assert app.sub_title.startswith(f"jax_profile · {units} · {stages}")
        await pilot.resize_terminal(80, 24)
        await until(pilot, lambda: "reported; " not in app.sub_title)
        assert app.sub_title.startswith("jax_profile · 94 stages (79 reported)")


def test_a_stage_filter_counts_the_stages_it_leaves_out(tmp_path):
    run_path = copy_sample("gpt2_provenance", tmp_path / "gpt2")
    with Run.open(run_path) as run:
        report = build_report(run, stages=["ptx"])
        every = shown_stage_count(run)
    count = report.stage_count
    ptx = sum(len(u.stages) for u in report.units)
    assert (count.stages, count.reported) == (every.stages, ptx)
    assert count.left_out == every.reported - ptx and dict(count.others) == dict(every.others)
    assert count.stages_text() == (f"111 stages ({ptx} reported; {every.reported - ptx} left "
                                   "out by --stage, 19 metadata, 3 text)")
