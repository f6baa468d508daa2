"""The one place that writes to the terminal: stdout results, stderr messages, progress.

Names in a run or a file (kernels, units, paths) may hold anything, so nothing written here
reaches the terminal as a control character or an invisible one: escape sequences would
retitle, clear or rewrite the user's terminal, bidi overrides reorder what it shows. They
are made visible by ``escaping`` (ESC as ␛, U+202E as ``<U+202E>``); a line written by
``out``, ``note``, ``warn`` or ``error`` stays one line (a newline in a name as ␤, so a name
cannot fake a line of output); documents keep their lines (``write_text``).
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from contextlib import contextmanager
from typing import Any, Iterator

from irscope.escaping import one_line, printable, unsafe

LATE_BAR_S = 1.0  # filing that ends sooner draws no progress bar


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
    sys.stdout.write(one_line(text) + "\n")


def note(text: str) -> None:
    """Write an informational line to stderr (so stdout stays clean for --json)."""
    sys.stderr.write(one_line(text) + "\n")


def error(text: str) -> None:
    """Write one error line to stderr, prefixed with the program name."""
    sys.stderr.write(f"irscope: error: {one_line(text)}\n")


def warn(text: str) -> None:
    """Write one warning line to stderr, prefixed with the program name."""
    sys.stderr.write(f"irscope: warning: {one_line(text)}\n")


def write_text(text: str) -> None:
    """Write a document (a report, a stage) to stdout, its control characters made visible."""
    sys.stdout.write(printable(text))


def print_json(data: Any) -> None:
    """Pretty JSON on stdout, keys in the order given; written in pieces of many encoder
    chunks (one write per chunk costs more than the encoding of a large listing)."""
    chunks = json.JSONEncoder(indent=2, default=str).iterencode(data)
    while piece := "".join(itertools.islice(chunks, 65536)):
        sys.stdout.write(piece)
    sys.stdout.write("\n")


def rich_console(stderr: bool = False):
    """A Rich console that respects NO_COLOR, fits the terminal width and shows control
    and invisible characters in what it prints visible (its own styling still colours the
    output); strings it prints, and those in its tables' cells, stay one line."""
    from rich.console import Console
    from rich.segment import Segment

    class PrintableConsole(Console):
        def render_str(self, text: str, **kwargs):
            """A string printed or put in a cell is one line: a newline in a name within
            it is shown as ␤ (a ``Text`` is made one line by its maker)."""
            return super().render_str(one_line(text), **kwargs)

        def _render_buffer(self, buffer):
            return super()._render_buffer(
                segment if segment.control or not unsafe(segment.text)
                else Segment(printable(segment.text), segment.style) for segment in buffer)

    stream = sys.stderr if stderr else sys.stdout
    return PrintableConsole(file=stream, no_color=not color_enabled(stream), highlight=False,
                            soft_wrap=False)


def markup_escape(text: object) -> str:
    """``text`` (a name) safe inside Rich markup: one visible line, and ``[/]`` in it shown,
    never parsed."""
    from rich.markup import escape

    return escape(one_line(text))


class _Progress:
    def __init__(self, bar, task):
        self._bar, self._task = bar, task

    def advance(self, n: int = 1, description: str | None = None) -> None:
        if self._bar is not None:
            self._bar.update(self._task, advance=n, description=description)

    def total(self, total: int) -> None:
        if self._bar is not None:
            self._bar.update(self._task, total=total)


class _LateProgress:
    """A progress handle that counts from the start and draws its bar only once ``show()``
    is called (by a timer, when the work takes long), caught up with what was done."""

    def __init__(self, description: str, total: int | None):
        import threading
        from contextlib import ExitStack

        self._description, self._total = description, total
        self._lock = threading.Lock()
        self._stack = ExitStack()
        self._bar: _Progress | None = None
        self._closed = False
        self._done = 0
        self._label: str | None = None

    def show(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._bar = self._stack.enter_context(_bar(self._description, self._total))
            if self._done:
                self._bar.advance(self._done, description=self._label)

    def total(self, total: int) -> None:
        with self._lock:
            self._total = total
            if self._bar is not None:
                self._bar.total(total)

    def advance(self, n: int = 1, description: str | None = None) -> None:
        with self._lock:
            self._done += n
            self._label = description or self._label
            if self._bar is not None:
                self._bar.advance(n, description=description)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._stack.close()


@contextmanager
def progress(description: str, total: int | None = None,
             delay: float = 0.0) -> Iterator[_Progress | _LateProgress]:
    """A progress bar on stderr when it is a terminal; silent otherwise (CI, pipes).

    ``delay``: seconds the work may take before the bar appears (work done sooner draws
    nothing; the bar then starts with what was done meanwhile).
    """
    if delay <= 0:
        with _bar(description, total) as bar:
            yield bar
        return
    import threading

    late = _LateProgress(description, total)
    timer = threading.Timer(delay, late.show)
    timer.daemon = True
    timer.start()
    try:
        yield late
    finally:
        timer.cancel()
        late.close()


@contextmanager
def _bar(description: str, total: int | None = None) -> Iterator[_Progress]:
    """The bar itself, drawn at once (on a terminal)."""
    if not sys.stderr.isatty() or os.environ.get("CI"):
        yield _Progress(None, None)
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), console=rich_console(stderr=True), transient=True)
    with bar:
        yield _Progress(bar, bar.add_task(description, total=total))
