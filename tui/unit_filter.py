"""Which units the navigator shows for its filter text and rank, fast on runs of many units.

A unit matches when its name, its framework or one of its stage kinds contains the text
(ignoring case) and, with a rank chosen, when that rank compiled it or no single rank did (a
kernel shared by every process). Each unit's searchable text is built once; a text that
extends the last one narrows the last result instead of scanning every unit again, so typing
a filter into a 12,000-unit run costs a few milliseconds a key.
"""

from __future__ import annotations

from collections.abc import Sequence

from irscope.read.ranks import unit_rank
from irscope.browse.tree import FrameworkGroup, UnitRow


class UnitFilter:
    """The rows of ``groups`` kept for a text and a rank (None: every rank)."""

    def __init__(self, groups: Sequence[FrameworkGroup]) -> None:
        self.groups = list(groups)
        # name, framework and stage kinds, one per line: a needle (no newline) matches one
        self._text = {row.unit.id: "\n".join((row.unit.name.lower(), group.framework.lower(),
                                              *sorted({s.kind.lower() for s in row.stages})))
                      for group in self.groups for row in group.rows}
        self._last: tuple[str, int | None, list[FrameworkGroup]] | None = None

    @property
    def ranks(self) -> tuple[int, ...]:
        """The ranks that compiled units, in order (none for a one-process run)."""
        return tuple(sorted({r for g in self.groups for row in g.rows
                             if (r := unit_rank(row.unit)) is not None}))

    def apply(self, query: str, rank: int | None = None) -> list[FrameworkGroup]:
        """The groups with their kept rows, empty groups left out."""
        needle = query.strip().lower()
        base = self.groups
        if self._last is not None:
            last_needle, last_rank, last_kept = self._last
            if last_rank == rank and needle.startswith(last_needle):
                if needle == last_needle:
                    return last_kept
                base = last_kept  # a longer text keeps a subset of what the shorter kept
        kept = [FrameworkGroup(g.framework, rows) for g in base
                if (rows := tuple(r for r in g.rows if self._matches(r, needle, rank)))]
        self._last = (needle, rank, kept)
        return kept

    def _matches(self, row: UnitRow, needle: str, rank: int | None) -> bool:
        if rank is not None and unit_rank(row.unit) not in (rank, None):
            return False
        return not needle or needle in self._text[row.unit.id]
