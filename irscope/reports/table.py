"""Terminal reports and diffs as Rich tables that fit the console width."""

from __future__ import annotations

import io

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from irscope.reports.common import (number, run_total_changes, percent, signed, stage_columns, stage_title,
                                    summary_line, top_ops, unit_columns)
from irscope.reports.diff import Diff
from irscope.reports.records import Report


def report_renderable(report: Report) -> Group:
    """A headline table (one row per unit) and a stage table (one row per unit × stage)."""
    columns = unit_columns(report)
    units = Table(title=summary_line(report), title_justify="left", expand=False)
    units.add_column("Unit", overflow="fold", min_width=8)
    units.add_column("Framework", no_wrap=True)
    for _, title in columns:
        units.add_column(title, justify="right", no_wrap=True)
    for unit in report.units:
        units.add_row(Text(unit.name), unit.framework,
                      *(number(unit.headline.get(key)) for key, _ in columns))

    totals = stage_columns(report)
    stages = Table(title="Op counts per stage", title_justify="left", expand=True)
    stages.add_column("Unit", overflow="fold", min_width=8, max_width=40)
    stages.add_column("Stage", overflow="fold", min_width=5, max_width=24)
    for _, title in totals:
        stages.add_column(title, justify="right", no_wrap=True)
    stages.add_column("Top ops", overflow="ellipsis", no_wrap=True, ratio=1)
    for unit in report.units:
        for stage in unit.stages:
            stages.add_row(Text(unit.name), stage_title(stage),
                           *(number(stage.totals.get(key)) for key, _ in totals),
                           Text(top_ops(stage.histogram)))
    return Group(units, stages)


def diff_renderable(diff: Diff) -> Group:
    """A unit table (status and how each pair matched) and a table of every changed figure."""
    title = (f"{diff.a.run} -> {diff.b.run}: {diff.count('matched')} matched, "
             f"{diff.count('added')} added, {diff.count('removed')} removed")
    units = Table(title=title, title_justify="left")
    for name in ("Status", "Unit", "Framework", "Matched by", "Changed figures"):
        units.add_column(name, overflow="fold")
    for unit in diff.units:
        units.add_row(unit.status, Text(unit.name), unit.framework, unit.matched_by or "",
                      str(len(unit.changes)) if unit.status == "matched" else "")

    changes = Table(title="Changes", title_justify="left")
    changes.add_column("Unit", overflow="fold", min_width=8, max_width=40)
    changes.add_column("Figure", overflow="fold", min_width=8)
    for name in ("A", "B", "Δ", "%"):
        changes.add_column(name, justify="right", no_wrap=True)
    for delta in run_total_changes(diff):
        changes.add_row("(run total)", Text(delta.name), number(delta.a), number(delta.b),
                        signed(delta.delta), percent(delta))
    for unit in diff.units:
        for delta in unit.changes:
            changes.add_row(Text(unit.name), Text(delta.name), number(delta.a), number(delta.b),
                            signed(delta.delta), percent(delta))
    return Group(units, changes)


def print_renderable(renderable, console: Console) -> None:
    console.print(renderable)


def render_text(renderable, width: int = 120) -> str:
    """Plain text of a renderable at ``width`` columns (for -o FILE and tests)."""
    buffer = io.StringIO()
    Console(file=buffer, width=width, no_color=True, color_system=None,
            highlight=False).print(renderable)
    return buffer.getvalue()


def render_report(report: Report, width: int = 120) -> str:
    return render_text(report_renderable(report), width)


def render_diff(diff: Diff, width: int = 120) -> str:
    return render_text(diff_renderable(diff), width)
