"""Op histograms as they are drawn and compared: per opcode, folded per base op or per
category, and the difference of two."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from irscope.parsers.base import ParseResult, sorted_histogram

HISTOGRAM_MODES = ("opcode", "op", "category")


def histogram(parsed: ParseResult, mode: str) -> dict[str, int]:
    """The histogram to draw: per opcode, per base op (before the first '.'), or per category."""
    if mode == "category":
        return dict(getattr(parsed, "categories", {}))
    hist = dict(parsed.histogram)
    if mode == "op":
        if getattr(parsed, "ops", None):
            return dict(parsed.ops)
        merged: dict[str, int] = defaultdict(int)
        for name, count in hist.items():
            merged[name.split(".")[0] if not name.startswith(".") else name] += count
        return sorted_histogram(merged)
    return hist


@dataclass(frozen=True)
class DiffRow:
    op: str
    left: int
    right: int

    @property
    def delta(self) -> int:
        return self.right - self.left


def histogram_diff(left: Mapping[str, int], right: Mapping[str, int]) -> list[DiffRow]:
    """Rows for every op in either histogram, largest absolute change first."""
    ops = set(left) | set(right)
    rows = [DiffRow(op, int(left.get(op, 0)), int(right.get(op, 0))) for op in ops]
    return sorted(rows, key=lambda r: (-abs(r.delta), -max(r.left, r.right), r.op))

