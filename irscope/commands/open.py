"""`irscope open RUN`: browse a run in the terminal UI."""

from __future__ import annotations


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
    p.add_argument("--all", action="store_true", dest="show_all",
                   help="show JAX's eager ops too (jits JAX makes for itself, such as jit_add; "
                        "hidden by default), folded under 'eager ops'")
    p.add_argument("--compare", metavar="OTHER",
                   help="a second run: c compares the stage shown with the same unit's stage "
                        "of OTHER as a line-aligned diff with figure deltas")
    p.add_argument("--exact", action="store_true",
                   help="compare stages as they are: by default folders of paths (each run its "
                        "own caches), hashes in names and SSA, register, label and kernel "
                        "numbers are ignored (i toggles inside)")
    p.set_defaults(func=run)


def run(args) -> int:
    from irscope.store import Run, locate_run

    path = locate_run(args.run)
    Run.open(path).close()  # a missing or damaged index is one clear line, before any UI
    other = None
    if getattr(args, "compare", None):
        other = locate_run(args.compare)
        Run.open(other).close()
    from irscope.tui.app import run_app

    run_app(path, theme=args.theme, show_all=args.show_all, compare_with=other,
            exact=args.exact)
    return 0
