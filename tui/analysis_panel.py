"""The side panel: the kernel card, a stage's totals, its launches and its opcode histogram."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.css.query import NoMatches
from textual.reactive import reactive
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from irscope.parsers.base import ParseResult
from irscope.tui import messages as msg
from irscope.tui.checks import LINT_STYLES
from irscope.analysis.histograms import HISTOGRAM_MODES, histogram
from irscope.analysis.op_names import launch_name
from irscope.browse.tree import compact, short_name

if TYPE_CHECKING:
    from irscope.parsers.inductor import Launch

TOP_OPS = 24
# Totals shown first, in this order, when the parser reports them.
HEADLINE = ("instructions", "kernels", "functions", "registers", "local_store_bytes",
            "local_load_bytes", "shared_bytes", "local_bytes", "stack_bytes", "occupancy",
            "kernels_generated",
            "kernels_launched", "fusions", "computations", "layout_conversions", "extern_calls")

ALWAYS_SHOWN = ("instructions", "registers")  # even when 0


def bar_rows(hist: dict[str, int], width: int, limit: int = TOP_OPS) -> Table:
    """A table of op, count and a bar scaled to the largest count; op names get the room the
    panel has (half its width), not a fixed few characters."""
    label_width = max(width // 2, 12)
    table = Table.grid(padding=(0, 1))
    table.add_column(no_wrap=True, overflow="ellipsis", max_width=label_width)
    table.add_column(justify="right", no_wrap=True)
    table.add_column(no_wrap=True)
    items = list(hist.items())[:limit]
    top = max((c for _, c in items), default=1) or 1
    longest = min(max((len(op) for op, _ in items), default=4), label_width)
    room = max(width - longest - 8, 4)
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


def card_table(rows: tuple[tuple[str, str], ...]) -> Table:
    """The kernel card: launch facts and resources, values wrapped rather than cut."""
    table = Table.grid(padding=(0, 1))
    table.add_column(style="dim", no_wrap=True)
    table.add_column(overflow="fold")
    for label, value in rows:
        table.add_row(label, value)
    return table


PHASE_STYLES = ("cyan", "magenta", "yellow", "green", "blue")  # Rich styles, phase by phase
# PyTorch's "Triton compile" time is the wait for every kernel's compile, C++ ones included
PHASE_TITLES = {"Triton compile": "kernel compile"}


def compile_timeline(timing: Any, kernels: tuple = (), width: int = 30) -> list[Text]:
    """A compile's time as one stacked bar, its phases in order (each its own part: they
    add up to the total), then each phase's seconds, the steps named inside them, the
    slowest Triton compiles (in parallel: they add up to more) and the caches."""
    from irscope.reports.common import counted

    total = timing.total_s or 1.0
    bar = Text("▕")
    for (name, seconds), style in zip(timing.phases, PHASE_STYLES):
        bar.append("█" * max(1 if seconds else 0, round((width - 2) * seconds / total)),
                   style=style)
    bar.append("▏")
    rows = [Text(""), Text(f"compile {timing.total_s:.2f} s", style="bold"), bar]
    for (name, seconds), style in zip(timing.phases, PHASE_STYLES):
        rows.append(Text.assemble(("█ ", style), (f"{PHASE_TITLES.get(name, name):<16}", "dim"),
                                  f"{seconds:6.2f} s"))
    for name, seconds in timing.inside:
        if seconds >= 0.01:
            rows.append(Text(f"  {name} {seconds:.2f} s", style="dim"))
    if kernels:
        rows.append(Text("slowest Triton compiles", style="dim"))
        rows += [Text(f"  {short_name(name, width - 10)} {seconds:.2f} s", no_wrap=True)
                 for name, seconds in kernels[:3]]
    if timing.caches:
        rows.append(Text(f"caches: {counted(', '.join(timing.caches))}", style="dim"))
    return rows


def where(finding) -> str:
    """A finding's evidence as `stage:line,line`, or its message when it has none."""
    if finding.stage:
        return f"{finding.stage}:{','.join(map(str, finding.lines))}" if finding.lines else (
            finding.stage)
    return finding.message


def listing(title: str, items: tuple, describe, limit: int = 8) -> list[Text]:
    """A titled list of a parser's records (fusions), or nothing when absent."""
    if not items:
        return []
    rows = [Text(describe(item), no_wrap=True, overflow="ellipsis") for item in items[:limit]]
    if len(items) > limit:
        rows.append(Text(f"… {len(items) - limit} more", style="dim"))
    return [Text(""), Text(f"{title} ({len(items)})", style="bold"), *rows]


class AnalysisPanel(VerticalScroll):
    """Renders ``card`` (a kernel's facts) and ``parsed`` (the parser's result) in the histogram
    ``mode``; every kernel launched is an option: enter follows it."""

    parsed: reactive[ParseResult | None] = reactive(None)
    mode: reactive[str] = reactive("opcode")
    title: reactive[str] = reactive("")
    card: reactive[tuple[tuple[str, str], ...]] = reactive(())
    # a compile's time (irscope.read.compile_time.CompileTime) and its slowest Triton compiles
    timeline: reactive[tuple[Any, tuple]] = reactive((None, ()))
    findings: reactive[tuple[tuple[Any, Any], ...]] = reactive(())  # (Finding, Place) rows

    def compose(self) -> ComposeResult:
        yield Static(id="panel-head")
        yield Static(id="panel-totals")
        yield OptionList(id="panel-launches")
        yield Static(id="panel-lint")
        yield OptionList(id="panel-findings")
        yield Static(id="panel-body")

    def on_mount(self) -> None:
        self.watch_findings()
        self._refresh_all()

    def watch_parsed(self) -> None:
        self._refresh_all()

    def watch_mode(self) -> None:
        self._refresh_all()

    def watch_title(self) -> None:
        self._refresh_all()

    def watch_card(self) -> None:
        self._refresh_all()

    def watch_timeline(self) -> None:
        self._refresh_all()

    def watch_findings(self) -> None:
        try:
            found = self.query_one("#panel-findings", OptionList)
        except NoMatches:
            return
        found.clear_options()
        found.add_options([Option(Text.assemble((f"{f.severity} ", LINT_STYLES.get(
            f.severity, "dim")), f"{f.rule}  ", (where(f), "dim")), id=str(i))
            for i, (f, _place) in enumerate(self.findings)])
        found.display = bool(self.findings)
        found.highlighted = 0 if self.findings else None  # enter opens the first at once
        head = self.query_one("#panel-lint", Static)
        head.update(Text(f"\nlint ({len(self.findings)})  P, enter opens the evidence",
                         style="bold"))
        head.display = bool(self.findings)

    def on_resize(self) -> None:
        self._refresh_all()

    def focus_first(self) -> None:
        lists = [self.query_one(f"#panel-{name}", OptionList) for name in ("launches", "findings")]
        next((found for found in lists if found.display), self).focus()

    @property
    def launches(self) -> tuple[Launch, ...]:
        return getattr(self.parsed, "launch_sequence", ())

    def _refresh_all(self) -> None:
        try:
            head = self.query_one("#panel-head", Static)
            totals_part = self.query_one("#panel-totals", Static)
            body = self.query_one("#panel-body", Static)
            launches = self.query_one("#panel-launches", OptionList)
        except NoMatches:  # a reactive set before the panel composed its parts
            return
        width = max(self.size.width - 2, 20)
        parts: list[Any] = [Text(self.title or "No stage", style="bold" if self.parsed
                                 is not None else "dim", overflow="fold")]
        if self.card:
            parts += [Text(""), Text("kernel", style="bold"), card_table(self.card)]
        timing, kernels = self.timeline
        if timing is not None:
            parts += compile_timeline(timing, kernels, width)
        head.update(Group(*parts))
        parsed = self.parsed
        if parsed is None:
            totals_part.update("")
            launches.display = False
            body.update("")
            return
        parts = []
        totals = parsed.totals
        if totals:
            parts += [Text(""), totals_table(totals)]
        items = self.launches
        if items:
            parts += [Text(""), Text(f"kernels launched ({len(items)})  P, enter follows",
                                     style="bold")]
        totals_part.update(Group(*parts))
        launches.clear_options()
        launches.add_options([Option(Text(f"{launch_name(k)}  {k.kind}", no_wrap=True,
                                          overflow="ellipsis"), id=f"{i}:{k.line}:{launch_name(k)}")
                              for i, k in enumerate(items)])
        launches.display = bool(items)
        rest: list[Any] = listing("fusions", getattr(parsed, "fusions", ()),
                                  lambda f: f"{f.name}  {f.kind}  "
                                  + " ".join(f"{op}×{n}" for op, n in f.members.items()))
        hist = histogram(parsed, self.mode)
        heading = Text("histogram ", style="bold")
        for mode in HISTOGRAM_MODES:
            heading.append(f" {mode} ", style="reverse bold" if mode == self.mode else "dim")
        rest += [Text(""), heading]
        rest.append(bar_rows(hist, width) if hist else
                    Text(f"no {self.mode} histogram for this stage", style="dim"))
        diagnostics = parsed.diagnostics
        if diagnostics:
            rest += [Text(""), Text(f"{len(diagnostics)} diagnostics", style="bold")]
            for diag in diagnostics[:5]:
                rest.append(Text(f"{diag.line}: {diag.message}",
                                 style="dim", overflow="ellipsis", no_wrap=True))
        body.update(Group(*rest))

    @on(OptionList.OptionSelected, "#panel-findings")
    def _finding_chosen(self, event: OptionList.OptionSelected) -> None:
        self.post_message(msg.PlaceChosen(self.findings[int(event.option.id or 0)][1]))

    @on(OptionList.OptionSelected, "#panel-launches")
    def _launch_chosen(self, event: OptionList.OptionSelected) -> None:
        _index, line, name = (event.option.id or "::").split(":", 2)
        if name:
            self.post_message(msg.KernelChosen(name, int(line) - 1 if int(line) > 0 else None))
