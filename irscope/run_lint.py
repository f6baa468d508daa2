"""Read a run's lint findings: its units, stages, events and figures into irscope.analysis.lint."""

from __future__ import annotations

from collections.abc import Iterable

from irscope.analysis.lint import (Finding, LintInput, Rule, RULES, StageInput, lint_unit)
from irscope.run_figures import read_run_figures
from irscope.store import Run, Unit

# The stage kinds some rule reads; the others are never opened.
LINT_KINDS = frozenset({"ttir", "ttgir", "ptx", "sass", "inductor_output_code",
                        "hlo_after_opt", "buffer_assignment"})
RUN_WIDE = "(run)"  # findings of events that belong to no unit


def read_findings(run: Run, units: Iterable[Unit] | None = None,
                  rules: Iterable[Rule] = RULES) -> list[Finding]:
    """Findings of ``rules`` on every unit of ``run`` (or ``units``), then on events of no
    unit (a graph break the trace could not place)."""
    chosen = list(run.units() if units is None else units)
    rules = tuple(rules)
    figures = read_run_figures(run, chosen)
    wanted = {u.id for u in chosen}
    stages: dict[int, list] = {}
    for stage in run.stages():
        if stage.kind in LINT_KINDS and stage.unit_id in wanted:
            stages.setdefault(stage.unit_id, []).append(stage)
    events: dict[int | None, list] = {}
    for event in run.events():
        if event.unit_id in wanted or (units is None and event.unit_id is None):
            events.setdefault(event.unit_id, []).append((event.kind, event.data))
    findings: list[Finding] = []
    for unit, unit_figures in zip(chosen, figures.units):
        inputs = tuple(_stage_input(run, s) for s in stages.get(unit.id, ()))
        findings += lint_unit(LintInput(unit_figures, unit.attrs, tuple(
            s for s in inputs if s is not None), tuple(events.get(unit.id, ()))), rules)
    if events.get(None):
        from irscope.analysis.figures import UnitFigures

        orphan = LintInput(UnitFigures(0, RUN_WIDE, ""), {}, (), tuple(events[None]))
        findings += lint_unit(orphan, rules)
    return findings


def _stage_input(run: Run, stage) -> StageInput | None:
    try:
        return StageInput(stage.kind, stage.name, run.parsed(stage), run.read_text(stage))
    except Exception:  # noqa: BLE001  an unreadable stage gives no finding, never a crash
        return None
