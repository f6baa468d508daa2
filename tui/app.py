"""The irscope TUI: navigator, stage viewer and analysis panel over one run."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from textual import on, work
from textual.app import App, ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Header, Static
from textual.worker import Worker, WorkerState

from irscope.errors import IrscopeError, UsageError
from irscope.parsers import registry
from irscope.run_figures import read_run_figures
from irscope.store import Run, Stage
from irscope.tui import messages as msg
from irscope.tui.analysis_panel import AnalysisPanel
from irscope.tui.bindings import KeyBar, bindings
from irscope.tui.navigator import Navigator
from irscope.tui.screens import (CompareScreen, HelpScreen, LoopsScreen, PromptScreen,
                                 SourceScreen, stage_label)
from irscope.tui.viewer import IrViewer
from irscope.views import (HISTOGRAM_MODES, LineLocations, badges, is_ir, line_locations,
                           navigator_groups, neighbour_stage, node_keys, python_location,
                           stage_title)

NARROW = 110  # below this many columns the analysis panel starts hidden
BADGE_KINDS = ("sass", "ptx", "inductor_output_code", "hlo_after_opt", "jaxpr", "fx_graph")


def lexer_for(kind: str):
    """The registry's lexer, set to keep blank lines so lexed lines stay aligned."""
    lexer = registry.lexer(kind)
    lexer.stripnl, lexer.ensurenl = False, True
    return lexer


class IrscopeApp(App[None]):
    """Browse one run: pick a stage on the left, read it in the middle, figures on the right."""

    CSS_PATH = "app.tcss"
    TITLE = "irscope"
    BINDINGS = bindings("app")

    def __init__(self, run_path: str | Path, show_all: bool = False) -> None:
        super().__init__()
        self.run_path = Path(run_path)
        self.sub_title = self.run_path.name
        self._local = threading.local()
        self._locations: dict[tuple[str, str], LineLocations] = {}
        self.current: Stage | None = None  # the stage chosen
        self.shown: Stage | None = None  # the stage whose text (or failure) is on screen
        self.marked: Stage | None = None
        self.collapsed = False
        self.folded_spans: list[tuple[int, int]] = []  # collapsed line -> source lines
        self.parsed: dict[str, Any] = {}
        self.units: dict[int, Any] = {}
        self.stages_by_unit: dict[int, tuple[Stage, ...]] = {}

        self.navigator = Navigator(id="navigator", show_all=show_all)
        self.viewer = IrViewer(id="viewer")
        self.status = Static("", id="status")
        self.panel = AnalysisPanel(id="panel")
        self._badges_requested = False

    def compose(self) -> ComposeResult:
        yield Header(icon="◆")
        with Horizontal(id="main"):
            yield self.navigator
            with Vertical(id="centre"):
                yield self.viewer
                yield self.status
            yield self.panel
        yield KeyBar(id="keybar")

    def store(self) -> Run:
        """This thread's connection to the run (SQLite handles stay in their thread)."""
        run = getattr(self._local, "run", None)
        if run is None:
            run = self._local.run = Run.open(self.run_path)
        return run

    def on_mount(self) -> None:
        self.watch(self.viewer, "cursor", self._update_status, init=False)
        self.screen.set_class(self.size.width < NARROW, "narrow")
        self.load_run()

    # -- workers: each posts one message ----------------------------------------------------
    @work(thread=True, exclusive=True, group="run", exit_on_error=False)
    def load_run(self) -> None:
        run = self.store()
        self.post_message(msg.RunLoaded(navigator_groups(run), run.events()))

    @work(thread=True, exclusive=True, group="badges", exit_on_error=False)
    def load_badges(self) -> None:
        run, by_blob, out = self.store(), {}, {}
        figures = {u.unit_id: u for u in read_run_figures(run).units}
        for unit_id, stages in self.stages_by_unit.items():
            per_kind = {}
            for stage in stages:
                if stage.kind in BADGE_KINDS and stage.kind not in per_kind:
                    key = (stage.blob, stage.kind)
                    if key not in by_blob:
                        by_blob[key] = self._parse_quietly(run, stage)
                    per_kind[stage.kind] = by_blob[key]
            out[unit_id] = badges(per_kind, figures.get(unit_id))
        self.post_message(msg.BadgesReady(out))

    @work(thread=True, exclusive=True, group="stage", exit_on_error=False)
    def load_stage(self, stage: Stage, cursor: int = 0, marks: tuple[int, ...] = ()) -> None:
        if registry.get(stage.kind).binary:
            self.post_message(msg.StageFailed(stage, f"{stage_title(stage)} is binary "
                                              f"({stage.size:,} bytes): open its SASS stage"))
            return
        try:
            text = self.store().read_text(stage)
        except IrscopeError as exc:
            self.post_message(msg.StageFailed(stage, self._without_run_path(exc)))
            return
        collapsed = self.collapsed and stage.kind == "ptx"
        if collapsed:
            lines, spans = collapsed_listing(text)
            cursor = next((i for i, (first, last) in enumerate(spans) if cursor <= last), 0)
        else:
            lines, spans = text.splitlines(), []
        self.post_message(msg.StageLoaded(stage, lines, lexer_for(stage.kind), cursor, marks,
                                          spans))

    @work(thread=True, exclusive=True, group="analysis", exit_on_error=False)
    def load_analysis(self, stage: Stage) -> None:
        self.post_message(msg.AnalysisReady(stage, self._parse_quietly(self.store(), stage)))

    @work(thread=True, exclusive=True, group="follow", exit_on_error=False)
    def follow_worker(self, stage: Stage, line: int, step: int) -> None:
        run = self.store()
        target = neighbour_stage(self.stages_by_unit.get(stage.unit_id, ()), stage, step)
        if target is None:
            target = self._linked_stage(run, stage, step)
        if target is None:
            where = "next" if step > 0 else "previous"
            self.post_message(msg.FollowResolved(None, (), f"no {where} stage"))
            return
        keys = self._locations_of(run, stage).same_source(line)
        if not keys:
            self.post_message(msg.FollowResolved(target, (), f"line {line + 1} carries no "
                                                 "source location; opened the stage at the top"))
            return
        hits = tuple(self._locations_of(run, target).find(keys))
        files = sorted(k.rsplit("/", 1)[-1] for k in keys if not k.startswith("node "))
        shown = ", ".join(files or sorted(keys))
        note = (f"{len(hits)} lines from {shown}" if hits
                else f"{shown} does not appear in {stage_title(target)}")
        self.post_message(msg.FollowResolved(target, hits, note))

    @work(thread=True, exclusive=True, group="source", exit_on_error=False)
    def source_worker(self, stage: Stage, line: int) -> None:
        run = self.store()
        keys = self._locations_of(run, stage).at(line)
        found = python_location(keys)
        nodes = node_keys(keys)
        for graph in self.stages_by_unit.get(stage.unit_id, ()):  # Inductor code names FX
            if found is None and nodes and graph.kind in ("fx_graph", "aot_graph"):  # nodes
                graph_locations = self._locations_of(run, graph)
                for number in graph_locations.find(nodes):
                    found = found or python_location(graph_locations.at(number))
        if found is None:
            self.post_message(msg.Problem("no Python source line for this line (or the file "
                                          "is not on this machine)", "warning"))
            return
        path, number = found
        lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
        self.call_from_thread(self.push_screen,
                              SourceScreen(path, lines, number, lexer_for("python_source")))

    @work(thread=True, exclusive=True, group="compare", exit_on_error=False)
    def compare_worker(self, left: Stage, right: Stage) -> None:
        run, sides = self.store(), []
        for stage in (left, right):
            try:
                lines = run.read_text(stage).splitlines()
            except IrscopeError as exc:
                lines = [f"⚠ {exc}"]
            title = stage_label(stage, self.units[stage.unit_id].name)
            sides.append((stage, title, lines, lexer_for(stage.kind),
                          self._parse_quietly(run, stage)))
        self.post_message(msg.CompareReady(sides))

    def _without_run_path(self, exc: Exception) -> str:
        """The error as the user needs it here: the run's path is already in the title."""
        return str(exc).removeprefix(f"{self.run_path}: ")

    def _parse_quietly(self, run: Run, stage: Stage) -> dict[str, Any]:
        """Parsed JSON, or a result naming the failure: one odd stage never stops the TUI."""
        try:
            return run.parsed(stage)
        except IrscopeError as exc:
            return {"diagnostics": [{"line": 0, "message": self._without_run_path(exc)}]}
        except Exception as exc:  # a missing or failing parser module
            return {"diagnostics": [{"line": 0, "message": f"no analysis: {exc}"}]}

    def _locations_of(self, run: Run, stage: Stage) -> LineLocations:
        key = (stage.blob, stage.kind)
        if key not in self._locations:
            self._locations[key] = line_locations(stage.kind, run.read_text(stage),
                                                  self._parse_quietly(run, stage))
        return self._locations[key]

    def _linked_stage(self, run: Run, stage: Stage, step: int) -> Stage | None:
        """Across a "launches" relation: graph → first kernel stage, kernel → graph's last."""
        relations = run.relations("launches")
        linked = ([r.dst for r in relations if r.src == stage.unit_id] if step > 0
                  else [r.src for r in relations if r.dst == stage.unit_id])
        for unit_id in linked:
            text_stages = [s for s in self.stages_by_unit.get(unit_id, ()) if is_ir(s)]
            if text_stages:
                return text_stages[0] if step > 0 else text_stages[-1]
        return None

    # -- messages ---------------------------------------------------------------------------
    @on(msg.RunLoaded)
    def _run_loaded(self, message: msg.RunLoaded) -> None:
        self.units = {row.unit.id: row.unit for g in message.groups for row in g.rows}
        self.stages_by_unit = {row.unit.id: row.stages for g in message.groups for row in g.rows}
        self.navigator.set_groups(message.groups)
        problems = [e for e in message.events if e.kind in ("graph_break", "compile_failure")]
        stage_count = sum(len(s) for s in self.stages_by_unit.values())
        self.sub_title = (f"{self.run_path.name} · {len(self.units)} units · {stage_count} stages"
                          + (f" · {len(problems)} breaks/failures" if problems else ""))
        first = self.navigator.first_stage()
        if first is None:
            self.viewer.show_message("This run has no stages.")
        else:
            self.open_stage(first)
            self.navigator.select_stage(first)
        self.navigator.stage_tree.focus()

    @on(msg.BadgesReady)
    def _badges(self, message: msg.BadgesReady) -> None:
        self.navigator.stage_tree.set_badges(message.badges)

    @on(Navigator.StageChosen)
    def _stage_chosen(self, message: Navigator.StageChosen) -> None:
        if self.current is None or message.stage.id != self.current.id:
            self.open_stage(message.stage)

    def open_stage(self, stage: Stage, cursor: int = 0, marks: tuple[int, ...] = ()) -> None:
        self.current = stage
        self.panel.title = self._label(stage)
        self.panel.parsed = None
        self.load_stage(stage, cursor, marks)

    @on(msg.StageLoaded)
    def _stage_loaded(self, message: msg.StageLoaded) -> None:
        if self.current is None or message.stage.id != self.current.id:
            return
        self.shown = message.stage
        self.folded_spans = message.folded_spans
        self.viewer.show(message.lines, message.lexer, message.cursor, message.marks)
        self._update_status()
        self.call_after_refresh(self.load_analysis, message.stage)  # after the text is drawn
        if not self._badges_requested:  # badges parse every unit: only once the screen is up
            self._badges_requested = True
            self.call_after_refresh(self.load_badges)

    @on(msg.StageFailed)
    def _stage_failed(self, message: msg.StageFailed) -> None:
        if self.current is None or message.stage.id != self.current.id:
            return
        self.shown = message.stage
        self.viewer.show_message(f"⚠ {message.reason}. The other stages are still browsable.")
        self._update_status()
        self.load_analysis(message.stage)

    @on(msg.AnalysisReady)
    def _analysis(self, message: msg.AnalysisReady) -> None:
        if self.current is not None and message.stage.id == self.current.id:
            self.parsed = message.parsed
            self.panel.parsed = message.parsed

    @on(msg.FollowResolved)
    def _followed(self, message: msg.FollowResolved) -> None:
        self.notify(message.note, timeout=4)
        if message.target is not None:
            self.navigator.select_stage(message.target)
            self.open_stage(message.target, message.lines[0] if message.lines else 0,
                            message.lines)

    @on(msg.CompareReady)
    def _compare_ready(self, message: msg.CompareReady) -> None:
        self.push_screen(CompareScreen(message.sides))

    @on(msg.Problem)
    def _problem(self, message: msg.Problem) -> None:
        self.notify(message.text, severity=message.severity, timeout=6)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            self.notify(f"{event.worker.name}: {event.worker.error}", severity="error",
                        timeout=8)

    def on_resize(self, event) -> None:
        self.screen.set_class(event.size.width < NARROW, "narrow")

    # -- status -----------------------------------------------------------------------------
    def _label(self, stage: Stage) -> str:
        unit = self.units.get(stage.unit_id)
        return stage_label(stage, unit.name if unit else "?")

    def _update_status(self) -> None:
        if self.current is None:
            return
        viewer = self.viewer
        parts = [self._label(self.current)]
        if viewer.lines:
            parts.append(f"line {viewer.cursor + 1}/{len(viewer.lines)}")
        if self.collapsed and self.current.kind == "ptx":
            parts.append("collapsed")
        if viewer.pattern:
            parts.append(f"/{viewer.pattern.pattern.replace(chr(92), '')}: "
                         f"{len(viewer.matches)} lines")
        if self.marked:
            parts.append(f"marked: {self._label(self.marked)}")
        self.status.update("  │  ".join(parts))

    # -- actions ----------------------------------------------------------------------------
    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_focus_filter(self) -> None:
        self.navigator.filter.focus()

    def action_search(self) -> None:
        def done(text: str | None) -> None:
            if text is not None:
                count = self.viewer.search(text)
                self.notify(f"{count} matching lines" if count else f"no match for {text!r}",
                            timeout=3)
                self.viewer.focus()
                self._update_status()

        current = self.viewer.pattern.pattern.replace("\\", "") if self.viewer.pattern else ""
        self.push_screen(PromptScreen("Search", current, "text to find"), done)

    def action_search_next(self) -> None:
        self.viewer.next_match(1)

    def action_search_prev(self) -> None:
        self.viewer.next_match(-1)

    def action_goto_line(self) -> None:
        def done(text: str | None) -> None:
            if text and text.strip().isdigit():
                self.viewer.cursor = int(text) - 1
                self.viewer.focus()
            elif text:
                self.notify(f"not a line number: {text!r}", severity="warning")

        self.push_screen(PromptScreen(f"Go to line (1-{len(self.viewer.lines)})", "", "line"),
                         done)

    def action_follow(self, step: int) -> None:
        if self.current is None:
            return
        if self.collapsed and self.current.kind == "ptx":
            self.notify("leave the collapsed view (z) to follow lines", severity="warning")
            return
        self.follow_worker(self.current, self.viewer.cursor, step)

    def action_python_source(self) -> None:
        if self.current is not None and self.viewer.lines:
            self.source_worker(self.current, self.viewer.cursor)

    def action_toggle_collapsed(self) -> None:
        self.collapsed = not self.collapsed
        if self.current is not None and self.current.kind == "ptx":
            line = self.viewer.cursor  # keep the cursor on the same instruction
            if self.folded_spans and line < len(self.folded_spans):
                line = self.folded_spans[line][0]
            self.load_stage(self.current, line)
        elif self.collapsed:
            self.notify("collapsed view applies to PTX stages", timeout=3)
        self._update_status()

    def action_loops(self) -> None:
        kernels = self.parsed.get("kernels") if self.parsed else None
        if self.current is None or not isinstance(kernels, list):
            self.notify("no loop analysis for this stage", severity="warning")
            return
        self.push_screen(LoopsScreen(self._label(self.current), kernels))

    def action_cycle_histogram(self) -> None:
        panel = self.panel
        panel.mode = HISTOGRAM_MODES[(HISTOGRAM_MODES.index(panel.mode) + 1)
                                     % len(HISTOGRAM_MODES)]

    def action_toggle_panel(self) -> None:
        self.panel.display = not self.panel.display

    def action_mark(self) -> None:
        if self.current is not None:
            self.marked = self.current
            self.notify(f"marked {self._label(self.current)}; pick another stage and press c",
                        timeout=3)
            self._update_status()

    def action_compare(self) -> None:
        if self.marked is None or self.current is None:
            self.notify("mark a stage with m, select another, then press c", severity="warning")
            return
        self.compare_worker(self.marked, self.current)

    def action_copy_line(self) -> None:
        self.copy_to_clipboard(self.viewer.current_line)
        self.notify("copied the line", timeout=2)

    def action_copy_stage(self) -> None:
        self.copy_to_clipboard("\n".join(self.viewer.lines))
        self.notify(f"copied {len(self.viewer.lines)} lines", timeout=2)

    def action_toggle_dark(self) -> None:
        self.theme = "textual-light" if self.current_theme.dark else "textual-dark"


def collapsed_listing(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """The PTX analyzer's folded listing: shown lines and the 0-based source lines each covers."""
    from irscope.parsers.ptx_listing import collapse

    items = collapse(text)
    return [i.text for i in items], [(i.first_line - 1, i.last_line - 1) for i in items]


def run_app(run_path: str | Path, theme: str | None = None, show_all: bool = False) -> None:
    """Open the TUI on a run directory (already checked to open), in ``theme`` if given;
    ``show_all`` lists the units hidden by default (JAX's eager ops) too."""
    app = IrscopeApp(run_path, show_all)
    if theme:
        if theme not in app.available_themes:
            raise UsageError(f"unknown theme {theme!r}; choose one of "
                             + ", ".join(sorted(app.available_themes)))
        app.theme = theme
    app.run()
