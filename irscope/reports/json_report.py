"""Reports and diffs as JSON documents (schemas irscope.report/1 and irscope.diff/1).

Top-level keys are indented; each unit is one compact line, so a 1,000-unit report stays
quick to write (Python's C encoder) and line-diffable. Values are exact: characters a
terminal or an editor would act on or hide are written as JSON's own ``\\uXXXX`` escapes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from irscope.escaping import json_text
from irscope.reports.common import Rendering
from irscope.reports.diff import Diff, diff_to_json
from irscope.reports.records import Report, report_to_json


def dumps(doc: Mapping[str, Any]) -> str:
    """``doc`` as JSON with one line per top-level key and per element of ``units``; a stage
    object several units share (every rank's copy of a kernel) is encoded once."""
    lines = []
    encoded: dict[int, str] = {}

    def unit_json(unit: Mapping[str, Any]) -> str:
        stages = unit.get("stages")
        if not isinstance(stages, list) or not stages:
            return json.dumps(unit, ensure_ascii=False)
        for stage in stages:
            if id(stage) not in encoded:
                encoded[id(stage)] = json.dumps(stage, ensure_ascii=False)
        head = json.dumps({k: v for k, v in unit.items() if k != "stages"}, ensure_ascii=False)
        return (head[:-1] + (", " if len(head) > 2 else "") + '"stages": ['
                + ", ".join(encoded[id(s)] for s in stages) + "]}")

    for key, value in doc.items():
        if key == "units" and value:
            inner = ",\n".join("    " + unit_json(unit) for unit in value)
            text = f"[\n{inner}\n  ]"
        else:
            text = json.dumps(value, ensure_ascii=False)
        lines.append(f"  {json.dumps(key)}: {text}")
    return json_text("{\n" + ",\n".join(lines) + "\n}\n")


def render_report(report: Report, rendering: Rendering = Rendering()) -> str:
    doc = report_to_json(report)
    if rendering.history is not None:  # --history: each figure over the earlier runs
        doc["history"] = {"runs": list(rendering.history.runs), "series": [
            {"unit": unit, "figure": figure, "values": list(values)}
            for (unit, figure), values in rendering.history.series.items()]}
    return dumps(doc)


def render_diff(diff: Diff, rendering: Rendering = Rendering()) -> str:
    """The diff document, with a row for each gate that held."""
    return dumps(diff_to_json(diff, [v.to_json() for v in rendering.violations]))
