"""`irscope runs`: list the runs under ./.irscope/runs (or --root)."""

from __future__ import annotations

from pathlib import Path
from irscope.errors import RunError
from irscope.console import note, out, print_json


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("runs", help="list runs (name, date, units, command, exit)",
                                   description="List the runs under ./.irscope/runs or --root.")
    parser.add_argument("--root", type=Path, help="folder holding runs (default ./.irscope/runs)")
    parser.add_argument("--json", action="store_true", help="print the list as JSON")
    parser.set_defaults(func=run)


def describe(path: Path) -> dict:
    """One row of the listing; a damaged, unreadable or newer run is listed with its problem.
    ``units``: the units the other front ends show (JAX's eager ops are ``hidden_units``);
    ``partial``: the run's program failed, or an ingest into it never finished (killed)."""
    from irscope.store import Run  # not on --help's path
    from irscope.store.units import shown_units

    try:
        with Run.open(path, read_only=True) as run_:  # listing writes nothing
            run_.counts()  # a damaged index: a RunError saying so
            shown, hidden = shown_units(run_.units())  # as ls, the report and the TUI count
            meta = run_.meta
    except RunError as exc:
        return {"name": path.name, "path": str(path), "problem": str(exc)}
    except OSError as exc:
        return {"name": path.name, "path": str(path), "problem": f"{path}: unreadable ({exc})"}
    command = meta.get("command")
    ingests = meta.get("ingests") if isinstance(meta.get("ingests"), list) else []
    unfinished = any(isinstance(e, dict) and "ended" not in e for e in ingests)
    exit_status = meta.get("exit_status")
    return {"name": str(meta.get("name") or path.name), "path": str(path),
            "date": meta.get("started") or meta.get("created"), "units": len(shown),
            "hidden_units": len(hidden),
            "command": " ".join(map(str, command)) if isinstance(command, list) else command,
            "exit_status": exit_status if isinstance(exit_status, int) else None,
            "partial": bool(meta.get("partial")) or unfinished}


def run(args) -> int:
    from irscope.read.stage_counts import hidden_text
    from irscope.store import DEFAULT_ROOT, find_runs

    root = args.root or DEFAULT_ROOT
    rows = [describe(p) for p in find_runs(root)]
    if args.json:
        print_json(rows)
        return 0
    if not rows:
        note(f"no runs under {root}")
        return 0
    out(f"{'RUN':<40} {'DATE':<25} {'UNITS':>5} {'EXIT':>4}  COMMAND")
    hidden = []
    for row in rows:
        if "problem" in row:
            out(f"{Path(row['path']).name:<40} {row['problem']}")
            continue
        exit_status = "" if row["exit_status"] is None else str(row["exit_status"])
        if row["partial"] and not exit_status:
            exit_status = "partial"  # killed while filing: what it holds is not all
        out(f"{Path(row['path']).name:<40} {str(row['date'] or ''):<25} {row['units']:>5} "
            f"{exit_status:>4}  {str(row['command'] or '')[:80]}")
        if row["hidden_units"]:
            hidden.append(f"{Path(row['path']).name} {hidden_text(row['hidden_units'])}")
    if hidden:  # as `irscope ls` says it
        note(f"({'; '.join(hidden)}; `irscope ls RUN --all` lists them)")
    return 0
