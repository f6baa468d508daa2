"""`irscope passes RUN UNIT [PASS]`: a unit's compiler passes in order, or one pass's diff."""

from __future__ import annotations

import difflib
import sys
from irscope.console import color_enabled, note, out, print_json, printable, rich_console, warn
from irscope.escaping import one_line
from irscope.errors import IrscopeError


class NoPasses(IrscopeError):
    """The unit has no passes filed."""


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "passes", help="a unit's compiler passes in order, and the diff of each",
        description="List the passes of a unit's pipelines in order (Triton's MLIR passes, "
                    "XLA's HLO passes and emitter pass logs, Inductor's pre-grad, joint and "
                    "post-grad graph passes): name, time where logged, lines changed and "
                    "op-count delta. Passes that changed nothing are folded (counted) unless "
                    "--all. With PASS (an index or a name), print that pass's diff. Capture "
                    "them with --passes on inspect, compile or ingest.")
    parser.add_argument("run", metavar="RUN", help="run folder, name, prefix or 'latest'")
    parser.add_argument("unit", metavar="UNIT", help="unit id, name or unique part of a name")
    parser.add_argument("pass_", metavar="PASS", nargs="?",
                        help="print the diff of this pass (its index or name)")
    parser.add_argument("--all", action="store_true",
                        help="list the passes that changed nothing too")
    parser.add_argument("--context", type=int, default=3, metavar="N",
                        help="lines of context around each change of a diff (default 3)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=run)


def run(args) -> int:
    from irscope.store import Run, locate_run

    with Run.open(locate_run(args.run), read_only=True) as run_:
        unit = run_.unit(args.unit)
        from irscope.read.passes import find_pass, pass_texts, unit_passes, unkept_ir

        passes = unit_passes(run_, unit)
        if not passes.rows:
            raise NoPasses(f"unit {unit.name!r} has no passes filed: capture them with "
                           "--passes on `irscope inspect`, `compile` or `ingest` (Inductor's "
                           "graph passes come with its trace)")
        if args.pass_ is None:
            return _list(passes, args)
        row = find_pass(passes, args.pass_)
        if row is None:
            raise IrscopeError(f"unit {unit.name!r} has no pass {args.pass_!r} "
                               f"(`irscope passes {args.run} {args.unit} --all` lists them)")
        before, after = pass_texts(run_, unit, row)
        gap = unkept_ir(passes.rows, row)
    if gap:  # a diff against text that was not kept would show every line as changed
        if args.json:
            print_json({"unit": unit.name, "pass": row.to_json(), "diff": None, "note": gap})
        else:
            note(gap)
        return 0
    diff = list(difflib.unified_diff(before.splitlines(), after.splitlines(),
                                     f"before {one_line(row.name)}", f"after {one_line(row.name)}",
                                     n=max(0, args.context), lineterm=""))
    if args.json:
        print_json({"unit": unit.name, "pass": row.to_json(), "diff": diff})
    elif row.changed is None:
        note(f"{row.name}: the dump does not hold the IR this pass left")
    else:
        _write_diff(diff, row.name)
    return 0


def _list(passes, args) -> int:
    from irscope.analysis.passes import listing

    shown = listing(passes.rows, args.all)
    if args.json:
        print_json({"unit": passes.unit.name, "total": shown.total, "changed": shown.changed,
                    "folded": shown.folded, "unknown": shown.unknown,
                    "passes": [r.to_json() for r in shown.rows],
                    "diagnostics": list(passes.diagnostics)})
        return 0
    _print_table(shown.rows)
    unchanged = shown.total - shown.changed - shown.unknown
    out(f"{shown.total} passes: {shown.changed} changed the IR, {unchanged} changed nothing"
        + (" (folded; --all lists them)" if shown.folded else "")
        + (f", {shown.unknown} without the IR they left" if shown.unknown else ""))
    for message in passes.diagnostics:
        warn(message)
    return 0


def _print_table(rows) -> None:
    from rich.table import Table
    from rich.text import Text

    console = rich_console()
    table = Table(show_edge=False, pad_edge=False, header_style="bold")
    for title, justify in (("#", "right"), ("pipeline", "left"), ("pass", "left"),
                           ("time ms", "right"), ("lines ±", "right"), ("ops", "right"),
                           ("op Δ", "right")):
        table.add_column(title, justify=justify, no_wrap=True)
    for r in rows:
        delta = r.op_delta
        table.add_row(str(r.index), Text(one_line(r.pipeline)), Text(one_line(r.name)),
                      "" if r.seconds is None else f"{r.seconds * 1000:.2f}",
                      "?" if r.changed is None else f"+{r.added} -{r.removed}",
                      "" if r.ops_after is None else str(r.ops_after),
                      "" if delta is None else f"{delta:+d}")
    if not console.is_terminal:  # a pipe: every row on one line, never squeezed
        wide = console.options.update_width(10_000)
        console.width = max(console.width, console.measure(table, options=wide).maximum)
    console.print(table)


def _write_diff(diff: list[str], name: str) -> None:
    if not diff:
        note(f"{name} changed nothing")
        return
    colour = color_enabled(sys.stdout)
    for line in diff:
        line = printable(line) if colour or sys.stdout.isatty() else line
        if colour and line.startswith(("+", "-")) and not line.startswith(("+++", "---")):
            line = f"\x1b[{32 if line[0] == '+' else 31}m{line}\x1b[0m"
        sys.stdout.write(line + "\n")
