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
    object several units share (every rank's copy of a kernel) is encoded, and made safe
    (``json_text``), once. The document is joined from its pieces once (a 12,000-unit report
    is 57 MB)."""
    pieces = ["{\n"]
    encoded: dict[int, str] = {}

    def add_unit(unit: Mapping[str, Any]) -> None:
        stages = unit.get("stages")
        if not isinstance(stages, list) or not stages:
            pieces.append(_encoded(unit))
            return
        head = _encoded({k: v for k, v in unit.items() if k != "stages"})
        pieces.extend((head[:-1], ", " if len(head) > 2 else "", '"stages": ['))
        for place, stage in enumerate(stages):
            if id(stage) not in encoded:
                encoded[id(stage)] = _encoded(stage)
            pieces.extend((", " if place else "", encoded[id(stage)]))
        pieces.append("]}")

    for line, (key, value) in enumerate(doc.items()):
        if line:
            pieces.append(",\n")
        pieces.append(f"  {_encoded(key)}: ")
        if key == "units" and value:
            pieces.append("[\n")
            for place, unit in enumerate(value):
                pieces.append(",\n    " if place else "    ")
                add_unit(unit)
            pieces.append("\n  ]")
        else:
            pieces.append(_encoded(value))
    pieces.append("\n}\n")
    return "".join(pieces)


def _encoded(value: Any) -> str:
    """``value`` as compact JSON, characters a terminal acts on or hides escaped."""
    return json_text(json.dumps(value, ensure_ascii=False))


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
