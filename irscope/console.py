"""The one place that writes to the terminal: stdout results, stderr messages, progress."""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from typing import Any, Iterator


def color_enabled(stream=None) -> bool:
    """Colour only on a terminal and never when NO_COLOR is set (https://no-color.org)."""
    stream = stream or sys.stdout
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return hasattr(stream, "isatty") and stream.isatty()


def out(text: str = "") -> None:
    """Write one result line to stdout."""
    sys.stdout.write(text + "\n")


def note(text: str) -> None:
    """Write an informational line to stderr (so stdout stays clean for --json)."""
    sys.stderr.write(text + "\n")


def error(text: str) -> None:
    """Write one error line to stderr, prefixed with the program name."""
    sys.stderr.write(f"irscope: error: {text}\n")


def warn(text: str) -> None:
    sys.stderr.write(f"irscope: warning: {text}\n")


def print_json(data: Any) -> None:
    """Pretty JSON on stdout, keys in the order given."""
    json.dump(data, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def rich_console(stderr: bool = False):
    """A Rich console that respects NO_COLOR and fits the terminal width."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    return Console(file=stream, no_color=not color_enabled(stream), highlight=False,
                   soft_wrap=False)


class _Progress:
    def __init__(self, bar, task):
        self._bar, self._task = bar, task

    def advance(self, n: int = 1, description: str | None = None) -> None:
        if self._bar is not None:
            self._bar.update(self._task, advance=n, description=description)

    def total(self, total: int) -> None:
        if self._bar is not None:
            self._bar.update(self._task, total=total)


@contextmanager
def progress(description: str, total: int | None = None) -> Iterator[_Progress]:
    """A progress bar on stderr when it is a terminal; silent otherwise (CI, pipes)."""
    if not sys.stderr.isatty() or os.environ.get("CI"):
        yield _Progress(None, None)
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), console=rich_console(stderr=True), transient=True)
    with bar:
        yield _Progress(bar, bar.add_task(description, total=total))
