"""The side panel: a stage's totals and its opcode histogram drawn as bars."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from irscope.views import HISTOGRAM_MODES, compact, histogram

TOP_OPS = 24
# Totals shown first, in this order, when the parser reports them.
HEADLINE = ("instructions", "kernels", "functions", "registers", "local_store_bytes",
            "local_load_bytes", "shared_bytes", "local_bytes", "stack_bytes", "occupancy",
            "kernels_generated",
            "kernels_launched", "fusions", "computations", "layout_conversions", "extern_calls")

ALWAYS_SHOWN = ("instructions", "registers")  # even when 0


def bar_rows(hist: dict[str, int], width: int, limit: int = TOP_OPS) -> Table:
    """A table of op, count and a bar scaled to the largest count."""
    table = Table.grid(padding=(0, 1))
    table.add_column(no_wrap=True, overflow="ellipsis", max_width=18)
    table.add_column(justify="right", no_wrap=True)
    table.add_column(no_wrap=True)
    items = list(hist.items())[:limit]
    top = max((c for _, c in items), default=1) or 1
    room = max(width - 28, 4)
    for op, count in items:
        table.add_row(op, compact(count), Text("█" * max(1, round(room * count / top)),
                                               style="bold"))
    if len(hist) > limit:
        table.add_row(Text(f"… {len(hist) - limit} more", style="dim"), "", "")
    return table


def totals_table(totals: dict[str, Any]) -> Table:
    table = Table.grid(padding=(0, 1))
    table.add_column(style="dim", no_wrap=True)
    table.add_column(justify="right", no_wrap=True)
    keys = [k for k in HEADLINE if k in totals] + sorted(k for k in totals if k not in HEADLINE)
    for key in keys:
        if not totals[key] and key not in ALWAYS_SHOWN:
            continue
        value = totals[key]
        shown = f"{value:.0%}" if key == "occupancy" and isinstance(value, float) else (
            compact(value) if isinstance(value, int) else str(value))
        table.add_row(key.replace("_", " "), shown)
    return table


def listing(title: str, items: Any, describe, limit: int = 8) -> list[Text]:
    """A titled list of a parser's records (launches, fusions), or nothing when absent."""
    if not isinstance(items, list) or not items:
        return []
    rows = [Text(describe(item) if isinstance(item, dict) else str(item), no_wrap=True,
                 overflow="ellipsis") for item in items[:limit]]
    if len(items) > limit:
        rows.append(Text(f"… {len(items) - limit} more", style="dim"))
    return [Text(""), Text(f"{title} ({len(items)})", style="bold"), *rows]


class AnalysisPanel(Static):
    """Renders ``parsed`` (the parser's JSON) in the histogram ``mode``."""

    parsed: reactive[dict[str, Any] | None] = reactive(None)
    mode: reactive[str] = reactive("opcode")
    title: reactive[str] = reactive("")

    def render(self):
        if self.parsed is None:
            return Text(self.title or "No stage", style="dim")
        parsed = self.parsed
        parts: list[Any] = [Text(self.title, style="bold")]
        totals = parsed.get("totals") or {}
        if totals:
            parts += [Text(""), totals_table(totals)]
        parts += listing("kernels launched", parsed.get("launch_sequence"),
                         lambda k: f"{k.get('name', '?')}  {k.get('kind', '')}")
        parts += listing("fusions", parsed.get("fusions"),
                         lambda f: f"{f.get('name', '?')}  {f.get('kind', '')}  " + " ".join(
                             f"{op}×{n}" for op, n in (f.get("members") or {}).items()))
        hist = histogram(parsed, self.mode)
        heading = Text("histogram ", style="bold")
        for mode in HISTOGRAM_MODES:
            heading.append(f" {mode} ", style="reverse bold" if mode == self.mode else "dim")
        parts += [Text(""), heading]
        parts.append(bar_rows(hist, self.size.width) if hist else
                     Text(f"no {self.mode} histogram for this stage", style="dim"))
        diagnostics = parsed.get("diagnostics") or []
        if diagnostics:
            parts += [Text(""), Text(f"{len(diagnostics)} diagnostics", style="bold")]
            for diag in diagnostics[:5]:
                parts.append(Text(f"{diag.get('line', 0)}: {diag.get('message', '')}",
                                  style="dim", overflow="ellipsis", no_wrap=True))
        return Group(*parts)
