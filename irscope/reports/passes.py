"""The report's passes section: each unit's passes that changed the IR, and its ``passes.*``
figures (``passes.total``, ``passes.changed``, ``passes.lines_changed``) that gates read."""

from __future__ import annotations

from dataclasses import replace

from irscope.analysis.passes import listing
from irscope.reports.records import Report
from irscope.read.passes import PASS_KINDS, unit_passes
from irscope.read.view import RunView
from irscope.store import Stage


def with_passes(run: RunView, report: Report) -> Report:
    """``report`` with the passes of its units that have passes filed (the stages they are
    read from fetched at once for the whole run)."""
    units = {(u.framework, u.name): u for u in run.units()}
    stages: dict[int, list[Stage]] = {}
    for stage in run.stages(kinds=PASS_KINDS):
        stages.setdefault(stage.unit_id, []).append(stage)
    records, compared = [], {}
    for record in report.units:
        unit = units.get(record.key)
        held = stages.get(unit.id) if unit is not None else None
        rows = unit_passes(run, unit, held, compared).rows if held else ()
        if not rows:
            records.append(record)
            continue
        shown = listing(rows)
        changed = tuple(r for r in shown.rows if r.changed)
        records.append(replace(record, passes=changed, pass_figures={
            "passes.total": shown.total, "passes.changed": shown.changed,
            "passes.lines_changed": sum(r.lines_changed for r in changed)}))
    return replace(report, units=tuple(records))
