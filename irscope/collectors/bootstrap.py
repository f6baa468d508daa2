"""Child-process entry of ``irscope inspect``: install the collectors, then run the user's script.

Usage: ``python -m irscope.collectors.bootstrap CONFIG.json -- script.py [args]`` or
``... CONFIG.json -m package.module [args]``. The script sees its own ``sys.argv``,
``sys.path[0]``, working directory and standard streams, and the process exits with the
status the script would have exited with; ``status.json`` in staging says how it ended.
In a multi-process run each process that a launcher gave a rank writes into its own
``rank_<N>/`` staging folder; under a launcher command (``irscope inspect -- torchrun ...``)
a ``sitecustomize`` calls ``install_in_rank()`` in every Python process it starts.
"""

from __future__ import annotations

import atexit
import importlib.machinery
import importlib.util
import json
import os
import runpy
import signal
import sys
import time
from pathlib import Path

from irscope.collectors import imports
from irscope.collectors.staging import (COMPILE_ERROR, FAILED_ENDINGS, FRAMEWORKS,
                                        SCRIPT_SETTINGS, Staging, close_records,
                                        rank_from_env, xla_dump_flags)

EXIT_INTERRUPTED = 130
# What SCRIPT_SETTINGS held when the script started: a script that points TORCH_TRACE or a
# cache elsewhere itself is followed there (status.json "script_env").
_SETTINGS_AT_START: dict[str, str | None] = {}
CONFIG_VARIABLE = "IRSCOPE_CONFIG"  # the collection's config.json, for processes a launcher starts


class Collectors:
    """The hooks installed for one collection; ``remove()`` takes them all off again.

    ``xla_dumps``: whether irscope asks XLA for a dump of each compile (not when the user
    dumps with their own ``--xla_dump_to``); ``dump_cache``: where those dumps are cached.
    """

    def __init__(self, staging: Staging, only, xla_dumps: bool = True,
                 dump_cache: Path | None = None, profile: dict | None = None):
        self.staging = staging
        self.xla_dumps, self.dump_cache = xla_dumps, dump_cache
        self.restores: list = []
        hooks = {name: self._hook(name) for name in ("triton", "jax") if name in only}
        if "torch" in only:  # Thunder compiles PyTorch programs
            hooks["thunder"] = self._hook("thunder")
        self.finder = imports.when_imported(hooks)
        self.end_profile = None
        if profile:  # inspect --profile: a window of the script's steps under its profiler
            from irscope.collectors import profile as profiling

            self.end_profile = profiling.install(staging, profile.get("skip"),
                                                 int(profile.get("steps") or 1))

    def _hook(self, framework: str):
        def install(_module) -> None:
            try:
                if framework in ("triton", "thunder"):
                    from irscope.collectors import thunder, triton

                    module = triton if framework == "triton" else thunder
                    self.restores.append(module.install(self.staging))
                else:
                    from irscope.collectors import jax, pallas

                    self.restores.append(jax.install(self.staging, self.xla_dumps,
                                                     self.dump_cache))
                    self.restores.append(pallas.install(self.staging))  # kernels jits call
            except Exception as exc:  # a framework version irscope does not know: run on
                self.staging.record_event("collector_error", {
                    "collector": framework, "error": f"{type(exc).__name__}: {exc}"})
                if framework == "jax" and self.xla_dumps:  # XLA has not started yet
                    os.environ["XLA_FLAGS"] = xla_dump_flags(self.staging, dict(os.environ))
        return install

    def finish_profile(self) -> None:
        """End the profile window if one is still open (the script has ended)."""
        if self.end_profile is not None:
            self.end_profile()
            self.end_profile = None

    def remove(self) -> None:
        self.finish_profile()
        imports.remove(self.finder)
        while self.restores:
            self.restores.pop()()
        close_records()


def imported_frameworks() -> list[str]:
    return [name for name in FRAMEWORKS if name in sys.modules]


def missing_frameworks(only) -> list[str]:
    """Selected frameworks that this interpreter cannot import (found without importing)."""
    return [name for name in only if importlib.util.find_spec(name) is None]


def write_status(staging: Staging, status: dict, only=()) -> None:
    from irscope import environment

    moved = {name: os.environ[name] for name in SCRIPT_SETTINGS if name in _SETTINGS_AT_START
             and os.environ.get(name) and os.environ.get(name) != _SETTINGS_AT_START[name]}
    status = {**status, "script_ended": time.time(), "frameworks": imported_frameworks(),
              **({"script_env": moved} if moved else {}), "missing": missing_frameworks(only),
              "versions": environment.imported_versions()}
    tmp = staging.status.with_suffix(".tmp")
    tmp.write_text(json.dumps(status, default=str), encoding="utf-8")
    os.replace(tmp, staging.status)


def exit_code(code) -> int:
    """The process status ``SystemExit(code)`` gives, as the interpreter computes it."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    return 1


def run_target(target: list[str]) -> None:
    """Run ``script.py args`` or ``-m module args`` as ``__main__``, like the interpreter does."""
    if target[0] == "-m":
        if len(target) < 2:
            raise SystemExit("irscope: -m needs a module name")
        sys.argv = [target[1], *target[2:]]
        sys.path[0] = os.getcwd()
        runpy.run_module(target[1], run_name="__main__", alter_sys=True)
    else:
        script = target[0]
        sys.argv = list(target)
        # as python does: a folder run through its __main__.py is itself on the path
        where = Path(script).resolve()
        sys.path[0] = str(where if where.is_dir() else where.parent)
        # __file__ absolute, as `python script.py` makes it: the script may change directory
        runpy.run_path(os.path.abspath(script), run_name="__main__")


def _user_traceback(exc: BaseException):
    """The traceback from the user's first frame on, as ``python script.py`` would print it;
    None when no frame is the user's (the script did not compile: Python prints where)."""
    tb = exc.__traceback__
    while tb is not None and _is_launcher_frame(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    return _without_hook_frames(tb)


def _without_hook_frames(tb):
    """``tb`` without the frames of irscope's import hook (between the user's ``import jax``
    and jax's own frames), as if the import had not been watched."""
    kept = []
    while tb is not None:
        if tb.tb_frame.f_code.co_filename != imports.__file__:
            kept.append(tb)
        tb = tb.tb_next
    for frame, after in zip(kept, [*kept[1:], None]):
        frame.tb_next = after
    return kept[0] if kept else None


def _is_launcher_frame(filename: str) -> bool:
    """A frame of what runs the script: this module, runpy, and importlib finding ``-m``'s."""
    return filename in (__file__, runpy.__file__) or filename.startswith(
        ("<frozen runpy", "<frozen importlib"))


def did_not_compile(exc: BaseException) -> bool:
    """Whether ``exc`` stopped the script before any line of it ran: its source does not
    compile (a SyntaxError raised by no frame of the user's)."""
    return isinstance(exc, SyntaxError) and _user_traceback(exc) is None


def _compile_error(exc: BaseException, ended: str, ranked: bool) -> dict:
    """What a rank's status keeps of a script that did not compile: Python's report of the
    error, which the rank does not print (every rank would print the same; irscope prints
    it once)."""
    if not (ranked and ended == COMPILE_ERROR):
        return {}
    import traceback

    return {"compile_error": "".join(traceback.format_exception_only(exc))}


def _process_ending(exc: BaseException | None) -> dict:
    """How a launched process ends, from the exception that ended its script (``sys.
    last_value``, left by the interpreter once it has printed it), if any: its launcher
    alone knows its exit status otherwise."""
    if exc is None:
        return {"ended": "exit"}
    if isinstance(exc, KeyboardInterrupt):
        return {"ended": "interrupted", "exit_status": EXIT_INTERRUPTED}
    ended = COMPILE_ERROR if _main_did_not_compile(exc) else "exception"
    return {"ended": ended, "exit_status": 1, "error": f"{type(exc).__name__}: {exc}",
            **_compile_error(exc, ended, True)}


def _main_did_not_compile(exc: BaseException) -> bool:
    """Whether ``exc`` is the interpreter's report that the main script does not compile (a
    SyntaxError without a frame, in the file ``sys.argv[0]`` names)."""
    if not isinstance(exc, SyntaxError) or exc.__traceback__ is not None:
        return False
    main = sys.argv[0] if sys.argv else ""
    return bool(main and exc.filename) and os.path.realpath(exc.filename) == \
        os.path.realpath(main)


def _quiet_compile_error(previous):
    """``sys.excepthook`` for a rank of a launched program: the main script's compile error
    is kept for irscope to show once (``_process_ending``), the rest printed as before."""
    def hook(kind, exc, tb):
        if tb is None and _main_did_not_compile(exc):
            return
        previous(kind, exc, tb)
    return hook


def rank_staging(staging: Staging, config: dict) -> Staging:
    """This process's own staging folder: ``rank_<N>/`` in a multi-process run, with
    TORCH_TRACE moved into it when irscope set it (torch reads it when imported)."""
    rank = rank_from_env(os.environ) if config.get("per_rank") else None
    if rank is None:
        return staging
    own = staging.for_rank(rank).create()
    if os.environ.get("TORCH_TRACE") == str(staging.torch_trace):
        os.environ["TORCH_TRACE"] = str(own.torch_trace)
    return own


def install_in_rank() -> None:
    """Collect in a Python process of a launched program: into its rank's staging folder when
    its launcher gave it a rank, else into the run's own (``irscope inspect -- python x.py``).
    Then the user's own sitecustomize, if any, runs."""
    path = os.environ.get(CONFIG_VARIABLE)
    _chain_sitecustomize()
    if not path:
        return
    config = json.loads(Path(path).read_text(encoding="utf-8"))
    root = Path(config["staging"])
    staging = rank_staging(Staging(root), config)
    only = tuple(config.get("only", ()))
    cache = config.get("dump_cache")
    collectors = Collectors(staging, only, config.get("xla_dumps", True),
                            Path(cache) if cache else None, config.get("profile"))
    if staging.root != root:  # a rank: irscope shows the script's compile error once
        sys.excepthook = _quiet_compile_error(sys.excepthook)
    # The launcher reports the program's exit status; each process records how it ended.
    atexit.register(lambda: (record_ending(staging, getattr(sys, "last_value", None), only),
                             collectors.remove()))


def record_ending(staging: Staging, exc: BaseException | None, only=()) -> None:
    """Write how this process of a launched program ended (``_process_ending``), unless it
    ended well and another process of its rank (a compile worker it started, which has
    its rank too) recorded a failure first: the rank failed."""
    ending = _process_ending(exc)
    if ending["ended"] == "exit":
        try:
            recorded = json.loads(staging.status.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # nothing recorded yet
            recorded = {}
        if isinstance(recorded, dict) and recorded.get("ended") in FAILED_ENDINGS:
            return
    write_status(staging, ending, only)


def _chain_sitecustomize() -> None:
    """Run the sitecustomize that irscope's shadows (later on sys.path), as Python would have."""
    here = os.path.dirname(sys.modules["sitecustomize"].__file__ or "") \
        if "sitecustomize" in sys.modules else None
    rest = [p for p in sys.path if os.path.abspath(p or ".") != os.path.abspath(here or "")]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest) if here else None
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


def main(argv: list[str]) -> int:
    booted = time.time()  # the interpreter is up and irscope's bootstrap imported
    if len(argv) < 2:
        sys.stderr.write("usage: python -m irscope.collectors.bootstrap CONFIG -- script [args]\n")
        return 2
    config = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    target = argv[2:] if argv[1] == "--" else argv[1:]
    staging = rank_staging(Staging(Path(config["staging"])), config)
    ranked = staging.root != Path(config["staging"])
    only = tuple(config.get("only", ()))
    if config.get("interruptible", True):
        signal.signal(signal.SIGINT, signal.default_int_handler)
    cache = config.get("dump_cache")
    collectors = Collectors(staging, only, config.get("xla_dumps", True),
                            Path(cache) if cache else None, config.get("profile"))
    started = time.time()
    timed = {"booted": booted, "script_started": started}
    _SETTINGS_AT_START.update((name, os.environ.get(name)) for name in SCRIPT_SETTINGS)
    try:
        try:
            run_target(target)
        finally:
            collectors.finish_profile()
    except SystemExit as exc:
        code = exit_code(exc.code)
        write_status(staging, {"exit_status": code, "ended": "exit", **timed}, only)
        raise
    except BaseException as exc:
        interrupted = isinstance(exc, KeyboardInterrupt)
        code = EXIT_INTERRUPTED if interrupted else 1
        ended = ("interrupted" if interrupted else
                 COMPILE_ERROR if did_not_compile(exc) else "exception")
        write_status(staging, {"exit_status": code, "ended": ended,
                               "error": None if interrupted else f"{type(exc).__name__}: {exc}",
                               **_compile_error(exc, ended, ranked), **timed}, only)
        if not (ranked and ended == COMPILE_ERROR):  # a rank's is shown once, by irscope
            tb = _user_traceback(exc)
            sys.excepthook(type(exc), exc.with_traceback(tb), tb)
        return code
    write_status(staging, {"exit_status": 0, "ended": "exit", **timed}, only)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
