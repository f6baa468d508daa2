"""`irscope compile FILE.py::KERNEL`: compile a Triton kernel ahead of time for any GPU and compare configs."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from irscope.console import note, print_json, progress, rich_console, warn
from irscope.errors import InputError, MissingDependency, UsageError


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "compile", help="compile a Triton kernel ahead of time (no GPU) and compare configurations",
        description="Import FILE.py, find the @triton.jit KERNEL, compile every configuration of "
                    "the sweep for every architecture in parallel, file each with all its stages "
                    "(ttir, ttgir, llir, ptx, cubin, SASS) into a run, and print a comparison "
                    "table: registers, spills, shared memory, instruction counts, tensor-core "
                    "instructions, main-loop global traffic, and whether the config is valid.")
    p.add_argument("target", metavar="FILE.py::KERNEL", help="the kernel file and kernel name")
    p.add_argument("--signature", metavar="NAME=TYPE,...", default="",
                   help="types of the non-constexpr parameters, e.g. 'x_ptr=*fp16,n=i32'; "
                        "append :16 where a launch would see 16-divisible values (aligned "
                        "pointers: '*fp16:16'), as Triton's launcher specializes them")
    p.add_argument("--example", metavar="FILE.py", help="infer the signature from a file "
                   "defining args = (...) (and kwargs = {...}) as at a call site (needs torch)")
    p.add_argument("--constexpr", action="append", default=[], metavar="NAME=VALUE",
                   help="a constexpr value (repeatable)")
    p.add_argument("--sweep", action="append", default=[], metavar="NAME=V1,V2,...",
                   help="sweep a constexpr, num_warps, num_stages, maxnreg or arch over values "
                        "(repeatable; configurations are the cartesian product)")
    p.add_argument("--arch", action="append", default=[], metavar="ARCH",
                   help="GPU architecture(s): sm_80, sm_89, sm_90a, sm_100a, ... (repeatable or "
                        "comma-separated; default sm_90a)")
    p.add_argument("--num-warps", type=int, metavar="N", help="warps per program (default 4)")
    p.add_argument("--num-stages", type=int, metavar="N", help="pipeline stages (default 3)")
    p.add_argument("-j", "--jobs", type=int, metavar="N",
                   help="parallel compiler processes (default: one per core)")
    p.add_argument("-o", "--output", metavar="RUN", help="run directory (default: "
                   "./.irscope/runs/<time>-compile-<kernel>)")
    p.add_argument("--sort", metavar="FIGURE", help="sort the table by a figure or config name "
                   "(registers, spills, shared_bytes, ptx_instructions, tensor_core, BLOCK_M, ...)")
    p.add_argument("--reverse", action="store_true", help="sort in descending order")
    p.add_argument("--passes", action="store_true",
                   help="also keep the IR after every MLIR pass that changed it, TTIR to LLVM "
                        "IR (see `irscope passes RUN UNIT`); compiles bypass Triton's cache")
    p.add_argument("--json", action="store_true", help="print the comparison rows as JSON")
    p.set_defaults(func=run)


def split_target(text: str) -> tuple[str, str]:
    """``path/k.py::matmul_kernel`` -> (path, kernel); the file must exist."""

    path, sep, kernel = text.rpartition("::")
    if not sep or not kernel.isidentifier() or not path:
        raise UsageError(f"compile: {text!r} is not FILE.py::KERNEL")
    if not Path(path).is_file():
        raise InputError(f"{path}: no such file")
    return path, kernel


def run(args) -> int:
    import dataclasses
    import importlib.util

    from irscope.sweep import configs as sweep, results
    from irscope.sweep.pool import CompilePool
    from irscope.collectors import triton_aot
    from irscope.store import Run, default_run_dir

    path, kernel = split_target(args.target)
    signature = sweep.parse_signature(args.signature)
    configs = sweep.expand(args.constexpr, args.sweep, args.arch,
                           {"num_warps": args.num_warps, "num_stages": args.num_stages})
    if importlib.util.find_spec("triton") is None:
        raise MissingDependency("triton", "irscope compile", "triton")
    workers = min(args.jobs or os.cpu_count() or 1, len(configs))
    with CompilePool(workers) as pool:
        info = pool.call(triton_aot.describe, path, kernel)
        inferred = {}
        if args.example:
            types, inferred = pool.call(triton_aot.infer_signature, path, kernel, args.example)
            signature = {**types, **signature}
        configs = [c.ordered(info.params) for c in configs]
        jobs = sweep.jobs_for(path, info, signature, configs, inferred)
        if args.passes:
            jobs = [dataclasses.replace(job, passes=True) for job in jobs]
        out = Path(args.output) if args.output else default_run_dir(f"compile-{kernel}")
        run_store = Run.create(out, {"name": out.name, "kind": "compile", **_describe()})
        names = [c.unit_name(kernel) for c in configs]
        with progress(f"compiling {len(jobs)} configurations", total=len(jobs)) as bar:
            for index, outcome in pool.compile(jobs):
                unit_id = results.file_outcome(run_store, info, configs[index], jobs[index],
                                               outcome)
                if outcome.pass_dump:
                    _file_passes(run_store, unit_id, outcome.pass_dump)
                bar.advance(description=names[index])
    rows = results.comparison_rows(run_store, names)
    results.store_figures(run_store, rows)
    rows = results.sort_rows(rows, args.sort, args.reverse)
    if args.json:
        print_json({"run": str(out), "kernel": kernel, "rows": rows})
    else:
        _print_table(rows)
    sys.stdout.flush()
    failed = sum(1 for r in rows if r["status"] == "error")
    invalid = sum(1 for r in rows if r["status"] == "invalid")
    note(f"{len(rows)} configurations: {len(rows) - failed - invalid} valid, {invalid} invalid, "
         f"{failed} failed to compile; run at {out}")
    note(f"browse it with `irscope open {out}`, export it with `irscope report {out}`")
    return 1 if failed else 0


def _file_passes(run_store, unit_id: int, dump: str) -> None:
    """File a configuration's pass dump into its unit, then remove the dump."""
    from irscope.ingest.passes import file_dump_file

    try:
        filer = file_dump_file(run_store, unit_id, dump)
        for problem in filer.diagnostics:
            if problem.severity != "info":
                warn(f"{run_store.unit_by_id(unit_id).name}: passes: {problem.message}")
    finally:
        Path(dump).unlink(missing_ok=True)


def _print_table(rows: list[dict]) -> None:
    """The comparison table (config columns that vary, then figures) and each config's problems."""
    from rich.table import Table
    from irscope.sweep import results

    console = rich_console()
    varying = results.varying_settings(rows)
    table = Table(show_edge=False, pad_edge=False, header_style="bold")
    for name in ["arch", *varying, "status"]:
        table.add_column(name, no_wrap=True)
    for key, title in results.FIGURES:
        table.add_column(title, justify="right", no_wrap=True)
    styles = {"ok": "green", "invalid": "yellow", "error": "red"}
    for row in rows:
        cells = [row["arch"], *(str(row["config"].get(n, "")) for n in varying),
                 f"[{styles[row['status']]}]{row['status']}[/]"]
        cells += ["" if row.get(k) is None else _number(row[k]) for k, _ in results.FIGURES]
        table.add_row(*cells)
    if not console.is_terminal:  # a pipe or file: the whole table, never squeezed to 80
        wide = console.options.update_width(10_000)
        console.width = max(console.width, console.measure(table, options=wide).maximum)
    console.print(table)
    for row in rows:
        for message in row["problems"] + row["warnings"]:
            console.print(f"{row['unit']}: {message}", markup=False, soft_wrap=True)
        if row.get("error"):
            where = f"{row['error_file']}:{row['error_line']}: " if row.get("error_line") else ""
            console.print(f"{row['unit']}: {where}{row['error']}", markup=False, soft_wrap=True)
            if row.get("error_source"):
                console.print(f"    {row['error_source']}", markup=False, soft_wrap=True)


def _number(value) -> str:
    return f"{value:.2f}" if isinstance(value, float) else f"{value:,}"


def _describe() -> dict:
    from irscope import environment

    return environment.describe(["irscope", *sys.argv[1:]])
