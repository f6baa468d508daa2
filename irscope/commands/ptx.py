"""`irscope ptx FILE...`: per-kernel opcode histograms, collapsed listing and loops of a PTX module."""

from __future__ import annotations

import argparse
from pathlib import Path
from irscope.errors import InputError, UsageError
from irscope.files import read_artifact
from irscope.console import markup_escape, out, print_json, rich_console, warn

LEVELS = {"opcode": "histogram", "op": "ops", "category": "categories"}


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "ptx", help="analyze a PTX file: op histograms per kernel, loops, collapsed listing",
        description="Parse a PTX module and show, per kernel, its instruction histogram, "
                    "declarations, static estimates and (optionally) loops and a collapsed "
                    "listing. Needs no CUDA tools.")
    parser.add_argument("files", nargs="+", metavar="FILE",
                        help=".ptx files or glob patterns ('out/**/*.ptx', quoted so irscope "
                             "expands them)")
    parser.add_argument("--kernel", metavar="NAME", help="only this kernel (exact or unique substring)")
    parser.add_argument("--by", choices=tuple(LEVELS), default="opcode",
                        help="histogram granularity (default: opcode)")
    parser.add_argument("--top", type=int, default=25, metavar="N",
                        help="rows of each histogram to show (default: 25; 0 = all)")
    parser.add_argument("--collapsed", action="store_true",
                        help="print each kernel's listing with runs of like instructions folded")
    parser.add_argument("--loops", action="store_true", help="show loops and what runs inside them")
    parser.add_argument("--json", action="store_true", help="print JSON on stdout")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from irscope.commands.stats import artifact_paths, each_file

    paths = artifact_paths(args.files)
    if not args.json or len(paths) == 1:
        return each_file(paths, lambda path: analyse(path, args))
    documents: list = []  # several files as --json: one array, a document per file
    status = each_file(paths, lambda path: analyse(path, args, documents.append))
    print_json(documents)
    return status


def analyse(path: Path, args: argparse.Namespace, emit=print_json) -> int:
    """Parse one PTX file and show it (or hand its JSON document to ``emit``)."""
    from irscope.parsers import ptx

    args = argparse.Namespace(**{**vars(args), "file": path})
    text = read_artifact(args.file, "PTX text")
    module = ptx.parse(text)
    errors = [d for d in module.diagnostics if d.severity == "error"]
    if errors:
        raise InputError(f"{args.file}: {errors[0].message}")
    if not module.kernels:
        raise InputError(f"{args.file}: no .entry or .func found: not a PTX module")
    for d in module.diagnostics:
        warn(f"{args.file}:{d.line}: {d.message}" if d.line else f"{args.file}: {d.message}")
    kernels = list(module.kernels)
    if args.kernel:
        try:
            kernels = [module.kernel(args.kernel)]
        except KeyError:
            names = ", ".join(k.name for k in module.kernels[:8])
            raise UsageError(f"no single kernel matches {args.kernel!r} (kernels: {names})") from None
    if args.json:
        emit(_json(args, module, kernels, text))
        return 0
    _print(args, module, kernels, text)
    return 0


def _json(args, module, kernels, text) -> dict:
    from irscope.parsers import ptx
    from irscope.parsers.base import to_jsonable

    data = module.to_json()
    data["file"] = str(args.file)
    data["kernels"] = [k.summary() for k in kernels]
    if args.collapsed:
        for entry, kernel in zip(data["kernels"], kernels):
            listing = ptx.collapse(ptx.kernel_text(text, kernel), kernel.first_line)
            entry["collapsed"] = [to_jsonable(line) for line in listing]
    return data


def _print(args, module, kernels, text) -> None:
    from rich.table import Table
    from rich.text import Text

    from irscope.parsers import ptx

    console = rich_console()
    totals = module.totals
    console.print(f"[bold]{markup_escape(args.file)}[/]  PTX "
                  f"{markup_escape(module.version or '?')}  target "
                  f"{markup_escape(module.target or '?')}  {totals['kernels']} kernel(s), "
                  f"{totals['functions']} function(s), {totals['instructions']:,} instructions", soft_wrap=True)
    for kernel in kernels:
        console.print()
        kind = "kernel" if kernel.is_entry else "function"
        console.print(f"[bold cyan]{markup_escape(kernel.name)}[/]  ({kind}, lines "
                      f"{kernel.first_line}-"
                      f"{kernel.last_line}{', TRUNCATED' if kernel.truncated else ''})", soft_wrap=True)
        console.print(Text(_card(kernel)), soft_wrap=True)
        histogram = getattr(kernel, LEVELS[args.by])
        table = Table(title=f"by {args.by}", title_justify="left", show_edge=False)
        table.add_column(args.by)
        table.add_column("count", justify="right")
        table.add_column("%", justify="right")
        total = max(kernel.instructions, 1)
        rows = list(histogram.items())
        for name, count in rows[:args.top or None]:
            table.add_row(Text(name), f"{count:,}", f"{100 * count / total:.1f}")
        if args.top and len(rows) > args.top:
            table.add_row(f"… {len(rows) - args.top} more", "", "")
        console.print(table)
        if args.loops:
            _print_loops(console, kernel)
        if args.collapsed:
            listing = ptx.collapse(ptx.kernel_text(text, kernel), kernel.first_line)
            for line in listing:
                out(f"{line.first_line:>6}  {line.text}")


def _card(kernel) -> str:
    regs = ", ".join(f"{n} .{t}" for t, n in kernel.registers.items()) or "none"
    perf = ", ".join(f".{k} {','.join(map(str, v))}" for k, v in kernel.perf.items()) or "none"
    est = kernel.estimates
    return (f"  instructions {kernel.instructions:,}  blocks {len(kernel.blocks)}  "
            f"loops {len(kernel.loops)}  params {len(kernel.params)}\n"
            f"  virtual registers: {regs}\n"
            f"  shared {kernel.shared_bytes:,} B  local {kernel.local_bytes:,} B  "
            f"perf directives: {perf}\n"
            f"  per thread, one pass: global loads {est['global_load_bytes']:,} B, "
            f"stores {est['global_store_bytes']:,} B, tensor-core ops {est['tensor_core']}, "
            f"FMA {est['fma']}")


def _print_loops(console, kernel) -> None:
    from rich.table import Table
    from rich.text import Text

    if not kernel.loops:
        console.print("  no loops", soft_wrap=True)
        return
    table = Table(title="loops", title_justify="left", show_edge=False)
    for column in ("head", "depth", "lines", "instructions", "top opcodes"):
        table.add_column(column, justify="right" if column in ("depth", "instructions") else "left")
    for loop in kernel.loops:
        top = ", ".join(f"{op} {n}" for op, n in list(loop.histogram.items())[:4])
        table.add_row(Text("  " * (loop.depth - 1) + loop.head), str(loop.depth),
                      f"{loop.first_line}-{loop.last_line}", f"{loop.instructions:,}", Text(top))
    console.print(table)
