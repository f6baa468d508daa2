"""`irscope report RUN`: op counts and headline figures of every unit, in five formats."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from irscope.console import note, rich_console, write_text
from irscope.errors import UsageError
from irscope.files import write_whole

FORMATS = ("table", "json", "csv", "md", "html")
DETAILED = ("html",)  # formats that show the run's kernels and problems beside the records


def add_format_options(parser: argparse.ArgumentParser) -> None:
    """--format, -o, --stage and --unit, shared by `report` and `diff`."""
    parser.add_argument("--format", "-f", choices=FORMATS, default=None,
                        help="output format (default: table on a terminal, json with --json; "
                             "for -o, taken from the file extension)")
    parser.add_argument("--json", action="store_true", help="same as --format json")
    parser.add_argument("--all", action="store_true", dest="show_all",
                        help="report JAX's eager ops too (jits JAX makes for itself, such as "
                             "jit_add; hidden by default)")
    parser.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    parser.add_argument("--stage", metavar="KINDS",
                        help="comma-separated stage kinds or families to include "
                             "(e.g. ptx,sass,ttgir or hlo,inductor)")
    parser.add_argument("--unit", metavar="PATTERN",
                        help="only units whose name matches (glob, or substring without wildcards)")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "report", help="export op counts and headline figures of a run (table/json/csv/md/html)",
        description="Per unit and per stage: op counts from the parsers plus kernels generated "
                    "and launched, fused ops, extern calls, PTX/SASS instruction categories, "
                    "registers, spills, shared memory, HLO fusions, graph breaks and "
                    "recompilations. JSON follows the irscope.report/1 schema.")
    parser.add_argument("run", nargs="?", default="latest",
                        help="run directory, run name under ./.irscope/runs, or 'latest' (default)")
    add_format_options(parser)
    parser.add_argument("--summary", action="store_true",
                        help="with --format md: at most 60 lines to paste in a pull request "
                             "(headline figures, the top kernels, the problems, and with "
                             "--against what changed)")
    parser.add_argument("--against", metavar="BASE",
                        help="with --summary: a run, report JSON or artifact to say what "
                             "changed since")
    parser.add_argument("--history", metavar="DIR", type=Path,
                        help="an export dataset (irscope export): show each headline figure "
                             "over the earlier runs of the same name there")
    add_candidates_option(parser)
    parser.set_defaults(func=run)


def add_candidates_option(parser: argparse.ArgumentParser) -> None:
    """--candidates, shared by `report` and `lint`."""
    parser.add_argument("--candidates", action="store_true",
                        help="count the autotuning candidates that lost too (kept and listed, "
                             "but left out of the run's figures and lint by default)")


_EXTENSIONS = {".json": "json", ".csv": "csv", ".md": "md", ".markdown": "md", ".html": "html",
               ".htm": "html", ".txt": "table"}


def chosen_format(args: argparse.Namespace) -> str:
    """--format, else --json, else the -o extension, else table."""
    if args.format:
        return args.format
    if args.json:
        return "json"
    if args.output:
        return _EXTENSIONS.get(Path(args.output).suffix.lower(), "table")
    return "table"


def stage_filter(args: argparse.Namespace) -> tuple[str, ...] | None:
    if not args.stage:
        return None
    return tuple(s.strip() for s in args.stage.split(",") if s.strip()) or None


def emit(text_at_width, renderable_for_terminal, fmt: str, output: str | None) -> None:
    """Write the rendering to -o FILE, or to stdout (Rich for a table, text otherwise);
    ``text_at_width(width)`` renders the text (a file's table is 120 columns wide); a table
    on stdout fits the terminal, or COLUMNS, and is whole in a pipe."""

    if output:
        write_whole(Path(output), text_at_width(120))  # whole or not at all
    elif fmt == "table":
        console = rich_console()
        if console.is_terminal or os.environ.get("COLUMNS"):
            console.print(renderable_for_terminal(console.width))
            return
        from irscope.reports.table import WHOLE

        # a pipe or a file: every column, each as wide as it needs, as ls writes to a pipe
        renderable = renderable_for_terminal(WHOLE)
        console.width = console.measure(renderable, options=console.options.update_width(
            WHOLE)).maximum
        console.print(renderable)
    else:
        write_text(text_at_width(120))


def run(args: argparse.Namespace) -> int:
    return collector_paused(_report)(args)


def collector_paused(command):
    """``command`` run with the cyclic garbage collector paused: the records of a large run
    are 100,000s of small objects in no reference cycle, and the collector's passes over them
    cost a quarter of a first diff of 12,000 units."""
    from irscope.parsers.base import gc_paused

    return gc_paused(command)


def _report(args: argparse.Namespace) -> int:
    from irscope.read.stage_counts import hidden_text
    from irscope.read.view import RunView
    from irscope.reports import renderer
    from irscope.reports.build import build_report
    from irscope.reports.common import Details, Rendering
    from irscope.store import Run, locate_run

    fmt = chosen_format(args)
    if (args.summary or args.against) and fmt != "md":
        raise UsageError("--summary and --against write Markdown: add --format md")
    if args.against and not args.summary:
        raise UsageError("--against says what changed in a --summary: add --summary")
    with Run.open(locate_run(args.run)) as opened:
        view = RunView(opened)
        report = build_report(view, stage_filter(args), args.unit, args.show_all,
                              args.candidates)
        details = Details.of_view(view) if fmt in DETAILED else Details()
    history = None
    if args.history is not None:
        from irscope.reports.history import read_history

        history = read_history(args.history, report)
        note(_history_found(history, args.history, report.run))
    if report.totals.get("hidden_units"):
        note(f"irscope: {hidden_text(report.totals['hidden_units'])} (--all reports them)")
    if not report.units:
        note(f"irscope: {report.run}: no units" + (f" match {args.unit!r}" if args.unit else ""))
    changes = None
    if args.against:
        from contextlib import ExitStack

        from irscope.commands.diff import load_side
        from irscope.reports.diff import diff_reports

        with ExitStack() as opened_runs:
            against, _ = load_side(args.against, stage_filter(args), args.unit, opened_runs)
        changes = diff_reports(against, report)
    module = renderer(fmt)
    if args.summary:
        emit(lambda width: module.render_summary(report, Rendering(width, details,
                                                                   history=history,
                                                                   changes=changes)),
             None, fmt, args.output)
        return 0
    emit(lambda width: module.render_report(report, Rendering(width, details, history=history)),
         lambda width: module.report_renderable(report, width,
                                                Rendering(width, details, history=history)),
         fmt, args.output)
    if args.output:
        note(f"wrote {fmt} report of {len(report.units)} units to {args.output}")
    return 0


def _history_found(history, folder: Path, name: str) -> str:
    """What --history found, for a report that may show no history rows."""
    if not history.runs:
        return (f"irscope: history: {folder} holds no earlier run named {name!r} (irscope "
                "export adds each run)")
    changed = len(history.rows())
    runs = f"{len(history.runs)} earlier run{'s' * (len(history.runs) != 1)} named {name!r}"
    return f"irscope: history: {runs}, " + (
        f"{changed} figure{'s' * (changed != 1)} changed" if changed else "no figure changed")
