"""`irscope where RUN FILE:LINE`: what a line of your code became at each stage."""

from __future__ import annotations

import re

from irscope.console import note, out, print_json, printable, warn
from irscope.errors import UsageError

# "model.py:12"   "src/model.py:12"   "C:\\src\\model.py:12"; what follows the last
# colon, when it holds no path separator, is meant as a line: "model.py:abc", "model.py:-3"
LOCATION_RE = re.compile(r"^(.+):([^:/\\]+)$")
# what the located places of each kind of stage are, in pipeline order, for the heading
LOCATED = {"fx_graph": "FX nodes", "aot_graph": "FX nodes", "thunder_trace": "trace lines",
           "jaxpr": "jaxpr equations", "stablehlo": "StableHLO ops",
           "hlo_before_opt": "HLO instructions", "hlo_after_opt": "HLO instructions"}


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "where", help="what a line of your code became: FX nodes, kernels, IR lines",
        description="Print what FILE:LINE became at each stage of the run, by the compilers' "
                    "own records: the FX nodes it is the innermost frame of (each graph with "
                    "its role; for JAX its jaxpr equations, StableHLO ops and HLO "
                    "instructions), the kernels and extern calls it feeds (forward and "
                    "backward, each launch with its output-code line and the records that say "
                    "so; for JAX the XLA fusions and the HLO instructions run outside any "
                    "fusion, per module) with their measured time where the run was profiled, and each "
                    "kernel's IR lines and SASS instructions. FILE is a path or a file "
                    "name the run's records name once; with FILE alone, the lines of it that "
                    "feed kernels (those marked 'with callees' count the kernels of the code "
                    "they call too); with --files, the files the records name.")
    parser.add_argument("run", metavar="RUN", help="run folder, name, prefix or 'latest'")
    parser.add_argument("location", metavar="FILE:LINE", nargs="?",
                        help="a source line (model.py:42), or a file alone")
    parser.add_argument("--files", action="store_true",
                        help="list the source files the run's records name")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=run)


def run(args) -> int:
    from irscope.browse.source_view import source_files
    from irscope.read.source_lines import line_rows, unknown_note
    from irscope.browse.where import resolve_file, where
    from irscope.read.view import RunView
    from irscope.store import Run, locate_run

    if not args.files and not args.location:
        raise UsageError("where: give FILE:LINE (or a file, or --files)")
    with Run.open(locate_run(args.run), read_only=True) as opened:
        view = RunView(opened)
        if args.files:
            files = source_files(view)
            if args.json:
                print_json({"files": files})
            else:
                for path in files:
                    out(printable(path))
            return 0
        match = LOCATION_RE.match(args.location)
        if match is None:  # a file alone: its lines that feed kernels
            path = resolve_file(view, args.location)
            rows = line_rows(view, path)
            unknown = unknown_note(view, rows.values())
            callers = [n for n, row in rows.items() if row.with_callees]
            if args.json:
                print_json({"path": path, "with_callers": callers, "lines": [
                    {"line": r.line, "forward": r.forward, "backward": r.backward,
                     "inference": r.inference, "other": r.other, "kernels": r.kernels,
                     "instructions": r.instructions, "gpu_time_us": None if r.gpu_time_ns
                     is None else round(r.gpu_time_ns / 1000, 3)} for r in rows.values()],
                    "note": unknown or None})
            else:
                out(printable(path))
                for row in rows.values():
                    out(f"  {row.line:>6}  {row.label()}")
                if callers:
                    note(f"{len(callers)} line{'s' * (len(callers) != 1)} (with callees) count "
                         "the kernels of the code they call too, by the kernels' stack traces; "
                         "`irscope report` counts what a line does itself")
                if unknown:
                    note(unknown)
            return 0
        line = _line_number(args.location, match.group(2))
        found = where(view, resolve_file(view, match.group(1)), line)
    if args.json:
        print_json(found.to_json())
        return 0
    _print(found)
    return 0


def _line_number(location: str, text: str) -> int:
    """The line of FILE:LINE, a positive number; else a usage error saying why."""
    try:
        line = int(text)
    except ValueError:
        raise UsageError(f"{location}: {text!r} is not a line number (FILE:LINE, such as "
                         "model.py:42)") from None
    if line < 1:
        raise UsageError(f"{location}: line {line} is not positive (lines count from 1)")
    return line


def _print(found) -> None:
    out(printable(f"{found.path}:{found.line}"))
    if found.text is not None:
        out(printable(f"    {found.text.strip()}"))
    if found.fx:
        out(f"{_located_heading({row.kind for row in found.fx})} located here "
            "(this line is their innermost frame):")
        for row in found.fx:
            role = f" ({row.role})" if row.role else ""
            names = ", ".join(f"{name}:{line}" if name else f"line {line}"
                              for name, line in row.nodes[:8])
            more = f" … ({len(row.nodes)})" if len(row.nodes) > 8 else ""
            out(printable(f"  {row.unit} · {row.stage}{role}: {names}{more}"))
    if found.rows:
        roles = [_role(r) for r in found.rows]
        counts = ", ".join(f"{roles.count(r)} {'user kernel' if r == 'kernel' else r}"
                           for r in dict.fromkeys(roles))
        out(f"Launches and kernels ({counts}{_kernel_count(found)}):")
        shown: set[tuple[str, str]] = set()
        for row in found.rows:
            where_ = f"{row.graph} · {row.stage}:{row.line}" if row.graph else "user kernel"
            how = "; ".join(row.records)
            out(printable(f"  {_role(row):<9} {row.name}  [{where_}]{_measured(row)}  by {how}"))
            for kernel in row.kernels:
                seen = (kernel.module, kernel.unit) in shown
                shown.add((kernel.module, kernel.unit))
                count = f": {kernel.instructions:,} instructions" if kernel.instructions else ""
                out(printable(f"      {kernel.unit}{count}"
                              + (" (its IR lines above)" if seen and kernel.stages else "")))
                for stage in () if seen else kernel.stages:
                    out(printable(f"        {stage.name}: {stage.text()}"))
    for note in found.notes:
        warn(note)


def _measured(row) -> str:
    """"  9.7 µs in 6 launches": what the launch ran, measured (inspect --profile)."""
    if row.gpu_time_us is None:
        return ""
    launches = f"{row.gpu_launches:,} launch{'es' * (row.gpu_launches != 1)}"
    return f"  {row.gpu_time_us:,.1f} µs in {launches}"


def _kernel_count(found) -> str:
    """"; 4 kernels, 6 compiled configurations": kernels as `where FILE` counts them (an
    autotuned kernel's configurations are one), and the units they were compiled into."""
    if not found.kernels:
        return ""
    kernels = f"; {found.kernels} kernel{'s' * (found.kernels != 1)}"
    if found.configurations > found.kernels:
        kernels += f", {found.configurations} compiled configurations"
    return kernels


def _located_heading(kinds: set[str]) -> str:
    """What the stages' located places are: "jaxpr equations, StableHLO ops and HLO
    instructions", "FX nodes"."""
    named = [*dict.fromkeys(n for kind, n in LOCATED.items() if kind in kinds)]
    if kinds - LOCATED.keys():
        named.append("IR lines")
    return " and ".join(filter(None, (", ".join(named[:-1]), named[-1])))


def _role(row) -> str:
    """forward / backward / inference, else what the place is (a user kernel, a fusion, an
    unfused HLO instruction)."""
    return row.role or {"kernel": "kernel", "fusion": "fusion", "op": "unfused",
                        "region": "region"}.get(row.kind, "-")
