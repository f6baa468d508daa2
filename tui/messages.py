"""Small messages workers post to the app: results of reading, parsing and following."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from textual.message import Message

from irscope.parsers.base import ParseResult
from irscope.read.stage_counts import StageCount
from irscope.store import Event, Relation, Stage
from irscope.browse.tree import Badges, FrameworkGroup


@dataclass
class RunLoaded(Message):
    """The run's units are grouped and ready for the navigator; ``complete`` False: only the
    navigator's first page holds its stages (a large run), the whole run follows."""

    groups: list[FrameworkGroup]
    events: list[Event] = field(default_factory=list)
    launches: list[Relation] = field(default_factory=list)  # graph --launches--> kernel
    complete: bool = True


@dataclass
class BadgesReady(Message):
    """Headline figures per unit id, computed after the navigator is shown."""

    badges: dict[int, Badges]
    figures: dict[int, Any] = field(default_factory=dict)  # UnitFigures by unit id
    gpu_time: Any = None  # the run's measured time (irscope.analysis.timing.RunTime), if any
    tuned: dict[int, Any] = field(default_factory=dict)  # autotuners' times by unit id
    kernels: dict[int, Any] = field(default_factory=dict)  # browse.graph_kernels by graph
    origins: dict[int, str] = field(default_factory=dict)  # read.kernel_origins by unit id
    kernel_counts: tuple = ()  # read.kernel_origins.KernelOrigins per framework


@dataclass
class StageLoaded(Message):
    """A stage's text, split into lines, ready to render; ``lexer`` highlights it."""

    stage: Stage
    lines: list[str]
    lexer: Any
    cursor: int = 0
    marks: tuple[int, ...] = ()
    folded_spans: list[tuple[int, int]] = field(default_factory=list)  # when collapsed


@dataclass
class StageFailed(Message):
    """A stage could not be read (missing blob, unreadable file)."""

    stage: Stage
    reason: str


@dataclass
class AnalysisReady(Message):
    """The parser's result for a stage."""

    stage: Stage
    parsed: ParseResult


@dataclass
class FollowResolved(Message):
    """Where a line lands in a neighbouring stage, or why it does not; several places to
    pick from (``choices``), or the user's source line for the source view (``source``)."""

    target: Stage | None
    lines: tuple[int, ...]
    note: str
    cursor: int = 0  # the line to open at
    choices: tuple[Any, ...] = ()  # irscope.browse.follow.Choice
    source: Any = None  # irscope.browse.follow.SourceLines


@dataclass
class SourceViewReady(Message):
    """A source view (irscope.browse.source_view.SourceView) to open at 1-based ``line``."""

    view: Any
    line: int = 1


@dataclass
class PlacesReady(Message):
    """The places a source line's hit opens (irscope.browse.follow.Choice), for the picker."""

    choices: tuple[Any, ...]
    note: str = ""


@dataclass
class KernelChosen(Message):
    """A launch picked in the panel's list: its name and 0-based line in the output code."""

    name: str
    line: int | None = None


@dataclass
class CompareReady(Message):
    """Both sides of a comparison: titles, lines, lexers and parsed histograms."""

    sides: list[tuple[Stage, str, list[str], Any, ParseResult]]
    figures: tuple[str, ...] = ()  # the two units' figures where they differ


@dataclass
class Problem(Message):
    """Something the user should know about, shown as a notification."""

    text: str
    severity: str = "error"


@dataclass
class StagesCounted(Message):
    """The units the navigator shows and their stages, counted for the header."""

    counted: StageCount


@dataclass
class ChecksReady(Message):
    """The run's problems (irscope.read.problems) and lint's findings with their places."""

    problems: tuple[Any, ...]
    findings: list[tuple[Any, Any]]


@dataclass
class PlaceChosen(Message):
    """A finding picked in the panel: open its evidence (an irscope.tui.checks.Place)."""

    place: Any
