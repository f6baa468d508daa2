"""What the TUI lists beside a run's compile problems: the ranks' divergences and lint's
findings, each with the place it jumps to (a unit, and for a finding its evidence line).

Plain values only (no textual): the problems view, the analysis panel and the navigator's
badges render these.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from irscope.analysis.lint import Finding
from irscope.analysis.ranks import RUN_UNIT, RankComparison, ranked_name
from irscope.browse.problems import Problem
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


def rank_problems(comparison: RankComparison, units: Iterable[Unit]
                  ) -> list[tuple[Problem, Place]]:
    """One row per divergence between ranks, leading to the unit on the first rank that
    differs (for a unit some rank lacks: a rank that has it)."""
    units = list(units)
    ids = unit_ids_by_name(units)
    rows = []
    for divergence in comparison.divergences:
        unit_id = None
        if divergence.unit != RUN_UNIT:
            ranks = divergence.ranks + tuple(r for _, rs in divergence.groups for r in rs)
            unit_id = next((ids[name] for r in ranks
                            if (name := ranked_name(divergence.unit, r)) in ids), None)
        shown = divergence.unit if unit_id is None else next(
            u.name for u in units if u.id == unit_id)
        text = f"{divergence.aspect} differs: {divergence.describe()}"
        rows.append((Problem("rank_divergence", unit_id, shown, text), Place(unit_id)))
    return rows


def lint_places(findings: Iterable[Finding], units: Iterable[Unit]
                ) -> list[tuple[Finding, Place]]:
    """Each finding with its evidence: its unit, its stage and its first line, worst first."""
    ids = unit_ids_by_name(units)
    ranked = sorted(findings, key=lambda f: severity_rank(f.severity))
    return [(f, Place(ids.get(f.unit), f.stage, tuple(n - 1 for n in f.lines if n > 0)))
            for f in ranked]


def lint_problems(places: Sequence[tuple[Finding, Place]]) -> list[tuple[Problem, Place]]:
    """The findings as rows of the problems view."""
    return [(Problem(f"lint {f.severity}", place.unit_id, f.unit, f"{f.rule}: {f.message}"
                     + (f" ({f.figures['gpu_time_share']:.1%} of GPU time)"
                        if "gpu_time_share" in f.figures else "")), place)
            for f, place in places]


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
