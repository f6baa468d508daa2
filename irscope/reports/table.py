"""Terminal reports and diffs as Rich tables that fit the console width."""

from __future__ import annotations

import io

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from irscope.reports.common import (middle, number, percent, printable, run_total_changes,
                                    signed, stage_columns, stage_summary, stage_title,
                                    summary_line, unit_columns)
from irscope.reports.diff import Diff
from irscope.reports.records import Report

# Past this many unit × stage rows the terminal shows the unit table only (Rich would take
# seconds, and nobody scrolls 5,000 rows): the other formats hold the full detail.
MAX_STAGE_ROWS = 400
CELL_PADDING = 3  # a Rich cell's padding plus its border
NAME_MIN, NAME_MAX = 12, 40  # a unit name's column: never narrower, and no wider than needed
NAME_RESERVED = 24  # figure columns give way to a unit name up to this width
STAGE_MAX, TOP_OPS_MIN, TOP_OPS_WIDE = 24, 12, 40


def fitting(columns, rows, width: int, reserved: int) -> list[tuple[str, str, int]]:
    """The leading figure columns, each with its width, that fit in ``width`` after
    ``reserved`` cells; the rest are dropped (the unit name must stay readable)."""
    kept, used = [], reserved
    for key, title in columns:
        need = max([len(title), *(len(number(r.get(key))) for r in rows)])
        if used + need + CELL_PADDING > width:
            break
        kept.append((key, title, need))
        used += need + CELL_PADDING
    return kept


def _fixed(table: Table, title: str, width: int, justify: str = "left") -> None:
    table.add_column(title, justify=justify, no_wrap=True, overflow="ellipsis", width=width,
                     min_width=width, max_width=width)


def report_renderable(report: Report, width: int = 120) -> Group:
    """A headline table (one row per unit) and a stage table (one row per unit × stage), each
    row one line at ``width`` columns: as many figure columns as fit, long names shortened in
    the middle (--format md/json keep them whole)."""
    names = [printable(u.name) for u in report.units]
    longest = min(max((len(n) for n in names), default=NAME_MIN), NAME_MAX)
    framework = max([len("Framework"), *(len(u.framework) for u in report.units)])
    columns = fitting(unit_columns(report), [u.headline for u in report.units], width,
                      1 + 2 * CELL_PADDING + framework + min(longest, NAME_RESERVED))
    name_width = max(NAME_MIN, width - 1 - CELL_PADDING * (2 + len(columns)) - framework
                     - sum(w for *_, w in columns))
    name_width = min(name_width, max(longest, len("Unit")))
    units = Table(title=Text(summary_line(report)), title_justify="left")
    _fixed(units, "Unit", name_width)
    _fixed(units, "Framework", framework)
    for _, title, need in columns:
        _fixed(units, title, need, "right")
    for unit, name in zip(report.units, names):
        units.add_row(Text(middle(name, name_width)), Text(unit.framework),
                      *(number(unit.headline.get(key)) for key, *_ in columns))

    stage_rows = sum(len(u.stages) for u in report.units)
    if stage_rows > MAX_STAGE_ROWS:
        note = Text(f"{stage_rows:,} stage rows: narrow with --unit/--stage, or write "
                    "--format md/html/csv for every op count", style="italic")
        return Group(units, note)
    records = [s for u in report.units for s in u.stages]
    stage_longest = max([len("Stage"), *(len(stage_title(s)) for s in records)])
    stage_width = min(STAGE_MAX, stage_longest)
    unit_width = min(longest, max(NAME_MIN, width // 4))
    totals = fitting(stage_columns(report), [s.totals for s in records], width,
                     1 + 3 * CELL_PADDING + unit_width + stage_width + TOP_OPS_MIN)
    rest = max(TOP_OPS_MIN + stage_width, width - 1 - CELL_PADDING * (3 + len(totals))
               - unit_width - sum(w for *_, w in totals))
    # a wide terminal gives stage titles (TTIR (gemm_fusion_3.ttir.txt)) room first
    stage_width = min(stage_longest, max(stage_width, rest - TOP_OPS_WIDE))
    top_width = rest - stage_width
    stages = Table(title="Op counts per stage", title_justify="left")
    _fixed(stages, "Unit", unit_width)
    _fixed(stages, "Stage", stage_width)
    for _, title, need in totals:
        _fixed(stages, title, need, "right")
    _fixed(stages, "Top ops", top_width)
    for unit, name in zip(report.units, names):
        for stage in unit.stages:
            stages.add_row(Text(middle(name, unit_width)),
                           Text(middle(stage_title(stage), stage_width)),
                           *(number(stage.totals.get(key)) for key, *_ in totals),
                           Text(stage_summary(stage)))
    return Group(units, stages)


def diff_renderable(diff: Diff) -> Group:
    """A unit table (status and how each pair matched) and a table of every changed figure."""
    title = (f"{diff.a.run} -> {diff.b.run}: {diff.count('matched')} matched, "
             f"{diff.count('added')} added, {diff.count('removed')} removed")
    units = Table(title=Text(title), title_justify="left")
    units.add_column("Status", overflow="fold")
    units.add_column("Unit", overflow="fold", ratio=3)
    units.add_column("Matched by", overflow="fold", ratio=1)
    units.add_column("Figures Δ", justify="right", overflow="fold")
    units.add_column("Stages Δ", overflow="fold", ratio=1)
    for unit in diff.units:
        units.add_row(Text(unit.status), Text(unit.name), Text(unit.matched_by or ""),
                      str(len(unit.changes)) if unit.status == "matched" else "",
                      Text(_stage_list(unit.stages_changed)))

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
