"""Modal and full screens: help, prompts (search, go-to-line), compare, source, loops."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import (DataTable, Footer, Input, Label, OptionList, SelectionList,
                             Static, Tree)
from textual.widgets.option_list import Option

from irscope.parsers.base import ParseResult
from irscope.store import Stage
from irscope.tui.analysis_panel import bar_rows
from irscope.tui.bindings import ACTIONS, key_label
from irscope.tui.viewer import IrViewer
from irscope.analysis.histograms import HISTOGRAM_MODES, histogram, histogram_diff
from irscope.browse.line_diff import DiffLine, aligned_diff
from irscope.read.problems import Problem
from irscope.browse.tree import short_name, stage_title

if TYPE_CHECKING:
    from irscope.parsers.ptx import PtxKernel

class FitLabel(Static):
    """A one-line title that always shows: shortened to the width it has, its start and end
    kept (a long unit name wrapped out of sight left the line blank)."""

    def __init__(self, text: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.text = text

    def render(self) -> Text:
        return Text(short_name(self.text, max(self.size.width - 2, 8)), no_wrap=True)


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
    """Two stages as a line-aligned diff: gaps where a side has no counterpart, changed rows
    marked (n/N step through them), the cursors linked, figure and histogram deltas below.
    Lines compare as compiles of one program do (analysis.normalize.normalized: folders of
    paths, hashes in names, numbering) unless ``exact`` (i toggles)."""

    BINDINGS = CLOSE + [Binding("h", "cycle_histogram", "Histogram mode", id="compare-mode"),
                        Binding("i", "toggle_exact", "Exact / normalised", id="compare-exact"),
                        Binding("n", "change(1)", "Next change", id="compare-next"),
                        Binding("N", "change(-1)", "Previous change", show=False,
                                id="compare-prev"),
                        Binding("tab", "focus_next", "Next pane", show=False, id="compare-tab")]

    MARKERS = {"same": "  ", "changed": "~ ", "removed": "- ", "added": "+ "}

    def __init__(self, sides: list[tuple[Stage, str, list[str], Any, ParseResult]],
                 figures: tuple[str, ...] = (), exact: bool = False) -> None:
        super().__init__()
        self.sides = sides
        self.figures = figures  # "registers 29 → 26 (-3)" rows
        self.mode = "opcode"
        self.exact = exact
        self.rows: list[DiffLine] = []

    def compose(self) -> ComposeResult:
        with Horizontal(id="compare-viewers"):
            for i, (stage, title, *_rest) in enumerate(self.sides):
                with Vertical(classes="compare-side"):
                    yield FitLabel(title, classes="compare-title")
                    yield IrViewer(id=f"compare-{i}")
        yield Label("", id="compare-summary")
        yield DataTable(id="compare-diff", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self._align()
        self._fill_diff()
        for i in (0, 1):
            self.watch(self.viewer(i), "cursor", self._linked(i), init=False)
        self.viewer(0).focus()

    def viewer(self, side: int) -> IrViewer:
        return self.query_one(f"#compare-{side}", IrViewer)

    def _linked(self, side: int):
        def follow(cursor: int) -> None:  # both sides show the same row: one cursor for both
            other = self.viewer(1 - side)
            if other.cursor != cursor:
                other.cursor = cursor
                other.scroll_to(y=self.viewer(side).scroll_y, animate=False)
        return follow

    def _align(self) -> None:
        (_s0, _t0, left, lexer0, _p0), (_s1, _t1, right, lexer1, _p1) = self.sides
        self.rows = aligned_diff(left, right, self.exact)
        changed = tuple(i for i, row in enumerate(self.rows) if row.tag != "same")
        for side, lines, lexer in ((0, left, lexer0), (1, right, lexer1)):
            shown = []
            for row in self.rows:
                number = row.left if side == 0 else row.right
                marker = self.MARKERS[row.tag] if number is not None else "  "
                shown.append(marker + (lines[number] if number is not None else ""))
            self.viewer(side).show(shown, lexer, cursor=changed[0] if changed else 0,
                                   marks=changed)
        counts = {tag: sum(1 for r in self.rows if r.tag == tag)
                  for tag in ("changed", "removed", "added")}
        summary = (f"~{counts['changed']} changed  -{counts['removed']} only left  "
                   f"+{counts['added']} only right"
                   + ("  (exact)" if self.exact else "  (paths, hashes, numbering ignored)")
                   + ("  │  " + "  ·  ".join(self.figures) if self.figures else ""))
        self.query_one("#compare-summary", Label).update(summary)

    def _fill_diff(self) -> None:
        table = self.query_one(DataTable)
        table.clear(columns=True)
        left, right = (histogram(side[4], self.mode) for side in self.sides)
        table.add_columns(self.mode, "left", "right", "Δ")
        for row in histogram_diff(left, right):
            sign = f"{row.delta:+d}" if row.delta else "0"
            table.add_row(row.op, str(row.left), str(row.right), sign)

    def action_cycle_histogram(self) -> None:
        self.mode = HISTOGRAM_MODES[(HISTOGRAM_MODES.index(self.mode) + 1) % len(HISTOGRAM_MODES)]
        self._fill_diff()

    def action_toggle_exact(self) -> None:
        """Compare the lines as they are, or as compiles of one program compare."""
        self.exact = not self.exact
        self._align()

    def action_change(self, step: int) -> None:
        self.viewer(0).next_match(step)


class SourceScreen(Screen[None]):
    """A read-only view of the Python file a line came from, at that line (a file the run's
    records do not name: its lines lead to no kernel, which enter and ] say)."""

    BINDINGS = CLOSE + [Binding("enter", "choose", "Kernels of this line", id="plain-choose"),
                        Binding("right_square_bracket", "choose", "Kernels of this line",
                                show=False, id="plain-follow")]

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

    def action_choose(self) -> None:
        self.notify("the run's records name no kernel of this file's lines (S lists the "
                    "files they name)", severity="warning", timeout=4)


class LoopsScreen(ModalScreen[None]):
    """The hot loops the PTX analyzer found in a stage, each with its histogram."""

    BINDINGS = CLOSE

    def __init__(self, title: str, kernels: tuple[PtxKernel, ...]) -> None:
        super().__init__()
        self.title_text, self.kernels = title, kernels

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(f"Loops in {self.title_text}  (escape closes)", classes="box-title")
            found = False
            for kernel in self.kernels:
                for loop in kernel.loops:
                    found = True
                    head = (f"loop at {loop.head}  lines {loop.first_line}-{loop.last_line}  "
                            f"depth {loop.depth}  {loop.instructions} instructions")
                    yield Static(Text(f"{kernel.name}  {head}", style="bold"))
                    yield Static(bar_rows(dict(loop.histogram), 60, limit=10))
            if not found:
                yield Static("No loops found in this stage.")

    def on_mount(self) -> None:
        self.query_one("#help-box").focus()  # up/down/page keys scroll the list


def stage_label(stage: Stage, unit_name: str, role: str = "") -> str:
    return f"{unit_name} · {stage_title(stage, role)}"


class ProblemsScreen(ModalScreen[int | None]):
    """The run's problems (irscope.read.problems), each once: the highlighted one's
    explanation and hints shown whole below the list; enter opens its evidence (dismisses
    with the row's index)."""

    BINDINGS = CLOSE
    SEVERITY_STYLES = {"error": "bold red", "warning": "bold yellow", "info": "cyan"}

    def __init__(self, rows: Sequence[Problem]) -> None:
        super().__init__()
        self.rows = list(rows)

    def compose(self) -> ComposeResult:
        with Vertical(id="problems-box"):
            yield Static(f"Problems ({len(self.rows)})  enter opens its evidence, escape closes",
                         classes="box-title")
            if not self.rows:
                yield Static("No compile failures, graph breaks, recompilations or findings "
                             "in this run.")
                return
            kind = min(max(len(row.kind) for row in self.rows), 26) + 1
            yield OptionList(id="problems", *[
                Option(Text.assemble((f"{row.kind:<{kind}}", self.SEVERITY_STYLES.get(
                    row.severity, "bold")), (f"{row.scope()}  ", "bold"), (row.title, "dim"),
                    no_wrap=True, overflow="ellipsis"), id=str(i))
                for i, row in enumerate(self.rows)])
            yield Static(id="problem-detail")

    def on_mount(self) -> None:
        if self.rows:
            found = self.query_one("#problems", OptionList)
            found.highlighted = 0
            found.focus()
            self._show(0)

    @on(OptionList.OptionHighlighted, "#problems")
    def _highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self._show(int(event.option.id or 0))

    def _show(self, index: int) -> None:
        self.query_one("#problem-detail", Static).update(problem_detail(self.rows[index]))

    @on(OptionList.OptionSelected, "#problems")
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(int(event.option.id))


def problem_detail(problem: Problem) -> Text:
    """A problem whole: what, where, the explanation and every hint, where it opens."""
    text = Text(problem.title, style="bold")
    if problem.where:
        text.append(f"\nat {problem.where}", style="dim")
    text.append(f"\nin {problem.scope()}")
    if problem.time_share is not None:
        text.append(f"  ({problem.time_share:.1%} of the measured GPU time)")
    if problem.explanation:
        text.append(f"\n{problem.explanation}")
    for hint in problem.hints:
        text.append("\nHint: ", style="bold")
        text.append(hint)
    if problem.more:
        text.append(f"\n{problem.more}", style="dim")
    if problem.stage:
        line = f":{problem.line}" if problem.line else ""
        text.append(f"\nenter opens {problem.unit} · {problem.stage}{line}", style="dim")
    return text


@dataclass(frozen=True)
class SidePane:
    """One pane of the side-by-side view: its title, lines, lexer, the source locations of
    its lines and the line its cursor starts on."""

    title: str
    lines: list[str]
    lexer: Any
    locations: Any  # irscope.browse.locations.LineLocations
    cursor: int = 0


class SideBySideScreen(Screen[None]):
    """Two to four stages of one unit side by side, each at the line of the same source as
    the cursor it was opened from; moving the focused pane's cursor marks that source's lines
    in the others and moves their cursors there. `s` picks the stages shown."""

    BINDINGS = CLOSE + [Binding("tab", "focus_next", "Next pane", id="side-tab"),
                        Binding("s", "pick", "Pick the stages", id="side-pick")]

    def __init__(self, panes: Sequence[SidePane], stages: tuple[Stage, ...] = (),
                 anchor: int = 0, choices: tuple[Stage, ...] = (),
                 titles: Sequence[str] = ()) -> None:
        super().__init__()
        self.panes = list(panes)
        self.stages, self.anchor = stages, anchor
        self.choices, self.titles = choices, list(titles)  # the stages `s` offers

    def compose(self) -> ComposeResult:
        with Horizontal(id="side-viewers"):
            for i, pane in enumerate(self.panes):
                with Vertical(classes="compare-side"):
                    yield FitLabel(pane.title, classes="compare-title")
                    yield IrViewer(id=f"side-{i}")
        # a plain line, not Footer: Footer rebuilds its widgets on each focus change
        yield Static(Text.assemble((" tab ", "reverse bold"), " next pane  ",
                                   (" s ", "reverse bold"), " pick the stages  ",
                                   (" escape ", "reverse bold"), " close"), id="side-keys")

    def on_mount(self) -> None:
        for i, pane in enumerate(self.panes):
            viewer = self.viewer(i)
            viewer.show(pane.lines, pane.lexer, cursor=pane.cursor)
            self.watch(viewer, "cursor", self._linked(i), init=False)
        anchor = self.viewer(min(self.anchor, len(self.panes) - 1))
        anchor.focus()
        self._link(self.anchor, anchor.cursor, move=False)

    def viewer(self, pane: int) -> IrViewer:
        return self.query_one(f"#side-{pane}", IrViewer)

    def _linked(self, pane: int):
        def follow(cursor: int) -> None:
            if self.viewer(pane).has_focus:  # moved by another pane: no echo back
                self._link(pane, cursor)
        return follow

    def _link(self, pane: int, cursor: int, move: bool = True) -> None:
        """Mark the lines of ``cursor``'s source in the other panes; move their cursors
        there (``move``), so the panes scroll together."""
        keys = self.panes[pane].locations.same_source(cursor)
        for other in range(len(self.panes)):
            if other != pane:
                hits = self.panes[other].locations.find(keys) if keys else []
                viewer = self.viewer(other)
                viewer.set_marks(hits)
                if hits and move and viewer.cursor not in hits:
                    viewer.cursor = hits[0]

    def action_pick(self) -> None:
        """Choose the stages to show (Python, TTGIR, PTX, SASS, ...) among the unit's."""
        shown = {s.id for s in self.stages}

        def chosen(picked: list[int] | None) -> None:
            if picked and len(picked) >= 2:
                stages = tuple(self.choices[i] for i in picked)
                focused = next((i for i in range(len(self.panes))
                                if self.viewer(i).has_focus), self.anchor)
                anchor = self.stages[focused] if focused < len(self.stages) else stages[0]
                self.app.side_by_side_worker(anchor, self.viewer(focused).cursor, stages)
            elif picked is not None:
                self.notify("pick two stages or more", severity="warning", timeout=3)

        self.app.push_screen(StagesPicker(self.titles, [i for i, s in enumerate(self.choices)
                                                        if s.id in shown]), chosen)


class TickList(SelectionList[int]):
    """A selection list whose enter confirms the ticks (space ticks) instead of ticking."""

    BINDINGS = [Binding("enter", "screen.done", "Show these", id="ticks-done")]


class StagesPicker(ModalScreen[list[int] | None]):
    """The unit's stages with those shown ticked: space ticks, enter shows the ticked ones."""

    BINDINGS = CLOSE

    def __init__(self, titles: Sequence[str], ticked: Sequence[int]) -> None:
        super().__init__()
        self.titles, self.ticked = list(titles), set(ticked)

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box"):
            yield Static("Stages side by side  (space ticks, enter shows them, escape closes)",
                         classes="box-title")
            yield TickList(*[(title, i, i in self.ticked) for i, title in enumerate(self.titles)],
                           id="pick")

    def on_mount(self) -> None:
        self.query_one("#pick").focus()

    def action_done(self) -> None:
        self.dismiss(sorted(self.query_one("#pick", TickList).selected))


class CompileIndexScreen(ModalScreen[int | None]):
    """The run's compiles under the user's frames that led to them (browse.compile_index):
    enter on a compile opens it (dismisses with its unit id)."""

    BINDINGS = CLOSE

    def __init__(self, root: Any) -> None:
        super().__init__()
        self.root = root

    def compose(self) -> ComposeResult:
        with Vertical(id="problems-box"):
            yield Static(f"Compiles by the frames that led to them ({self.root.count()})  "
                         "enter opens one, escape closes", classes="box-title")
            tree: Tree[int | None] = Tree("run", id="compile-index")
            tree.show_root = False
            self._add(tree.root, self.root)
            yield tree

    def _add(self, node, frame) -> None:
        for compiled in frame.compiles:
            node.add_leaf(Text(compiled.label(), style="bold"), data=compiled.unit_id)
        for child in frame.frames.values():
            self._add(node.add(Text(child.where, style="dim"), data=None, expand=True), child)

    def on_mount(self) -> None:
        tree = self.query_one("#compile-index", Tree)
        tree.root.expand_all()
        tree.focus()

    @on(Tree.NodeSelected, "#compile-index")
    def _chosen(self, event: Tree.NodeSelected) -> None:
        if event.node.data is not None:
            self.dismiss(event.node.data)


class PickerScreen(ModalScreen[int | None]):
    """Several places to go to (one FX node became three kernels, a line feeds a forward and
    a backward kernel): enter picks one (dismisses with its index), escape none."""

    BINDINGS = CLOSE

    def __init__(self, title: str, labels: list[str]) -> None:
        super().__init__()
        self.title_text, self.labels = title, labels

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box"):
            yield Static(f"{self.title_text}  (enter opens, escape closes)", classes="box-title")
            yield OptionList(*[Option(Text(label), id=str(i))
                               for i, label in enumerate(self.labels)], id="picker")

    def on_mount(self) -> None:
        self.query_one("#picker").focus()

    @on(OptionList.OptionSelected, "#picker")
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(int(event.option.id))


class SourceViewScreen(Screen[None]):
    """A user's file, each line that feeds kernels ending in what it feeds (forward and
    backward launches, kernels, instructions; "with callees" where that counts the kernels of
    the code it calls, as `irscope where FILE` says) and marked (n/N step through them); enter
    on one asks the app for its kernels (a picker, then the kernel opens)."""

    BINDINGS = CLOSE + [Binding("enter", "choose", "Kernels of this line", id="source-choose"),
                        Binding("right_square_bracket", "choose", "Kernels of this line",
                                show=False, id="source-follow"),
                        Binding("n", "mark(1)", "Next line with kernels", id="source-next"),
                        Binding("N", "mark(-1)", "Previous line with kernels", show=False,
                                id="source-prev")]

    def __init__(self, view: Any, line: int, lexer: Any) -> None:
        super().__init__()
        self.view, self.line, self.lexer = view, line, lexer

    def compose(self) -> ComposeResult:
        rows = self.view.rows
        callees = sum(row.with_callees for row in rows.values())
        yield Label(f"{self.view.title}  ·  {len(rows)} lines feed kernels"
                    + (f" ({callees} with callees)" if callees else ""), classes="compare-title")
        yield IrViewer(id="source-view")
        yield Footer()

    def on_mount(self) -> None:
        lines = [text.rstrip() + (f"  # ◂ {self.view.rows[n].label()}"
                                  if n in self.view.rows else "")
                 for n, text in enumerate(self.view.lines, 1)]
        viewer = self.query_one(IrViewer)
        viewer.show(lines, self.lexer, cursor=max(self.line - 1, 0),
                    marks=tuple(n - 1 for n in self.view.rows))
        viewer.focus()

    def action_choose(self) -> None:
        line = self.query_one(IrViewer).cursor + 1
        row = self.view.rows.get(line)
        if row is None:
            self.notify("this line feeds no kernel the run's records name (n: the next one)",
                        timeout=3)
            return
        self.app.open_hits(row)

    def action_mark(self, step: int) -> None:
        self.query_one(IrViewer).next_match(step)
