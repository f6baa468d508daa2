"""Terminal reports and diffs as Rich tables that fit the console width."""

from __future__ import annotations

import io

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from irscope.reports.common import (number, percent, run_total_changes, signed, stage_columns,
                                    stage_summary, stage_title, summary_line, unit_columns)
from irscope.reports.diff import Diff
from irscope.reports.records import Report

# Past this many unit × stage rows the terminal shows the unit table only (Rich would take
# seconds, and nobody scrolls 5,000 rows): the other formats hold the full detail.
MAX_STAGE_ROWS = 400
CELL_PADDING = 3  # a Rich cell's padding plus its border


def fitting(columns, rows, width: int, reserved: int) -> list[tuple[str, str]]:
    """The leading figure columns that fit in ``width`` after ``reserved`` cells; the rest
    are dropped (the unit name must stay readable)."""
    kept, used = [], reserved
    for key, title in columns:
        need = max([len(title), *(len(number(r.get(key))) for r in rows)]) + CELL_PADDING
        if used + need > width:
            break
        kept.append((key, title))
        used += need
    return kept


def report_renderable(report: Report, width: int = 120) -> Group:
    """A headline table (one row per unit) and a stage table (one row per unit × stage),
    showing as many figure columns as ``width`` allows."""
    frameworks = max((len(u.framework) for u in report.units), default=9)
    columns = fitting(unit_columns(report), [u.headline for u in report.units], width,
                      16 + max(frameworks, 9) + 2 * CELL_PADDING)
    units = Table(title=summary_line(report), title_justify="left")
    units.add_column("Unit", overflow="fold", min_width=12)
    units.add_column("Framework", overflow="fold")
    for _, title in columns:
        units.add_column(title, justify="right", no_wrap=True)
    for unit in report.units:
        units.add_row(Text(unit.name), unit.framework,
                      *(number(unit.headline.get(key)) for key, _ in columns))

    stage_rows = sum(len(u.stages) for u in report.units)
    if stage_rows > MAX_STAGE_ROWS:
        note = Text(f"{stage_rows:,} stage rows: narrow with --unit/--stage, or write "
                    "--format md/html/csv for every op count", style="italic")
        return Group(units, note)
    records = [s for u in report.units for s in u.stages]
    totals = fitting(stage_columns(report), [s.totals for s in records], width,
                     16 + 12 + 20 + 3 * CELL_PADDING)
    stages = Table(title="Op counts per stage", title_justify="left", expand=True)
    stages.add_column("Unit", overflow="fold", min_width=12, max_width=40)
    stages.add_column("Stage", overflow="fold", min_width=8, max_width=24)
    for _, title in totals:
        stages.add_column(title, justify="right", no_wrap=True)
    stages.add_column("Top ops", overflow="ellipsis", no_wrap=True, ratio=1)
    for unit in report.units:
        for stage in unit.stages:
            stages.add_row(Text(unit.name), stage_title(stage),
                           *(number(stage.totals.get(key)) for key, _ in totals),
                           Text(stage_summary(stage)))
    return Group(units, stages)


def diff_renderable(diff: Diff) -> Group:
    """A unit table (status and how each pair matched) and a table of every changed figure."""
    title = (f"{diff.a.run} -> {diff.b.run}: {diff.count('matched')} matched, "
             f"{diff.count('added')} added, {diff.count('removed')} removed")
    units = Table(title=title, title_justify="left")
    units.add_column("Status", overflow="fold")
    units.add_column("Unit", overflow="fold", ratio=3)
    units.add_column("Matched by", overflow="fold", ratio=1)
    units.add_column("Figures Δ", justify="right", overflow="fold")
    units.add_column("Stages Δ", overflow="fold", ratio=1)
    for unit in diff.units:
        units.add_row(unit.status, Text(unit.name), unit.matched_by or "",
                      str(len(unit.changes)) if unit.status == "matched" else "",
                      _stage_list(unit.stages_changed))

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
    if not changes.row_count:
        return Group(units, Text("No figure changed.", style="italic"))
    return Group(units, changes)


def _stage_list(names: tuple[str, ...], limit: int = 3) -> str:
    return ", ".join(names) if len(names) <= limit else f"{len(names)} stages"


def render_text(renderable, width: int = 120) -> str:
    """Plain text of a renderable at ``width`` columns (for -o FILE and tests)."""
    buffer = io.StringIO()
    Console(file=buffer, width=width, no_color=True, color_system=None,
            highlight=False).print(renderable)
    return buffer.getvalue()


def render_report(report: Report, width: int = 120) -> str:
    return render_text(report_renderable(report, width), width)


def render_diff(diff: Diff, width: int = 120) -> str:
    return render_text(diff_renderable(diff), width)
