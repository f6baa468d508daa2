"""Reports and diffs as JSON documents (schemas irscope.report/1 and irscope.diff/1)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from irscope.reports.diff import Diff, diff_to_json
from irscope.reports.records import Report, report_to_json


def render_report(report: Report) -> str:
    return json.dumps(report_to_json(report), indent=2) + "\n"


def render_diff(diff: Diff, gates: Iterable[Mapping[str, Any]] = ()) -> str:
    return json.dumps(diff_to_json(diff, gates), indent=2) + "\n"
