"""The one table of key bindings: it builds every Binding, the footer and the help screen."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.binding import Binding
from textual.widgets import Static


@dataclass(frozen=True)
class KeyAction:
    """A key, the action it runs, what it does, and whether the footer shows it."""

    id: str
    key: str
    action: str
    description: str
    footer: bool = False
    scope: str = "app"  # "app", "viewer" or "navigator": where the binding lives
    label: str = ""  # how the help screen spells the key, when it differs from ``key``
    short: str = ""  # the footer's word for it, when the description is too long there


ACTIONS: tuple[KeyAction, ...] = (
    KeyAction("help", "question_mark", "help", "Help: every key", True, label="?", short="Help"),
    KeyAction("quit", "q", "quit", "Quit", True),
    KeyAction("filter", "f", "focus_filter", "Filter units", True, short="Filter"),
    KeyAction("focus-next", "tab", "app.focus_next", "Next pane"),
    KeyAction("search", "slash", "search", "Search the stage", True, label="/", short="Search"),
    KeyAction("search-next", "n", "search_next", "Next match or followed line"),
    KeyAction("search-prev", "N", "search_prev", "Previous match or followed line",
              label="N (shift+n)"),
    KeyAction("goto-line", "colon", "goto_line", "Go to line", True, label=":", short="Line"),
    KeyAction("next-stage", "right_square_bracket", "follow(1)",
              "Same source in the next stage", True, label="]", short="Next stage"),
    KeyAction("prev-stage", "left_square_bracket", "follow(-1)",
              "Same source in the previous stage", True, label="[",
              short="Prev stage"),
    KeyAction("back", "b", "back", "Back to where the last follow started (exact line)", True,
              short="Back"),
    KeyAction("forward", "B", "forward", "Forward again after going back",
              label="B (shift+b)"),
    KeyAction("panel-focus", "P", "focus_panel", "Focus the analysis panel: kernels launched, lint's findings",
              label="P (shift+p)"),
    KeyAction("wider", "greater_than_sign", "wider(4)", "Widen the navigator", label=">"),
    KeyAction("narrower", "less_than_sign", "wider(-4)", "Narrow the navigator", label="<"),
    KeyAction("rank", "r", "cycle_rank", "Rank filter: every rank, then each rank in turn"),
    KeyAction("problems", "e", "problems", "Problems: breaks, recompiles, failures, slowest",
              True, short="Problems"),
    KeyAction("passes", "i", "passes", "Pipeline: this unit's passes, each with its diff"),
    KeyAction("compile-index", "x", "compile_index",
              "Compile index: compile ids by the frames of your code that led to them"),
    KeyAction("side-by-side", "v", "side_by_side",
              "This stage and the next ones side by side, cursors linked by source"),
    KeyAction("python-source", "p", "python_source",
              "Your source line: the source view, each line with the kernels it feeds"),
    KeyAction("source-view", "S", "source_view",
              "Source view of a file the run names: lines, their kernels, enter opens one",
              label="S (shift+s)"),
    KeyAction("collapse", "z", "toggle_collapsed", "Collapsed (folded) listing", True,
              short="Fold"),
    KeyAction("loops", "o", "loops", "Hot loops with their histograms"),
    KeyAction("histogram-mode", "h", "cycle_histogram", "Histogram: opcode / op / category"),
    KeyAction("panel", "a", "toggle_panel", "Show or hide the analysis panel"),
    KeyAction("mark", "m", "mark", "Mark this stage for compare", True, short="Mark"),
    KeyAction("compare", "c", "compare", "Compare marked stage with this one", True,
              short="Compare"),
    KeyAction("copy-line", "y", "copy_line", "Copy the cursor line"),
    KeyAction("copy-stage", "Y", "copy_stage", "Copy the whole stage", label="Y (shift+y)"),
    KeyAction("theme", "ctrl+t", "toggle_dark", "Dark / light theme"),
    KeyAction("line-down", "down", "cursor(1)", "Line down", scope="viewer"),
    KeyAction("line-up", "up", "cursor(-1)", "Line up", scope="viewer"),
    KeyAction("vim-down", "j", "cursor(1)", "Line down", scope="viewer"),
    KeyAction("vim-up", "k", "cursor(-1)", "Line up", scope="viewer"),
    KeyAction("page-down", "pagedown", "page(1)", "Page down", scope="viewer"),
    KeyAction("page-up", "pageup", "page(-1)", "Page up", scope="viewer"),
    KeyAction("space-down", "space", "page(1)", "Page down", scope="viewer"),
    KeyAction("top", "home", "edge(0)", "First line", scope="viewer"),
    KeyAction("bottom", "end", "edge(1)", "Last line", scope="viewer"),
    KeyAction("vim-top", "g", "edge(0)", "First line", scope="viewer"),
    KeyAction("vim-bottom", "G", "edge(1)", "Last line", scope="viewer", label="G (shift+g)"),
    KeyAction("scroll-left", "left", "hscroll(-1)", "Scroll left", scope="viewer"),
    KeyAction("scroll-right", "right", "hscroll(1)", "Scroll right", scope="viewer"),
    KeyAction("line-start", "0", "line_start", "Scroll back to column 1", scope="viewer"),
    KeyAction("leave-filter", "escape", "leave_filter", "Leave the filter for the tree",
              scope="navigator"),
)


def bindings(scope: str) -> list[Binding]:
    """Textual bindings for one scope, each with its id so users can remap it."""
    return [Binding(a.key, a.action, a.short or a.description, show=a.footer, id=a.id,
                    tooltip=a.description)
            for a in ACTIONS if a.scope == scope]


def key_label(action: KeyAction) -> str:
    return action.label or action.key


class KeyBar(Static):
    """The footer: the table's main keys, drawn once (Textual's Footer rebuilds its widgets
    on every focus change, which costs more than the rest of start-up)."""

    def render(self) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        for action in ACTIONS:
            if action.footer:
                text.append(f" {key_label(action)} ", style="reverse bold")
                text.append(f" {action.short or action.description} ")
        return text
