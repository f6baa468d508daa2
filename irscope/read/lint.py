"""Read a run's lint findings: its units, stages, events and figures into irscope.analysis.lint."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import replace

from irscope.analysis.figures import RunFigures, UnitFigures
from irscope.analysis.lint import (RUN_WIDE_UNIT, Finding, LintInput, Rule, RULES, StageInput,
                                   lint_unit)
from irscope.read.figures import read_run_figures
from irscope.read.timing import lines_share, read_time, time_share
from irscope.read.view import RunView
from irscope.store import Run, Unit

# The stage kinds some rule reads; the others are never opened.
LINT_KINDS = frozenset({"ttir", "ttgir", "ptx", "sass", "inductor_output_code",
                        "hlo_after_opt", "buffer_assignment"})
RUN_WIDE = RUN_WIDE_UNIT  # findings of events that belong to no unit
KEPT_TEXT_BYTES = 64 << 20  # stages read lately, kept for the next unit holding them


def read_findings(run: RunView | Run, units: Iterable[Unit] | None = None,
                  rules: Iterable[Rule] = RULES, figures: RunFigures | None = None,
                  candidates: bool = False) -> list[Finding]:
    """Findings of ``rules`` on every unit of ``run`` (or ``units``, whose ``figures`` the
    caller may have read already), then on events of no unit (a graph break the trace could
    not place). Autotuning candidates that lost (which never run) only with ``candidates``.
    A stage held by many units is read and parsed once, and a view lints each unit once
    (a report and its export, and the problems they list, all ask for its findings)."""
    run = RunView.of(run)
    chosen = list(run.units() if units is None else units)
    rules = tuple(rules)
    figures = figures or read_run_figures(run, chosen)
    wanted = {u.id for u in chosen}
    stages: dict[int, list] = {}
    for stage in run.stages(kinds=LINT_KINDS):
        if stage.unit_id in wanted:
            stages.setdefault(stage.unit_id, []).append(stage)
    events: dict[int | None, list] = {}
    for event in run.events():
        if event.unit_id in wanted or (units is None and event.unit_id is None):
            events.setdefault(event.unit_id, []).append((event.kind, event.data))
    findings: list[Finding] = []
    read = _Recent()
    # a unit's findings depend on it alone (its figures are its own, whichever units are
    # read with it): the view keeps them, so the report's units and then the whole run's
    # (its export, the problems) lint each unit once
    done: dict[int, list[Finding]] = run.derived("lint findings by unit", dict) \
        if rules == RULES else {}
    for unit, unit_figures in zip(chosen, figures.units):
        if unit_figures.autotune_lost and not candidates:
            continue
        found = done.get(unit.id)
        if found is None:
            inputs = tuple(read.input(run, s) for s in stages.get(unit.id, ()))
            found = done[unit.id] = lint_unit(LintInput(unit_figures, unit.attrs, tuple(
                s for s in inputs if s is not None), tuple(events.get(unit.id, ()))), rules)
        findings += found
    if events.get(None):
        orphan = LintInput(UnitFigures(0, RUN_WIDE, ""), {}, (), tuple(events[None]))
        findings += lint_unit(orphan, rules)
    return _by_time_share(run, chosen, findings)


def _by_time_share(run: RunView, units: list[Unit], findings: list[Finding]) -> list[Finding]:
    """Where the run measured GPU time: each finding with its share of it
    (``gpu_time_share``): at lines of a graph's output code, the kernels launched there; else
    its unit's. The findings ordered by that share, largest first."""
    time = read_time(run)
    if time is None or not time.kernel_time_ns:
        return findings
    ids = {u.name: u.id for u in units}

    def share(finding: Finding) -> float | None:
        unit_id = ids.get(finding.unit)
        if unit_id is None:
            return None
        if finding.stage and finding.lines:
            at_lines = lines_share(time, unit_id, finding.stage, finding.lines)
            if at_lines is not None:
                return at_lines
        return time_share(time, unit_id)

    timed = []
    for finding in findings:
        found = share(finding)
        timed.append(finding if found is None else replace(
            finding, figures={**finding.figures, "gpu_time_share": round(found, 4)}))
    return sorted(timed, key=lambda f: -f.figures.get("gpu_time_share", -1.0))


class _Recent:
    """Stages as rules see them, the last ones read (up to KEPT_TEXT_BYTES of text) kept for
    the next unit that holds them (every rank's copy of a graph): each is read once."""

    def __init__(self) -> None:
        self.kept: OrderedDict[tuple[str, str, str], StageInput | None] = OrderedDict()
        self.size = 0

    def input(self, run: RunView, stage) -> StageInput | None:
        key = (stage.kind, stage.name, stage.blob)
        if key in self.kept:
            self.kept.move_to_end(key)
            return self.kept[key]
        try:
            found = StageInput(stage.kind, stage.name, run.parsed(stage), run.read_text(stage))
        except Exception:  # noqa: BLE001  an unreadable stage gives no finding, never a crash
            found = None
        self.kept[key] = found
        self.size += len(found.text) if found else 0
        while self.size > KEPT_TEXT_BYTES and len(self.kept) > 1:
            _, gone = self.kept.popitem(last=False)
            self.size -= len(gone.text) if gone else 0
        return found
