"""The report of every committed GPU sample run, byte for byte: a change to how runs are read
(the read layer, the kernel record, the store) leaves every figure where it was, and a change
that means to move a figure shows it in the golden's diff.

Regenerate after an intended change, then read the diff:
    IRSCOPE_UPDATE_GOLDENS=1 .venv/bin/python -m pytest tests/test_report_goldens.py -q
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from conftest import ROOT, SAMPLES

from irscope.reports.build import build_report
from irscope.reports.json_report import render_report
from irscope.store import INDEX, Run

GOLDEN = ROOT / "tests" / "golden" / "reports"
UPDATE = os.environ.get("IRSCOPE_UPDATE_GOLDENS") == "1"
RUNS = sorted(p.name for p in (SAMPLES / "gpu").iterdir() if (p / INDEX).is_file())


@pytest.mark.parametrize("name", RUNS)
def test_report_json_of_a_committed_run_is_unchanged(name, tmp_path):
    copy = tmp_path / name
    shutil.copytree(SAMPLES / "gpu" / name, copy)
    with Run.open(copy, read_only=True) as run:
        text = render_report(build_report(run)).replace(str(copy), name)
    golden = GOLDEN / f"{name}.json"
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text, encoding="utf-8")
    assert golden.is_file(), f"no golden for {name}: run with IRSCOPE_UPDATE_GOLDENS=1"
    assert text == golden.read_text(encoding="utf-8")


def test_no_golden_without_its_run():
    orphans = sorted(p.stem for p in GOLDEN.glob("*.json") if p.stem not in RUNS)
    assert orphans == []
