"""The irscope TUI: navigator, stage viewer and analysis panel over one run."""

from __future__ import annotations

import asyncio
import gc
import re
import threading
from pathlib import Path
from typing import Any

from textual import on, work
from textual.app import App, ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Header
from textual.worker import Worker, WorkerState

from irscope.errors import IrscopeError, UsageError
from irscope.parsers import registry
from irscope.parsers.base import ParseResult
from irscope.read.figures import read_run_figures, unit_figures_of
from irscope.read.autotune import autotune_times
from irscope.read.kernel_origins import kernel_origins, origin_counts
from irscope.read.timing import read_time, time_share
from irscope.read.view import RunView, SharedReads
from irscope.store import Run, Stage
from irscope.tui import messages as msg
from irscope.tui.analysis_panel import AnalysisPanel
from irscope.tui.bindings import KeyBar, bindings
from irscope.tui.checks import Place, lint_badges, lint_places, problem_place, stage_of
from irscope.tui.navigator import NO_GRAPH_TAG, Navigator, StageTree
from irscope.tui.screens import (CompareScreen, CompileIndexScreen, HelpScreen, LoopsScreen,
                                 PickerScreen, ProblemsScreen, PromptScreen, SideBySideScreen,
                                 SidePane, SourceScreen, SourceViewScreen, stage_label)
from irscope.tui.status_line import SEPARATOR, StatusLine
from irscope.tui.threads import DaemonThreads
from irscope.tui.viewer import IrViewer
from irscope.analysis.histograms import HISTOGRAM_MODES
from irscope.browse.autotune import autotune_candidates, candidate_text
from irscope.browse.kernel_card import figure_deltas, kernel_card, launched_by, time_rows
from irscope.browse.graph_kernels import graph_kernels
from irscope.browse.launch_facts import launch_facts
from irscope.browse.launches import output_code_kernels
from irscope.browse.follow import Follower, parsed_quietly
from irscope.browse.locations import LineLocations, first_code_line, is_ir
from irscope.browse.side_by_side import default_stages, pane_count, start_lines
from irscope.browse.tree import RAW, badges, navigator_groups, stage_title
from irscope.read.stage_counts import StageCount, shown_stage_count
from irscope.read.stage_text import readable_text

NARROW = 110  # below this many columns the analysis panel starts hidden
HEADER_SIDES = 18  # columns of the header's icon and clock space, either side of its title
# actions that act on the main screen: refused while another screen is on top
GLOBAL_ACTIONS = frozenset({"quit", "help", "toggle_dark", "focus_next", "focus_previous",
                            "command_palette", "screenshot", "bell"})
BADGE_KINDS = ("sass", "ptx", "inductor_output_code", "hlo_after_opt", "jaxpr", "fx_graph")


def lexer_for(kind: str):
    """The registry's lexer, set to keep blank lines so lexed lines stay aligned."""
    lexer = registry.lexer(kind)
    lexer.stripnl, lexer.ensurenl = False, True
    return lexer



def settle_heap() -> None:
    """Keep what is loaded out of the garbage collector's full passes: on a run of 12,000
    units one pass over it took 200-550 ms, a stall when it fell on a keystroke. The app
    gives it back to the collector when it closes (``on_unmount``)."""
    gc.freeze()

class IrscopeApp(App[None]):
    """Browse one run: pick a stage on the left, read it in the middle, figures on the right."""

    CSS_PATH = "app.tcss"
    TITLE = "irscope"
    BINDINGS = bindings("app")
    exiting = False  # set by exit(): keys typed after q act no more

    def __init__(self, run_path: str | Path, show_all: bool = False,
                 compare_with: str | Path | None = None, exact: bool = False) -> None:
        super().__init__()
        self.exact = exact  # compare stages as they are (paths, hashes, numbers included)
        self.run_path = Path(run_path)
        self.other_path = Path(compare_with) if compare_with else None  # `--compare OTHER`
        self.sub_title = self.run_path.name
        self._local = threading.local()
        self._shared_reads = SharedReads()  # what every thread's view reads in whole, read once
        self._locations: dict[tuple[str, str], LineLocations] = {}
        self.current: Stage | None = None  # the stage chosen
        self.shown: Stage | None = None  # the stage whose text (or failure) is on screen
        self.marked: Stage | None = None
        self.collapsed = False
        self.folded_spans: list[tuple[int, int]] = []  # collapsed line -> source lines
        self.parsed: ParseResult | None = None
        self.units: dict[int, Any] = {}
        self.stages_by_unit: dict[int, tuple[Stage, ...]] = {}
        self.roles: dict[int, str] = {}  # stage id -> forward, backward... (browse.tree.stage_roles)
        # where following came from: stage, cursor line and the lines it had marked
        self.back_stack: list[tuple[Stage, int, tuple[int, ...]]] = []
        self.forward_stack: list[tuple[Stage, int, tuple[int, ...]]] = []

        self.navigator = Navigator(id="navigator", show_all=show_all)
        self.viewer = IrViewer(id="viewer")
        self.status = StatusLine(id="status")
        self.panel = AnalysisPanel(id="panel")
        self._badges_requested = False
        self.loaded: bool | None = None  # the run read: None not yet, False its first page
        self._rest_requested = False
        self.figures: dict[int, Any] = {}  # UnitFigures by unit id, once badges are read
        self.gpu_time: Any = None  # the run's measured GPU time, once badges are read
        self.tuned: dict[int, Any] = {}  # the autotuners' benchmark times, likewise
        self.badges: dict[int, Any] = {}  # headline figures per unit, likewise
        self.launches: list = []  # the run's "launches" relations
        self.launch_facts: dict[int, tuple] = {}  # card rows of each kernel's launches
        self.slowest_compiles: dict[int, tuple] = {}  # a graph's slowest Triton compiles
        self.events: list = []
        self.problems: tuple = ()  # the run's problems (irscope.read.problems), each once
        self.counted: StageCount | None = None  # the units shown and their stages, once counted
        self.findings: list = []  # (Finding, Place) per lint finding, worst first
        self.checked = False  # whether the problems and findings are in
        self._problems_asked = False  # e pressed before they were in: shown when they are

    def compose(self) -> ComposeResult:
        yield Header(icon="◆")
        with Horizontal(id="main"):
            yield self.navigator
            with Vertical(id="centre"):
                yield self.viewer
                yield self.status
            yield self.panel
        yield KeyBar(id="keybar")

    def store(self) -> RunView:
        """This thread's view of the run (SQLite handles stay in their thread)."""
        view = getattr(self._local, "view", None)
        if view is None:
            view = self._local.view = RunView(Run.open(self.run_path), self._shared_reads)
        return view

    # whether the source view may read the user's files from this machine (not when served)
    reads_source_files = True

    def follower(self) -> Follower:
        """Following over this thread's view (one per thread, so the provenance graph is
        built once); line locations are shared across threads."""
        view = self.store()
        follower = getattr(self._local, "follower", None)
        if (follower is None or follower.source is not view
                or follower.stages_by_unit is not self.stages_by_unit):  # the rest read since
            follower = self._local.follower = Follower(RunView.of(view), self.units,
                                                       self.stages_by_unit, self._locations)
            follower.source = view
        return follower

    def on_mount(self) -> None:
        asyncio.get_running_loop().set_default_executor(DaemonThreads())  # q never waits
        self.watch(self.viewer, "cursor", self._update_status, init=False)
        self.screen.set_class(self.size.width < NARROW, "narrow")
        self.load_run()
        self.count_stages()

    def on_unmount(self) -> None:
        gc.unfreeze()  # what settle_heap kept from the collector is collectable again

    # -- workers: each posts one message ----------------------------------------------------
    @work(thread=True, exclusive=True, group="run", exit_on_error=False)
    def load_run(self) -> None:
        """The navigator's first page first: a run of 12,000 units is browsable before the
        stages of all of them are read (load_rest, once the first stage is drawn)."""
        run = self.store()
        groups = navigator_groups(run, first=StageTree.PAGE)
        if any(row.pending for group in groups for row in group.rows):
            self.post_message(msg.RunLoaded(groups, complete=False))
        else:
            self.post_message(msg.RunLoaded(groups, run.events(), run.relations("launches")))

    @work(thread=True, exclusive=True, group="run", exit_on_error=False)
    def load_rest(self) -> None:
        run = self.store()
        self.post_message(msg.RunLoaded(navigator_groups(run), run.events(),
                                        run.relations("launches")))

    @work(thread=True, exclusive=True, group="count", exit_on_error=False)
    def count_stages(self) -> None:
        """The units shown and their stages, counted as `irscope ls` and reports count them,
        for the header (beside load_run: a 12,000-unit run's count takes 0.3 s)."""
        self.post_message(msg.StagesCounted(shown_stage_count(self.store(),
                                                              self.navigator.show_all)))

    @work(thread=True, exclusive=True, group="badges", exit_on_error=False)
    def load_badges(self) -> None:
        run, by_blob, out = self.store(), {}, {}
        figures = {u.unit_id: u for u in read_run_figures(run).units}
        time, tuned = read_time(run), autotune_times(run)
        for unit_id, stages in self.stages_by_unit.items():
            per_kind = {}
            for stage in stages:
                if stage.kind in BADGE_KINDS and stage.kind not in per_kind:
                    key = (stage.blob, stage.kind)
                    if key not in by_blob:
                        by_blob[key] = self._parse_quietly(run, stage)
                    per_kind[stage.kind] = by_blob[key]
            out[unit_id] = badges(per_kind, figures.get(unit_id), time_share(time, unit_id))
        kernels = graph_kernels(run, self.roles)
        origins, counts = kernel_origins(run), origin_counts(run)
        run.run.save_stats()  # what was parsed for the badges is cached for the next open
        self.post_message(msg.BadgesReady(out, figures, time, tuned, kernels, origins, counts))

    @work(thread=True, exclusive=True, group="checks", exit_on_error=False)
    def load_checks(self) -> None:
        """The run's problems and lint's findings, read once the badges are in."""
        from irscope.read.lint import read_findings
        from irscope.read.problems import run_problems

        run, units = self.store(), list(self.units.values())
        findings = read_findings(run)
        problems = run_problems(run, findings=findings)
        run.run.save_stats()  # what was parsed for the checks is cached for the next open
        self.post_message(msg.ChecksReady(problems, lint_places(findings, units)))

    @work(thread=True, exclusive=True, group="stage", exit_on_error=False)
    def load_stage(self, stage: Stage, cursor: int | None = None,
                   marks: tuple[int, ...] = ()) -> None:
        if registry.get(stage.kind).binary:
            self.post_message(msg.StageFailed(stage, f"{stage_title(stage)} is binary "
                                              f"({stage.size:,} bytes): open its SASS stage"))
            return
        try:
            text = readable_text(stage.kind, self.store().read_text(stage))
        except IrscopeError as exc:
            self.post_message(msg.StageFailed(stage, self._without_run_path(exc)))
            return
        if cursor is None:
            cursor = first_code_line(stage.kind, text.splitlines())
        collapsed = self.collapsed and stage.kind == "ptx"
        if collapsed:
            lines, spans = collapsed_listing(text)
            cursor = next((i for i, (first, last) in enumerate(spans) if cursor <= last), 0)
        else:
            lines, spans = text.splitlines(), []
        self.post_message(msg.StageLoaded(stage, lines, lexer_for(shown_kind(stage, text)),
                                          cursor, marks, spans))

    @work(thread=True, exclusive=True, group="analysis", exit_on_error=False)
    def load_analysis(self, stage: Stage) -> None:
        self.post_message(msg.AnalysisReady(stage, self._parse_quietly(self.store(), stage)))

    @work(thread=True, exclusive=True, group="follow", exit_on_error=False)
    def follow_worker(self, stage: Stage, line: int, step: int) -> None:
        came_from = [place[0].unit_id for place in self.back_stack]
        found = self.follower().follow(stage, line, step, came_from)
        self.post_message(msg.FollowResolved(found.target, found.lines, found.note,
                                             found.cursor, found.choices, found.source))

    @work(thread=True, exclusive=True, group="source", exit_on_error=False)
    def source_worker(self, stage: Stage, line: int) -> None:
        found = self.follower().python_source(stage, line)
        if isinstance(found, str):
            severity = "information" if stage.kind == "python_source" else "warning"
            self.post_message(msg.Problem(found, severity))
            return
        if self._source_view(found.path, found.number):
            return
        self.call_from_thread(self.push_screen, SourceScreen(
            found.title, found.lines, found.number, lexer_for("python_source"),
            cursor=found.cursor))

    @work(thread=True, exclusive=True, group="source", exit_on_error=False)
    def source_view_worker(self, path: str, line: int = 1) -> None:
        if not self._source_view(path, line):
            self.post_message(msg.Problem(f"{path}: no source view", "warning"))

    def _source_view(self, path: str, line: int) -> bool:
        """Post the source view of ``path`` (named by the run's records) at ``line``; False
        when the records name no such file."""
        from irscope.browse.source_view import source_view

        follower = self.follower()
        if not path or path not in follower.graph.files():
            return False
        found = source_view(follower.view, path, disk=self.reads_source_files)
        if isinstance(found, str):
            self.post_message(msg.Problem(found, "warning"))
        else:
            self.post_message(msg.SourceViewReady(found, line))
        return True

    @work(thread=True, exclusive=True, group="source", exit_on_error=False)
    def files_worker(self) -> None:
        from irscope.browse.source_view import source_files

        files = source_files(self.follower().view)
        if not files:
            self.post_message(msg.Problem("the run's records name no source file (no "
                                          "provenance: see `irscope where --help`)", "warning"))
            return
        self.call_from_thread(self._pick_file, files)

    def _pick_file(self, files: list[str]) -> None:
        def chosen(index: int | None) -> None:
            if index is not None:
                self.source_view_worker(files[index])

        self.push_screen(PickerScreen("Source files the run's records name", files), chosen)

    @work(thread=True, exclusive=True, group="hits", exit_on_error=False)
    def hits_worker(self, row) -> None:
        follower = self.follower()
        choices = tuple(c for c in map(follower.hit_choice, row.hits) if c is not None)
        self.post_message(msg.PlacesReady(choices, f"line {row.line}: {row.summary()}"))

    def open_hits(self, row) -> None:
        """A source view line's kernels: the picker (the source view stays under it)."""
        self.hits_worker(row)

    @work(thread=True, exclusive=True, group="compare", exit_on_error=False)
    def compare_worker(self, left: Stage, right: Stage) -> None:
        run, sides = self.store(), []
        for stage in (left, right):
            try:
                lines = run.read_text(stage).splitlines()
            except IrscopeError as exc:
                lines = [f"⚠ {exc}"]
            title = stage_label(stage, self.units[stage.unit_id].name, self.roles.get(stage.id, ""))
            sides.append((stage, title, lines, lexer_for(stage.kind),
                          self._parse_quietly(run, stage)))
        units = [self.units[stage.unit_id] for stage in (left, right)]
        cards = [dict(kernel_card(unit, unit_figures_of(run, unit))) for unit in units]
        self.post_message(msg.CompareReady(sides, figure_deltas(*cards)))

    @work(thread=True, exclusive=True, group="compare", exit_on_error=False)
    def compare_runs_worker(self, stage: Stage) -> None:
        """The stage shown beside the same unit's stage (kind and name) in the other run."""
        from irscope.read.provenance_keys import twin as twin_unit

        run, unit = self.store(), self.units[stage.unit_id]
        with Run.open(self.other_path) as other:
            match, how = twin_unit(RunView.of(run), unit, RunView(other))
            twin = next((s for s in other.stages(match.id) if s.kind == stage.kind
                         and s.name == stage.name), None) if match else None
            if twin is None:
                self.post_message(msg.Problem(f"{self.other_path.name} has no {unit.name} · "
                                              f"{stage_title(stage)}", "warning"))
                return
            sides = []
            for source, this, owner, where in ((run, stage, unit, self.run_path),
                                               (other, twin, match, self.other_path)):
                try:
                    lines = readable_text(this.kind, source.read_text(this)).splitlines()
                except IrscopeError as exc:
                    lines = [f"⚠ {exc}"]
                paired = f" (by {how})" if owner is match and how != "name" else ""
                role = self.roles.get(this.id, "") if owner is unit else ""
                title = f"{where.name}: {stage_label(this, owner.name, role)}{paired}"
                sides.append((this, title, lines, lexer_for(this.kind),
                              self._parse_quietly(source, this)))
            cards = [dict(kernel_card(owner, unit_figures_of(source, owner)))
                     for source, owner in ((run, unit), (other, match))]
        self.post_message(msg.CompareReady(sides, figure_deltas(*cards)))

    @work(thread=True, exclusive=True, group="side", exit_on_error=False)
    def side_by_side_worker(self, anchor: Stage, cursor: int,
                            chosen: tuple[Stage, ...] = ()) -> None:
        """Stages side by side (``chosen``, else ``anchor`` and the IR stages after it, as
        many as the width holds), each pane at the line of the same source as ``cursor`` of
        ``anchor``, linked by the source locations every line carries."""
        run, follower = self.store(), self.follower()
        held = self.stages_by_unit.get(anchor.unit_id, ())
        stages = list(chosen) or default_stages(held, anchor, pane_count(self.size.width))
        if len(stages) < 2:
            self.post_message(msg.Problem("this unit has one stage to show", "warning"))
            return
        texts, locations = [], []
        for this in stages:
            try:
                text = run.read_text(this)
                texts.append(readable_text(this.kind, text).splitlines())
                locations.append(follower.locations_of(this, text))
            except IrscopeError as exc:
                texts.append([f"⚠ {self._without_run_path(exc)}"])
                locations.append(LineLocations())
        at = next((i for i, s in enumerate(stages) if s.id == anchor.id), 0)
        starts = start_lines(locations, texts, [s.kind for s in stages], at,
                             cursor if stages[at].id == anchor.id else 0)
        panes = [SidePane(self._title(this), lines, lexer_for(this.kind), found, start)
                 for this, lines, found, start in zip(stages, texts, locations, starts)]
        choices = tuple(s for s in held if is_ir(s))
        self.call_from_thread(self._show_side_by_side, panes, tuple(stages), at, choices)

    def _show_side_by_side(self, panes, stages, anchor, choices) -> None:
        while isinstance(self.screen, SideBySideScreen):  # picked again: the new panes
            self.pop_screen()
        self.push_screen(SideBySideScreen(panes, stages, anchor, choices,
                                          [self._title(s) for s in choices]))

    def _without_run_path(self, exc: Exception) -> str:
        """The error as the user needs it here: the run's path is already in the title."""
        return str(exc).removeprefix(f"{self.run_path}: ")

    def _parse_quietly(self, run: RunView, stage: Stage) -> ParseResult:
        """The parser's result, or one naming the failure: one odd stage never stops the TUI."""
        return parsed_quietly(run, stage)

    # -- messages ---------------------------------------------------------------------------
    @on(msg.RunLoaded)
    def _run_loaded(self, message: msg.RunLoaded) -> None:
        rows = [row for group in message.groups for row in group.rows]
        shown_before = self.loaded is not None
        self.units = {row.unit.id: row.unit for row in rows}
        self.stages_by_unit = {row.unit.id: row.stages for row in rows}
        self.roles = {k: v for row in rows for k, v in row.roles.items()}
        self.launches, self.events = message.launches, message.events
        self.loaded = message.complete
        if shown_before:
            self.navigator.update_groups(message.groups)
        else:
            self.navigator.set_groups(message.groups)
            self.viewer.focus()  # the stage's keys work from the start; tab reaches the tree
        if self.current is None:
            first = self.navigator.first_stage()
            if first is not None:
                self.open_stage(first)
                self.navigator.select_stage(first, quiet=True)
            elif message.complete:
                self.viewer.show_message("This run has no stages.")
            elif not self._rest_requested:  # a unit still being read comes first
                self._rest_requested = True
                self.load_rest()
        elif message.complete and self.current.unit_id in self.units:
            unit = self.units[self.current.unit_id]  # its card and compile time, all read
            self.panel.card, self.panel.timeline = self._card(unit), self._timeline(unit)
        if message.complete:
            if self.shown is not None:
                self._request_badges()
            settle_heap()

    def _request_badges(self) -> None:
        """Badges parse every unit: once the whole run is read and a stage is on screen.
        The first stage drawn over a run's first page, the rest of the run is read."""
        if self.loaded is False and not self._rest_requested:
            self._rest_requested = True
            self.call_after_refresh(self.load_rest)
        if self.loaded and not self._badges_requested:
            self._badges_requested = True
            self.call_after_refresh(self.load_badges)

    @on(Navigator.StageSelected)
    def _stage_selected(self) -> None:
        self.viewer.focus()

    def _timeline(self, unit) -> tuple:
        """The unit's compile time from its events, with its slowest Triton compiles once a
        worker read them from its metrics."""
        from irscope.read.compile_time import compile_time

        event = next((e for e in self.events if e.kind == "compile_time"
                      and e.unit_id == unit.id), None)
        if event is None:
            return (None, ())
        caches = [e.data for e in self.events if e.unit_id == unit.id
                  and e.kind in ("cache_miss", "cache_hit")]
        timing = compile_time(unit, event.data, caches)
        if unit.id not in self.slowest_compiles:
            self.slowest_worker(unit)
        return (timing, self.slowest_compiles.get(unit.id, ()))

    @work(thread=True, exclusive=True, group="slowest", exit_on_error=False)
    def slowest_worker(self, unit) -> None:
        from irscope.read.compile_time import slowest_kernels

        found = slowest_kernels(self.store(), unit)
        self.call_from_thread(self._slowest_ready, unit, found)

    def _slowest_ready(self, unit, found: tuple) -> None:
        self.slowest_compiles[unit.id] = found
        if found and self.current is not None and self.current.unit_id == unit.id:
            self.panel.timeline = self._timeline(unit)

    @work(thread=True, exclusive=True, group="card", exit_on_error=False)
    def launch_facts_worker(self, unit) -> None:
        """A kernel's launch line, arguments, grid and launches per step (browse.launch_facts)."""
        found = launch_facts(self.store(), unit, self.launches, self.units, self.roles,
                             self.gpu_time)
        self.call_from_thread(self._launch_facts_ready, unit.id, found)

    def _launch_facts_ready(self, unit_id: int, rows: list) -> None:
        self.launch_facts[unit_id] = tuple(rows)
        if self.current is not None and self.current.unit_id == unit_id:
            self.panel.card = self._card(self.units[unit_id])

    @on(Navigator.RecordsWanted)
    def _records_wanted(self, message: Navigator.RecordsWanted) -> None:
        self.records_worker(message.unit_id)

    @work(thread=True, group="records", exit_on_error=False)
    def records_worker(self, unit_id: int) -> None:
        """A unit's raw log records, read when the navigator opens them."""
        found = self.store().stages(unit_id, kinds=(RAW,))
        self.call_from_thread(self.navigator.stage_tree.add_records, unit_id, found)

    @on(msg.BadgesReady)
    def _badges(self, message: msg.BadgesReady) -> None:
        self.figures, self.tuned, self.badges = message.figures, message.tuned, message.badges
        self.gpu_time = message.gpu_time
        self.navigator.stage_tree.set_origins(message.origins, message.kernel_counts)
        self.navigator.stage_tree.set_badges(message.badges)
        self.navigator.stage_tree.set_kernels(message.kernels)
        unit = self.units.get(self.current.unit_id) if self.current else None
        if unit is not None:
            self.panel.card = self._card(unit)
        self.load_checks()
        settle_heap()

    @on(msg.StagesCounted)
    def _stages_counted(self, message: msg.StagesCounted) -> None:
        self.counted = message.counted
        self._show_header()

    def _show_header(self, width: int | None = None) -> None:
        """The run's name, its units and stages once counted, its problems once found: what
        the stages that a report leaves out are where the header has room for it, then
        their count, then the units' count (the name and problems always). ``width``: a
        resize's, which the app's size takes only after its handlers."""
        name, counted = self.run_path.name, self.counted
        problems = [f"{len(self.problems)} problems (e)"] if self.problems else []
        counts = [] if counted is None else [
            [counted.units_text(), counted.stages_text()],
            [counted.units_text(), counted.stages_text(what_others_are=False)],
            [counted.stages_text(what_others_are=False)]]
        room = (width or self.size.width) - HEADER_SIDES - len(f"{self.title} — ")
        for middle in counts or [[]]:
            self.sub_title = " · ".join([name, *middle, *problems])
            if len(self.sub_title) <= room:
                return

    @on(msg.ChecksReady)
    def _checks(self, message: msg.ChecksReady) -> None:
        self.problems, self.findings = message.problems, message.findings
        self.checked = True
        self._show_header()
        self.navigator.stage_tree.set_lint(lint_badges(message.findings))
        self._show_findings()
        if self._problems_asked and len(self.screen_stack) == 1:
            self.action_problems()
        settle_heap()

    def _show_findings(self) -> None:
        """The current unit's lint findings in the panel."""
        unit_id = self.current.unit_id if self.current else None
        self.panel.findings = tuple(f for f in self.findings if f[1].unit_id == unit_id)

    @on(msg.PlaceChosen)
    def _place_chosen(self, message: msg.PlaceChosen) -> None:
        self.jump(message.place)

    def jump(self, place: Place) -> None:
        """Open the stage and line a problem or finding names, else its unit's first IR (or
        first stage: a compile that broke before any graph holds only its records)."""
        stage = stage_of(place, self.stages_by_unit)
        held = self.stages_by_unit.get(place.unit_id, ())
        if stage is None:
            stage = next((s for s in held if is_ir(s)), held[0] if held else None)
        if stage is None:
            if place.unit_id is not None:
                self.notify("that unit has no stage to open", severity="warning")
            return
        if self.current is not None:
            self.back_stack.append(self._place())
            self.forward_stack.clear()
        self._go(stage, place.lines[0] if place.lines else None, place.lines)

    @on(Navigator.StageChosen)
    def _stage_chosen(self, message: Navigator.StageChosen) -> None:
        if message.selections != self.navigator.selections:
            return  # highlighted before the app selected a stage since: that stage stays
        if self.current is None or message.stage.id != self.current.id:
            self.open_stage(message.stage)

    def _card(self, unit) -> tuple[tuple[str, str], ...]:
        """The kernel card of ``unit`` with the graphs that launch it and how (its launch
        facts are read by a worker the first time: then the card is drawn again)."""
        rows = kernel_card(unit, self.figures.get(unit.id)) + time_rows(unit.id, self.gpu_time)
        graphs = launched_by(unit.id, self.launches, self.units)
        if self.navigator.stage_tree.origin_tag(unit.id) == NO_GRAPH_TAG:
            rows.append(("launched by", "no graph of the run"))  # a script's own kernel, say
        if graphs:
            rows.append(("launched by", graphs))
            if unit.id in self.launch_facts:
                rows += self.launch_facts[unit.id]
            elif self.figures:  # the badges are in: the run's measured time with them
                self.launch_facts_worker(unit)
        candidates = autotune_candidates(unit, self.units.values(), self.tuned)
        if candidates:
            best = next((c for c in candidates if c.best), None)
            rows.append(("configs", f"{len(candidates)} compiled, " + (
                "★ chosen" if best else "choice not captured")))
            for candidate in candidates:
                badge = self.badges.get(candidate.unit_id)
                rows.append((("★ " if candidate.best else "  ")
                             + ("▸" if candidate.unit_id == unit.id else " "),
                             candidate_text(candidate, self.figures.get(candidate.unit_id),
                                            badge.instructions if badge else None)))
        return tuple(rows)

    def open_stage(self, stage: Stage, cursor: int | None = None,
                   marks: tuple[int, ...] = ()) -> None:
        if self.current is not None and stage.id != self.current.id:
            self.viewer.clear_search()  # a search is about the stage it was made in
        self.current = stage
        self.panel.title = self._label(stage)
        unit = self.units.get(stage.unit_id)
        self.panel.card = self._card(unit) if unit else ()
        self.panel.timeline = self._timeline(unit) if unit else (None, ())
        self._show_findings()
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
        self._request_badges()

    @on(msg.StageFailed)
    def _stage_failed(self, message: msg.StageFailed) -> None:
        if self.current is None or message.stage.id != self.current.id:
            return
        self.shown = message.stage
        self.viewer.show_message(f"⚠ {message.reason}. The other stages are still browsable.")
        self._request_badges()
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
        if message.choices:
            self._pick(message.choices, message.note)
            return
        if message.source is not None:
            self.source_view_worker(message.source.path, message.source.number)
            return
        if message.target is not None:
            if self.current is not None:
                self.back_stack.append(self._place())
                self.forward_stack.clear()
            self._go(message.target, message.cursor, message.lines)

    def _pick(self, choices, title: str) -> None:
        """Several places: the picker; the one chosen opens."""
        def chosen(index: int | None) -> None:
            if index is not None:
                self._open_choice(choices[index])

        self.push_screen(PickerScreen(title, [c.label for c in choices]), chosen)

    def _open_choice(self, choice) -> None:
        """Open a place picked (leaving a source view), remembered for `b`."""
        while isinstance(self.screen, SourceViewScreen):
            self.pop_screen()
        if self.current is not None:
            self.back_stack.append(self._place())
            self.forward_stack.clear()
        self._go(choice.stage, choice.cursor, choice.lines)

    @on(msg.PlacesReady)
    def _places(self, message: msg.PlacesReady) -> None:
        if not message.choices:
            self.notify("nothing of this line to open", severity="warning", timeout=3)
        elif len(message.choices) == 1:
            self._open_choice(message.choices[0])
        else:
            self._pick(message.choices, message.note)

    @on(msg.SourceViewReady)
    def _source_view_ready(self, message: msg.SourceViewReady) -> None:
        self.push_screen(SourceViewScreen(message.view, message.line, lexer_for("python_source")))

    def _go(self, stage: Stage, cursor: int, marks: tuple[int, ...] = ()) -> None:
        """Open ``stage`` at ``cursor`` and keep the navigator and the focus with it."""
        self.navigator.select_stage(stage, quiet=True)
        self.open_stage(stage, cursor, marks)
        self.viewer.focus()

    @on(msg.KernelChosen)
    def _kernel_chosen(self, message: msg.KernelChosen) -> None:
        if self.current is None or self.current.kind != "inductor_output_code":
            return
        kernels = output_code_kernels(self.viewer.lines)
        kernel = kernels.get(message.name)
        if message.line is not None:
            self.viewer.cursor = message.line
        self.viewer.focus()
        if kernel is None:
            self.notify(f"{message.name} is an extern call: no kernel of the run",
                        timeout=3)
            return
        line = self.viewer.cursor if message.line is not None else (
            kernel.runs[0] if kernel.runs else kernel.first)
        self.viewer.cursor = line
        self.follow_worker(self.current, line, 1)

    @on(msg.CompareReady)
    def _compare_ready(self, message: msg.CompareReady) -> None:
        self.push_screen(CompareScreen(message.sides, message.figures, self.exact))

    @on(msg.Problem)
    def _problem(self, message: msg.Problem) -> None:
        self.notify(message.text, severity=message.severity, timeout=6)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            self.notify(f"{event.worker.name}: {event.worker.error}", severity="error",
                        timeout=8)

    def on_resize(self, event) -> None:
        self.screen.set_class(event.size.width < NARROW, "narrow")
        self._show_header(event.size.width)
        self.call_after_refresh(self._update_status)

    # -- status -----------------------------------------------------------------------------
    def _label(self, stage: Stage) -> str:
        unit = self.units.get(stage.unit_id)
        return stage_label(stage, unit.name if unit else "?", self.roles.get(stage.id, ""))

    def _title(self, stage: Stage) -> str:
        return stage_title(stage, self.roles.get(stage.id, ""))

    def _update_status(self) -> None:
        """Stage, line, matches and mark first, the unit's name (which may be long) last: a
        narrow status line cuts the name, never the figures."""
        if self.current is None:
            return
        viewer = self.viewer
        parts = [self._title(self.current)]
        if viewer.lines:
            parts.append(f"line {viewer.cursor + 1}/{len(viewer.lines)}")
        if self.collapsed and self.current.kind == "ptx":
            parts.append("collapsed")
        if viewer.pattern:
            parts.append(f"/{viewer.query}: {len(viewer.matches)} lines")
        elif viewer.marks:
            runs = viewer.mark_runs
            at = sum(1 for r in runs if r <= viewer.cursor)
            parts.append(f"followed {at}/{len(runs)} (n/N)")
        if self.marked:
            parts.append(f"marked: {self.marked.kind}")
        if self.navigator.rank is not None:
            parts.append(f"rank {self.navigator.rank}")
        unit = self.units.get(self.current.unit_id)
        self.status.show(SEPARATOR.join(parts), unit.name if unit is not None else "")

    # -- actions ----------------------------------------------------------------------------
    def exit(self, *args, **kwargs) -> None:
        """Quit; a key typed right after q (``e``, ``i``) would otherwise push a screen that
        mounts into the closing app and fails."""
        self.exiting = True
        super().exit(*args, **kwargs)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The main screen's keys do nothing while another screen is on top of it, nor
        once the app is quitting."""
        if self.exiting:
            return False
        if action not in GLOBAL_ACTIONS and len(self.screen_stack) > 1:
            return False
        return True

    def action_back(self) -> None:
        self._travel(self.back_stack, self.forward_stack, "back")

    def action_forward(self) -> None:
        self._travel(self.forward_stack, self.back_stack, "forward")

    def _travel(self, source: list, other: list, word: str) -> None:
        """Return to the stage and exact line the last follow left (or came back from)."""
        if not source:
            self.notify(f"nothing to go {word} to", timeout=2)
            return
        stage, cursor, marks = source.pop()
        if self.current is not None:
            other.append(self._place())
        self._go(stage, cursor, marks)

    def _place(self) -> tuple[Stage, int, tuple[int, ...]]:
        return self.current, self.viewer.cursor, tuple(sorted(self.viewer.marks))

    def action_problems(self) -> None:
        """The run's problems, each once; enter opens its evidence."""
        if not self.checked:
            self._problems_asked = True
            self.notify("reading the run's problems…", timeout=3)
            return
        self._problems_asked = False
        rows = self.problems

        def chosen(index: int | None) -> None:
            if index is not None:
                self.jump(problem_place(rows[index]))

        self.push_screen(ProblemsScreen(rows), chosen)

    def action_compile_index(self) -> None:
        self.compile_index_worker()

    @work(thread=True, exclusive=True, group="index", exit_on_error=False)
    def compile_index_worker(self) -> None:
        from irscope.browse.compile_index import collapsed, compile_index

        root = collapsed(compile_index(self.store()))
        if not root.count():
            self.post_message(msg.Problem("this run records no Dynamo compile", "warning"))
            return
        self.call_from_thread(self._show_index, root)

    def _show_index(self, root) -> None:
        def chosen(unit_id: int | None) -> None:
            if unit_id is not None:
                self.jump(Place(unit_id))

        self.push_screen(CompileIndexScreen(root), chosen)

    def action_passes(self) -> None:
        from irscope.tui.passes_screen import PassesScreen

        unit = self.units.get(self.current.unit_id) if self.current else None
        if unit is None:
            self.notify("choose a unit first", severity="warning")
            return
        self.push_screen(PassesScreen(self.run_path, unit))

    def action_cycle_rank(self) -> None:
        if not self.navigator.unit_filter.ranks:
            self.notify("this run holds one process: no rank to filter", timeout=3)
            return
        rank = self.navigator.cycle_rank()
        self.notify("every rank" if rank is None else f"units of rank {rank}", timeout=2)
        self._update_status()

    def action_side_by_side(self) -> None:
        if self.current is not None:
            self.side_by_side_worker(self.current, self.viewer.cursor)

    def action_focus_panel(self) -> None:
        if not self.panel.display:
            self.panel.display = True
        self.panel.focus_first()

    def action_wider(self, step: int) -> None:
        self.navigator.widen(step)

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_focus_filter(self) -> None:
        self.navigator.filter.focus()

    def action_search(self) -> None:
        def done(text: str | None) -> None:
            if text is not None:
                try:
                    count = self.viewer.search(text)
                except re.error as exc:
                    self.notify(f"not a regular expression ({exc}): start with = to search "
                                "the text as it is", severity="warning", timeout=5)
                    return
                self.notify(f"{count} matching lines" if count else f"no match for {text!r}",
                            timeout=3, severity="information" if count else "warning")
                self.viewer.focus()
                self._update_status()

        self.push_screen(PromptScreen("Search (a regular expression; = first: plain text)",
                                      self.viewer.query, "F(FMA|MUL) R  or  =ld.global"), done)

    def action_search_next(self) -> None:
        self.viewer.next_match(1)
        self._update_status()

    def action_search_prev(self) -> None:
        self.viewer.next_match(-1)
        self._update_status()

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

    def action_source_view(self) -> None:
        self.files_worker()

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
        kernels = getattr(self.parsed, "kernels", None)
        if self.current is None or getattr(self.parsed, "kind", None) != "ptx" or kernels is None:
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
        if self.other_path is not None and self.marked is None and self.current is not None:
            self.compare_runs_worker(self.current)
            return
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


def shown_kind(stage: Stage, text: str) -> str:
    """The kind to highlight ``text`` as: a Python source stage some caches fill with the
    kernel's TTIR is highlighted as what it holds."""
    if stage.kind == "python_source" and text.lstrip().startswith(("#loc", "module", "#")):
        detected = registry.detect(text)
        if detected in ("ttir", "ttgir"):
            return detected
    return stage.kind


def collapsed_listing(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """The PTX analyzer's folded listing: shown lines and the 0-based source lines each covers."""
    from irscope.parsers.ptx_listing import collapse

    items = collapse(text)
    return [i.text for i in items], [(i.first_line - 1, i.last_line - 1) for i in items]


def run_app(run_path: str | Path, theme: str | None = None, show_all: bool = False,
            compare_with: str | Path | None = None, exact: bool = False) -> None:
    """Open the TUI on a run directory (already checked to open), in ``theme`` if given;
    ``show_all`` lists the units hidden by default (JAX's eager ops) too; with
    ``compare_with`` (a second run) c diffs the stage shown against that run's (``exact``:
    paths, hashes and numbers included)."""
    app = IrscopeApp(run_path, show_all, compare_with, exact)
    if theme:
        if theme not in app.available_themes:
            raise UsageError(f"unknown theme {theme!r}; choose one of "
                             + ", ".join(sorted(app.available_themes)))
        app.theme = theme
    app.run()
