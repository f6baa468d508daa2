"""Terminal reports and diffs as Rich tables that fit the console width."""

from __future__ import annotations

import io

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from irscope.browse.tree import short_names
from irscope.escaping import one_line, printable
from irscope.reports.common import (SOURCE_LINE_HEADER, Rendering, history_rows, kernel_lines,
                                    middle, number, percent, run_total_changes, signed,
                                    source_line_rows, source_lines_title, stage_columns,
                                    stage_summary, stage_title, summary_line, unit_columns)
from irscope.reports.common import compile_time_table, compile_time_title, headline_text
from irscope.reports.diff import Diff
from irscope.reports.records import Report
from irscope.reports.timing import LINES_TITLE, headline, numeric_from, section_tables

# Past this many unit × stage rows the terminal shows the unit table only (Rich would take
# seconds, and nobody scrolls 5,000 rows): the other formats hold the full detail.
MAX_STAGE_ROWS = 400
CELL_PADDING = 3  # a Rich cell's padding plus its border
NAME_MIN, NAME_MAX = 12, 40  # a unit name's column: never narrower, and no wider than needed
NAME_RESERVED = 24  # figure columns give way to a unit name up to this width
ESSENTIAL_FIGURES = 2  # a time table's share and total, shown before its names widen
STAGE_MAX, TOP_OPS_MIN, TOP_OPS_WIDE = 24, 12, 40
FIRST_COLUMNS = frozenset({"gpu_time_us"})  # kept whatever the width, where the run has it
# The width of a table written to a pipe or a file with COLUMNS unset: every column, each as
# wide as what it holds, names whole (as ls writes to a pipe)
WHOLE = 1 << 20


def name_limit(width: int) -> int:
    """How long a name may be shown at ``width``: NAME_MAX on a terminal, whole when WHOLE."""
    return NAME_MAX if width < WHOLE else WHOLE


def fitting(columns, rows, width: int, reserved: int) -> list[tuple[str, str, int]]:
    """The figure columns, each with its width, that fit in ``width`` after ``reserved``
    cells, those most rows have first (a narrow terminal shows the kernels' registers and
    spills, not three graph columns that read "-" on every kernel's row), shown in their
    usual order; the rest are dropped (the unit name must stay readable)."""
    rows = list(rows)
    order = sorted(range(len(columns)), key=lambda i: (
        columns[i][0] not in FIRST_COLUMNS, -sum(1 for r in rows if columns[i][0] in r), i))
    kept, used = set(), reserved
    for index in order:
        key, title = columns[index]
        need = max([len(title), *(len(headline_text(key, r.get(key))) for r in rows)])
        if used + need + CELL_PADDING <= width:
            kept.add(index)
            used += need + CELL_PADDING
    return [(columns[i][0], columns[i][1], max([len(columns[i][1]), *(
        len(headline_text(columns[i][0], r.get(columns[i][0]))) for r in rows)]))
            for i in sorted(kept)]


def _text(value: object, width: int | None = None) -> Text:
    """A cell or title from a run's names: one visible line (a newline in a name would fake
    a row, an escape sequence reach the file), cut in the middle to ``width``."""
    line = one_line(value)
    return Text(line if width is None else middle(line, width))


def _fixed(table: Table, title: str, width: int, justify: str = "left") -> None:
    table.add_column(title, justify=justify, no_wrap=True, overflow="ellipsis", width=width,
                     min_width=width, max_width=width)


def report_renderable(report: Report, width: int = 120,
                      rendering: Rendering = Rendering()) -> Group:
    """A headline table (one row per unit) and a stage table (one row per unit × stage), each
    row one line at ``width`` columns: as many figure columns as fit, long names shortened
    where they do not tell rows apart (whole at WHOLE, as --format md/json keep them)."""
    names = [one_line(u.name) for u in report.units]
    frameworks = [one_line(u.framework) for u in report.units]
    longest = min(max((len(n) for n in names), default=NAME_MIN), name_limit(width))
    framework = max([len("Framework"), *(len(f) for f in frameworks)])
    columns = fitting(unit_columns(report), [u.headline for u in report.units], width,
                      1 + 2 * CELL_PADDING + framework + min(longest, NAME_RESERVED))
    name_width = max(NAME_MIN, width - 1 - CELL_PADDING * (2 + len(columns)) - framework
                     - sum(w for *_, w in columns))
    name_width = min(name_width, max(longest, len("Unit")))
    # the title: the run's counts, then what its kernel units are (read.kernel_origins)
    title = Text("\n").join([_text(summary_line(report)), *map(_text, kernel_lines(report))])
    units = Table(title=title, title_justify="left")
    _fixed(units, "Unit", name_width)
    _fixed(units, "Framework", framework)
    for _, title, need in columns:
        _fixed(units, title, need, "right")
    shown = short_names(names, name_width)  # told apart: their ends kept, more where alike
    for unit, name, framework_name in zip(report.units, names, frameworks):
        units.add_row(_text(shown[name]), _text(framework_name),
                      *(headline_text(key, unit.headline.get(key)) for key, *_ in columns))

    stage_rows = sum(len(u.stages) for u in report.units)
    if stage_rows > MAX_STAGE_ROWS:
        note = Text(f"{stage_rows:,} stage rows: narrow with --unit/--stage, or write "
                    "--format md/html/csv for every op count", style="italic")
        return Group(*_time_tables(report, width), units, note)
    records = [s for u in report.units for s in u.stages]
    titles = [[one_line(stage_title(s)) for s in unit.stages] for unit in report.units]
    stage_longest = max([len("Stage"), *(len(t) for unit in titles for t in unit)])
    stage_width = min(STAGE_MAX, stage_longest)
    unit_width = min(longest, max(NAME_MIN, width // 4))
    totals = fitting(stage_columns(report), [s.totals for s in records], width,
                     1 + 3 * CELL_PADDING + unit_width + stage_width + TOP_OPS_MIN)
    rest = max(TOP_OPS_MIN + stage_width, width - 1 - CELL_PADDING * (3 + len(totals))
               - unit_width - sum(w for *_, w in totals))
    # a wide terminal gives stage titles (TTIR (gemm_fusion_3.ttir.txt)) room first
    stage_width = min(stage_longest, max(stage_width, rest - TOP_OPS_WIDE))
    summaries = [one_line(stage_summary(s)) for s in records]
    top_width = min(rest - stage_width, max([TOP_OPS_MIN, *map(len, summaries)]))
    while top_width > TOP_OPS_MIN and _alike(titles, stage_width):  # top ops give way
        stage_width, top_width = stage_width + 1, top_width - 1
    stages = Table(title="Op counts per stage", title_justify="left")
    _fixed(stages, "Unit", unit_width)
    _fixed(stages, "Stage", stage_width)
    for _, title, need in totals:
        _fixed(stages, title, need, "right")
    _fixed(stages, "Top ops", top_width)
    unit_names = short_names(names, unit_width)  # rows that differ read apart
    summary = iter(summaries)  # in the order of records: unit by unit, stage by stage
    for unit, name, unit_titles in zip(report.units, names, titles):
        shown = short_names(unit_titles, stage_width)
        for stage, title in zip(unit.stages, unit_titles):
            stages.add_row(_text(unit_names[name]), _text(shown[title]),
                           *(number(stage.totals.get(key)) for key, *_ in totals),
                           _text(next(summary)))
    return Group(*_time_tables(report, width), units, stages, *_compile_time_table(report),
                 *_passes_table(report, width),
                 *_source_lines_table(report, width), *_history_table(rendering))


def _alike(titles: list[list[str]], width: int) -> bool:
    """Whether two different stage titles of one unit would read the same at ``width``."""
    return any(len(set(short_names(unit, width).values())) < len(set(unit))
               for unit in titles if max(map(len, unit), default=0) > width)


def _history_table(rendering: Rendering) -> list[Table]:
    """The figures that changed over the earlier runs (--history), oldest first."""
    changed = history_rows(rendering)
    if not changed:
        return []
    table = Table(title=f"History (last {len(rendering.history.runs)} runs, then this one)",
                  title_justify="left")
    for title in ("Unit", "Figure", "Values"):
        table.add_column(title, overflow="fold")
    for unit, figure, values in changed:
        table.add_row(_text(unit), _text(figure), _text(values))
    return [table]


def _time_tables(report: Report, width: int) -> list:
    """Where the GPU time goes, before everything else (none when the run measured none):
    names cut in the middle, the figure columns that fit at ``width``."""
    if report.time is None:
        return []
    found: list = [Text(one_line("Where the time goes: " + headline(report.time)), style="bold")]
    found += [Text(one_line(f"  {note}"), style="italic") for note in report.time.notes]
    for title, header, rows in section_tables(report.time):
        if title == LINES_TITLE:  # each line by its file's name, as the kernels' rows name it
            rows = [[row[0].rsplit("/", 1)[-1], *row[1:]] for row in rows]
        first = numeric_from(header)
        needs = [max([len(name), *(len(row[i]) for row in rows)])
                 for i, name in enumerate(header)]
        names = [min(need, name_limit(width)) for need in needs[:first]]
        # the first figures (share, time) beside names NAME_MIN wide; the other figures while
        # the names keep up to NAME_RESERVED each; what is left widens the names
        kept, fixed = list(range(first)), 1 + CELL_PADDING * first
        for index in range(first, len(header)):
            least = NAME_MIN if index - first < ESSENTIAL_FIGURES else NAME_RESERVED
            if fixed + needs[index] + CELL_PADDING + sum(min(n, least) for n in names) > width:
                break
            kept.append(index)
            fixed += needs[index] + CELL_PADDING
        sizes = _shared_out(names, width - fixed) + needs[first:]
        table = Table(title=title, title_justify="left")
        for index in kept:
            _fixed(table, header[index], sizes[index], "left" if index < first else "right")
        # kernels and source lines cut where they do not tell their rows apart (fmha_cutlassB
        # from fmha_cutlassF; the place of each launch of one kernel from the same lines)
        # (a kernel keeps most of its start: fmha_cutlassB…, sm80_xmma_gemm…)
        apart = {i: short_names([one_line(row[i]) for row in rows], sizes[i],
                                sizes[i] * 2 // 3 if header[i] == "Kernel" else None)
                 for i in range(first) if header[i] in ("Kernel", "Source")}
        for row in rows:
            table.add_row(*(Text(apart[i][one_line(row[i])]) if i in apart else
                            _text(row[i], sizes[i]) for i in kept))
        found.append(table)
    return found


def _shared_out(names: list[int], room: int) -> list[int]:
    """The widths of name columns that need ``names`` characters in ``room`` in all: each
    NAME_MIN (or less when it needs less), then an equal part of what is left, a column that
    needs less than its part giving the rest to the others (a long kernel name beside a
    short phase)."""
    sizes = [min(need, NAME_MIN) for need in names]
    spare = room - sum(sizes)
    while spare > 0:
        wanting = [i for i, need in enumerate(names) if sizes[i] < need]
        if not wanting:
            break
        part = max(1, spare // len(wanting))
        for i in wanting:
            grown = min(names[i], sizes[i] + part, sizes[i] + spare)
            spare -= grown - sizes[i]
            sizes[i] = grown
    return sizes


def _source_lines_table(report: Report, width: int) -> list[Table]:
    """The source lines that produce the most kernels (none without provenance)."""
    if not report.source_lines:
        return []
    table = Table(title=source_lines_title(report), title_justify="left")
    figures = SOURCE_LINE_HEADER[1:]
    rows = source_line_rows(report)
    files = [one_line(location.rsplit("/", 1)[-1]) for location, *_ in rows]
    place = min(max(NAME_MIN, width - 1 - CELL_PADDING * (1 + len(figures))
                    - sum(max(len(f), 6) for f in figures)),
                max([len(SOURCE_LINE_HEADER[0]), *map(len, files)]))
    _fixed(table, SOURCE_LINE_HEADER[0], place)
    for title in figures:
        _fixed(table, title, max(len(title), 6), "right")
    for file, (_, *values) in zip(files, rows):  # the file's name: md, html keep paths
        table.add_row(_text(file, place), *values)
    if report.source_lines_note:
        table.caption, table.caption_justify = report.source_lines_note, "left"
    return [table]


def _compile_time_table(report: Report) -> list[Table]:
    """The slowest compiles by phase (none when the run recorded no compile times); their
    caches are in the md, html and json formats."""
    if not report.compile_time:
        return []
    header, rows = compile_time_table(report)
    table = Table(title=compile_time_title(report), title_justify="left")
    for index, title in enumerate(header[:-1]):
        table.add_column(title, justify="right" if index else "left", no_wrap=True,
                         overflow="ellipsis", min_width=len(title) if index else NAME_MIN)
    for row in rows:
        table.add_row(_text(row[0]), *row[1:-1])
    return [table]


def _passes_table(report: Report, width: int) -> list[Table]:
    """The passes that changed each unit's IR (none when no unit has passes filed), the
    units' names told apart in NAME_MIN columns (whole at WHOLE)."""
    units = [u for u in report.units if u.passes]
    if not units:
        return []
    names = short_names([one_line(u.name) for u in units], NAME_MIN if width < WHOLE else WHOLE)
    table = Table(title="Passes that changed the IR (irscope passes RUN UNIT)",
                  title_justify="left")
    for title, justify, least in (("Unit", "left", NAME_MIN), ("#", "right", 3),
                                  ("Pipeline", "left", 6), ("Pass", "left", 12),
                                  ("Lines ±", "right", 11), ("Op Δ", "right", 6)):
        table.add_column(title, justify=justify, no_wrap=True, overflow="ellipsis",
                         min_width=least)
    for unit in units:
        for r in unit.passes:
            table.add_row(_text(names[one_line(unit.name)]), str(r.index),
                          _text(r.pipeline), _text(r.name), f"+{r.added} -{r.removed}",
                          "" if r.op_delta is None else f"{r.op_delta:+d}")
    return [table]


def diff_renderable(diff: Diff, width: int | None = None) -> Group:
    """A unit table (status and how each pair matched) and a table of every changed figure,
    each row one line at ``width`` columns (the console's when not given; WHOLE: every name
    whole): unit and figure names cut where they do not tell rows apart."""
    width = Console().width if width is None else width
    title = (f"{diff.a.run} -> {diff.b.run}: {diff.count('matched')} matched, "
             f"{diff.count('added')} added, {diff.count('removed')} removed")
    stage_lists = [one_line(_stage_list(u.stages_changed)) for u in diff.units]
    limit = 16 if width < WHOLE else WHOLE
    fixed = [max([len("Status"), *(len(u.status) for u in diff.units)]),
             min(limit, max([len("Matched by"), *(len(u.matched_by or "")
                                                   for u in diff.units)])),
             len("Figures Δ"),
             min(limit, max([len("Stages Δ"), *(len(s) for s in stage_lists)]))]
    unit_names = [one_line(u.name) for u in diff.units]
    name_width = min(max(NAME_MIN, width - 1 - CELL_PADDING * 5 - sum(fixed)),
                     max([len("Unit"), *map(len, unit_names)]))
    units = Table(title=_text(title), title_justify="left")
    _fixed(units, "Status", fixed[0])
    _fixed(units, "Unit", name_width)
    _fixed(units, "Matched by", fixed[1])
    _fixed(units, "Figures Δ", fixed[2], "right")
    _fixed(units, "Stages Δ", fixed[3])
    shown = short_names(unit_names, name_width)
    for unit, name, stages in zip(diff.units, unit_names, stage_lists):
        units.add_row(_text(unit.status), _text(shown[name]),
                      _text(unit.matched_by or ""),
                      str(len(unit.changes)) if unit.status == "matched" else "", Text(stages))

    rows = [("(run total)", d) for d in run_total_changes(diff)]
    rows += [(one_line(u.name), d) for u in diff.units for d in u.changes]
    if not rows:
        return Group(units, Text("No figure changed.", style="italic"))
    cells = [(number(d.a), number(d.b), signed(d.delta), percent(d)) for _, d in rows]
    numbers = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate("ABΔ%")]
    names = width - 1 - CELL_PADDING * 6 - sum(numbers)
    unit_width = min(max(len(n) for n, _ in rows), max(8, names // 2))
    figure_names = [one_line(delta.name) for _, delta in rows]
    figure_width = min(max(8, names - unit_width), max([len("Figure"), *map(len, figure_names)]))
    changes = Table(title="Changes", title_justify="left")
    _fixed(changes, "Unit", unit_width)
    _fixed(changes, "Figure", figure_width)
    for name, need in zip(("A", "B", "Δ", "%"), numbers):
        _fixed(changes, name, need, "right")
    unit_names = short_names([name for name, _ in rows], unit_width)
    figures = short_names(figure_names, figure_width)
    for (name, _), figure, numbers_of_row in zip(rows, figure_names, cells):
        changes.add_row(_text(unit_names[name]), _text(figures[figure]), *numbers_of_row)
    return Group(units, changes)


def _stage_list(names: tuple[str, ...], limit: int = 3) -> str:
    return ", ".join(names) if len(names) <= limit else f"{len(names)} stages"


def render_text(renderable, width: int = 120) -> str:
    """Plain text of a renderable at ``width`` columns (for -o FILE and tests), with nothing
    a terminal would act on, as on stdout."""
    buffer = io.StringIO()
    Console(file=buffer, width=width, no_color=True, color_system=None,
            highlight=False).print(renderable)
    return printable(buffer.getvalue())


def render_report(report: Report, rendering: Rendering = Rendering()) -> str:
    return render_text(report_renderable(report, rendering.width, rendering), rendering.width)


def render_diff(diff: Diff, rendering: Rendering = Rendering()) -> str:
    return render_text(diff_renderable(diff, rendering.width), rendering.width)
