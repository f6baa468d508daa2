"""A run read into report records: each unit's stage records, headline figures, lint counts
and passes, and the run's totals, kept in the run between reports (``rollup``)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from dataclasses import replace

from irscope.analysis.lint import lint_counts
from irscope.parsers import registry
from irscope.read.figures import read_run_figures
from irscope.read.kernel_origins import KernelOrigins, kernel_origins, origin_counts
from irscope.read.kept import kept_json
from irscope.read.lint import read_findings
from irscope.read.compile_time import run_compile_times
from irscope.read.problems import Problem, run_problems
from irscope.read.ranks import rank_totals
from irscope.store.units import shown_units
from irscope.read.view import RunView
from irscope.reports.passes import with_passes
from irscope.read.stage_counts import StageCount, count_stages, is_reported, stage_selected
from irscope.reports.records import (Report, SourceLineRecord, StageRecord, UnitRecord,
                                     plain_meta, stage_record, unit_headline, unit_problems,
                                     unit_selected)
from irscope.read.provenance_keys import unit_keys
from irscope.read.source_lines import run_line_rows, unknown_note
from irscope.read.timing import read_time
from irscope.reports.rollup import Records, kept_or_built, kept_rows
from irscope.reports.timing import time_section
from irscope.store import Run, Stage


def build_report(run: RunView | Run, stages: Iterable[str] | None = None,
                 unit_pattern: str | None = None, show_all: bool = False,
                 candidates: bool = False) -> Report:
    """Read ``run`` (parsing through its cache) into a Report, filtered by stage and unit;
    units hidden by default (JAX's eager ops) only with ``show_all``, counted either way.
    Autotuning candidates that lost are listed but left out of the run's figures and lint,
    unless ``candidates``. The records of a run that has not changed since its last report
    are read back."""
    run = RunView.of(run)
    report = report_records(run, stages, unit_pattern, show_all, candidates)
    units = report.units
    problems = problem_records(run, candidates)
    names = {u.name for u in units}
    lines, note = source_line_records(run)
    stage_count, kernels = listing_records(run, report, unit_pattern, show_all, candidates)
    return replace(report, time=time_section(run, units), source_lines=lines,
                   kernels=kernels, stage_count=stage_count, source_lines_note=note,
                   problems=unit_problems(problems, units) if unit_pattern else problems,
                   compile_time=tuple(row for row in compile_time_records(run)
                                      if row.get("unit") in names))


def report_records(run: RunView | Run, stages: Iterable[str] | None = None,
                   unit_pattern: str | None = None, show_all: bool = False,
                   candidates: bool = False) -> Report:
    """The part of ``build_report``'s Report that a diff compares: the unit records and run
    totals, without the time, source line, problem and compile time sections."""
    run = RunView.of(run)
    wanted = tuple(stages) if stages else None
    report = Report(run=run.name, path=str(run.path), units=(), totals={}, stages=wanted,
                    meta=plain_meta(run.meta))

    def build() -> Records:
        units, totals = _records(run, wanted, unit_pattern, show_all, candidates)
        units = with_passes(run, replace(report, units=units)).units
        return units, totals, replace(report, units=units).units_rolled_up()

    units, totals, rollup = kept_or_built(run, (wanted, unit_pattern, show_all, candidates),
                                          build)
    return replace(report, units=units, totals=totals, unit_rollup=rollup)


def listing_records(run: RunView, report: Report, unit_pattern: str | None, show_all: bool,
                    candidates: bool) -> tuple[StageCount, tuple[KernelOrigins, ...]]:
    """The count of ``report``'s units and their stages, and their kernels by origin, kept in
    the run between reports like the unit records: a cached report reads no unit again."""
    def listing() -> tuple[StageCount, tuple[KernelOrigins, ...]]:
        keys = {u.key for u in report.units}
        listed = [u for u in run.units() if (u.framework, u.name) in keys]
        hidden = shown_units(run.units(), show_all)[1]
        return (count_stages(run, listed, len(hidden), report.stages),
                origin_counts(run, listed))

    def document() -> dict:
        count, kernels = listing()
        return {"stage_count": count.to_json(), "kernels": [k.to_json() for k in kernels]}

    filters = [report.stages, unit_pattern, show_all, candidates]
    kept = kept_json(run, f"listing:{json.dumps(filters)}", document,
                     lambda doc: isinstance(doc, dict) and isinstance(doc.get("kernels"), list))
    count = StageCount.from_json(kept.get("stage_count"))
    kernels = [KernelOrigins.from_json(k) for k in kept["kernels"]]
    if count is None or None in kernels:  # kept of another shape
        return listing()
    return count, tuple(kernels)


def problem_records(run: RunView, candidates: bool = False) -> tuple[Problem, ...]:
    """The run's problems (read.problems; findings on autotuning's losers with
    ``candidates``), kept in the run between reports like the unit records (each row one
    JSON document: its lists stay whole)."""
    rows = kept_rows(run, f"problems:{candidates}", lambda: [
        {"problem": json.dumps(p.to_json())} for p in run_problems(run, candidates)])
    found = (Problem.from_json(json.loads(row["problem"])) for row in rows
             if isinstance(row.get("problem"), str))
    return tuple(p for p in found if p is not None)


def compile_time_records(run: RunView) -> list[dict]:
    """Each compile's time by phase (read.compile_time), slowest first, kept in the run
    between reports like the unit records: a cached report reads no event again."""
    return kept_rows(run, "compile_time", lambda: [c.row() for c in run_compile_times(run)])


def source_line_records(run: RunView) -> tuple[tuple[SourceLineRecord, ...], str]:
    """The run's source lines that produce kernels (read.source_lines) and why their kernel
    counts are unknown where they are, kept in the run between reports like the unit records
    (an unknown figure kept as an absent key, the note as a last row of its own)."""
    def build() -> list[dict]:
        rows = run_line_rows(run)
        note = unknown_note(run, rows)
        return [*({k: v for k, v in SourceLineRecord(
                      r.path, r.line, r.forward, r.backward, r.inference, r.other, r.kernels,
                      r.instructions).to_json().items() if v is not None} for r in rows),
                *([{"note": note}] if note else [])]

    fields = {f.name for f in dataclasses.fields(SourceLineRecord)}
    kept = kept_rows(run, "source_lines", build)
    lines = tuple(SourceLineRecord(**{k: v for k, v in row.items() if k in fields})
                  for row in kept if "note" not in row)
    return lines, next((str(row["note"]) for row in kept if "note" in row), "")


def _records(run: RunView, wanted: tuple[str, ...] | None, unit_pattern: str | None,
             show_all: bool, candidates: bool) -> tuple[tuple[UnitRecord, ...], dict[str, float]]:
    """The unit records and run totals of a report; each distinct stage (kind, name and
    content) made into a record once, however many units hold it."""
    kinds = [k for k in registry.kinds() if is_reported(k) and stage_selected(k, wanted)]
    by_unit: dict[int, list[Stage]] = {}
    for stage in run.stages(kinds=kinds):
        by_unit.setdefault(stage.unit_id, []).append(stage)
    shown, hidden = shown_units(run.units(), show_all)
    chosen = [u for u in shown if unit_selected(u.name, unit_pattern)]
    rollup = read_run_figures(run, chosen)
    lint = _lint_by_unit(run, chosen, rollup, candidates)
    made: dict[tuple, StageRecord] = {}
    units = []
    timed = read_time(run)
    origins = kernel_origins(run)
    for unit, figures in zip(chosen, rollup.units):
        records = tuple(_stage_record(run, s, made) for s in by_unit.get(unit.id, ()))
        headline = unit_headline(records, figures)
        if timed is not None and unit.id in timed.units:  # measured GPU time, where joined
            headline.update(timed.units[unit.id].figures())
        lines, code = unit_keys(run, unit)
        units.append(UnitRecord(unit.name, unit.framework, unit.source_file, unit.source_line,
                                records, headline, lint.get(unit.name, {}),
                                provenance=lines, code_key=code,
                                candidate=figures.autotune_lost and not candidates,
                                launches=figures.launches, origin=origins.get(unit.id)))
    totals = {"units": len(units), "graph_breaks": rollup.event_total("graph_breaks"),
              "recompiles": rollup.recompiles}
    if hidden:
        totals["hidden_units"] = len(hidden)
    if rollup.graphs:  # sums over distinct graphs, each of its output codes once
        totals.update(graphs=len(rollup.graphs), kernels_generated=rollup.kernels_generated,
                      kernels_launched=rollup.kernels_launched)
    totals.update(rank_totals(run))  # a multi-process run: its ranks and where they diverge
    if timed is not None:
        totals.update(timed.figures())
    return tuple(units), totals


def _stage_record(run: RunView, stage: Stage, made: dict[tuple, StageRecord]) -> StageRecord:
    key = (stage.kind, stage.name, stage.blob, stage.size)
    if key not in made:
        parsed = run.parsed(stage) if registry.get(stage.kind).module else None
        made[key] = stage_record(stage.kind, stage.name, parsed, stage.blob, stage.size)
    return made[key]


def _lint_by_unit(run: RunView, units, figures, candidates: bool) -> dict[str, dict[str, int]]:
    """``lint.<rule>`` counts of each unit's findings (irscope lint), by unit name."""
    found: dict[str, list] = {}
    for finding in read_findings(run, units, figures=figures, candidates=candidates):
        found.setdefault(finding.unit, []).append(finding)
    return {name: lint_counts(findings) for name, findings in found.items()}
