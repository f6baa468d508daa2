"""`irscope inspect script.py [args]`: run a script unmodified, collect all it compiles."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

EXIT_SIGNAL_BASE = 128


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "inspect", help="run a Python script and capture every compiled function, stage and kernel",
        description="Run SCRIPT (or -m MODULE) in a child Python with irscope's collectors, then "
                    "file what PyTorch, Triton and JAX compiled into a run. irscope's options go "
                    "before the script; everything after it is the script's own arguments.")
    p.add_argument("-o", "--output", metavar="RUN", help="run directory (default: "
                   "./.irscope/runs/<time>-<name>)")
    p.add_argument("--replace", action="store_true",
                   help="replace the run at -o RUN if there is one (never a non-run folder)")
    p.add_argument("--name", help="run name (default: the script or module name)")
    p.add_argument("--only", metavar="LIST", help="collect only these frameworks, e.g. torch,jax")
    p.add_argument("--python", metavar="PATH", help="interpreter for the script "
                   "(default: the one running irscope)")
    p.add_argument("--open", action="store_true", help="open the run in the TUI afterwards")
    p.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    p.add_argument("--no-dump-cache", action="store_true",
                   help="neither read nor fill irscope's cache of XLA dumps (kept under "
                        "$IRSCOPE_CACHE_DIR, default ~/.cache/irscope): XLA dumps every compile")
    p.add_argument("--keep-staging", action="store_true",
                   help="keep the raw collection folder <run>/staging after filing it")
    p.add_argument("-m", dest="module", nargs=argparse.REMAINDER, metavar="MODULE ...",
                   help="run a module as a script, like python -m")
    p.add_argument("target", nargs=argparse.REMAINDER, metavar="SCRIPT [ARGS]",
                   help="the script and its arguments")
    p.set_defaults(func=run)


def _target(args) -> list[str]:
    from irscope.errors import InputError, UsageError

    target = list(args.target or [])
    if target[:1] == ["--"]:
        target = target[1:]
    if args.module:
        return ["-m", *args.module, *target]
    if not target:
        raise UsageError("inspect: give a script to run, or -m MODULE")
    if not Path(target[0]).is_file():
        raise InputError(f"{target[0]}: no such script")
    return target


def run(args) -> int:
    from irscope import environment
    from irscope.collectors import xla_dumps
    from irscope.collectors.session import Session
    from irscope.collectors.staging import frameworks_arg, owns_xla_dumps
    from irscope.console import progress

    target = _target(args)
    only = frameworks_arg(args.only)
    name = args.name or (target[1] if target[0] == "-m" else Path(target[0]).stem)
    python = args.python or sys.executable
    if args.replace and args.output:
        _remove_run(Path(args.output))
    session = Session(args.output, name, only, {
        "kind": "inspect", "target": target, "interpreter": python})
    cache = None if args.no_dump_cache else xla_dumps.cache_dir()
    config = session.staging.write_config({
        "staging": str(session.staging.root), "only": list(only),
        "xla_dumps": owns_xla_dumps(dict(os.environ)), "dump_cache": cache and str(cache),
        # The child inherits this process's ignored SIGINT; it restores what the user had.
        "interruptible": signal.getsignal(signal.SIGINT) is not signal.SIG_IGN})
    env = {**os.environ, **session.env(), **_import_path(python, session.staging.root)}
    command = [python, "-m", "irscope.collectors.bootstrap", str(config), "--", *target]
    # The script starts first; the run's index and the machine's description (nvidia-smi,
    # package versions) are made while it runs, off its critical path.
    status = _run_child(command, env, session.staging, lambda: session.open_run(
        environment.describe(["irscope", *sys.argv[1:]], versions=False)))
    with progress("filing the run") as bar:
        session.finish(status, keep_staging=args.keep_staging, progress=bar)
    try:
        _report(session.run, args)
    finally:
        session.close()
    return int(status["exit_status"])


def _run_child(command: list[str], env: dict[str, str], staging, while_running) -> dict:
    """Run the child with the terminal's signals going to it, calling ``while_running()``
    meanwhile; how it ended, as status.json says."""
    import json

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the child's to handle
    previous_term = signal.getsignal(signal.SIGTERM)
    failure = None
    try:
        child = subprocess.Popen(command, env=env)
        threading.Thread(target=_preload, daemon=True).start()
        # A polite kill of irscope ends the script, then the run is still filed.
        signal.signal(signal.SIGTERM, lambda signum, _frame: child.send_signal(signum))
        try:
            while_running()
        except Exception as exc:  # the script runs on; the error is raised once it ends
            failure = exc
        returncode = child.wait()
    finally:
        signal.signal(signal.SIGINT, previous)
        signal.signal(signal.SIGTERM, previous_term)
    if failure is not None:
        raise failure
    try:
        status = json.loads(staging.status.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # os._exit() or a signal: the child wrote nothing
        status = {"ended": "exit", "frameworks": []}
    if returncode < 0:
        sig = -returncode
        ended = "interrupted" if sig == signal.SIGINT else f"killed by {signal.Signals(sig).name}"
        status.update(exit_status=EXIT_SIGNAL_BASE + sig, ended=ended)
    else:
        status["exit_status"] = returncode
    return status


def _preload() -> None:
    """Import what filing and the summary need while the script runs (this process idles)."""
    import zipfile  # noqa: F401  (cached XLA dumps)

    import irscope.collectors.filing  # noqa: F401
    import irscope.ingest  # noqa: F401
    import irscope.summary  # noqa: F401
    from irscope.parsers import inductor, registry  # noqa: F401
    from rich import console, text  # noqa: F401


def _report(run, args) -> None:
    from irscope import summary
    from irscope.console import print_json

    path = run.path
    data = summary.summarize(run)
    if args.json:
        print_json(data)
    else:
        summary.render(data, stderr=True)
    if args.open:
        from irscope.tui.app import run_app

        run_app(path)


def _remove_run(path: Path) -> None:
    import shutil

    from irscope.errors import RunError
    from irscope.store import INDEX

    if path.is_dir() and any(path.iterdir()):
        if not (path / INDEX).is_file():
            raise RunError(f"{path}: not an irscope run; --replace only replaces runs")
        shutil.rmtree(path)


def _import_path(python: str, staging_root: Path) -> dict[str, str]:
    """PYTHONPATH that lets another interpreter import irscope (and nothing else of ours)."""
    if os.path.abspath(python) == os.path.abspath(sys.executable):
        return {}  # (a venv's python links to its base interpreter: compare paths, not files)
    import irscope

    shim = staging_root / "import"
    shim.mkdir(exist_ok=True)
    (shim / "irscope").symlink_to(Path(irscope.__file__).resolve().parent, target_is_directory=True)
    existing = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": os.pathsep.join(p for p in (existing, str(shim)) if p)}
