"""`irscope open RUN`: browse a run in the terminal UI."""

from __future__ import annotations

from pathlib import Path

from irscope.errors import RunError


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "open", help="browse a run in the terminal UI",
        description="Browse a run's units and IR stages with highlighting, analysis, search, "
                    "compare and stage-to-stage following. Press ? inside for every key.")
    p.add_argument("run", nargs="?", default="latest",
                   help="run directory, run name under ./.irscope/runs, or 'latest' (default)")
    p.add_argument("--theme", metavar="NAME",
                   help="colour theme, e.g. textual-light or solarized-light for light "
                        "terminals (ctrl+t switches dark/light inside; NO_COLOR is honoured)")
    p.set_defaults(func=run)


def resolve_run(spec: str, root: Path | None = None) -> Path:
    """A run directory from a path, a run name (or its unique suffix) or 'latest'."""
    from irscope.store import DEFAULT_ROOT, INDEX, find_runs

    path = Path(spec)
    if (path / INDEX).exists() or (path.exists() and spec != "latest"):
        return path
    runs = find_runs(root)
    if spec == "latest":
        if not runs:
            raise RunError(f"no runs under {root or DEFAULT_ROOT}; create one with "
                           "`irscope inspect script.py`")
        return runs[-1]
    named = [r for r in runs if r.name == spec or r.name.endswith(f"-{spec}")]
    if named:
        return named[-1]  # run folders start with a timestamp: the last is the newest
    raise RunError(f"{spec}: no such run (not a directory, nor a run under "
                   f"{root or DEFAULT_ROOT})")


def run(args) -> int:
    from irscope.store import Run

    path = resolve_run(args.run)
    Run.open(path).close()  # a missing or damaged index is one clear line, before any UI
    from irscope.tui.app import run_app

    run_app(path, theme=args.theme)
    return 0
