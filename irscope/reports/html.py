"""Reports and diffs as one self-contained HTML file: inline CSS, SVG bars and one small
sorting script, no network access.

Every name from a run goes through ``text()`` (``escaping.html_text``: HTML-escaped, on one
line, control and invisible characters shown), so a kernel called ``<script>`` or one
carrying terminal escapes or bidi overrides is shown as the text it is.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Mapping, Sequence

from irscope.escaping import html_text as text
from irscope.reports.common import (SOURCE_LINE_HEADER, Rendering, compile_time_table,
                                    compile_time_title, headline_text, kernel_lines,
                                    kernel_rows, number, percent, run_total_changes, signed,
                                    source_line_rows, source_lines_title, stage_columns,
                                    stage_title, summary_line, unit_columns)
from irscope.reports.diff import Diff, FigureDelta
from irscope.reports.records import Report
from irscope.reports.timing import headline, numeric_from, section_tables

BAR_LIMIT = 25  # ops per bar chart; the rest are summed into one "other" bar
LIMIT = ' class="limit"'
BAR_HEIGHT, BAR_GAP, LABEL_WIDTH, BAR_WIDTH, COUNT_WIDTH = 14, 4, 190, 360, 70

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em;color:#1b1f24;background:#fff}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:2em}
table{border-collapse:collapse;margin:.5em 0}
th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.name{max-width:22em;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.name.short{max-width:10em}
.lines{max-width:13em}
table.units th{white-space:normal;min-width:3em}
th{background:#f6f8fa}
table.sortable th{cursor:pointer;user-select:none}
table.sortable th[aria-sort=ascending]::after{content:" \\25B2"}
table.sortable th[aria-sort=descending]::after{content:" \\25BC"}
details{margin:.6em 0;border:1px solid #d0d7de;border-radius:6px;padding:.4em .8em}
summary{cursor:pointer;font-weight:600}
svg.bars{display:block;margin:.3em 0 1em;font:12px ui-monospace,monospace}
svg.bars rect{fill:#4f8fd6}svg.bars text.count{fill:#57606a}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:.5em 0}
.card{border:1px solid #d0d7de;border-radius:6px;padding:.5em .8em;min-width:15em;
      max-width:28em}
.card h4{margin:0 0 .3em;font:600 13px ui-monospace,monospace;overflow-wrap:anywhere}
.card dl{display:grid;grid-template-columns:max-content 1fr;gap:0 1em;margin:0}
.card dd{margin:0;text-align:right;font-variant-numeric:tabular-nums}
.card.spills{border-color:#b42318}.card .limit{color:#9a6700}
.problems li{margin:.2em 0}.problems .kind{font-weight:600}
.up{color:#b42318}.down{color:#1a7f37}
code{font-family:ui-monospace,monospace}
"""

# Click a column title to sort by it (numbers as numbers, '-' last); click again to reverse.
SORT_SCRIPT = """
document.querySelectorAll("table.sortable").forEach(function (table) {
  table.querySelectorAll("thead th").forEach(function (th, col) {
    th.addEventListener("click", function () {
      var down = th.getAttribute("aria-sort") === "ascending";
      table.querySelectorAll("thead th").forEach(function (o) { o.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", down ? "descending" : "ascending");
      var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
      function key(row) {
        var cell = row.cells[col], text = cell ? cell.textContent.trim() : "";
        var n = parseFloat(text.replace(/,/g, "").replace(/%$/, ""));
        return isNaN(n) || !/^[-+]?[\\d.,]+%?$/.test(text) ? [1, text.toLowerCase()] : [0, n];
      }
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        if (x[0] !== y[0]) return x[0] - y[0];
        var c = x[1] < y[1] ? -1 : x[1] > y[1] ? 1 : 0;
        return down ? -c : c;
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
});
"""


def _td(value: object, numeric: bool = False, css: str = "") -> str:
    classes = " ".join(c for c in ("n" if numeric else "", css) if c)
    if css.startswith("name"):  # cut by the stylesheet (a div: a cell's width is its content's)
        return f"<td><div class=\"{css}\" title=\"{text(value)}\">{text(value)}</div></td>"
    return f"<td class=\"{classes}\">{text(value)}</td>" if classes else f"<td>{text(value)}</td>"


def units_table(report: Report, columns) -> str:
    """One row per unit with its headline figures: names cut to 22em (whole when hovered),
    titles wrapped, so that every figure fits a 1,400-pixel window; each unit's stages,
    kernels and op counts are folded below."""
    head = "".join(f"<th>{text(h)}</th>" for h in ["Unit", "Framework", *(t for _, t in columns)])
    rows = ("<tr>" + _td(u.name, css="name") + _td(u.framework)
            + "".join(_td(headline_text(k, u.headline.get(k)), True) for k, _ in columns)
            + "</tr>"
            for u in report.units)
    return (f"<table class=\"sortable units\"><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>")


def _table(header: Sequence[str], rows: Iterable[str], sortable: bool = True) -> str:
    head = "".join(f"<th>{text(h)}</th>" for h in header)
    css = " class=\"sortable\"" if sortable else ""
    return f"<table{css}><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def bar_chart(histogram: Mapping[str, float], title: str = "",
              drawn: dict[int, tuple[str, str]] | None = None) -> str:
    """Horizontal bars as inline SVG, one per op, lengths relative to the most frequent op;
    ``drawn`` keeps the bars of each histogram already drawn (units sharing a stage)."""
    if drawn is not None:
        if id(histogram) not in drawn:
            drawn[id(histogram)] = (histogram, _bars(histogram))  # kept: its id stays its own
        return _svg(drawn[id(histogram)][1], title)
    return _svg(_bars(histogram), title)


def _svg(bars: tuple[str, int, int], title: str) -> str:
    body, width, height = bars
    return (f"<svg class=\"bars\" role=\"img\" width=\"{width}\" height=\"{height}\" "
            f"viewBox=\"0 0 {width} {height}\" aria-label=\"{text(title)}\">{body}</svg>")


def _bars(histogram: Mapping[str, float]) -> tuple[str, int, int]:
    """The bars of a histogram (SVG elements), the chart's width and height."""
    items = sorted(histogram.items(), key=lambda kv: (-kv[1], kv[0]))
    shown, rest = items[:BAR_LIMIT], items[BAR_LIMIT:]
    if rest:
        shown.append((f"{len(rest)} other ops", sum(v for _, v in rest)))
    peak = max((v for _, v in shown), default=0) or 1
    step = BAR_HEIGHT + BAR_GAP
    width, height = LABEL_WIDTH + BAR_WIDTH + COUNT_WIDTH, step * len(shown)
    parts = []
    for row, (op, count) in enumerate(shown):
        y, length = row * step, max(1.0, BAR_WIDTH * count / peak)
        label = op if len(op) <= 28 else op[:27] + "…"
        parts.append(f"<g><title>{text(op)}: {text(number(count))}</title>"
                     f"<text x=\"{LABEL_WIDTH - 6}\" y=\"{y + BAR_HEIGHT - 3}\" "
                     f"text-anchor=\"end\">{text(label)}</text>"
                     f"<rect x=\"{LABEL_WIDTH}\" y=\"{y}\" width=\"{length:.1f}\" "
                     f"height=\"{BAR_HEIGHT}\" rx=\"2\"></rect>"
                     f"<text class=\"count\" x=\"{LABEL_WIDTH + length + 6:.1f}\" "
                     f"y=\"{y + BAR_HEIGHT - 3}\">{text(number(count))}</text></g>")
    return "".join(parts), width, height


def kernel_cards(kernels: Sequence) -> str:
    """A card per compiled kernel: registers, spills, shared memory, occupancy and its limiter
    (the analysis layer's KernelRecord, shown as they are)."""
    cards = []
    for k in kernels:
        spilled = bool(k.spill_bytes)
        occupancy = "-" if k.occupancy is None else f"{100 * k.occupancy:.0f}%"
        rows = [("Registers", number(k.registers)),
                ("Spills", "-" if k.spill_bytes is None else f"{number(k.spill_bytes)} B"),
                ("Shared memory", f"{number(k.shared_bytes)} B"),
                ("Occupancy", occupancy)]
        if k.occupancy_limiter:
            rows.append(("Limited by", k.occupancy_limiter))
        cells = "".join(f"<dt>{text(name)}</dt><dd{LIMIT if name == 'Limited by' else ''}>"
                        f"{text(value)}</dd>" for name, value in rows)
        css = "card spills" if spilled else "card"
        cards.append(f"<div class=\"{css}\"><h4>{text(k.name)}</h4><dl>{cells}</dl></div>")
    return f"<div class=\"cards\">{''.join(cards)}</div>" if cards else ""


def problems_list(report: Report) -> str:
    """The run's problems (irscope.read.problems), each once: what, where, its explanation
    and hints whole."""
    if not report.problems:
        return "<h2>Problems</h2><p>None recorded.</p>"
    items = "".join(f"<li><span class=\"kind\">{text(p.kind)}</span> in "
                    f"<code>{text(p.scope())}</code>: {text(p.text())}"
                    + (f" <small>{text(p.more)}</small>" if p.more else "") + "</li>"
                    for p in report.problems)
    return f"<h2>Problems ({len(report.problems)})</h2><ul class=\"problems\">{items}</ul>"


def _hash(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode() + "'"


# The page loads nothing, and runs no script but the sorter (named by its hash): were a name
# ever to slip through unescaped, the browser would still refuse to run it.
POLICY = f"default-src 'none'; style-src {_hash(STYLE)}; script-src {_hash(SORT_SCRIPT)}"


def _page(title: str, body: list[str], sortable: bool = True) -> str:
    policy = (f"<meta http-equiv=\"Content-Security-Policy\" content=\"{POLICY}\">"
              if sortable else "")
    script = f"\n<script>{SORT_SCRIPT}</script>" if sortable else ""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"{policy}<title>{text(title)}</title><style>{STYLE}</style></head><body>\n"
            + "\n".join(body) + f"{script}\n</body></html>\n")


def render_report(report: Report, rendering: Rendering = Rendering()) -> str:
    """The report page, with the run's kernel figures and problems (``rendering.details``)."""
    details = rendering.details
    drawn: dict[int, tuple] = {}
    columns, totals = unit_columns(report), stage_columns(report)
    body = [f"<h1>irscope report: {text(report.run)}</h1>",
            f"<p>{text(summary_line(report))}</p>",
            *(f"<p>{text(said)}</p>" for said in kernel_lines(report)), time_section(report),
            units_table(report, columns), problems_list(report)]
    for unit in (u for u in report.units if u.stages or details.kernels.get(u.key)):
        where = f" <small>{text(unit.location)}</small>" if unit.location else ""
        body.append(f"<details><summary>{text(unit.name)} "
                    f"<small>({text(unit.framework)})</small>{where}</summary>")
        body.append(kernel_cards(details.kernels.get(unit.key, ())))
        body.append(_table(["Stage", *(t for _, t in totals), "Diagnostics"],
                           ("<tr>" + _td(stage_title(s))
                            + "".join(_td(number(s.totals.get(k)), True) for k, _ in totals)
                            + _td(s.diagnostics, True) + "</tr>" for s in unit.stages)))
        kernels = kernel_rows(unit)
        if kernels:
            body.append("<h3>Generated kernels</h3>" + _table(
                ["Stage", "Kernel", "Kind", "Fused ops"],
                ("<tr>" + _td(stage) + _td(name, css="name") + _td(kind) + _td(fused, True) + "</tr>"
                 for stage, name, kind, fused in kernels)))
        for stage in unit.stages:
            if stage.histogram:
                title = stage_title(stage)
                body.append(f"<h3>{text(title)}</h3>"
                            + bar_chart(stage.histogram, f"{unit.name} {title} op counts",
                                        drawn))
        body.append("</details>")
    body.append(compile_time_section(report))
    body.append(passes_section(report))
    if report.source_lines:
        body.append(f"<h2>{text(source_lines_title(report))}</h2>" + _table(
            SOURCE_LINE_HEADER, ("<tr>" + _td(row[0]) + "".join(_td(v, True)
                                                                for v in row[1:]) + "</tr>"
                                 for row in source_line_rows(report))))
        if report.source_lines_note:
            body.append(f"<p>{text(report.source_lines_note)}</p>")
    body.append(history_section(rendering))
    return _page(f"irscope report: {report.run}", body)


def history_section(rendering: Rendering) -> str:
    """The figures that changed over the earlier runs (--history), each with a sparkline."""
    history = rendering.history
    if history is None or not history.rows():
        return ""
    rows = ("<tr>" + _td(unit) + _td(figure) + "<td>" + sparkline(values) + "</td>"
            + _td(" → ".join(number(v) for v in values)) + "</tr>"
            for unit, figure, values in history.rows())
    return (f"<h2>History (last {len(history.runs)} runs, then this one)</h2>"
            + _table(["Unit", "Figure", "Trend", "Values"], rows, False))


def sparkline(values, width: int = 80, height: int = 16) -> str:
    """An inline SVG line through ``values`` (None leaves a gap), newest at the right."""
    known = [v for v in values if v is not None]
    if len(known) < 2 or len(values) < 2:
        return ""
    low, high = min(known), max(known)
    span = (high - low) or 1
    step = width / (len(values) - 1)
    points = " ".join(f"{i * step:.1f},{height - 1 - (v - low) / span * (height - 2):.1f}"
                      for i, v in enumerate(values) if v is not None)
    return (f'<svg width="{width}" height="{height}" role="img" aria-label="trend">'
            f'<polyline fill="none" stroke="currentColor" points="{points}"/></svg>')


def time_section(report: Report) -> str:
    """Where the GPU time goes: totals, top kernels with their static facts, roll-ups."""
    if report.time is None:
        return ""
    parts = ["<h2>Where the time goes</h2>", f"<p>{text(headline(report.time))}</p>"]
    if report.time.notes:
        parts.append("<ul>" + "".join(f"<li>{text(n)}</li>" for n in report.time.notes)
                     + "</ul>")
    for title, header, rows in section_tables(report.time):
        first = numeric_from(header)  # the names before the figures: cut, whole when hovered
        # a kernel's source lines wrap, whole: their end tells apart its launches' places
        css = ["lines" if title == "Source" else "name short" for title in header[:first]]
        parts.append(f"<h3>{text(title)}</h3>" + _table(header, (
            "<tr>" + "".join(_td(c, css=css[i]) if i < first else _td(c, c[:1].isdigit())
                             for i, c in enumerate(row)) + "</tr>" for row in rows)))
    return "".join(parts)


def compile_time_section(report: Report) -> str:
    """The slowest compiles, each phase's part of its time and its caches."""
    if not report.compile_time:
        return ""
    header, rows = compile_time_table(report)
    return f"<h2>{text(compile_time_title(report))}</h2>" + _table(header, (
        "<tr>" + _td(row[0], css="name") + "".join(_td(c, True) for c in row[1:-1])
        + _td(row[-1]) + "</tr>" for row in rows))


def passes_section(report: Report) -> str:
    """The passes that changed each unit's IR, in pipeline order ("" when none is filed)."""
    rows = [("<tr>" + _td(u.name) + _td(r.index, True) + _td(r.pipeline) + _td(r.name)
             + _td(r.added, True) + _td(r.removed, True)
             + _td("" if r.op_delta is None else f"{r.op_delta:+d}", True) + "</tr>")
            for u in report.units for r in u.passes]
    if not rows:
        return ""
    return "<h2>Passes that changed the IR</h2>" + _table(
        ["Unit", "#", "Pipeline", "Pass", "Lines +", "Lines -", "Op Δ"], rows)


def _delta_row(d: FigureDelta) -> str:
    css = "" if d.delta in (None, 0) else ("up" if d.delta > 0 else "down")
    return ("<tr>" + _td(d.name) + _td(number(d.a), True)
            + _td(number(d.b), True) + _td(signed(d.delta), True, css)
            + _td(percent(d), True, css) + "</tr>")


def render_diff(diff: Diff, rendering: Rendering = Rendering()) -> str:
    """The diff page: plain tables, no script."""
    failures = rendering.failures
    body = [f"<h1>irscope diff: {text(diff.a.run)} → {text(diff.b.run)}</h1>",
            f"<p>{diff.count('matched')} matched, {diff.count('added')} added, "
            f"{diff.count('removed')} removed</p>"]
    if failures:
        body.append("<h2>Failed gates</h2><ul>"
                    + "".join(f"<li>{text(f)}</li>" for f in failures) + "</ul>")
    totals = run_total_changes(diff)
    if totals:
        body.append("<h2>Run totals</h2>" + _table(["Figure", "A", "B", "Δ", "%"],
                                                   (_delta_row(d) for d in totals), False))
    body.append("<h2>Units</h2>" + _table(
        ["Status", "Unit", "Framework", "Matched by", "Changed figures", "Changed stages"],
        ("<tr>" + _td(u.status) + _td(u.name) + _td(u.framework) + _td(u.matched_by or "")
         + _td(len(u.changes) if u.status == "matched" else "", True)
         + _td(", ".join(u.stages_changed)) + "</tr>" for u in diff.units), False))
    for unit in diff.units:
        if unit.changes:
            body.append(f"<details><summary>{text(unit.name)}: {len(unit.changes)} changed "
                        "figures</summary>" + _table(["Figure", "A", "B", "Δ", "%"],
                                                     (_delta_row(d) for d in unit.changes),
                                                     False) + "</details>")
    return _page(f"irscope diff: {diff.a.run} -> {diff.b.run}", body, sortable=False)
