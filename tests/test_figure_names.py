"""The figure catalogue (irscope.analysis.figure_names, docs/figures.md) holds every figure
irscope reports: each parser's totals on every sample, and every figure of the committed GPU
runs' reports; names no run can hold are not in it."""

from __future__ import annotations

import json

import pytest
from conftest import GPU_SAMPLES, ROOT

from irscope.analysis.figure_names import catalogued, stage_totals
from irscope.read.view import RunView
from irscope.reports.build import report_records
from irscope.store import Run

GOLDEN = ROOT / "tests" / "golden"


def results(node):
    """Every parse result (an object with a kind and totals) in a golden document."""
    if isinstance(node, dict):
        if isinstance(node.get("kind"), str) and isinstance(node.get("totals"), dict):
            yield node
        for value in node.values():
            yield from results(value)
    elif isinstance(node, list):
        for value in node:
            yield from results(value)


def test_every_total_a_parser_reports_on_the_samples_is_its_kinds():
    totals = stage_totals()
    found = {(r["kind"], total) for path in GOLDEN.rglob("*.json")
             for r in results(json.loads(path.read_text())) for total in r["totals"]}
    assert found and {(k, t) for k, t in found if t not in totals.get(k, ())} == set()


def test_every_figure_of_the_gpu_samples_is_catalogued():
    names = set()
    for path in sorted(p for p in GPU_SAMPLES.iterdir() if (p / "index.sqlite").is_file()):
        with Run.open(path, read_only=True) as run:
            report = report_records(RunView(run), None, None)
        names.update(report.figures())
        names.update(name for unit in report.units for name in unit.figures())
    assert len(names) > 1000 and sorted(n for n in names if not catalogued(n)) == []


@pytest.mark.parametrize("name", ["ptx.spils", "spils", "llir.instruction", "lint.no_rule",
                                  "forward.spills", "ptx", "rank1.units"])
def test_a_name_no_run_can_hold_is_not_catalogued(name):
    assert not catalogued(name)
