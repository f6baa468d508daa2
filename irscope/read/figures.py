"""Read a run's figures: the store's units, stages and events into irscope.analysis records."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from irscope.analysis.figures import RunFigures, UnitFigures, count_events, unit_figures
from irscope.read.view import RunView
from irscope.store import Run, Unit

OUTPUT_CODE = "inductor_output_code"


def read_run_figures(run: RunView | Run, units: Iterable[Unit] | None = None) -> RunFigures:
    """Figures of every unit of ``run`` (or of ``units``), each output code parsed (or read
    from the parse cache) once however many units hold it."""
    run = RunView.of(run)
    chosen = list(run.units() if units is None else units)
    wanted = {u.id for u in chosen}
    codes: dict[int, list] = {}
    for stage in run.stages(kinds=(OUTPUT_CODE,)):
        if stage.unit_id in wanted:
            codes.setdefault(stage.unit_id, []).append(stage)
    events = count_events(e for e in run.events() if e.unit_id in wanted or e.unit_id is None)
    links = Counter(r.src for r in run.relations("launches"))
    parsed: dict[str, object] = {}
    return RunFigures(tuple(_unit(run, u, codes.get(u.id, ()), events.get(u.id, {}),
                                  links.get(u.id, 0), parsed) for u in chosen),
                      events.get(None, {}))


def unit_figures_of(run: RunView | Run, unit: Unit) -> UnitFigures:
    """One unit's figures."""
    return read_run_figures(run, [unit]).units[0]


def _unit(run: RunView, unit: Unit, stages, events, links, parsed: dict) -> UnitFigures:
    keys = {name: key for key, name in (unit.attrs.get("output_codes") or {}).items()}
    codes = []
    for stage in stages:
        if stage.blob not in parsed:
            try:
                parsed[stage.blob] = run.parsed(stage)
            except Exception:  # noqa: BLE001  an unreadable stage counts as nothing, never crashes
                parsed[stage.blob] = None
        if parsed[stage.blob] is not None:
            codes.append((keys.get(stage.name, stage.blob), stage.name, parsed[stage.blob]))
    return unit_figures(unit, codes, events, links)
