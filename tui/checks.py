"""Where the TUI's problems and lint's findings lead: a unit, and within it a stage and the
evidence lines.

Plain values only (no textual): the problems view, the analysis panel and the navigator's
badges render these.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from irscope.analysis.lint import Finding
from irscope.read.problems import Problem
from irscope.store import Stage, Unit

SEVERITY_ORDER = ("error", "warning", "info")
LINT_STYLES = {"error": "bold red", "warning": "bold yellow", "info": "cyan"}  # Rich styles


@dataclass(frozen=True)
class Place:
    """Where a row of the problems view leads: a unit, and within it a stage (by name) and
    the 0-based lines of the row's evidence there (marked: n/N step through them)."""

    unit_id: int | None
    stage: str | None = None
    lines: tuple[int, ...] = ()


def unit_ids_by_name(units: Iterable[Unit]) -> dict[str, int]:
    """Unit name -> id, the first unit of a name winning (lint and ranks name units)."""
    found: dict[str, int] = {}
    for unit in units:
        found.setdefault(unit.name, unit.id)
    return found


def lint_places(findings: Iterable[Finding], units: Iterable[Unit]
                ) -> list[tuple[Finding, Place]]:
    """Each finding with its evidence: its unit, its stage and its first line, worst first."""
    ids = unit_ids_by_name(units)
    ranked = sorted(findings, key=lambda f: severity_rank(f.severity))
    return [(f, Place(ids.get(f.unit), f.stage, tuple(n - 1 for n in f.lines if n > 0)))
            for f in ranked]


def problem_place(problem: Problem) -> Place:
    """Where a problem opens: its unit, stage and evidence lines (0-based)."""
    lines = problem.lines or ((problem.line,) if problem.line else ())
    return Place(problem.unit_id, problem.stage, tuple(n - 1 for n in lines if n > 0))


def severity_rank(severity: str) -> int:
    return SEVERITY_ORDER.index(severity) if severity in SEVERITY_ORDER else len(SEVERITY_ORDER)


def lint_badges(places: Sequence[tuple[Finding, Place]]) -> dict[int, tuple[int, str]]:
    """Unit id -> (findings, the worst severity among them)."""
    badges: dict[int, tuple[int, str]] = {}
    for finding, place in places:
        if place.unit_id is None:
            continue
        count, worst = badges.get(place.unit_id, (0, finding.severity))
        if severity_rank(finding.severity) < severity_rank(worst):
            worst = finding.severity
        badges[place.unit_id] = (count + 1, worst)
    return badges


def stage_of(place: Place, stages: Mapping[int, Sequence[Stage]]) -> Stage | None:
    """The stage a place names in its unit (its name, else its kind), None when absent."""
    held = stages.get(place.unit_id, ()) if place.unit_id is not None else ()
    return next((s for s in held if s.name == place.stage), None) or next(
        (s for s in held if s.kind == place.stage), None)
