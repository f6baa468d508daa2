"""Reports and diffs as GitHub-flavoured Markdown: summary tables, a <details> block per unit.

Every name from a run goes through ``cell()`` (``escaping.markdown_text``): it stays the text
it is, never a link, an image, markup or a row of its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from irscope.escaping import markdown_text
from irscope.reports.common import (SOURCE_LINE_HEADER, kernel_lines, kernel_rows, middle,
                                    number, percent, run_total_changes, signed,
                                    source_line_rows, source_lines_title, stage_columns,
                                    stage_title, summary_line, unit_columns)
from irscope.reports.common import (Rendering, compile_time_table, compile_time_title,
                                    headline_text, history_rows)
from irscope.reports.diff import Diff, FigureDelta
from irscope.reports.records import Report
from irscope.reports.timing import headline, numeric_from, section_tables, source_cell
from irscope.reports.timing import short_name as kernel_name


cell = markdown_text  # every table cell, heading and summary of this module


def table(header: Sequence[str], rows: Iterable[Sequence[object]],
          numeric_from: int = 1) -> list[str]:
    """A GitHub table; columns from ``numeric_from`` on are right-aligned."""
    align = ["---" if i < numeric_from else "--:" for i in range(len(header))]
    lines = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return lines


def render_report(report: Report, rendering: Rendering = Rendering()) -> str:
    columns, totals = unit_columns(report), stage_columns(report)
    lines = [f"## irscope report: {cell(report.run)}", "",
             cell(summary_line(report), line_start=True), ""]
    lines += [line for said in kernel_lines(report) for line in (cell(said, line_start=True),
                                                                 "")]
    lines += time_section(report)
    lines += table(["Unit", "Framework", *(t for _, t in columns)],
                   ([u.name, u.framework, *(headline_text(k, u.headline.get(k))
                                            for k, _ in columns)]
                    for u in report.units), numeric_from=2)
    for unit in (u for u in report.units if u.stages):
        where = f" — {cell(unit.location)}" if unit.location else ""
        lines += ["", f"<details><summary><b>{cell(unit.name)}</b> ({cell(unit.framework)})"
                      f"{where}</summary>", ""]
        lines += table(["Stage", *(t for _, t in totals), "Diagnostics"],
                       ([stage_title(s), *(number(s.totals.get(k)) for k, _ in totals),
                         s.diagnostics] for s in unit.stages))
        kernels = kernel_rows(unit)
        if kernels:
            lines += ["", "**Generated kernels**", ""]
            lines += table(["Stage", "Kernel", "Kind", "Fused ops"], kernels, numeric_from=3)
        for stage in unit.stages:
            if stage.histogram:
                lines += ["", f"**{cell(stage_title(stage))}** op counts", ""]
                lines += table(["Op", "Count"], stage.histogram.items())
        lines += ["", "</details>"]
    lines += problems_section(report)
    lines += compile_time_section(report)
    lines += passes_section(report)
    if report.source_lines:
        lines += ["", f"### {cell(source_lines_title(report))}", ""]
        lines += table(SOURCE_LINE_HEADER, source_line_rows(report))
        if report.source_lines_note:
            lines += ["", cell(report.source_lines_note, line_start=True)]
    changed = history_rows(rendering)
    if changed:
        lines += ["", f"### History (last {len(rendering.history.runs)} runs, then this one)",
                  ""]
        lines += table(["Unit", "Figure", "Values"], changed, numeric_from=3)
    return "\n".join(lines) + "\n"


def time_section(report: Report) -> list[str]:
    """Where the GPU time goes, first: totals, top kernels, lines, graphs, what is unjoined."""
    if report.time is None:
        return []
    lines = ["### Where the time goes", "", headline(report.time, cell), ""]
    lines += [f"- {cell(note, line_start=True)}" for note in report.time.notes]
    for title, header, rows in section_tables(report.time):
        lines += ["", f"**{cell(title)}**", ""]
        lines += table(header, rows, numeric_from=numeric_from(header))
    return lines + [""]


def problems_section(report: Report, limit: int | None = None) -> list[str]:
    """The run's problems (irscope.read.problems), each once with its explanation and hints
    whole; the first ``limit`` of them when given."""
    if not report.problems:
        return ["", "### Problems", "", "None recorded."]
    shown = report.problems[:limit] if limit else report.problems
    lines = ["", f"### Problems ({len(report.problems)})", ""]
    lines += [f"- **{cell(p.kind)}** in {cell(p.scope())}: {cell(p.text())}" for p in shown]
    if len(shown) < len(report.problems):
        lines.append(f"- … {len(report.problems) - len(shown)} more (irscope report RUN "
                     "--format md)")
    return lines


def compile_time_section(report: Report) -> list[str]:
    """The slowest compiles, each phase's part of its time and its caches."""
    if not report.compile_time:
        return []
    header, rows = compile_time_table(report)
    return ["", f"### {cell(compile_time_title(report))}", "",
            *table(header, rows, numeric_from=1)]


def passes_section(report: Report) -> list[str]:
    """The passes that changed each unit's IR, in pipeline order (irscope passes RUN UNIT)."""
    units = [u for u in report.units if u.passes]
    if not units:
        return []
    lines = ["", "### Passes", ""]
    for unit in units:
        figures = unit.pass_figures
        lines += [f"**{cell(unit.name)}**: {figures.get('passes.changed', 0)} of "
                  f"{figures.get('passes.total', 0)} passes changed the IR", ""]
        lines += table(["#", "Pipeline", "Pass", "Lines +", "Lines -", "Op Δ"],
                       ([r.index, r.pipeline, r.name, r.added, r.removed,
                         "" if r.op_delta is None else f"{r.op_delta:+d}"]
                        for r in unit.passes), numeric_from=3)
        lines.append("")
    return lines


def _delta_rows(deltas: Iterable[FigureDelta]):
    return ([d.name, number(d.a), number(d.b), signed(d.delta), percent(d)] for d in deltas)


def render_diff(diff: Diff, rendering: Rendering = Rendering()) -> str:
    lines = [f"## irscope diff: {cell(diff.a.run)} → {cell(diff.b.run)}", "",
             f"**{diff.count('matched')} matched**, {diff.count('added')} added, "
             f"{diff.count('removed')} removed", ""]
    if rendering.failures:
        lines += ["### Failed gates", "",
                  *(f"- {cell(f, line_start=True)}" for f in rendering.failures), ""]
    totals = run_total_changes(diff)
    if totals:
        lines += ["### Run totals", ""]
        lines += table(["Figure", "A", "B", "Δ", "%"], _delta_rows(totals))
        lines.append("")
    lines += ["### Units", ""]
    lines += table(["Status", "Unit", "Framework", "Matched by", "Changed stages",
                    "Changed figures"],
                   ([u.status, u.name, u.framework, u.matched_by or "",
                     ", ".join(u.stages_changed),
                     len(u.changes) if u.status == "matched" else ""] for u in diff.units),
                   numeric_from=5)
    for unit in diff.units:
        if unit.changes:
            lines += ["", f"<details><summary><b>{cell(unit.name)}</b>: "
                          f"{len(unit.changes)} changed figures</summary>", ""]
            lines += table(["Figure", "A", "B", "Δ", "%"], _delta_rows(unit.changes))
            lines += ["", "</details>"]
    return "\n".join(lines) + "\n"



SUMMARY_LINES = 60  # a pull-request comment people read whole
SUMMARY_KERNELS, SUMMARY_PROBLEMS, SUMMARY_CHANGES = 8, 8, 10
SUMMARY_NAME = 60  # characters of a kernel's or unit's name in a summary's table


def render_summary(report: Report, rendering: Rendering = Rendering()) -> str:
    """The report in at most SUMMARY_LINES lines, to paste in a pull request: headline
    figures (measured GPU time where the run has it), the top kernels, the problems and,
    against a base (``rendering.changes``, a Diff), what changed."""
    totals = report.totals
    figures = [f"{number(totals.get('units'))} unit{'s' * (totals.get('units') != 1)}"]
    for key, one, many in (("graphs", "graph", "graphs"),
                           ("kernels_generated", "kernel generated", "kernels generated"),
                           ("kernels_launched", "launched per call", "launched per call"),
                           ("graph_breaks", "graph break", "graph breaks"),
                           ("recompiles", "recompile", "recompiles")):
        if totals.get(key):
            figures.append(f"{number(totals[key])} {one if totals[key] == 1 else many}")
    lines = [f"### irscope: {cell(report.run)}", "", cell(", ".join(figures))]
    lines += [line for said in kernel_lines(report) for line in ("", cell(said,
                                                                          line_start=True))]
    if report.time is not None:
        lines += ["", f"**GPU time**: {headline(report.time, cell)}"]
    lines += ["", *top_kernels(report)]
    lines += problems_section(report, SUMMARY_PROBLEMS)
    if rendering.changes is not None:
        lines += ["", *what_changed(rendering.changes)]
    lines += ["", "<sub>irscope report RUN --format md for every unit, stage and op count"
                  "</sub>"]
    return "\n".join(lines[:SUMMARY_LINES]) + "\n"


def top_kernels(report: Report) -> list[str]:
    """The kernels that took the most GPU time, else those with the most spills and
    registers, with their resources."""
    units = {u.name: u for u in report.units}
    if report.time is not None and report.time.kernels:
        rows = [[middle(kernel_name(row.get("name", "")), SUMMARY_NAME),
                 middle(row.get("unit") or "", SUMMARY_NAME),
                 middle(source_cell(row["source_lines"]), SUMMARY_NAME)
                 if row.get("source_lines") else "", f"{row.get('share', 0):.1%}",
                 number(row.get("total_us")), *_resources(units.get(row.get("unit") or ""))]
                for row in report.time.kernels[:SUMMARY_KERNELS]]
        header = ["Kernel", "Unit", "Source", "Share", "GPU µs", "Regs", "Spills", "Occupancy"]
        return ["**Top kernels by GPU time**", "", *table(header, rows, numeric_from=3)]
    kernels = sorted((u for u in report.units if "registers" in u.headline),
                     key=lambda u: (-u.headline.get("spills", 0), -u.headline["registers"]))
    if not kernels:
        return []
    rows = [[middle(u.name, SUMMARY_NAME), *_resources(u)] for u in kernels[:SUMMARY_KERNELS]]
    return ["**Kernels by spills and registers**", "",
            *table(["Kernel", "Regs", "Spills", "Occupancy"], rows)]


def _resources(unit) -> list[str]:
    if unit is None:
        return ["", "", ""]
    occupancy = unit.headline.get("occupancy")
    return [number(unit.headline.get("registers")), number(unit.headline.get("spills")),
            "-" if occupancy is None else f"{occupancy:.0%}"]


def what_changed(diff: Diff) -> list[str]:
    """Units added and removed, the run totals and the figures that changed most."""
    lines = [f"**Against {cell(diff.a.run)}**: {diff.count('matched')} matched, "
             f"{diff.count('added')} added, {diff.count('removed')} removed", ""]
    changes = [("(run)", d) for d in run_total_changes(diff)]
    changes += [(u.name, d) for u in diff.units for d in u.changes if ".op." not in d.name]
    changes.sort(key=lambda c: -abs(c[1].percent or 0) if c[1].percent not in (
        float("inf"), float("-inf")) else -1e9)
    if not changes:
        return lines + ["No figure changed."]
    rows = [[middle(unit, SUMMARY_NAME), d.name, number(d.a), number(d.b), percent(d)]
            for unit, d in changes[:SUMMARY_CHANGES]]
    more = len(changes) - len(rows)
    return lines + table(["Unit", "Figure", "Before", "After", "%"], rows, numeric_from=2) + (
        [f"… {more} more (irscope diff)"] if more > 0 else [])
