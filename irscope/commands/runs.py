"""`irscope runs`: list the runs under ./.irscope/runs (or --root)."""

from __future__ import annotations

from pathlib import Path

from irscope.console import note, out, print_json
from irscope.errors import RunError
from irscope.store import DEFAULT_ROOT, Run, find_runs


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("runs", help="list runs (name, date, units, command, exit)",
                                   description="List the runs under ./.irscope/runs or --root.")
    parser.add_argument("--root", type=Path, help=f"folder holding runs (default {DEFAULT_ROOT})")
    parser.add_argument("--json", action="store_true", help="print the list as JSON")
    parser.set_defaults(func=run)


def describe(path: Path) -> dict:
    """One row of the listing; a damaged or newer run is listed with its problem."""
    try:
        with Run.open(path) as run_:
            units = run_.counts()[0]
            meta = run_.meta
    except RunError as exc:
        return {"name": path.name, "path": str(path), "problem": str(exc)}
    command = meta.get("command")
    return {"name": meta.get("name") or path.name, "path": str(path),
            "date": meta.get("started") or meta.get("created"), "units": units,
            "command": " ".join(command) if isinstance(command, list) else command,
            "exit_status": meta.get("exit_status")}


def run(args) -> int:
    root = args.root or DEFAULT_ROOT
    rows = [describe(p) for p in find_runs(root)]
    if args.json:
        print_json(rows)
        return 0
    if not rows:
        note(f"no runs under {root}")
        return 0
    out(f"{'RUN':<40} {'DATE':<25} {'UNITS':>5} {'EXIT':>4}  COMMAND")
    for row in rows:
        if "problem" in row:
            out(f"{Path(row['path']).name:<40} {row['problem']}")
            continue
        exit_status = "" if row["exit_status"] is None else str(row["exit_status"])
        out(f"{Path(row['path']).name:<40} {str(row['date'] or ''):<25} {row['units']:>5} "
            f"{exit_status:>4}  {(row['command'] or '')[:80]}")
    return 0
