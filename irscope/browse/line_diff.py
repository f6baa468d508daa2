"""Two stages' lines aligned row by row, SSA value, register and label numbers ignored on
request."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

# SSA values, registers and labels whose numbers change between two compiles of one kernel:
# "%x_12", "%r34", "%rd1", "%p2", "R120", "UR4", "P0", "#loc33", "$L__BB0_1", "!dbg !42"
NUMBERING_RE = re.compile(r"(%[A-Za-z_]*|\bU?R|\bU?P|#loc|\$L__BB\d+_|![a-z]*\s?!|\^bb)\d+")
LARGE_DIFF_LINES = 4000


@dataclass(frozen=True)
class DiffLine:
    """One row of an aligned diff: the line of each side (None: a gap) and how they differ:
    "same", "changed", "removed" (left only) or "added" (right only)."""

    left: int | None
    right: int | None
    tag: str


def unnumbered(line: str) -> str:
    """A line with SSA value, register and label numbers blanked (`%r34` -> `%r#`)."""
    return NUMBERING_RE.sub(lambda m: m.group(1) + "#", line)


def aligned_diff(left: Sequence[str], right: Sequence[str],
                 ignore_numbering: bool = False) -> list[DiffLine]:
    """The two stages' lines aligned row by row, gaps where one side has no counterpart."""
    norm = unnumbered if ignore_numbering else (lambda line: line)
    a = [norm(line).strip() for line in left]
    b = [norm(line).strip() for line in right]
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
            rows.append(DiffLine(i, j, tag))
    return rows
