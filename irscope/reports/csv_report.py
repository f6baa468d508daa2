"""Reports and diffs as tidy CSV: one row per unit × stage × figure, ready for a dataframe.

Text cells go through ``escaping.csv_cell``: one visible line (a CR or newline in a name
would start a row in some readers) and no formula a spreadsheet would evaluate.
"""

from __future__ import annotations

import csv
import io

from irscope.escaping import csv_cell
from irscope.reports.common import Rendering
from irscope.reports.diff import Diff
from irscope.reports.records import Report

REPORT_HEADER = ("unit", "framework", "source_file", "source_line", "stage", "stage_name",
                 "section", "key", "value")
DIFF_HEADER = ("status", "unit_a", "unit_b", "framework", "matched_by", "figure", "a", "b",
               "delta", "percent")


def report_rows(report: Report):
    """Rows: where the time goes (unit ``(run)``, section ``time``: run totals, then each
    top kernel's figures as ``kernel:<rank>.<figure>``), unit-level figures (section
    ``figure``), then per stage its totals, ops, categories; then each source line's
    figures (section ``source_line``)."""
    if report.time is not None:
        head = ("(run)", "", "", "", "", "")
        for key, value in report.time.totals.items():
            yield (*head, "time", key, value)
        for rank, kernel in enumerate(report.time.kernels, 1):
            for key, value in kernel.items():
                yield (*head, "time", f"kernel:{rank}.{key}", value)
    for unit in report.units:
        head = (unit.name, unit.framework, unit.source_file or "", unit.source_line or "")
        for key, value in unit.headline.items():
            yield (*head, "", "", "figure", key, value)
        for stage in unit.stages:
            where = (*head, stage.kind, stage.name)
            for section, values in (("total", stage.totals), ("op", stage.histogram),
                                    ("category", stage.categories)):
                for key, value in values.items():
                    yield (*where, section, key, value)
    for line in report.source_lines:  # the run's source lines: no unit, section source_line
        for key in ("forward", "backward", "inference", "other", "kernels", "instructions"):
            yield ("", "", line.path, line.line, "", "", "source_line", key, getattr(line, key))


def diff_rows(diff: Diff):
    """Rows: run totals (status ``total``), then each changed figure of matched units, then
    one row per added or removed unit (figure empty)."""
    def blank(value):
        return "" if value is None else value

    def pct(d):
        return "" if d.percent is None else round(d.percent, 3)

    for d in diff.totals:
        yield ("total", "", "", "", "", d.name, blank(d.a), blank(d.b), blank(d.delta), pct(d))
    for unit in diff.units:
        names = (unit.a.name if unit.a else "", unit.b.name if unit.b else "", unit.framework,
                 unit.matched_by or "")
        if unit.status != "matched":
            yield (unit.status, *names, "", "", "", "", "")
        for d in unit.changes:
            yield (unit.status, *names, d.name, blank(d.a), blank(d.b), blank(d.delta), pct(d))


def _csv(header, rows) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows([csv_cell(value) for value in row] for row in rows)
    return buffer.getvalue()


def render_report(report: Report, rendering: Rendering = Rendering()) -> str:
    return _csv(REPORT_HEADER, report_rows(report))


def render_diff(diff: Diff, rendering: Rendering = Rendering()) -> str:
    return _csv(DIFF_HEADER, diff_rows(diff))
