"""`irscope inspect script.py [args]`: run a script unmodified, collect all it compiles.

``--nproc N`` runs N ranks of the script (torchrun's environment, one process each), and
``irscope inspect -- torchrun ... script.py`` runs any launcher command; either way each
rank collects into its own staging folder and the run holds every rank's units.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from irscope.console import LATE_BAR_S, error, print_json, progress, warn
from irscope.errors import InputError, IrscopeError, UsageError, environment_error

EXIT_SIGNAL_BASE = 128
PACKAGE = Path(__file__).resolve().parents[1]  # the irscope package folder


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
    p.add_argument("--passes", action="store_true",
                   help="also keep the IR after every compiler pass that changed it: Triton's "
                        "MLIR passes (kernels compile again, bypassing Triton's cache) and "
                        "XLA's HLO passes (see `irscope passes RUN UNIT`)")
    p.add_argument("--provenance", action="store_true",
                   help="also ask Inductor for its provenance records (INDUCTOR_PROVENANCE=1): "
                        "the whole stack trace behind each kernel, on a cold compile; without "
                        "them the kernels' own records still lead to their FX nodes and lines. "
                        "Part of Inductor's cache key; about +5%% of a warm run's wall time")
    p.add_argument("--profile", action="store_true",
                   help="measure every kernel's GPU time over a window of the script's steps "
                        "(torch.profiler for PyTorch, jax.profiler for JAX), joined to its "
                        "unit: a step begins at each call of a compiled function from outside "
                        "any other, or at each `with irscope.profile():` block the script marks")
    p.add_argument("--profile-steps", type=int, default=3, metavar="N",
                   help="how many steps --profile measures (default 3)")
    p.add_argument("--profile-skip", type=int, default=None, metavar="N",
                   help="steps to run before measuring, to keep compiles out (default 1, "
                        "or 0 when the script marks its steps with irscope.profile())")
    p.add_argument("--keep-staging", action="store_true",
                   help="keep the raw collection folder <run>/staging after filing it")
    p.add_argument("--nproc", type=int, default=1, metavar="N",
                   help="run N processes of the script, each with torchrun's RANK, WORLD_SIZE, "
                        "MASTER_ADDR and MASTER_PORT; one run holds every rank")
    p.add_argument("-m", dest="module", nargs=argparse.REMAINDER, metavar="MODULE ...",
                   help="run a module as a script, like python -m")
    p.add_argument("target", nargs=argparse.REMAINDER, metavar="SCRIPT [ARGS]",
                   help="the script and its arguments, or after -- a launcher command "
                        "(torchrun --nproc-per-node 2 train.py): every rank is collected")
    p.set_defaults(func=run)


def _target(args) -> list[str]:
    target = list(args.target or [])
    if target[:1] == ["--"]:
        target = target[1:]
    if args.module:
        return ["-m", *args.module, *target]
    if not target:
        raise UsageError("inspect: give a script to run, or -m MODULE")
    from irscope.filing.launch import is_launcher

    if is_launcher(target):
        return target
    script = Path(target[0])
    if script.is_dir():  # python runs a folder through its __main__.py
        if not (script / "__main__.py").is_file():
            raise InputError(f"{target[0]}: is a folder with no __main__.py (python runs a "
                             "folder or a zip file through it)")
        return target
    if not script.is_file():
        raise InputError(f"{target[0]}: no such script")
    from irscope.files import not_a_script

    reason = not_a_script(Path(target[0]))
    if reason:  # refused before a run is made: a failed start is no run
        raise UsageError(f"{target[0]}: {reason}")
    return target


def _script_to_compile_first(target: list[str], launcher: bool, python: str) -> Path | None:
    """The script to compile before the program starts, where this interpreter is the one
    that will run it (its grammar is then this one's): a script given to irscope, or the one
    a launcher command runs with this interpreter; None where that is not known."""
    if launcher:
        from irscope.filing.launch import script_run_by_this_python

        return script_run_by_this_python(target)
    if python != sys.executable or target[0] == "-m" or not Path(target[0]).is_file():
        return None
    return Path(target[0])


def _refuse_syntax_error(script: Path, kept: str | None) -> None:
    """Before any process starts: a script this Python cannot compile (read and compiled,
    never run) gets Python's own report, once, and no run is made (the run at ``kept``,
    which ``--replace`` would have emptied, stays as it was)."""
    import traceback

    try:
        compile(script.read_bytes(), os.path.abspath(script), "exec", dont_inherit=True)
    except SyntaxError as exc:
        sys.stderr.write("".join(traceback.format_exception_only(exc)))
        raise InputError(f"{script}: did not compile (the error is above); " + (
            f"{kept} was kept as it was" if kept else "no run was made")) from None
    except (OSError, ValueError):  # unreadable or NUL bytes: the child reports it
        return


def run(args) -> int:
    from irscope.collectors import xla_dump_cache
    from irscope.filing import launch
    from irscope.filing.session import Session
    from irscope.collectors.staging import COMPILE_ERROR, frameworks_arg, owns_xla_dumps

    target = _target(args)
    only = frameworks_arg(args.only)
    launcher = target[0] != "-m" and launch.is_launcher(target)
    if args.nproc < 1 or (launcher and args.nproc > 1):
        raise UsageError("inspect: --nproc takes a count of 1 or more, and a script (a "
                         "launcher command starts its own processes)")
    name = args.name or (target[1] if target[0] == "-m" else _script_name(target))
    python = args.python or sys.executable
    profile = _profile_window(args)
    replacing = args.output if args.replace and args.output else None
    if replacing or launcher or args.nproc > 1:  # a rank's error would be one of many
        script = _script_to_compile_first(target, launcher, python)
        if script is not None:
            _refuse_syntax_error(script, replacing)
    session = Session(args.output, name, only, {
        "kind": "inspect", "target": target, "interpreter": python},
        replace=bool(args.replace and args.output), provenance=args.provenance)
    cache = None if args.no_dump_cache else xla_dump_cache.cache_dir()
    config = session.staging.write_config({
        "staging": str(session.staging.root), "only": list(only),
        "xla_dumps": owns_xla_dumps(dict(os.environ)), "dump_cache": cache and str(cache),
        # The child inherits this process's ignored SIGINT; it restores what the user had.
        "interruptible": signal.getsignal(signal.SIGINT) is not signal.SIG_IGN,
        "per_rank": launcher or args.nproc > 1, "profile": profile})
    env = {**session.user_env, **session.env()}  # an enclosing collection's variables left out
    pass_dump = _pass_env(env) if args.passes else None
    if launcher:
        children = [(target, {**env, **launch.launcher_env(session.staging, config, env)})]
    else:
        env.update(_import_path(python, session.staging.root, env))
        command = [python, "-m", "irscope.collectors.bootstrap", str(config), "--", *target]
        ranks = launch.rank_envs(args.nproc) if args.nproc > 1 else [{}]
        children = [(command, {**env, **rank}) for rank in ranks]
    try:
        status = _run_child(children, session.staging, lambda: _while_running(session))
    except _NotFiled as exc:
        return _unfiled(session, exc.status, exc.cause)
    except OSError:  # the interpreter could not be started: a failed start is no run
        session.discard()
        raise
    if launcher or args.nproc > 1:
        status = launch.merged_status(session.staging, status)
        for report in status.get("compile_errors", ()):  # the ranks kept theirs: once here
            sys.stderr.write(report)
    if status.get("ended") == COMPILE_ERROR:  # no line of the script ran: no run to file
        session.discard()
        script = target[1] if target[0] == "-m" else _script_arg(target)
        error(f"{script}: did not compile (the error is above); no run was made")
        return int(status["exit_status"]) or 1
    try:
        with progress("filing the run", delay=LATE_BAR_S) as bar:
            session.finish(status, keep_staging=args.keep_staging, progress=bar,
                           passes=args.passes)
        if pass_dump:
            _file_passes(session.run, pass_dump)
    except Exception as exc:  # noqa: BLE001  a full disk, an unwritable run: said in one line
        return _unfiled(session, status, exc)
    try:
        _report(session.run, args)
    except OSError:  # the terminal hung up (SIGHUP): the run is filed, the summary has nowhere
        pass
    finally:
        session.close()
    return int(status["exit_status"])


def _profile_window(args) -> dict | None:
    """The window ``--profile`` asks the child to measure, or None; where no GPU is visible
    it says in one line that there is nothing to time, and the run is made without it."""
    from irscope.collectors.staging import gpu_visible

    if args.profile_steps < 1 or (args.profile_skip is not None and args.profile_skip < 0):
        raise UsageError("inspect: --profile-steps takes 1 or more, --profile-skip 0 or more")
    if not args.profile:
        return None
    if not gpu_visible(dict(os.environ)):
        warn("--profile: no GPU is visible here, so there is nothing to time; the run is "
             "captured without measured time")
        return None
    return {"steps": args.profile_steps, "skip": args.profile_skip}


def _pass_env(env: dict[str, str]) -> Path:
    """Ask the child for pass dumps (``--passes``): XLA's through ``IRSCOPE_PASSES``, Triton's
    MLIR dump into one file, every kernel compiled in the script's own process; returns
    that file."""
    import tempfile

    dump = Path(tempfile.mkdtemp(prefix="irscope-passes-")) / "triton.mlir-passes.log"
    env.update(IRSCOPE_PASSES="1", MLIR_ENABLE_DUMP="1", MLIR_DUMP_PATH=str(dump),
               TRITON_ALWAYS_COMPILE="1")
    # Inductor's compile workers would each write the file from a process of their own
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    return dump


def _file_passes(run, dump: Path) -> None:
    """File the Triton kernels' passes into their units, then remove the dump."""
    import shutil
    from irscope.ingest.passes import file_triton_dump

    try:
        if dump.is_file() and dump.stat().st_size:
            for problem in file_triton_dump(run, dump):
                warn(problem)
    finally:
        shutil.rmtree(dump.parent, ignore_errors=True)


def _script_arg(target: list[str]) -> str:
    """The script as the command names it, also when a launcher command runs it."""
    return next((arg for arg in target if arg.endswith(".py")), target[0])


def _script_name(target: list[str]) -> str:
    """The run's default name: the script's, also when a launcher command runs it."""
    return Path(_script_arg(target)).stem


def _run_child(children: list[tuple[list[str], dict[str, str]]], staging, while_running) -> dict:
    """Run the children (commands with their environments) with the terminal's signals going
    to them, calling ``while_running()`` meanwhile; how they ended, as status.json says (the
    first child to fail decides the exit status)."""
    import json

    from irscope.filing.signals import ScriptSignals

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the child's to handle
    failure, signals = None, None
    try:
        spawned = time.time()
        started = [subprocess.Popen(command, env=env) for command, env in children]
        # A signal to irscope goes to the script; the run is filed once the script ends.
        signals = ScriptSignals(started).start()
        threading.Thread(target=_preload, daemon=True).start()
        try:
            while_running()
        except Exception as exc:  # the script runs on; the error is raised once it ends
            failure = exc
        codes = [child.wait() for child in started]
        returncode = next((code for code in codes if code), 0)
        exited = time.time()
    finally:
        if signals is not None:
            signals.stop()
        signal.signal(signal.SIGINT, previous)
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
    status.update(spawned=spawned, exited=exited)
    if failure is not None:
        raise _NotFiled(status, failure)
    return status


class _NotFiled(Exception):
    """The script ran, but its run could not be made: how the script ended, and why."""

    def __init__(self, status: dict, cause: BaseException):
        super().__init__(str(cause))
        self.status, self.cause = status, cause


def _unfiled(session, status: dict, cause: BaseException) -> int:
    """Say in one line why the run is not filed whole, mark it partial with the script's exit
    status where the disk still allows, and end with that status (1 if the script succeeded:
    irscope did not)."""

    message = str(cause) if isinstance(cause, IrscopeError) else environment_error(cause)[0]
    code = int(status.get("exit_status", 0) or 0)
    error(f"the run is not filed whole: {message}")
    try:
        session.run.update_meta({"partial": True, "exit_status": code, "filing_error": message,
                                 "ended": status.get("ended", "exit")})
    except Exception:  # noqa: BLE001  still no room: run.json says partial from the start
        pass
    try:
        session.close()
    except Exception:  # noqa: BLE001
        pass
    return code or 1


def _while_running(session) -> None:
    """What is done while the script runs, off its critical path: the run's index, filing
    work on what the script stages as it stages it, the machine's description."""
    from irscope import environment

    session.open_run()
    session.watch()
    session.open_run(environment.describe(["irscope", *sys.argv[1:]], versions=False))


def _preload() -> None:
    """Import what filing and the summary need while the script runs (this process idles),
    on the cores the script leaves idle. Only a head start: an import that fails here fails
    again, and is reported once, where filing needs it."""
    try:
        from irscope.filing.watch import yield_to_the_program

        yield_to_the_program()
        import zipfile  # noqa: F401  (cached XLA dumps)

        import irscope.filing.folder  # noqa: F401
        import irscope.ingest  # noqa: F401
        import irscope.reports.summary  # noqa: F401
        from irscope.parsers import inductor, registry  # noqa: F401
        from rich import console, text  # noqa: F401
    except Exception:  # noqa: BLE001  (a thread's traceback would only repeat it)
        pass


def _report(run, args) -> None:
    from irscope.reports import summary
    from irscope.read.summary import read_summary

    path = run.path
    data = read_summary(run)
    if args.json:
        print_json(data.to_json())
    else:
        summary.render(data, stderr=True)
    if args.open:
        from irscope.tui.app import run_app

        run_app(path)


def _import_path(python: str, staging_root: Path, env: dict[str, str]) -> dict[str, str]:
    """PYTHONPATH that lets another interpreter import irscope (and nothing else of ours)."""
    if os.path.abspath(python) == os.path.abspath(sys.executable):
        return {}  # (a venv's python links to its base interpreter: compare paths, not files)
    shim = staging_root / "import"
    shim.mkdir(exist_ok=True)
    (shim / "irscope").symlink_to(PACKAGE, target_is_directory=True)
    existing = env.get("PYTHONPATH")
    return {"PYTHONPATH": os.pathsep.join(p for p in (existing, str(shim)) if p)}
