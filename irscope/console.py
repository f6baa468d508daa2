"""The one place that writes to the terminal: stdout results, stderr messages, progress.

Names in a run or a file (kernels, units, paths) may hold anything, so nothing written here
reaches the terminal as a control character: escape sequences would retitle, clear or
rewrite the user's terminal. They are shown as the Unicode control pictures (ESC as ␛).
"""

from __future__ import annotations

import json
import os
import re
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


# C0 controls but tab and newline, DEL, C1 controls: "\x1b[2J" clears a terminal
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _picture(match: re.Match) -> str:
    code = ord(match.group())
    return chr(0x2400 + code) if code < 0x20 else "\u2421" if code == 0x7F else "\ufffd"


def printable(text: str) -> str:
    """``text`` with every control character but tab and newline shown as a picture of it."""
    return CONTROL.sub(_picture, text)


def out(text: str = "") -> None:
    """Write one result line to stdout."""
    sys.stdout.write(printable(text) + "\n")


def note(text: str) -> None:
    """Write an informational line to stderr (so stdout stays clean for --json)."""
    sys.stderr.write(printable(text) + "\n")


def error(text: str) -> None:
    """Write one error line to stderr, prefixed with the program name."""
    sys.stderr.write(f"irscope: error: {printable(text)}\n")


def warn(text: str) -> None:
    sys.stderr.write(f"irscope: warning: {printable(text)}\n")


def write_text(text: str) -> None:
    """Write a document (a report, a stage) to stdout, its control characters made visible."""
    sys.stdout.write(printable(text))


def print_json(data: Any) -> None:
    """Pretty JSON on stdout, keys in the order given."""
    json.dump(data, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def rich_console(stderr: bool = False):
    """A Rich console that respects NO_COLOR, fits the terminal width and shows control
    characters in what it prints as pictures (its own styling still colours the output)."""
    from rich.console import Console
    from rich.segment import Segment

    class PrintableConsole(Console):
        def _render_buffer(self, buffer):
            return super()._render_buffer(
                segment if segment.control or not CONTROL.search(segment.text)
                else Segment(printable(segment.text), segment.style) for segment in buffer)

    stream = sys.stderr if stderr else sys.stdout
    return PrintableConsole(file=stream, no_color=not color_enabled(stream), highlight=False,
                            soft_wrap=False)


def markup_escape(text: object) -> str:
    """``text`` safe inside Rich markup: ``[/]`` in a name is shown, never parsed."""
    from rich.markup import escape

    return escape(str(text))


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
