"""Command line entry point: builds the parser from irscope.commands and owns exit codes."""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys

from irscope import __version__
from irscope.console import error
from irscope.errors import IrscopeError

# Subcommands in the order --help lists them; each is irscope.commands.<name>.
COMMANDS = ("inspect", "ingest", "runs", "ls", "show", "open", "serve", "stats", "ptx", "sass",
            "report", "diff", "lint", "passes", "ranks", "compile", "repro", "cache", "completion")

EXIT_OK, EXIT_USAGE, EXIT_INTERRUPTED = 0, 2, 130
EXIT_ENVIRONMENT, EXIT_INTERNAL = 1, 70  # the machine refused (disk, permissions); a bug
# Errors from the machine and what they mean to the user.
DISK_FULL = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
# Commands after which the interpreter's teardown is skipped (see entry()).
QUICK_EXIT = ("inspect",)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser; with ``only``, just that subcommand is imported and added."""
    parser = argparse.ArgumentParser(
        prog="irscope",
        description="See what the compiler did to your function: every IR stage of every "
                    "compiled PyTorch, JAX and Triton function, with PTX/SASS analysis.",
    )
    parser.add_argument("--version", action="version", version=f"irscope {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS if only is None else (only,):
        try:
            module = importlib.import_module(f"irscope.commands.{name.replace('-', '_')}")
        except ModuleNotFoundError as exc:
            if exc.name != f"irscope.commands.{name}":
                raise
            continue
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # `irscope inspect ...` imports only the inspect command: start-up is part of its overhead
    chosen = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(chosen if chosen in COMMANDS else None)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(args.func(args) or 0)
    except IrscopeError as exc:
        error(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        error("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        sys.stderr.close()
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001  one line for the user, never a traceback
        if os.environ.get("IRSCOPE_DEBUG"):
            raise
        message, code = environment_error(exc)
        error(message)
        return code


def environment_error(exc: BaseException) -> tuple[str, int]:
    """One line and an exit status for an exception no command turned into an IrscopeError:
    a refusal by the machine (permissions, a full disk, memory) or, failing that, a bug."""
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        if exc.errno in DISK_FULL:
            return f"{where}cannot write: disk full or file too large ({exc.strerror})", \
                EXIT_ENVIRONMENT
        if isinstance(exc, PermissionError):
            return f"{where}permission denied", EXIT_ENVIRONMENT
        return f"{where}{exc.strerror or exc}", EXIT_ENVIRONMENT
    if isinstance(exc, MemoryError):
        return "out of memory", EXIT_ENVIRONMENT
    sqlite3 = sys.modules.get("sqlite3")
    if sqlite3 is not None and isinstance(exc, sqlite3.Error):
        text = str(exc)
        if "full" in text or "disk I/O" in text:
            return f"cannot write the run's index: disk full or not writable ({text})", \
                EXIT_ENVIRONMENT
        return f"the run's index: {text}", EXIT_ENVIRONMENT
    return (f"internal error ({type(exc).__name__}: {exc}); IRSCOPE_DEBUG=1 shows where",
            EXIT_INTERNAL)


def entry() -> None:
    """The ``irscope`` console script and ``python -m irscope``: run ``main``, then exit.

    ``inspect`` has filed, closed and flushed everything when it returns; the interpreter's
    own teardown (freeing the few hundred modules filing and the summary loaded, about
    10 ms) would only add to the time it costs on top of the script, so it is skipped.
    """
    code = main()
    argv = sys.argv[1:]
    if next((a for a in argv if not a.startswith("-")), None) in QUICK_EXIT:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (BrokenPipeError, ValueError):
                pass
        os._exit(code)
    sys.exit(code)
