"""`irscope serve RUN`: the terminal UI in a browser, one read-only app process per viewer.

textual-serve starts a fresh process for every browser tab that connects, so several people
can read one run at once. Each process opens the run read-only (nothing is cached into it,
nothing is written), runs with Python's isolated mode so that no file in the run or in the
working directory can be imported, and shows no files from outside the run.
"""

from __future__ import annotations

import inspect
import shlex
import sys
import threading
from pathlib import Path
from irscope.console import note
from irscope.errors import UsageError

DEFAULT_PORT = 8000
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "serve", help="browse a run in a web browser (read-only, several viewers at once)",
        description="Serve the terminal UI of `irscope open` over HTTP: every browser tab gets "
                    "its own read-only view of the run. Needs the [serve] extra (textual-serve).")
    p.add_argument("run", nargs="?", default="latest",
                   help="run directory, run name under ./.irscope/runs, or 'latest' (default)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help=f"TCP port to listen on (default {DEFAULT_PORT})")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1, this machine only; 0.0.0.0 "
                        "lets every machine that reaches this one read the run)")
    p.add_argument("--all", action="store_true", dest="show_all",
                   help="show JAX's eager ops too, as `irscope open --all` does")
    p.set_defaults(func=run)


def app_command(run_path: Path, show_all: bool = False) -> str:
    """The shell command textual-serve runs for each viewer: this interpreter, isolated
    (-I: neither the working directory nor PYTHON* variables reach sys.path), every
    argument quoted so that no run name is read by the shell."""
    words = [sys.executable, "-I", "-m", "irscope.commands.serve", "--app", str(run_path)]
    return " ".join(shlex.quote(w) for w in (*words, *(["--all"] if show_all else [])))


def run(args) -> int:
    from irscope.store import locate_run

    path = Path(locate_run(args.run)).resolve()
    open_read_only(path).close()  # a missing or damaged run is one clear line, before serving
    try:
        from textual_serve.server import Server
    except ImportError:
        raise UsageError("irscope serve needs textual-serve: install irscope with the [serve] "
                         "extra (README: Install)") from None
    if not 0 < args.port < 65536:
        raise UsageError(f"--port {args.port}: choose a port from 1 to 65535")
    if args.host not in LOOPBACK:
        note(f"serving on {args.host}: every machine that reaches this one can read {path.name}")
    server = Server(app_command(path, args.show_all), host=args.host, port=args.port,
                    title=f"irscope {path.name}")
    sys.unraisablehook = _closed_loop_quiet(sys.unraisablehook)
    try:
        server.serve()
    except OSError as exc:  # the port is taken, or the address is not this machine's
        raise UsageError(f"cannot listen on {args.host}:{args.port}: "
                         f"{exc.strerror or exc}") from None
    return 0


def _closed_loop_quiet(hook):
    """``hook`` but for the pipes of app processes collected after the server's event loop
    closed on Ctrl-C, which asyncio reports as "Event loop is closed" with a traceback."""
    def unraisable(info) -> None:
        if isinstance(info.exc_value, RuntimeError) and str(info.exc_value) == \
                "Event loop is closed":
            return
        hook(info)
    return unraisable


def open_read_only(path: Path):
    """The run opened for reading only: by the store's read-only mode where it has one (no
    SQLite journal files either), and in any case marked so that parsed() caches nothing
    and transaction() refuses."""
    from irscope.store import Run

    if "read_only" in inspect.signature(Run.open).parameters:
        run = Run.open(path, read_only=True)
    else:
        run = Run.open(path)
    run.meta["read_only"] = True
    return run


def served_app(run_path: Path, show_all: bool = False):
    """The app one viewer gets: `irscope open`'s, with the run opened read-only whatever its
    run.json says, and no Python source file read from disk (a run names source files by
    path: a served run must not show the serving machine's files to its viewers)."""
    from irscope.tui import app as tui_app
    from irscope.tui import messages as msg
    from irscope.tui.app import IrscopeApp

    class ServedApp(IrscopeApp):
        CSS_PATH = Path(tui_app.__file__).with_name(IrscopeApp.CSS_PATH)
        reads_source_files = False

        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self._readers = threading.local()  # SQLite handles stay in their thread

        def store(self):
            run = getattr(self._readers, "run", None)
            if run is None:
                run = self._readers.run = open_read_only(self.run_path)
            return run

        def source_worker(self, stage, line) -> None:
            self.post_message(msg.Problem("irscope serve shows no Python source files; "
                                          "open the unit's Python source stage", "warning"))

    return ServedApp(run_path, show_all)


if __name__ == "__main__":
    if sys.argv[1:2] != ["--app"] or len(sys.argv) < 3:
        sys.exit("usage: python -I -m irscope.commands.serve --app RUN [--all]")
    served_app(Path(sys.argv[2]), "--all" in sys.argv[3:]).run()
