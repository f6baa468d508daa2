"""Two stages' lines aligned row by row, by default as compiles of one program compare:
folders of paths (each run its own caches), hashes in names and SSA value, register, label
and kernel numbers ignored, and a PTX's DWARF bytes (which spell those paths) too; exact on
request."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass

from irscope.analysis.normalize import normalized_lines

LARGE_DIFF_LINES = 4000


@dataclass(frozen=True)
class DiffLine:
    """One row of an aligned diff: the line of each side (None: a gap) and how they differ:
    "same", "changed", "removed" (left only) or "added" (right only)."""

    left: int | None
    right: int | None
    tag: str


def aligned_diff(left: Sequence[str], right: Sequence[str],
                 exact: bool = True) -> list[DiffLine]:
    """The two stages' lines aligned row by row, gaps where one side has no counterpart;
    unless ``exact``, lines compared ``normalized`` (a row whose lines differ only there is
    "same", and DWARF data is never a change)."""
    if exact:
        a, b = [line.strip() for line in left], [line.strip() for line in right]
    else:
        a, b = normalized_lines(left), normalized_lines(right)
    rows: list[DiffLine] = []
    # past a few thousand lines, lines repeated everywhere ("}", "bar.sync 0;") stop anchoring
    # the match: ten times faster on two 10k-line stages, a few fewer rows paired
    large = len(a) + len(b) > LARGE_DIFF_LINES
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=large)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            rows += [DiffLine(i, j, "same") for i, j in zip(range(i1, i2), range(j1, j2))]
            continue
        pairs = max(i2 - i1, j2 - j1)
        for k in range(pairs):
            i = i1 + k if i1 + k < i2 else None
            j = j1 + k if j1 + k < j2 else None
            tag = "changed" if i is not None and j is not None else (
                "removed" if j is None else "added")
            if not exact and (i is None or not a[i]) and (j is None or not b[j]):
                tag = "same"  # debug data, or blank: nothing a reader compares
            rows.append(DiffLine(i, j, tag))
    return rows
