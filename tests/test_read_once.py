"""Building a report reads the run's index once per kind of row: the units once, the events
once, the relations once, and each stage kind in one listing (the read layer's RunView)."""

from __future__ import annotations

import re
import shutil
from collections import Counter

import pytest
from conftest import SAMPLES

from irscope.reports.build import build_report
from irscope.store import Run

# "SELECT id, name, framework, ... FROM units ORDER BY id" -> "units"
LISTING = re.compile(r"^\s*SELECT .*? FROM (units|events|relations|stages)\b(.*)$", re.S)


@pytest.mark.parametrize("name", ["torch_cuda", "ddp_nccl", "jax_cuda"])
def test_a_report_lists_each_table_once(name, tmp_path):
    shutil.copytree(SAMPLES / "gpu" / name, tmp_path / name)
    with Run.open(tmp_path / name, read_only=True) as run:
        statements: list[str] = []
        run.db.set_trace_callback(statements.append)
        report = build_report(run)
    listings = Counter()
    kinds_listed: list[str] = []
    for statement in statements:
        found = LISTING.match(statement)
        if found and "WHERE id=" not in found.group(2) and "count(" not in statement:
            listings[found.group(1)] += 1
            if found.group(1) == "stages":
                kinds_listed += re.findall(r"'(\w+)'", found.group(2))
    assert report.units
    assert listings["units"] == 1 and listings["events"] == 1 and listings["relations"] == 1
    assert len(kinds_listed) == len(set(kinds_listed))  # no stage kind listed twice
