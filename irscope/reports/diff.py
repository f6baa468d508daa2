"""Diffing two reports: match units across them and compute figure deltas."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Callable

from irscope.reports.records import Report, UnitRecord, stage_figures_once

SCHEMA = "irscope.diff/1"

# Inductor kernel indices and store suffixes that change between compiles of the same code:
# "triton_poi_fused_add_3" -> "triton_poi_fused_add", "matmul_kernel-1a2b3c4d" -> "matmul_kernel"
_INDEX_SUFFIX = re.compile(r"(?:_\d+|-[0-9a-f]{8})$")
# Dynamo frame/compile ids: "[0/1] mlp" -> "mlp"
_FRAME_PREFIX = re.compile(r"^\[\d+/\d+\]\s*")


@dataclass(frozen=True)
class FigureDelta:
    """One figure on both sides; ``None`` where a side does not report it."""

    name: str
    a: float | None
    b: float | None

    @property
    def delta(self) -> float | None:
        return None if self.a is None or self.b is None else self.b - self.a

    @property
    def percent(self) -> float | None:
        """Relative change in percent; infinite when growing from zero, None when unknown."""
        if self.a is None or self.b is None:
            return None
        if self.a == 0:
            return 0.0 if self.b == 0 else float("inf") if self.b > 0 else float("-inf")
        return (self.b - self.a) / abs(self.a) * 100.0


@dataclass(frozen=True)
class UnitDiff:
    """A unit only in A (removed), only in B (added), or in both (matched) with its changes."""

    status: str
    a: UnitRecord | None
    b: UnitRecord | None
    matched_by: str | None = None
    changes: tuple[FigureDelta, ...] = ()
    stages_changed: tuple[str, ...] = ()  # stages on both sides whose text differs
    stages_added: tuple[str, ...] = ()
    stages_removed: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        if self.a and self.b and self.a.name != self.b.name:
            return f"{self.a.name} -> {self.b.name}"
        return (self.b or self.a).name

    @property
    def framework(self) -> str:
        return (self.b or self.a).framework


@dataclass(frozen=True)
class Diff:
    """Two reports side by side: unit diffs in A's order then B's, and run-total changes."""

    a: Report
    b: Report
    units: tuple[UnitDiff, ...]
    totals: tuple[FigureDelta, ...]

    def count(self, status: str) -> int:
        return sum(1 for u in self.units if u.status == status)


class Figures:
    """One side's figures; an op or category absent from a stage that side has counts as 0."""

    def __init__(self, figures: Mapping[str, float]):
        self.figures = figures
        self._stage_kinds: set[str] | None = None

    @property
    def stage_kinds(self) -> set[str]:
        if self._stage_kinds is None:
            self._stage_kinds = {name.split(".", 1)[0] for name in self.figures if "." in name}
        return self._stage_kinds

    def get(self, name: str) -> float | None:
        value = self.figures.get(name)
        if value is None and (".op." in name or ".category." in name) \
                and name.split(".", 1)[0] in self.stage_kinds:
            return 0
        return value


def figure_changes(a: Mapping[str, float], b: Mapping[str, float]) -> tuple[FigureDelta, ...]:
    """Figures that differ (or exist on one side only), headline figures first, then by name."""
    left, right = Figures(a), Figures(b)
    # a figure both sides hold with one value is no change: most of them, set aside first
    names = [n for n in a.keys() | b.keys()
             if not (n in a and n in b and a[n] is not None and a[n] == b[n])]
    names.sort(key=lambda n: ("." in n, n))
    deltas = (FigureDelta(n, left.get(n), right.get(n)) for n in names)
    return tuple(d for d in deltas if d.a != d.b)


def normalized_name(name: str) -> str:
    """A unit name with compile-specific indices removed, for matching renamed units."""
    name = _FRAME_PREFIX.sub("", name)
    while _INDEX_SUFFIX.search(name):
        name = _INDEX_SUFFIX.sub("", name)
    return name


def _match_unique(left: list[UnitRecord], right: list[UnitRecord],
                  key: Callable[[UnitRecord], Any]) -> list[tuple[UnitRecord, UnitRecord]]:
    """Pairs whose key is unique on both sides (ambiguous keys stay unmatched)."""
    def unique(units: Iterable[UnitRecord]) -> dict[Any, UnitRecord]:
        seen: dict[Any, list[UnitRecord]] = {}
        for u in units:
            k = key(u)
            if k is not None:
                seen.setdefault(k, []).append(u)
        return {k: v[0] for k, v in seen.items() if len(v) == 1}

    lu, ru = unique(left), unique(right)
    return [(lu[k], ru[k]) for k in lu if k in ru]


def match_units(a: Iterable[UnitRecord], b: Iterable[UnitRecord]
                ) -> list[tuple[UnitRecord, UnitRecord, str]]:
    """Pair units: kernels by provenance first (the same source lines and code, then the same
    source lines: Inductor renumbers kernels, ``_4`` -> ``_5``), then by (framework, name),
    normalized name, source location.

    Two one-unit reports (single artifacts) pair with each other whatever their names.
    """
    left, right = list(a), list(b)
    pairs: list[tuple[UnitRecord, UnitRecord, str]] = []
    strategies = (
        ("provenance", lambda u: (u.framework, u.provenance, u.code_key)
         if u.provenance and u.code_key else None),
        ("source lines", lambda u: (u.framework, u.provenance) if u.provenance else None),
        ("name", lambda u: u.key),
        ("normalized name", lambda u: (u.framework, normalized_name(u.name))),
        ("source location", lambda u: (u.framework, u.location) if u.location else None),
    )
    for label, key in strategies:
        matched = _match_unique(left, right, key)
        pairs += [(x, y, label) for x, y in matched]
        # set aside by identity: comparing records field by field made this quadratic
        paired_left, paired_right = {id(x) for x, _ in matched}, {id(y) for _, y in matched}
        left = [u for u in left if id(u) not in paired_left]
        right = [u for u in right if id(u) not in paired_right]
    if len(left) == 1 and len(right) == 1 and left[0].framework == right[0].framework == "file":
        pairs.append((left[0], right[0], "single artifact"))
    return pairs


def stage_changes(a: UnitRecord, b: UnitRecord
                  ) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """Stage names whose text changed, that only B has, and that only A has."""
    left = {s.name: s.digest for s in a.stages}
    right = {s.name: s.digest for s in b.stages}
    changed = tuple(n for n in left if n in right and None not in (left[n], right[n])
                    and left[n] != right[n])
    return (changed, tuple(n for n in right if n not in left),
            tuple(n for n in left if n not in right))


def diff_reports(a: Report, b: Report) -> Diff:
    """Match the units of ``a`` and ``b`` and compute every figure that changed."""
    pairs = match_units(a.units, b.units)
    matched_a = {id(x): (x, y, how) for x, y, how in pairs}
    matched_b = {id(y) for _, y, _ in pairs}
    stage_figures = stage_figures_once()
    units: list[UnitDiff] = []
    for unit in a.units:
        if id(unit) in matched_a:
            x, y, how = matched_a[id(unit)]
            changes = figure_changes(x.figures(stage_figures), y.figures(stage_figures))
            units.append(UnitDiff("matched", x, y, how, changes, *stage_changes(x, y)))
        else:
            units.append(UnitDiff("removed", unit, None))
    units.extend(UnitDiff("added", None, u) for u in b.units if id(u) not in matched_b)
    return Diff(a, b, tuple(units), figure_changes(a.figures(), b.figures()))


def without_renamings(diff: Diff, renamed_only: Callable[[UnitDiff, str], bool]) -> Diff:
    """``diff`` with the stages that ``renamed_only(unit, stage name)`` says differ only in
    what compiles of one program differ in (each run's cache folders in paths, hashes in
    names, SSA, register, label and kernel numbers: analysis.normalize.same_program) no longer
    counted as changed."""
    units = []
    for unit in diff.units:
        if unit.stages_changed:
            kept = tuple(name for name in unit.stages_changed if not renamed_only(unit, name))
            unit = replace(unit, stages_changed=kept)
        units.append(unit)
    return replace(diff, units=tuple(units))


def _number(value: float | None) -> float | str | None:
    """JSON has no infinity: a growth from zero is written as the string "inf"."""
    if value is None or abs(value) != float("inf"):
        return value
    return "inf" if value > 0 else "-inf"


def delta_to_json(d: FigureDelta) -> dict[str, Any]:
    pct = d.percent
    return {"figure": d.name, "a": d.a, "b": d.b, "delta": d.delta,
            "percent": None if pct is None else _number(round(pct, 3))}


def diff_to_json(diff: Diff, gates: Iterable[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The irscope.diff/1 document (see irscope/reports/schema.json)."""
    def side(report: Report) -> dict[str, Any]:
        return {"name": report.run, "path": report.path}

    def unit(u: UnitRecord | None) -> dict[str, Any] | None:
        return None if u is None else {"name": u.name, "framework": u.framework,
                                       "source_file": u.source_file,
                                       "source_line": u.source_line}

    return {
        "schema": SCHEMA,
        "a": side(diff.a), "b": side(diff.b),
        "summary": {s: diff.count(s) for s in ("matched", "added", "removed")},
        "totals": [delta_to_json(d) for d in diff.totals],
        "units": [{"status": u.status, "matched_by": u.matched_by, "a": unit(u.a),
                   "b": unit(u.b), "changes": [delta_to_json(d) for d in u.changes],
                   "stages_changed": list(u.stages_changed), "stages_added": list(u.stages_added),
                   "stages_removed": list(u.stages_removed)}
                  for u in diff.units],
        "gates": list(gates),
    }

