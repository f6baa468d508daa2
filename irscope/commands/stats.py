"""`irscope stats FILE`: parse one artifact of any known kind and print its totals and top ops."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from irscope.console import note, print_json, rich_console
from irscope.errors import InputError, UsageError
from irscope.files import read_artifact

TOP_OPS = 15


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "stats", help="parse one artifact file and print its totals and op histogram",
        description="Parse one compiler artifact (HLO, jaxpr, Inductor output code, FX graph, "
                    "PTX, ...) and print its totals and most frequent ops. The kind is "
                    "detected from the name and content unless --kind is given.")
    parser.add_argument("file", help="artifact file to parse")
    parser.add_argument("--kind", help="artifact kind (skips detection); see the error for kinds")
    parser.add_argument("--json", action="store_true", help="print the full parse as JSON")
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 when the parser reported any diagnostic")
    parser.set_defaults(func=run)


def buffer_assignment_beside(path: Path) -> str | None:
    """The XLA dump's `<name>-buffer-assignment.txt` next to an HLO file, when there is one."""
    sibling = path.with_name(path.stem + "-buffer-assignment.txt")
    try:
        return sibling.read_text() if sibling.is_file() else None
    except (OSError, UnicodeDecodeError):
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


def run(args: argparse.Namespace) -> int:
    from irscope.parsers import registry

    if args.kind and args.kind not in registry.kinds():
        parsed = ", ".join(k for k in registry.kinds() if registry.get(k).module)
        raise UsageError(f"unknown kind {args.kind!r}; valid kinds: {parsed}")
    path = Path(args.file)
    text = read_artifact(path)
    kind = args.kind or registry.detect(text, path.name)
    try:
        module = registry.parser_module(kind)
    except ImportError:
        module = None
    if module is None:
        raise InputError(f"{path}: no parser for kind {kind!r} (use --kind to choose one)")
    report = buffer_assignment_beside(path) if module.__name__.endswith(".hlo") else None
    result = module.parse(text, buffer_assignment=report) if report else registry.parse(kind, text)
    if result.kind in registry.kinds() and result.kind != kind and not args.kind:
        kind = result.kind  # the parse knows better (HLO after optimizations, memory report)
    if args.json:
        print_json(summary(kind, result))
    else:
        _print_table(path, kind, result)
    for diagnostic in result.diagnostics[:20]:
        where = f":{diagnostic.line}" if diagnostic.line else ""
        note(f"{path}{where}: {diagnostic.severity}: {diagnostic.message}")
    if len(result.diagnostics) > 20:
        note(f"{path}: ... {len(result.diagnostics) - 20} more diagnostics")
    return 1 if args.strict and result.diagnostics else 0


def _print_table(path: Path, kind: str, result) -> None:
    from rich.table import Table

    from irscope.parsers import registry

    console = rich_console()
    console.print(f"[bold]{path.name}[/bold]: {registry.get(kind).title} ({kind})")
    totals = Table(show_header=False)
    totals.add_column("total", style="bold")
    totals.add_column("value", justify="right")
    for key, value in result.totals.items():
        totals.add_row(key, f"{value:,}" if isinstance(value, int) else str(value))
    console.print(totals)
    if result.histogram:
        ops = Table(title=f"top {min(TOP_OPS, len(result.histogram))} of "
                          f"{len(result.histogram)} ops")
        ops.add_column("op")
        ops.add_column("count", justify="right")
        for op, count in list(result.histogram.items())[:TOP_OPS]:
            ops.add_row(op, f"{count:,}")
        console.print(ops)
