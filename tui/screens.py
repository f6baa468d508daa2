"""Modal and full screens: help, prompts (search, go-to-line), compare, source, loops."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Footer, Input, Label, Static

from irscope.store import Stage
from irscope.tui.analysis_panel import bar_rows
from irscope.tui.bindings import ACTIONS, key_label
from irscope.tui.viewer import IrViewer
from irscope.views import histogram, histogram_diff, stage_title

CLOSE = [Binding("escape", "dismiss", "Close", id="close"),
         Binding("q", "dismiss", "Close", show=False, id="close-q")]


class HelpScreen(ModalScreen[None]):
    """Every binding from the action table, grouped by where it applies."""

    BINDINGS = CLOSE + [Binding("question_mark", "dismiss", "Close", show=False, id="close-help")]

    def compose(self) -> ComposeResult:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold", no_wrap=True)
        table.add_column()
        for scope, title in (("app", "Everywhere"), ("viewer", "In the stage viewer"),
                             ("navigator", "In the navigator")):
            table.add_row(Text(title, style="underline"), "")
            for action in ACTIONS:
                if action.scope == scope:
                    table.add_row(key_label(action), action.description)
        with VerticalScroll(id="help-box"):
            yield Static("irscope keys  (escape closes)", classes="box-title")
            yield Static(table)


class PromptScreen(ModalScreen[str | None]):
    """One-line prompt (search pattern, line number); dismisses with the text or None."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="cancel")]

    def __init__(self, label: str, value: str = "", placeholder: str = "") -> None:
        super().__init__()
        self.label, self.value, self.placeholder = label, value, placeholder

    def compose(self) -> ComposeResult:
        with Vertical(id="prompt-box"):
            yield Label(self.label)
            yield Input(self.value, placeholder=self.placeholder, id="prompt-input")

    @on(Input.Submitted)
    def _submit(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


class CompareScreen(Screen[None]):
    """Two stages side by side with the difference of their histograms."""

    BINDINGS = CLOSE + [Binding("h", "cycle_histogram", "Histogram mode", id="compare-mode"),
                        Binding("tab", "focus_next", "Next pane", show=False, id="compare-tab")]

    def __init__(self, sides: list[tuple[Stage, str, list[str], Any, dict[str, Any]]]) -> None:
        super().__init__()
        self.sides = sides
        self.mode = "opcode"

    def compose(self) -> ComposeResult:
        with Horizontal(id="compare-viewers"):
            for i, (stage, title, *_rest) in enumerate(self.sides):
                with Vertical(classes="compare-side"):
                    yield Label(title, classes="compare-title")
                    yield IrViewer(id=f"compare-{i}")
        yield DataTable(id="compare-diff", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        for i, (_stage, _title, lines, lexer, _parsed) in enumerate(self.sides):
            self.query_one(f"#compare-{i}", IrViewer).show(lines, lexer)
        self._fill_diff()
        self.query_one("#compare-0", IrViewer).focus()

    def _fill_diff(self) -> None:
        table = self.query_one(DataTable)
        table.clear(columns=True)
        left, right = (histogram(side[4], self.mode) for side in self.sides)
        table.add_columns(self.mode, "left", "right", "Δ")
        for row in histogram_diff(left, right):
            sign = f"{row.delta:+d}" if row.delta else "0"
            table.add_row(row.op, str(row.left), str(row.right), sign)

    def action_cycle_histogram(self) -> None:
        from irscope.views import HISTOGRAM_MODES

        self.mode = HISTOGRAM_MODES[(HISTOGRAM_MODES.index(self.mode) + 1) % len(HISTOGRAM_MODES)]
        self._fill_diff()


class SourceScreen(Screen[None]):
    """A read-only view of the Python file a line came from, at that line."""

    BINDINGS = CLOSE

    def __init__(self, path: str, lines: list[str], line: int, lexer: Any,
                 cursor: int | None = None) -> None:
        super().__init__()
        self.path, self.lines, self.line, self.lexer = path, lines, line, lexer
        self.cursor = line - 1 if cursor is None else cursor  # 0-based line of ``lines``

    def compose(self) -> ComposeResult:
        yield Label(f"{self.path}:{self.line}", classes="compare-title")
        yield IrViewer(id="source-viewer")
        yield Footer()

    def on_mount(self) -> None:
        viewer = self.query_one(IrViewer)
        viewer.show(self.lines, self.lexer, cursor=self.cursor)
        viewer.focus()


class LoopsScreen(ModalScreen[None]):
    """The hot loops the PTX analyzer found in a stage, each with its histogram."""

    BINDINGS = CLOSE

    def __init__(self, title: str, kernels: list[dict[str, Any]]) -> None:
        super().__init__()
        self.title_text, self.kernels = title, kernels

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(f"Loops in {self.title_text}  (escape closes)", classes="box-title")
            found = False
            for kernel in self.kernels:
                for loop in kernel.get("loops") or []:
                    found = True
                    head = (f"loop at {loop.get('head', '?')}  lines {loop.get('first_line')}"
                            f"-{loop.get('last_line')}  depth {loop.get('depth')}  "
                            f"{loop.get('instructions')} instructions")
                    yield Static(Text(f"{kernel.get('name', '?')}  {head}", style="bold"))
                    yield Static(bar_rows(dict(loop.get("histogram") or {}), 60, limit=10))
            if not found:
                yield Static("No loops found in this stage.")

    def on_mount(self) -> None:
        self.query_one("#help-box").focus()  # up/down/page keys scroll the list


def stage_label(stage: Stage, unit_name: str) -> str:
    return f"{unit_name} · {stage_title(stage)}"
