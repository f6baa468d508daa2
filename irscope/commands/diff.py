"""`irscope diff A B`: what changed between two runs, reports or artifacts; CI gates."""

from __future__ import annotations

import argparse
import json
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

from irscope.commands.report import (add_format_options, chosen_format, collector_paused, emit,
                                     stage_filter)
from irscope.console import error, warn
from irscope.errors import InputError


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "diff", help="compare two runs, reports or artifacts; fail CI on regressions",
        description="Match units of A and B (by name, then by name without compile indices, "
                    "then by source location) and show units added and removed and, for "
                    "matched ones, every changed figure: op counts per stage, kernels, "
                    "fusions, registers, spills. JSON follows the irscope.diff/1 schema.",
        epilog="gates: --fail-on 'ptx.spills > 0'  --fail-on 'kernels_launched increased'  "
               "--fail-on 'sass.category.global_load > +10%'. Exit 1 when a gate holds, "
               "2 for a malformed gate or a figure irscope never reports (docs/figures.md "
               "names them); a figure neither side reports is a warning.")
    parser.add_argument("a", help="before: run directory or name, report JSON, or artifact file")
    parser.add_argument("b", help="after: run directory or name, report JSON, or artifact file")
    add_format_options(parser)
    parser.add_argument("--exact", action="store_true",
                        help="count a stage changed when its text differs at all: by default "
                             "two runs' stages that differ only in their cache folders, hashes "
                             "in names and SSA, register, label or kernel numbers are the same")
    parser.add_argument("--fail-on", metavar="EXPR", action="append", default=[],
                        help="exit 1 when EXPR holds for a matched unit or the run total "
                             "(repeatable), e.g. 'ptx.spills > 0', 'fusions decreased', "
                             "'sass.instructions > +10%%'")
    parser.set_defaults(func=run)


def load_side(spec: str, stages, unit_pattern, opened_runs: ExitStack):
    """A Report for one side (a report JSON file, an artifact file, or a run: its records,
    what a diff compares), and the run's view when it is a run (kept open in ``opened_runs``
    for the comparison of its texts)."""
    from irscope.files import read_artifact
    from irscope.parsers import registry
    from irscope.read.view import RunView
    from irscope.reports.build import report_records
    from irscope.reports.records import filtered, report_from_json, report_from_parsed
    from irscope.store import Run, locate_run

    path = Path(spec)
    if path.is_file():
        text = read_artifact(path, "a report or an artifact")
        if path.suffix.lower() == ".json" and '"schema"' in text[:4096]:
            try:
                return filtered(report_from_json(json.loads(text), str(path)), stages,
                                unit_pattern), None
            except (ValueError, KeyError, TypeError) as exc:
                raise InputError(f"{path}: not a readable irscope report ({exc})") from None
        kind = registry.detect(text, path.name)
        if not registry.get(kind).module:
            raise InputError(f"{path}: neither a run, an irscope report nor a known artifact")
        return report_from_parsed(path.name, kind, registry.parse(kind, text),
                                  str(path)), None
    view = RunView(opened_runs.enter_context(Run.open(locate_run(spec))))
    return report_records(view, stages, unit_pattern), view


def normalised(diff, views):
    """The diff of two runs (their ``views``) with the stages that differ only in paths,
    hashes and numbering no longer changed (a report or an artifact keeps no text to
    compare: left as it is)."""
    from irscope.analysis.normalize import same_program
    from irscope.reports.diff import without_renamings

    if None in views:
        return diff
    verdicts: dict[tuple[str, str], bool] = {}  # by blob pair: a large run shares them

    def renamed_only(unit, name: str) -> bool:
        """Whether both sides' text of the stage differ only in renamings, each pair of
        contents compared once."""
        blobs = [compared_blob(view, record, name)
                 for view, record in zip(views, (unit.a, unit.b))]
        if None in blobs:
            return False
        key = (blobs[0], blobs[1])
        if key not in verdicts:
            verdicts[key] = same_program(views[0].blob_text(blobs[0]),
                                         views[1].blob_text(blobs[1]))
        return verdicts[key]

    return without_renamings(diff, renamed_only)


def compared_blob(view, unit, name: str) -> str | None:
    """The blob whose text stands for ``unit``'s stage ``name`` in a comparison: the stage's
    own (its record's digest, the last of that name as ``stage_changes`` compares them), or
    for a cubin (its bytes hold paths) the unit's SASS; None when there is none."""
    stage = next((s for s in reversed(unit.stages) if s.name == name), None)
    if stage is None or stage.kind != "cubin":
        return stage and stage.digest
    sass = next((s for s in unit.stages if s.kind == "sass"), None)
    if sass is not None:
        return sass.digest
    found = view.unit_named(unit.framework, unit.name)  # SASS left out of the report (--stage)
    sass = next((s for s in view.stages(found.id) if s.kind == "sass"), None) if found else None
    return sass and sass.blob


def run(args: argparse.Namespace) -> int:
    return collector_paused(_diff)(args)


def _diff(args: argparse.Namespace) -> int:
    from irscope.reports import renderer
    from irscope.reports.common import Rendering
    from irscope.reports.diff import diff_reports
    from irscope.reports.gates import evaluate, parse_gate, unreported

    gates = [parse_gate(expr) for expr in args.fail_on]  # malformed: exit 2 before any work
    fmt = chosen_format(args)
    stages = stage_filter(args)
    with ExitStack() as opened_runs:
        (a, view_a), (b, view_b) = (load_side(spec, stages, args.unit, opened_runs)
                                    for spec in (args.a, args.b))
        diff = diff_reports(a, b)
        if not args.exact:
            diff = normalised(diff, (view_a, view_b))
    violations = []
    for gate in gates:
        if (missing := unreported(gate, diff)) is not None:
            warn(missing)
        violations += evaluate(gate, diff)
    rendering = Rendering(violations=tuple(violations))
    emit(lambda width: renderer(fmt).render_diff(diff, replace(rendering, width=width)),
         lambda width: renderer(fmt).diff_renderable(diff, width), fmt, args.output)
    for line in rendering.failures:
        error(f"gate failed: {line}")
    return 1 if violations else 0
