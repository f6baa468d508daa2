"""The source view: a user's file as the run's records name it, each line with the kernels it
feeds (forward and backward) and their instruction counts, and the files a run can show so."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from irscope.errors import IrscopeError
from irscope.files import read_artifact
from irscope.parsers.base import LIBRARY_PATH_RE
from irscope.read.provenance import provenance_graph
from irscope.read.source_lines import LineRow, line_rows
from irscope.read.view import RunView


@dataclass(frozen=True)
class SourceView:
    """A file to show: the path the records name it by, a title saying where its text came
    from, its lines, and per 1-based line what it feeds."""

    path: str
    title: str
    lines: tuple[str, ...]
    rows: Mapping[int, LineRow] = field(default_factory=dict)


def source_files(view: RunView) -> list[str]:
    """The files the run's records name, the user's own (outside library folders) first."""
    files = provenance_graph(view).files()
    return sorted(files, key=lambda p: (bool(LIBRARY_PATH_RE.search(p)), p))


def readable_source(view: RunView, path: str) -> bool:
    """Whether the source view may read ``path`` from this machine: a Python source file, or
    any file inside the working folder the run was made in. The path comes from the run's
    records, which may be crafted: never /etc/passwd because an IR location names it."""
    real = os.path.realpath(path)
    if real.endswith(".py"):
        return True
    cwd = view.meta.get("cwd")
    if not isinstance(cwd, str) or not cwd:
        return False
    return os.path.commonpath([real, os.path.realpath(cwd)]) == os.path.realpath(cwd)


def source_view(view: RunView, path: str, disk: bool = True) -> SourceView | str:
    """``path`` (as the records name it) with its rows; its text from the run when a unit's
    source stage holds it, else from this machine when ``disk``; a string says why not."""
    graph = provenance_graph(view)
    if path not in graph.files():
        return f"{path}: the run's records name no such file"
    rows = line_rows(view, path)
    held = graph.held.get(path)
    if held:
        lines = tuple(held.get(number, "") for number in range(1, max(held) + 1))
        return SourceView(path, f"{path} (from the run: the kernels it compiled)", lines, rows)
    why = "files are not read here" if not disk else "it is not on this machine"
    if disk and os.path.isfile(path) and not readable_source(view, path):
        disk, why = False, ("it is neither Python source nor in the run's working folder "
                            "(a run's records name the files shown, and may be crafted)")
    if disk and os.path.isfile(path):
        try:
            text = read_artifact(path, "a Python source file")
            return SourceView(path, f"{path} (from this machine)", tuple(text.splitlines()),
                              rows)
        except IrscopeError as exc:
            why = str(exc).removeprefix(f"{path}: ")
    if not rows:
        return f"{path}: the run holds no copy of it and {why}"
    return SourceView(path, f"{path} (its text: the run holds no copy and {why})",
                      ("",) * max(rows), rows)
