"""`irscope serve RUN`: the terminal UI in a browser, one read-only app process per viewer.

textual-serve starts a fresh process for every browser tab that connects, so several people
can read one run at once. Each process opens the run read-only (nothing is cached into it,
nothing is written), runs with Python's isolated mode so that no file in the run or in the
working directory can be imported, and shows no files from outside the run.

The web server (irscope/serving.py) answers its own origin only (``--allow-origin`` adds a
reverse proxy's), bounds each viewer's terminal and messages and the number of viewers, and
ends every app process with its viewer and with the server; an app also has the kernel end
it when the server process is gone, however it went. The page loads nothing from elsewhere.
"""

from __future__ import annotations

import inspect
import os
import signal
import sys
import threading
from pathlib import Path

from irscope.console import note
from irscope.errors import UsageError

DEFAULT_PORT = 8000
DEFAULT_VIEWERS = 8
LOOPBACK = ("127.0.0.1", "localhost", "::1")
PR_SET_PDEATHSIG = 1


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "serve", help="browse a run in a web browser (read-only, several viewers at once)",
        description="Serve the terminal UI of `irscope open` over HTTP: every browser tab gets "
                    "its own read-only view of the run. Only pages of the server's own origin "
                    "may use it. Needs the [serve] extra (textual-serve).")
    p.add_argument("run", nargs="?", default="latest",
                   help="run directory, run name under ./.irscope/runs, or 'latest' (default)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help=f"TCP port to listen on (default {DEFAULT_PORT})")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1, this machine only; 0.0.0.0 "
                        "lets every machine that reaches this one read the run)")
    p.add_argument("--allow-origin", action="append", default=[], metavar="URL",
                   help="also answer pages of this origin, e.g. https://irscope.example.com "
                        "for a reverse proxy serving it there (repeatable)")
    p.add_argument("--max-viewers", type=int, default=DEFAULT_VIEWERS, metavar="N",
                   help=f"viewers at once, each with an app process of its own (default "
                        f"{DEFAULT_VIEWERS}); more are refused until one leaves")
    p.add_argument("--all", action="store_true", dest="show_all",
                   help="show JAX's eager ops too, as `irscope open --all` does")
    p.set_defaults(func=run)


def app_words(run_path: Path, show_all: bool = False) -> list[str]:
    """The command each viewer's app process runs, as words (no shell reads them): this
    interpreter, isolated (-I: neither the working directory nor PYTHON* variables reach
    sys.path), told which process serves it (the one it ends with)."""
    return [sys.executable, "-I", "-m", "irscope.commands.serve", "--app", str(run_path),
            "--server", str(os.getpid()), *(["--all"] if show_all else [])]


def run(args) -> int:
    from irscope.store import locate_run

    path = Path(locate_run(args.run)).resolve()
    open_read_only(path).close()  # a missing or damaged run is one clear line, before serving
    try:
        from irscope.serving import GuardedServer, normalized_origin
    except ImportError as exc:
        if exc.name not in ("textual_serve", "aiohttp", "aiohttp_jinja2", "jinja2"):
            raise
        raise UsageError("irscope serve needs textual-serve: install irscope with the [serve] "
                         "extra (README: Install)") from None
    if not 0 < args.port < 65536:
        raise UsageError(f"--port {args.port}: choose a port from 1 to 65535")
    if args.max_viewers < 1:
        raise UsageError(f"--max-viewers {args.max_viewers}: at least 1")
    origins = tuple(normalized_origin(o) for o in args.allow_origin)
    if None in origins:
        bad = args.allow_origin[origins.index(None)]
        raise UsageError(f"--allow-origin {bad!r}: expected an origin such as "
                         "https://irscope.example.com (scheme, host and port only)")
    if args.host not in LOOPBACK:
        note(f"serving on {args.host}: every machine that reaches this one can read {path.name}")
    server = GuardedServer(app_words(path, args.show_all), host=args.host, port=args.port,
                           title=f"irscope {path.name}", origins=origins,
                           max_viewers=args.max_viewers)
    sys.unraisablehook = _closed_loop_quiet(sys.unraisablehook)
    try:
        server.serve()
    except OSError as exc:  # the port is taken, or the address is not this machine's
        raise UsageError(f"cannot listen on {args.host}:{args.port}: "
                         f"{exc.strerror or exc}") from None
    finally:
        server.end_viewers()
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


# -- one viewer's app ------------------------------------------------------------------------
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


def end_with_server(server: int) -> None:
    """Have the kernel kill this app process when the server process that started it dies,
    however it dies (Linux); end now if it is gone already."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != server:
        os._exit(0)


def _main(argv: list[str]) -> None:
    if argv[:1] != ["--app"] or len(argv) < 4 or argv[2] != "--server" \
            or not argv[3].isdigit():
        sys.exit("usage: python -I -m irscope.commands.serve --app RUN --server PID [--all]")
    end_with_server(int(argv[3]))
    served_app(Path(argv[1]), "--all" in argv[4:]).run()


if __name__ == "__main__":
    _main(sys.argv[1:])
