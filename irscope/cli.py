"""Command line entry point: builds the parser from irscope.commands and runs a command,
turning what it raises into one line and an exit code (irscope.errors names them)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings

from irscope import __version__
from irscope.console import error, note, warn
from irscope.errors import (EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, IrscopeError,
                            RunWarning, environment_error)

# Subcommands in the order --help lists them; each is irscope.commands.<name>.
COMMANDS = ("inspect", "ingest", "runs", "ls", "show", "open", "serve", "stats", "ptx", "sass",
            "report", "diff", "lint", "passes", "ranks", "where", "export", "compile", "repro",
            "cache", "completion")

# Commands after which the interpreter's teardown is skipped (see entry()).
QUICK_EXIT = ("inspect", "ingest")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser; with ``only``, just that subcommand is imported and added."""
    parser = argparse.ArgumentParser(
        prog="irscope",
        description="See what the compiler did to your function: every IR stage of every "
                    "compiled PyTorch, JAX and Triton function, with PTX/SASS analysis.",
    )
    parser.add_argument("--version", action="version", version=f"irscope {__version__}")
    parser.set_defaults(build_parser=build_parser)  # for commands that list every command
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS if only is None else (only,):
        try:
            module = importlib.import_module(f"irscope.commands.{name.replace('-', '_')}")
        except ModuleNotFoundError as exc:
            if exc.name != f"irscope.commands.{name}":
                raise
            continue
        module.add_parser(sub)
    parser.commands = sub.choices  # an option a command lacks is that command's usage error
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # `irscope inspect ...` imports only the inspect command: start-up is part of its overhead
    chosen = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(chosen if chosen in COMMANDS else None)
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        parser.commands.get(args.command, parser).error(
            f"unrecognized arguments: {' '.join(unknown)}")
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always", RunWarning)
            warnings.showwarning = _warning_lines()
            return int(args.func(args) or 0)
    except IrscopeError as exc:
        error(str(exc))
        for line in exc.details:
            note(line)
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


def _warning_lines():
    """A ``warnings.showwarning`` that writes each of irscope's run warnings once as one
    ``irscope: warning:`` line (a run opened twice is damaged once): what the store warns
    of is the user's to know, never where in the code it was raised. Other warnings are
    shown as Python shows them."""
    shown: set[str] = set()
    python_shows = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        if not issubclass(category, RunWarning):
            python_shows(message, category, filename, lineno, file, line)
        elif str(message) not in shown:
            shown.add(str(message))
            warn(str(message))

    return show


def entry() -> None:
    """The ``irscope`` console script and ``python -m irscope``: run ``main``, then exit.

    ``inspect`` and ``ingest`` have filed, closed and flushed everything when they return;
    the interpreter's own teardown (freeing the few hundred modules filing and the summary
    loaded, and what filing made: 10-20 ms) would only add to the time they cost, so it is
    skipped, unless a profiler or tracer (``python -m cProfile``, coverage) is to write its
    report at exit.
    """
    code = main()
    argv = sys.argv[1:]
    observed = sys.getprofile() is not None or sys.gettrace() is not None
    if next((a for a in argv if not a.startswith("-")), None) in QUICK_EXIT and not observed:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (BrokenPipeError, ValueError):
                pass
        os._exit(code)
    sys.exit(code)
