"""`irscope stats FILE...`: parse artifacts of any known kind and print their totals and top ops."""

from __future__ import annotations

import argparse
import glob
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from irscope.errors import InputError, IrscopeError, UsageError
from irscope.files import read_artifact
from irscope.console import error, note, print_json, rich_console
from irscope.escaping import one_line
from irscope.console import markup_escape as escape

TOP_OPS = 15


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "stats", help="parse artifact files and print their totals and op histograms",
        description="Parse compiler artifacts (HLO, jaxpr, Inductor output code, FX graph, "
                    "PTX, ...) and print each one's totals and most frequent ops. The kind is "
                    "detected from the name and content unless --kind is given.")
    parser.add_argument("files", nargs="+", metavar="FILE",
                        help="artifact files or glob patterns ('dump/**/*.txt', quoted so "
                             "irscope expands them)")
    parser.add_argument("--kind", help="artifact kind (skips detection); see the error for kinds")
    parser.add_argument("--json", action="store_true", help="print the full parse as JSON")
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 when the parser reported any diagnostic")
    parser.set_defaults(func=run)


def buffer_assignment_beside(path: Path) -> str | None:
    """The XLA dump's `<name>-buffer-assignment.txt` next to an HLO file, when there is one
    that reads (a FIFO or device of that name is passed over, never waited on)."""
    sibling = path.with_name(path.stem + "-buffer-assignment.txt")
    try:
        return read_artifact(sibling) if sibling.is_file() else None
    except (OSError, InputError):
        return None


def summary(kind: str, result) -> dict[str, Any]:
    """The JSON document `stats --json` prints: the parse plus the headline keys up front."""
    data = result.to_json()
    head = {"kind": kind, "histogram": data.pop("histogram"), "totals": data.pop("totals"),
            "diagnostics": data.pop("diagnostics")}
    data.pop("kind", None)
    for key in ("kernels", "fusions"):  # kernel/fusion records carry bulky source text
        for record in data.get(key, ()) or ():
            if isinstance(record, dict):
                record.pop("source", None)
    return {**head, **data}


GLOB_CHARS = frozenset("*?[")


def artifact_paths(patterns: Iterable[str]) -> list[Path]:
    """Each argument as a file, or, with a wildcard, every file it matches (sorted; ``**``
    spans folders); a pattern matching no file is an error."""
    paths: list[Path] = []
    for pattern in patterns:
        if not GLOB_CHARS & set(pattern) or os.path.lexists(pattern):  # "k[1].ptx" is a name
            paths.append(Path(pattern))
            continue
        matches = sorted(m for m in glob.glob(pattern, recursive=True) if Path(m).is_file())
        if not matches:
            raise InputError(f"{pattern}: no file matches")
        paths.extend(Path(m) for m in matches)
    return paths


def each_file(paths: list[Path], one: Callable[[Path], int]) -> int:
    """``one(path)`` for every path; with several, a file that fails is reported and the rest
    go on, and the exit code is the first failure's."""
    if len(paths) == 1:
        return one(paths[0])
    status = 0
    for path in paths:
        try:
            code = one(path)
        except IrscopeError as exc:
            error(str(exc))
            code = exc.exit_code
        status = status or code
    return status


def run(args: argparse.Namespace) -> int:
    from irscope.parsers import registry

    if args.kind and args.kind not in registry.kinds():
        parsed = ", ".join(k for k in registry.kinds() if registry.get(k).module)
        raise UsageError(f"unknown kind {args.kind!r}; valid kinds: {parsed}")
    paths = artifact_paths(args.files)
    if not args.json or len(paths) == 1:
        return each_file(paths, lambda path: stats_of(path, args))
    documents: list = []  # several files as --json: one array, a document per file
    status = each_file(paths, lambda path: stats_of(
        path, args, lambda doc: documents.append({"file": str(path), **doc})))
    print_json(documents)
    return status


def stats_of(path: Path, args: argparse.Namespace, emit: Callable | None = None) -> int:
    """Parse and show one file; with ``emit``, its JSON document goes there instead."""
    from irscope.parsers import registry

    emit = emit or print_json
    text = read_artifact(path)
    if not args.kind:
        log_kind = torch_log_kind(text, path.name)
        if log_kind:
            return _print_torch_log(path, log_kind, args.json, emit)
    kind = args.kind or registry.detect(text, path.name)
    module = registry.parser_module(kind)
    if module is None:
        raise InputError(f"{path}: no parser for kind {kind!r} (use --kind to choose one)")
    report = buffer_assignment_beside(path) if module.__name__.endswith(".hlo") else None
    result = module.parse(text, buffer_assignment=report) if report else registry.parse(kind, text)
    if result.kind in registry.kinds() and result.kind != kind and not args.kind:
        kind = result.kind  # the parse knows better (HLO after optimizations, memory report)
    if args.json:
        emit(summary(kind, result))
    else:
        _print_table(path, kind, result)
    for diagnostic in result.diagnostics[:20]:
        where = f":{diagnostic.line}" if diagnostic.line else ""
        note(f"{path}{where}: {diagnostic.severity}: {diagnostic.message}")
    if len(result.diagnostics) > 20:
        note(f"{path}: ... {len(result.diagnostics) - 20} more diagnostics")
    return 1 if args.strict and result.diagnostics else 0


def torch_log_kind(text: str, name: str) -> str | None:
    """"torch_trace" or "torch_logs" when ``text`` is one of PyTorch's compile logs."""
    from irscope.ingest import torch_logs, torch_trace

    head = text[:65536].encode("utf-8", "replace")
    if torch_trace.is_torch_trace(head):
        return "torch_trace"
    return "torch_logs" if torch_logs.is_torch_log(head, name) else None


def _print_torch_log(path: Path, kind: str, as_json: bool, emit: Callable = print_json) -> int:
    """Summarize a TORCH_TRACE log or TORCH_LOGS text: file it into a scratch run, then read
    the run's figures (graphs, breaks, recompilations, kernels) as `inspect` would."""
    import tempfile

    from irscope.ingest import ingest
    from irscope.read.summary import read_summary
    from irscope.store import Run

    with tempfile.TemporaryDirectory(prefix="irscope-stats-") as scratch:
        with Run.create(Path(scratch) / "run", {"name": path.name}) as run:
            report = ingest(run, [path])
            data = read_summary(run).to_json()
    figures = {"kind": kind, "graphs": data["graphs"], "units": data["units"],
               "graph_breaks": data["graph_breaks"], "recompiles": data["recompiles"],
               "compile_failures": data["compile_failures"],
               "kernels_generated": data["kernels_generated"],
               "kernels_launched": data["kernels_launched"],
               "kernels_launched_per_call": data["kernels_launched_per_call"],
               "warnings": report.warnings}
    if as_json:
        emit(figures)
        return 0
    from rich.table import Table

    console = rich_console()
    title = "TORCH_TRACE log" if kind == "torch_trace" else "TORCH_LOGS text"
    console.print(f"[bold]{escape(path.name)}[/bold]: {title} ({kind})")
    table = Table(show_header=False)
    table.add_column("figure", style="bold")
    table.add_column("value", justify="right")
    for key in ("graphs", "graph_breaks", "recompiles", "compile_failures",
                "kernels_generated", "kernels_launched"):
        table.add_row(key, f"{figures[key]:,}")
    console.print(table)
    if figures["kernels_launched_per_call"]:
        calls = Table(title="kernels launched per call")
        for column in ("graph", "output code", "launches"):
            calls.add_column(column, justify="right" if column == "launches" else "left")
        for row in figures["kernels_launched_per_call"]:
            calls.add_row(escape(row["graph"]), escape(row["role"] or row["output_code"]),
                          f"{row['kernels_launched']:,}")
        console.print(calls)
    for warning in report.warnings[:5]:
        note(f"{path}: {warning}")
    return 0


def _print_table(path: Path, kind: str, result) -> None:
    from rich.table import Table
    from rich.text import Text

    from irscope.parsers import registry

    console = rich_console()
    console.print(f"[bold]{escape(path.name)}[/bold]: {escape(registry.get(kind).title)} "
                  f"({escape(kind)})")
    totals = Table(show_header=False)
    totals.add_column("total", style="bold")
    totals.add_column("value", justify="right")
    for key, value in result.totals.items():
        totals.add_row(Text(one_line(key)), Text(f"{value:,}" if isinstance(value, int)
                                             else str(value)))
    console.print(totals)
    if result.histogram:
        ops = Table(title=f"top {min(TOP_OPS, len(result.histogram))} of "
                          f"{len(result.histogram)} ops")
        ops.add_column("op")
        ops.add_column("count", justify="right")
        for op, count in list(result.histogram.items())[:TOP_OPS]:
            ops.add_row(Text(one_line(op)), f"{count:,}")
        console.print(ops)
