"""`irscope sass FILE`: resource card (registers, spills, occupancy) and SASS histograms per kernel."""

from __future__ import annotations

import argparse
import shlex
from dataclasses import replace
from pathlib import Path
from irscope.errors import InputError, UsageError
from irscope.files import read_bytes
from irscope.console import markup_escape, print_json, rich_console, warn
from irscope.escaping import one_line

MAX_THREADS = 1024  # threads per block, the CUDA limit on every architecture


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "sass", help="analyze a cubin (or SASS text): registers, spills, occupancy, histograms",
        description="Disassemble a cubin with nvdisasm/cuobjdump (PATH, the Triton wheel or "
                    "$IRSCOPE_CUDA_BIN) and show per kernel its resource usage, theoretical "
                    "occupancy with what limits it, and its SASS opcode histogram. A SASS "
                    "listing (.sass, cuobjdump or nvdisasm output) is read directly.")
    parser.add_argument("file", type=Path, help="a .cubin, or a SASS text listing")
    parser.add_argument("--threads", type=int, metavar="N",
                        help="threads per block for occupancy (default: the kernel's "
                             ".reqntid/.maxntid, else 128)")
    parser.add_argument("--shared", type=int, default=0, metavar="BYTES",
                        help="dynamic shared memory per block added to the static amount")
    parser.add_argument("--arch", type=int, metavar="SM", help="architecture for occupancy, e.g. 90")
    parser.add_argument("--by", choices=("opcode", "op", "category"), default="op",
                        help="histogram granularity (default: op)")
    parser.add_argument("--top", type=int, default=20, metavar="N", help="histogram rows (0 = all)")
    parser.add_argument("--json", action="store_true", help="print JSON on stdout")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from irscope import nvtools
    from irscope.parsers import sass

    if args.threads is not None and not 1 <= args.threads <= MAX_THREADS:
        raise UsageError(f"--threads: {args.threads} threads per block is outside 1-{MAX_THREADS}")
    if args.shared < 0:
        raise UsageError(f"--shared: {args.shared} bytes of shared memory is negative")
    if args.arch is not None and not 10 <= args.arch <= 999:
        raise UsageError(f"--arch: {args.arch} is not an architecture (e.g. 80, 90)")
    data = read_bytes(args.file)
    if not data.strip():
        raise InputError(f"{args.file}: empty file")
    if data[:4] == b"\x7fELF":
        if not any(nvtools.find_tool(t) for t in nvtools.TOOLS):
            nvtools.warn_missing_once("cannot disassemble the cubin")
            return 1
        text = nvtools.disassemble(data)
        if text is None:
            raise InputError(f"{args.file}: nvdisasm/cuobjdump could not read this cubin")
        module = sass.with_resources(sass.parse(text), nvtools.resource_usage(data))
    elif b"\x00" in data[:4096]:
        raise InputError(f"{args.file}: binary file that is neither a cubin (ELF) nor SASS text")
    else:
        text = data.decode("utf-8", errors="replace")
        module = sass.parse(text)
        if not module.kernels:
            raise InputError(f"{args.file}: no SASS instructions found"
                             f"{_other_kind(args.file, text)}")
    cards = [_card(args, module, kernel) for kernel in module.kernels]
    if args.json:
        print_json({"file": str(args.file), "format": module.format, "arch": module.arch,
                    "totals": dict(module.totals), "histogram": dict(module.histogram),
                    "ops": dict(module.ops), "categories": dict(module.categories),
                    "kernels": [{**_kernel_json(k), "occupancy": card}
                                for k, card in zip(module.kernels, cards)]})
        return 0
    _print(args, module, cards)
    return 0


def _other_kind(path: Path, text: str) -> str:
    """What the file is instead, and the command that reads it (PTX: `irscope ptx`)."""
    from irscope.parsers import registry

    kind = registry.detect(text, path.name)
    if kind == "ptx":
        return f": it is PTX (`irscope ptx {shlex.quote(str(path))}` analyses it)"
    if registry.get(kind).module:
        return (f": it reads as {registry.get(kind).title} (`irscope stats "
                f"{shlex.quote(str(path))}` counts it)")
    return ""


def _card(args, module, kernel) -> dict | None:
    """Occupancy of one kernel, or None when its register count is unknown."""
    from irscope.analysis.kernels import kernel_records

    res = kernel.resources
    threads = args.threads or res.get("threads_per_block") or 128
    record = kernel_records(_one(module, kernel), {}, {}, {"shared": args.shared})[kernel.name]
    record = replace(record, arch=args.arch or module.arch, threads_per_block=threads)
    occ = record.occupancy_card()
    if occ is None:
        return None
    return {"arch": record.arch, "threads_per_block": threads, "active_blocks": occ.active_blocks,
            "active_warps": occ.active_warps, "max_warps": occ.max_warps,
            "ratio": round(occ.ratio, 4), "limiter": occ.limiter, "blocks_by": occ.blocks_by}


def _one(module, kernel):
    """``module`` holding ``kernel`` alone."""
    return replace(module, kernels=(kernel,))


def _kernel_json(kernel) -> dict:
    return {"name": kernel.name, "instructions": kernel.instructions,
            "histogram": kernel.histogram, "ops": kernel.ops, "categories": kernel.categories,
            "resources": kernel.resources}


def _print(args, module, cards) -> None:
    from rich.table import Table
    from rich.text import Text

    from irscope.commands.ptx import histogram_cut

    console = rich_console()
    arch = f"sm_{module.arch}" if module.arch else "unknown arch"
    console.print(f"[bold]{markup_escape(args.file)}[/]  {markup_escape(module.format)}, "
                  f"{arch}, "
                  f"{len(module.kernels)} kernel(s), {module.totals['instructions']:,} instructions", soft_wrap=True)
    for kernel, card in zip(module.kernels, cards):
        res = kernel.resources
        console.print()
        console.print(f"[bold cyan]{markup_escape(kernel.name)}[/]", soft_wrap=True)
        if "registers" in res:
            console.print(f"  registers {res['registers']}  stack {res.get('stack_bytes', 0)} B  "
                          f"shared {res.get('shared_bytes', 0):,} B (static)  "
                          f"const {res.get('const_bytes', 0):,} B", soft_wrap=True)
            console.print(f"  local memory: stores {res.get('local_store_bytes', 0)} B, loads "
                          f"{res.get('local_load_bytes', 0)} B per thread (spills and local "
                          f"arrays; `ptxas -v` on the kernel's PTX tells spills apart)",
                          soft_wrap=True)
        else:
            console.print("  resource usage unknown (no -res-usage data in this listing)", soft_wrap=True)
        if card:
            console.print(f"  occupancy on sm_{card['arch']} at {card['threads_per_block']} "
                          f"threads/block: [bold]{card['ratio']:.0%}[/] ({card['active_warps']}/"
                          f"{card['max_warps']} warps, {card['active_blocks']} blocks/SM), "
                          f"limited by {card['limiter'].replace('_', ' ')}", soft_wrap=True)
        histogram = {"opcode": kernel.histogram, "op": kernel.ops,
                     "category": kernel.categories}[args.by]
        table = Table(show_edge=False)
        table.add_column(args.by)
        table.add_column("count", justify="right")
        rows, more = histogram_cut(histogram, args.top)
        for name, count in rows:
            table.add_row(Text(one_line(name)), f"{count:,}")
        console.print(table)
        if more:
            console.print(f"  {more}", soft_wrap=True)
    if module.diagnostics:
        for d in module.diagnostics:
            warn(d.message)
