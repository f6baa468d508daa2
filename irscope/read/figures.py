"""Read a run's figures: the store's units, stages and events into irscope.analysis records."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from irscope.analysis.figures import (RunFigures, UnitFigures, count_events, lost_candidates,
                                      unit_figures, unit_kernels)
from irscope.analysis.ranks import split_rank
from irscope.read.autotune import unchosen_candidates
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
    lost = unchosen_candidates(run)  # as every count of the run's kernels leaves them out
    launches = run.derived("kernel launches", lambda: kernel_launches(run))
    # a unit's figures are its own, whichever units are read with it: the view keeps them
    # for the next reader (a report's units, then its export's whole run)
    done: dict[int, UnitFigures] = run.derived("unit figures", dict)
    found = []
    for u in chosen:
        figures = done.get(u.id)
        if figures is None:
            figures = done[u.id] = _unit(run, u, codes.get(u.id, ()), events.get(u.id, {}),
                                         links.get(u.id, 0), parsed, u.id in lost,
                                         launches.get(u.id, 0))
        found.append(figures)
    return RunFigures(tuple(found), events.get(None, {}))


def kernel_name(unit: Unit) -> str:
    """The kernel a unit compiles, without the rank and the ``-<hash8>`` a name may carry."""
    return str(unit.attrs.get("kernel") or split_rank(unit.name)[0].split("-")[0])


def autotune_lost(run: RunView) -> frozenset[int]:
    """The Triton units that are configurations autotuning tried and did not choose
    (``irscope.analysis.figures.lost_candidates``)."""
    units = run.units("triton")
    keys = [(kernel_name(u), u.source_file, u.attrs.get("rank")) for u in units]
    tried = {key for key, compiles in Counter(keys).items() if compiles > 1}
    # a kernel compiled once is no candidate: its records are not read
    return lost_candidates(
        (u.id, key, bool(u.attrs.get("autotune_best")),
         unit_kernels(u.attrs) if key in tried else ())
        for u, key in zip(units, keys))


def kernel_launches(run: RunView) -> dict[int, int]:
    """Kernel unit id -> how many times per call the graphs that launch it do: its name's
    launches in the output code whose definition linked it."""
    stages = {(s.unit_id, s.name): s for s in run.stages(kinds=(OUTPUT_CODE,))}
    counts: dict[tuple[int, str], Counter] = {}
    found: Counter = Counter()
    for relation in run.relations("launches"):
        stage = stages.get((relation.src, relation.attrs.get("output_code")))
        if stage is None:
            continue
        if (stage.unit_id, stage.name) not in counts:
            try:
                sequence = run.parsed(stage).launch_sequence
            except Exception:  # noqa: BLE001  an unreadable output code launches nothing known
                sequence = ()
            counts[stage.unit_id, stage.name] = Counter(
                launch.name for launch in sequence if launch.kind == "kernel")
        kernel = run.unit_by_id(relation.dst)
        found[relation.dst] += counts[stage.unit_id, stage.name].get(kernel_name(kernel), 0)
    return dict(found)


def unit_figures_of(run: RunView | Run, unit: Unit) -> UnitFigures:
    """One unit's figures."""
    return read_run_figures(run, [unit]).units[0]


def _unit(run: RunView, unit: Unit, stages, events, links, parsed: dict, lost: bool,
          launches: int) -> UnitFigures:
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
    return unit_figures(unit, codes, events, links, lost, launches)
