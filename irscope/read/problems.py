"""A run's problems, one list every front end reads (the TUI's problems view, the Markdown,
HTML and JSON reports): compile failures, graph breaks, recompilations, ranks that compiled
differently, lint's findings and the slow compiles.

Each problem is listed once: a graph break Dynamo met again in the frames around it, the same
break on every rank, a finding on every rank's copy of a graph, become one row naming the
units and ranks; the lint rules that restate an event (``graph_break``, ``recompile``) are left
to the event. Each row knows where it opens (the stage and 1-based line of its evidence: a
graph break's reason record at its reason line, a slow compile's metrics at its time) and,
where the run measured GPU time, the share of it its units took; rows are ordered by that
share. Findings on autotuning's configurations that were never chosen are left out unless
asked for (``candidates``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from irscope.analysis.figures import one_per_recompile
from irscope.analysis.lint import Finding
from irscope.analysis.ranks import split_rank
from irscope.read.autotune import unchosen_candidates
from irscope.read.stage_text import readable_text
from irscope.read.timing import read_time, time_share
from irscope.read.view import RunView
from irscope.store import Event, Run, Stage, Unit

SLOW_COMPILE_S = 5.0  # a frame that takes this long to compile is worth a row
SLOWEST = 5  # at most this many slow compiles are listed
EVENT_RULES = frozenset({"graph_break", "recompile"})  # lint rules that restate an event
BREAK_STAGE, RECOMPILE_STAGE, METRICS_STAGE = ("dynamo_graph_break_reason", "recompile_reasons",
                                               "compilation_metrics")
# the order of kinds among rows of equal time share
TIERS = ("compile failure", "graph break", "recompile", "rank divergence", "lint warning",
         "lint info", "slow compile")

# "Graph Break Reason: Encountered graph break when attempting to trace CALL: ..."
REASON_RE = re.compile(r"^Graph Break Reason:\s*(.*)$", re.M)
# "Graph break in user code at /x/modeling_utils.py:4635"
BREAK_AT_RE = re.compile(r"^Graph break in user code at (.+):(\d+)\s*$", re.M)
# "  Explanation: logging.Logger methods are not supported ...", "  Hint: Add the ..."
DETAIL_RE = re.compile(r"^\s*(Explanation|Hint):\s*(.*)$")
# " For more details about this graph break, please visit: https://..."
MORE_RE = re.compile(r"For more details about this graph break, please visit:\s*(\S+)")
DETAIL_END = ("Developer debug context:", "For more details", "User code traceback:")


@dataclass(frozen=True)
class Problem:
    """One row of the problems: what (``kind``, ``severity``, ``title`` and, for a graph break,
    ``explanation`` and ``hints`` whole), where in the user's code (``where``: file:line),
    the units and ranks it was seen in, the stage and 1-based line it opens (``unit``,
    ``unit_id``, ``stage``, ``line``, ``lines``: its evidence) and the share of the run's
    measured GPU time its units took."""

    kind: str
    severity: str
    title: str
    units: tuple[str, ...] = ()
    ranks: tuple[int, ...] = ()
    where: str | None = None
    explanation: str = ""
    hints: tuple[str, ...] = ()
    more: str | None = None  # the page PyTorch keeps on this graph break
    unit: str | None = None  # the unit it opens
    unit_id: int | None = None
    stage: str | None = None
    line: int | None = None
    lines: tuple[int, ...] = ()
    time_share: float | None = None

    def scope(self) -> str:
        """Where it was seen: "[0/0] wrapper, [1/0] forward (ranks 0, 1)"."""
        ranks = f" (rank{'s' * (len(self.ranks) > 1)} {', '.join(map(str, self.ranks))})" \
            if self.ranks else ""
        return ", ".join(self.units) + ranks if self.units else ("(run)" + ranks)

    def detail(self) -> str:
        """The explanation and every hint, one sentence after another."""
        parts = [self.explanation] if self.explanation else []
        parts += [f"Hint: {hint}" for hint in self.hints]
        return " ".join(parts)

    def text(self) -> str:
        """The whole problem on one line: title, where, explanation and hints, time share."""
        parts = [self.title]
        if self.where:
            parts.append(f"at {self.where}")
        if self.detail():
            parts.append(f"— {self.detail()}")
        if self.time_share is not None:
            parts.append(f"({self.time_share:.1%} of GPU time)")
        return " ".join(parts)

    def to_json(self) -> dict[str, Any]:
        """The problem as a report holds it: its unit by name (ids are the store's own), its
        tuples as lists."""
        return {item.name: list(value) if isinstance(value := getattr(self, item.name), tuple)
                else value for item in fields(self) if item.name != "unit_id"}

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> Problem | None:
        """A problem of a report document, None for a row of the wrong shape."""
        if not isinstance(row, Mapping) or not isinstance(row.get("kind"), str):
            return None
        values: dict[str, Any] = {}
        for item in fields(cls):
            value = row.get(item.name)
            if item.name in ("units", "hints"):
                values[item.name] = tuple(str(v) for v in value) if isinstance(value, list) \
                    else ()
            elif item.name in ("ranks", "lines"):
                values[item.name] = tuple(v for v in value if isinstance(v, int)) \
                    if isinstance(value, list) else ()
            elif item.name in ("unit_id", "line"):
                values[item.name] = value if isinstance(value, int) else None
            elif item.name == "time_share":
                values[item.name] = float(value) if isinstance(value, (int, float)) else None
            elif item.name in ("explanation", "title", "severity"):
                values[item.name] = str(value) if value is not None else ""
            else:
                values[item.name] = str(value) if value is not None else None
        return cls(**values)


def run_problems(run: RunView | Run, candidates: bool = False,
                 findings: Sequence[Finding] | None = None) -> tuple[Problem, ...]:
    """Every problem of ``run``, each once, ordered (see the module docstring); lint's
    ``findings`` when the caller read them already; ``candidates``: findings on
    autotuning's unchosen configurations too."""
    from irscope.read.lint import read_findings
    from irscope.read.ranks import rank_problems

    view = RunView.of(run)
    units = {u.id: u for u in view.units()}
    ranked = len({rank_of(u) for u in units.values()} - {None}) > 1
    rows = _Rows(view, units, ranked)
    for event in one_per_recompile(view.events()):  # a recompile is one, however many guards
        if event.kind in ("compile_failure", "graph_break", "recompile"):
            rows.event(event)
    for kind, unit, message in rank_problems(view):
        rows.add(Problem("rank divergence", "warning", message, (unit,) if unit else (),
                         unit=unit, unit_id=_id_of(units, unit)), ("rank divergence", message))
    dropped = set() if candidates else unchosen_candidates(view)
    by_name = {u.name: u for u in units.values()}
    found = read_findings(view, candidates=candidates) if findings is None else findings
    for finding in found:
        owner = by_name.get(finding.unit)
        if finding.rule in EVENT_RULES or (owner is not None and owner.id in dropped):
            continue
        rows.finding(finding, owner)
    rows.slow_compiles()
    return rows.ordered()


def rank_of(unit: Unit) -> int | None:
    """The rank that compiled ``unit``: its attribute, else its name's "(rank N)"; None for
    a unit every rank shares (a kernel compiled once)."""
    return unit.rank if unit.rank is not None else split_rank(unit.name)[1]


def _id_of(units: Mapping[int, Unit], name: str | None) -> int | None:
    return next((u.id for u in units.values() if u.name == name), None) if name else None


class _Rows:
    """Problems as they are found, merged by what they are about."""

    def __init__(self, view: RunView, units: Mapping[int, Unit], ranked: bool):
        self.view, self.units, self.ranked = view, units, ranked
        self.rows: dict[tuple, Problem] = {}
        self.time = read_time(view)
        self._records: dict[tuple[int, str], list[tuple[Stage, str]]] = {}
        self._seen: dict[tuple[int, str], int] = {}

    # -- where a unit and its rank are shown ----------------------------------------------
    def names(self, unit_id: int | None) -> tuple[tuple[str, ...], tuple[int, ...]]:
        unit = self.units.get(unit_id) if unit_id is not None else None
        if unit is None:
            return (), ()
        rank = rank_of(unit)
        return (split_rank(unit.name)[0],), ((rank,) if self.ranked and rank is not None else ())

    def share(self, unit_id: int | None) -> float | None:
        return time_share(self.time, unit_id) if unit_id is not None else None

    def add(self, problem: Problem, key: tuple, timed: bool = True) -> None:
        """Keep ``problem``, or fold it into the row of the same ``key``: its units and ranks
        joined, the largest time share kept, the first unit still the one it opens;
        ``timed``: the row carries its unit's share of the GPU time."""
        share = self.share(problem.unit_id) if timed else None
        if share is not None and (problem.time_share is None or share > problem.time_share):
            problem = replace(problem, time_share=share)
        held = self.rows.get(key)
        if held is None:
            self.rows[key] = problem
            return
        shares = [s for s in (held.time_share, problem.time_share) if s is not None]
        opens = min(held, problem, key=lambda p: (p.unit or "", p.stage or "", p.line or 0))
        self.rows[key] = replace(
            opens, units=tuple(sorted(set(held.units + problem.units))),
            ranks=tuple(sorted(set(held.ranks + problem.ranks))),
            time_share=max(shares) if shares else None)

    # -- events --------------------------------------------------------------------------
    def event(self, event: Event) -> None:
        data = event.data if isinstance(event.data, Mapping) else {}
        units, ranks = self.names(event.unit_id)
        unit = self.units.get(event.unit_id) if event.unit_id is not None else None
        opens = dict(unit=unit.name if unit else None, unit_id=event.unit_id)
        if event.kind == "graph_break":
            stage, text = self.record(event.unit_id, BREAK_STAGE)
            detail = break_detail(text or str(data.get("reason") or ""))
            where = (f"{data['file']}:{data['line']}" if data.get("file") and data.get("line")
                     else detail.get("where"))
            title = detail.get("title") or one_line(data.get("reason"))
            explanation = detail.get("explanation") or one_line(data.get("explanation"))
            problem = Problem("graph break", "warning", title, units, ranks, where, explanation,
                              detail.get("hints", ()), detail.get("more"), **opens,
                              stage=stage.name if stage else None,
                              line=line_of(text, REASON_RE) if stage else None)
            self.add(problem, ("graph break", where or title, explanation or title))
        elif event.kind == "recompile":
            reason = one_line(data.get("reason") or data.get("guard") or data)
            stage, text = self.record(event.unit_id, RECOMPILE_STAGE, reason[:40])
            self.add(Problem("recompile", "warning", reason, units, ranks, **opens,
                             stage=stage.name if stage else None,
                             line=line_with(text, reason[:40]) if stage else None),
                     ("recompile", units, reason))
        else:
            title = failure_title(data)
            where = (f"{data['file']}:{data['line']}" if data.get("file") and data.get("line")
                     else None)
            stage, text = self.metrics(event.unit_id)
            self.add(Problem("compile failure", "error", title, units, ranks, where, **opens,
                             stage=stage.name if stage else None,
                             line=line_with(text, '"fail_reason"') if stage else None),
                     ("compile failure", where, title))

    def record(self, unit_id: int | None, name: str, needle: str = ""
               ) -> tuple[Stage | None, str]:
        """The unit's next record stage of ``name`` (the n-th event of a unit is its n-th
        record; one that names ``needle`` is taken first) and its text."""
        if unit_id is None:
            return None, ""
        key = (unit_id, name)
        if key not in self._records:
            self._records[key] = [(s, self._text(s)) for s in self.view.stages(unit_id)
                                  if s.name.split("#")[0] == name]
        held = self._records[key]
        if not held:
            return None, ""
        if needle:
            found = next(((s, t) for s, t in held if needle in t), None)
            if found is not None:
                return found
        index = self._seen.get(key, 0)
        self._seen[key] = index + 1
        return held[min(index, len(held) - 1)]

    def metrics(self, unit_id: int | None) -> tuple[Stage | None, str]:
        """The unit's compilation metrics stage and its text as the viewer shows it."""
        if unit_id is None:
            return None, ""
        stage = next((s for s in self.view.stages(unit_id) if s.name == METRICS_STAGE), None)
        return (stage, self._text(stage)) if stage else (None, "")

    def _text(self, stage: Stage) -> str:
        try:
            return readable_text(stage.kind, self.view.read_text(stage))
        except Exception:  # noqa: BLE001  a record that cannot be read opens at its top
            return ""

    # -- lint findings -------------------------------------------------------------------
    def finding(self, finding: Finding, owner: Unit | None) -> None:
        units, ranks = self.names(owner.id if owner else None)
        if owner is None and finding.unit:
            units = (split_rank(finding.unit)[0],)
        share = finding.figures.get("gpu_time_share")
        problem = Problem(f"lint {finding.rule}", finding.severity, finding.message, units,
                          ranks, ", ".join(finding.sources) or None, unit=finding.unit,
                          unit_id=owner.id if owner else None, stage=finding.stage,
                          line=finding.lines[0] if finding.lines else None,
                          lines=tuple(finding.lines),
                          time_share=float(share) if share is not None else None)
        key = ("lint", finding.rule, units, finding.stage, finding.message)
        held = self.rows.get(key)
        if held is not None and problem.lines and not set(held.lines) & set(problem.lines):
            self.rows[key] = _at_more_lines(held, problem)
            return
        self.add(problem, key, timed=share is None)

    # -- slow compiles -------------------------------------------------------------------
    def slow_compiles(self) -> None:
        timed = []
        for event in self.view.events("compile_time"):
            data = event.data if isinstance(event.data, Mapping) else {}
            seconds = data.get("entire_frame_compile_time_s")
            if isinstance(seconds, (int, float)) and seconds >= SLOW_COMPILE_S:
                timed.append((float(seconds), event))
        for seconds, event in sorted(timed, key=lambda t: -t[0])[:SLOWEST]:
            units, ranks = self.names(event.unit_id)
            unit = self.units.get(event.unit_id) if event.unit_id is not None else None
            stage, text = self.metrics(event.unit_id)
            self.add(Problem("slow compile", "info", f"{seconds:.1f} s to compile the frame",
                             units, ranks, unit=unit.name if unit else None,
                             unit_id=event.unit_id, stage=stage.name if stage else None,
                             line=line_with(text, '"entire_frame_compile_time_s"')
                             if stage else None),
                     ("slow compile", units, round(seconds, 1)), timed=False)

    def ordered(self) -> tuple[Problem, ...]:
        """Failures first, then by time share, kind, and what they are about: the same
        order whatever order the run's sources were filed in."""
        def key(problem: Problem):
            tier = problem.kind if problem.kind in TIERS else f"lint {problem.severity}"
            return (problem.kind != "compile failure",
                    -(problem.time_share if problem.time_share is not None else -1.0),
                    TIERS.index(tier) if tier in TIERS else len(TIERS), problem.kind,
                    problem.units, problem.stage or "", problem.line or 0, problem.title)
        return tuple(sorted(self.rows.values(), key=key))


def _at_more_lines(held: Problem, other: Problem) -> Problem:
    """One row for the same advice at other lines of the same stage (each layer's copy of a
    pattern): every line, every source, and the time of them all."""
    lines = tuple(sorted(held.lines + other.lines))
    sources = sorted({part for p in (held, other) if p.where for part in p.where.split(", ")})
    shares = [p.time_share for p in (held, other) if p.time_share is not None]
    return replace(held, lines=lines, line=lines[0], where=", ".join(sources) or None,
                   time_share=sum(shares) if shares else None)


def break_detail(text: str) -> dict[str, Any]:
    """What a graph-break record (or a restart reason) says: the break's title, its
    explanation and hints whole, the page about it and the user's line."""
    found: dict[str, Any] = {"hints": ()}
    at = BREAK_AT_RE.search(text)
    if at:
        found["where"] = f"{at.group(1)}:{at.group(2)}"
    more = MORE_RE.search(text)
    if more:
        found["more"] = more.group(1)
    reason = REASON_RE.search(text)
    body = text[reason.end():] if reason else text
    title, explanation, hints, current = "", [], [], None
    for raw in body.splitlines():
        line = raw.strip()
        if line.startswith(DETAIL_END):
            break
        match = DETAIL_RE.match(raw)
        if match:
            current = explanation if match.group(1) == "Explanation" else None
            if current is None:
                hints.append(match.group(2))
            else:
                explanation.append(match.group(2))
        elif not line:
            current = None if title else current
        elif not title and current is None and not explanation:
            title = line
        elif current is not None:
            current.append(line)
        elif hints and raw.startswith("    "):
            hints[-1] += " " + line
    found.update(title=title, explanation=" ".join(explanation).strip(),
                 hints=tuple(h.strip() for h in hints if h.strip()))
    return found


def failure_title(data: Mapping[str, Any]) -> str:
    """A failed compile's title, one line: the exception and what its record says of it
    (Dynamo's ``reason``, a sweep's ``message``, a collector's ``error``). A compile a Ctrl-C
    stopped says so: Dynamo records it as a KeyboardInterrupt with no reason."""
    kind = one_line(data.get("type")) if data.get("type") else ""
    reason = next((one_line(data[key]) for key in ("reason", "message", "error")
                   if data.get(key)), "")
    if kind == "KeyboardInterrupt":
        return "interrupted (Ctrl-C) while compiling" + (f": {reason}" if reason else "")
    if kind and reason:
        return f"{kind}: {reason}"
    return reason or kind or "failed, with no reason recorded"


def one_line(value: Any) -> str:
    """A value of a record as one line of text (JSON for what is not text)."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return " ".join(str(text).split())


def line_of(text: str, pattern: re.Pattern[str]) -> int:
    """The 1-based line of ``text`` where ``pattern`` first matches, else 1."""
    match = pattern.search(text)
    return text.count("\n", 0, match.start()) + 1 if match else 1


def line_with(text: str, needle: str) -> int:
    """The 1-based line of ``text`` holding ``needle``, else 1."""
    at = text.find(needle) if needle else -1
    return text.count("\n", 0, at) + 1 if at >= 0 else 1
