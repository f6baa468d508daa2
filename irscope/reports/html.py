"""Reports and diffs as one self-contained HTML file: inline CSS, CSS bar charts, no network."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from html import escape

from irscope.reports.common import (kernel_rows, number, percent, run_total_changes, signed,
                                    stage_columns, stage_title, summary_line, unit_columns)
from irscope.reports.diff import Diff, FigureDelta
from irscope.reports.records import Report

BAR_LIMIT = 25  # ops per bar chart; the rest are summed into one "other" bar

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em;color:#1b1f24;background:#fff}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:2em}
table{border-collapse:collapse;margin:.5em 0}
th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top}
td.n{text-align:right;font-variant-numeric:tabular-nums}
th{background:#f6f8fa}
details{margin:.6em 0;border:1px solid #d0d7de;border-radius:6px;padding:.4em .8em}
summary{cursor:pointer;font-weight:600}
.bars{display:grid;grid-template-columns:minmax(8em,max-content) 1fr 5em;gap:2px 8px;
      align-items:center;max-width:60em;margin:.5em 0 1em}
.bar{height:12px;background:#4f8fd6;border-radius:2px}
.up{color:#b42318}.down{color:#1a7f37}
code{font-family:ui-monospace,monospace}
"""


def _td(value: object, numeric: bool = False, css: str = "") -> str:
    classes = " ".join(c for c in ("n" if numeric else "", css) if c)
    return f"<td class=\"{classes}\">{escape(str(value))}</td>" if classes else \
        f"<td>{escape(str(value))}</td>"


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def bar_chart(histogram: Mapping[str, float]) -> str:
    """Horizontal bars, one per op, widths relative to the most frequent op."""
    items = sorted(histogram.items(), key=lambda kv: (-kv[1], kv[0]))
    shown, rest = items[:BAR_LIMIT], items[BAR_LIMIT:]
    if rest:
        shown.append((f"{len(rest)} other ops", sum(v for _, v in rest)))
    peak = max((v for _, v in shown), default=0) or 1
    cells = [f"<code>{escape(op)}</code><div class=\"bar\" style=\"width:{100 * v / peak:.1f}%\">"
             f"</div><span>{escape(number(v))}</span>" for op, v in shown]
    return f"<div class=\"bars\">{''.join(cells)}</div>"


def _page(title: str, body: list[str]) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def render_report(report: Report) -> str:
    columns, totals = unit_columns(report), stage_columns(report)
    body = [f"<h1>irscope report: {escape(report.run)}</h1>",
            f"<p>{escape(summary_line(report))}</p>",
            _table(["Unit", "Framework", *(t for _, t in columns)],
                   ("<tr>" + _td(u.name) + _td(u.framework)
                    + "".join(_td(number(u.headline.get(k)), True) for k, _ in columns) + "</tr>"
                    for u in report.units))]
    for unit in (u for u in report.units if u.stages):
        where = f" <small>{escape(unit.location)}</small>" if unit.location else ""
        body.append(f"<details><summary>{escape(unit.name)} "
                    f"<small>({escape(unit.framework)})</small>{where}</summary>")
        body.append(_table(["Stage", *(t for _, t in totals), "Diagnostics"],
                           ("<tr>" + _td(stage_title(s))
                            + "".join(_td(number(s.totals.get(k)), True) for k, _ in totals)
                            + _td(s.diagnostics, True) + "</tr>" for s in unit.stages)))
        kernels = kernel_rows(unit)
        if kernels:
            body.append("<h3>Generated kernels</h3>" + _table(
                ["Stage", "Kernel", "Kind", "Fused ops"],
                ("<tr>" + _td(stage) + _td(name) + _td(kind) + _td(fused, True) + "</tr>"
                 for stage, name, kind, fused in kernels)))
        for stage in unit.stages:
            if stage.histogram:
                body.append(f"<h3>{escape(stage_title(stage))}</h3>{bar_chart(stage.histogram)}")
        body.append("</details>")
    return _page(f"irscope report: {report.run}", body)


def _delta_row(d: FigureDelta) -> str:
    css = "" if d.delta in (None, 0) else ("up" if d.delta > 0 else "down")
    return ("<tr>" + _td(d.name) + _td(number(d.a), True)
            + _td(number(d.b), True) + _td(signed(d.delta), True, css)
            + _td(percent(d), True, css) + "</tr>")


def render_diff(diff: Diff, failures: Sequence[str] = ()) -> str:
    body = [f"<h1>irscope diff: {escape(diff.a.run)} → {escape(diff.b.run)}</h1>",
            f"<p>{diff.count('matched')} matched, {diff.count('added')} added, "
            f"{diff.count('removed')} removed</p>"]
    if failures:
        body.append("<h2>Failed gates</h2><ul>"
                    + "".join(f"<li>{escape(f)}</li>" for f in failures) + "</ul>")
    totals = run_total_changes(diff)
    if totals:
        body.append("<h2>Run totals</h2>" + _table(["Figure", "A", "B", "Δ", "%"],
                                                   (_delta_row(d) for d in totals)))
    body.append("<h2>Units</h2>" + _table(
        ["Status", "Unit", "Framework", "Matched by", "Changed figures", "Changed stages"],
        ("<tr>" + _td(u.status) + _td(u.name) + _td(u.framework) + _td(u.matched_by or "")
         + _td(len(u.changes) if u.status == "matched" else "", True)
         + _td(", ".join(u.stages_changed)) + "</tr>" for u in diff.units)))
    for unit in diff.units:
        if unit.changes:
            body.append(f"<details><summary>{escape(unit.name)}: {len(unit.changes)} changed "
                        "figures</summary>" + _table(["Figure", "A", "B", "Δ", "%"],
                                                     (_delta_row(d) for d in unit.changes))
                        + "</details>")
    return _page(f"irscope diff: {diff.a.run} -> {diff.b.run}", body)
