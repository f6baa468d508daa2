"""The pipeline view: a unit's passes in order; choosing one shows its line-aligned diff."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Label, OptionList
from textual.widgets.option_list import Option

from irscope.analysis.passes import PassRow, listing
from irscope.parsers import registry
from irscope.store import Unit
from irscope.tui.viewer import IrViewer
from irscope.browse.line_diff import aligned_diff
from irscope.read.passes import unkept_ir

# the lexer a pipeline's IR is highlighted with
FAMILY_KINDS = {"mlir": "ttir", "hlo": "hlo_before_opt", "fx": "fx_graph"}
MARKERS = {"same": "  ", "removed": "- ", "added": "+ "}


@dataclass
class PassesLoaded(Message):
    """A unit's passes, read by a worker."""

    rows: tuple[PassRow, ...]
    families: dict[str, str]
    problems: tuple[str, ...]


@dataclass
class PassDiffLoaded(Message):
    """The two IRs of one pass, read by a worker."""

    row: PassRow
    before: str
    after: str


class PassesScreen(Screen[None]):
    """Passes of one unit (unchanged ones folded: ``a`` lists every pass) beside the diff of
    the pass under the cursor: ``- `` lines it removed, ``+ `` lines it added."""

    BINDINGS = [Binding("escape", "dismiss", "Close", id="passes-close"),
                Binding("a", "toggle_all", "All passes", id="passes-all")]
    DEFAULT_CSS = """
    #passes-list { width: 44; height: 1fr; }
    #passes-diff { width: 1fr; height: 1fr; }
    #passes-summary { height: 1; }
    """

    def __init__(self, run_path: Path, unit: Unit) -> None:
        super().__init__()
        self.run_path, self.unit = run_path, unit
        self.rows: tuple[PassRow, ...] = ()
        self.families: dict[str, str] = {}
        self.show_all = False
        self.shown_pass: PassRow | None = None  # the pass whose diff is on screen

    def compose(self) -> ComposeResult:
        yield Label(Text(f"Passes of {self.unit.name}: reading…"), id="passes-summary")
        with Horizontal():
            yield OptionList(id="passes-list")
            yield IrViewer(id="passes-diff")
        yield Footer()

    def on_mount(self) -> None:
        self.load_passes()

    @work(thread=True, exclusive=True, exit_on_error=False, group="passes")
    def load_passes(self) -> None:
        from irscope.read.passes import unit_passes
        from irscope.store import Run

        with Run.open(self.run_path, read_only=True) as run:
            found = unit_passes(run, run.unit_by_id(self.unit.id))
        self.post_message(PassesLoaded(found.rows, found.families or {}, found.diagnostics))

    @work(thread=True, exclusive=True, exit_on_error=False, group="pass-diff")
    def load_diff(self, row: PassRow) -> None:
        from irscope.read.passes import pass_texts
        from irscope.store import Run

        with Run.open(self.run_path, read_only=True) as run:
            before, after = pass_texts(run, run.unit_by_id(self.unit.id), row)
        self.post_message(PassDiffLoaded(row, before, after))

    @on(PassesLoaded)
    def _loaded(self, message: PassesLoaded) -> None:
        self.rows, self.families = message.rows, message.families
        self._fill()
        if not self.rows:
            self.query_one(IrViewer).show_message(
                "no passes filed for this unit: capture them with --passes on "
                "`irscope inspect`, `compile` or `ingest`")

    def _fill(self) -> None:
        shown = listing(self.rows, self.show_all)
        options = self.query_one(OptionList)
        options.clear_options()
        for row in shown.rows:
            figures = "?" if row.changed is None else f"+{row.added} -{row.removed}"
            delta = f" ops {row.op_delta:+d}" if row.op_delta else ""
            options.add_option(Option(Text(f"{row.index:>3} {row.name}  {figures}{delta}"),
                                      id=str(row.index)))
        self.query_one("#passes-summary", Label).update(Text(
            f"Passes of {self.unit.name}: {shown.total} passes, {shown.changed} changed the "
            f"IR, {shown.folded} unchanged folded (a: all)"))
        if shown.rows:
            options.highlighted = 0
            options.focus()

    @on(OptionList.OptionHighlighted)
    def _highlighted(self, event: OptionList.OptionHighlighted) -> None:
        row = next((r for r in self.rows if str(r.index) == event.option.id), None)
        if row is not None:
            self.load_diff(row)

    @on(PassDiffLoaded)
    def _diff_loaded(self, message: PassDiffLoaded) -> None:
        viewer = self.query_one(IrViewer)
        self.shown_pass = message.row
        if message.row.changed is None:
            viewer.show_message(f"{message.row.name}: the dump does not hold the IR it left")
            return
        gap = unkept_ir(self.rows, message.row)
        if gap:
            viewer.show_message(gap)
            return
        lines, marks = diff_lines(message.before.splitlines(), message.after.splitlines())
        kind = FAMILY_KINDS.get(self.families.get(message.row.pipeline, "mlir"), "text")
        viewer.show(lines, registry.lexer(kind), cursor=marks[0] if marks else 0, marks=marks)

    def action_toggle_all(self) -> None:
        self.show_all = not self.show_all
        self._fill()


def diff_lines(before: list[str], after: list[str]) -> tuple[list[str], tuple[int, ...]]:
    """One column of the line-aligned diff: ``- `` removed, ``+ `` added, marks on both."""
    lines: list[str] = []
    marks: list[int] = []
    for row in aligned_diff(before, after):
        if row.left is not None and row.tag != "same":
            marks.append(len(lines))
            lines.append(MARKERS["removed"] + before[row.left])
        if row.right is not None and row.tag != "same":
            marks.append(len(lines))
            lines.append(MARKERS["added"] + after[row.right])
        if row.tag == "same":
            lines.append(MARKERS["same"] + before[row.left])
    return lines, tuple(marks)
