"""A report's records kept in its run between reports, so an unchanged run is reported from them.

The records of a run (``UnitRecord``, ``StageRecord``, totals, the units' figures combined)
are kept compressed in the run under a key naming everything they were computed with: the
filters of the report, and a digest of the code that computes figures (parsers, analysis, the
report records), so a new irscope never reads an old irscope's figures. The store keeps them at
the run's generation, which any change to the run's units, stages, relations or events bumps:
records of another generation are never read. A run comes from anywhere, so kept records are
checked field by field against the record classes' annotations when read, and records that
fail are computed again.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from irscope.analysis.passes import PassRow
from irscope.reports.records import StageRecord, UnitRecord
from irscope.read.kept import code_digest, kept, kept_json
from irscope.read.view import RunView

KIND = "report"
_NUMBER = (int, float)
_NUMBERS, _TEXT = frozenset(_NUMBER), frozenset({str})
# Fields holding records of another class, by name: kept as rows of that class's fields.
_ROWS = {"passes": PassRow}

# the unit records, the run's totals and the units' figures combined (Report.unit_rollup)
Records = tuple[tuple[UnitRecord, ...], dict[str, float], dict[str, float]]


def kept_or_built(run: RunView, filters: tuple, build: Callable[[], Records]) -> Records:
    """The records of ``run`` for these report ``filters``: those kept in the run when nothing
    changed since they were, else ``build()``'s, which are then kept (when the run can be
    written)."""
    return kept(run, _key(filters), build, lambda records: encode(*records), decode)


def kept_rows(run: RunView, name: str, build: Callable[[], list[dict]]) -> list[dict]:
    """Rows of plain JSON objects (numbers and strings) kept in the run under ``name`` like
    the records: read back when nothing changed, else ``build()``'s, then kept."""
    return kept_json(run, name, build, lambda rows: isinstance(rows, list) and all(
        isinstance(r, dict) and all(isinstance(v, (str, *_NUMBER)) for v in r.values())
        for r in rows))


def _key(filters: tuple) -> str:
    return f"{KIND}:{code_digest(UnitRecord, StageRecord)}:{json.dumps(filters, default=str)}"


# -- records as JSON, checked both ways against the record classes' annotations -------------
def encode(units: tuple[UnitRecord, ...], totals: Mapping[str, float],
           rollup: Mapping[str, float]) -> bytes | None:
    """The records as compact JSON, each distinct stage record once; None when a field holds
    what the annotations do not allow (a new field of a kind this module does not keep)."""
    index: dict[int, int] = {}  # id of a stage record -> its place (shared records once)
    stages: list[StageRecord] = []
    rows = []
    try:
        for unit in units:
            row = _fields(unit, skip="stages")
            row.append([_place(index, stages, s) for s in unit.stages])
            rows.append(row)
        doc = {"stages": [_fields(s) for s in stages], "units": rows,
               "totals": _checked("Mapping[str, float]", totals),
               "rollup": _checked("Mapping[str, float]", rollup)}
        return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()
    except (TypeError, ValueError):
        return None


def _place(index: dict[int, int], stages: list[StageRecord], stage: StageRecord) -> int:
    if id(stage) not in index:
        index[id(stage)] = len(stages)
        stages.append(stage)
    return index[id(stage)]


def decode(data: bytes | None) -> Records | None:
    """Records that ``encode`` gave ``data``; None when there are none or they do not check."""
    if data is None:
        return None
    try:
        doc = json.loads(data)
        stages = [_record(StageRecord, row) for row in doc["stages"]]
        units = tuple(
            _record(UnitRecord, row[:-1], stages=tuple(stages[i] for i in _list(row[-1])))
            for row in _list(doc["units"]))
        return (units, dict(_checked("Mapping[str, float]", doc["totals"])),
                dict(_checked("Mapping[str, float]", doc["rollup"])))
    except (TypeError, ValueError, KeyError, IndexError, RecursionError):
        return None


def _list(value: Any) -> list:
    if not isinstance(value, list):
        raise TypeError("not a list")
    return value


@lru_cache(maxsize=None)
def _fields_of(cls: type) -> tuple[dataclasses.Field, ...]:
    return dataclasses.fields(cls)


def _fields(record: Any, skip: str | None = None) -> list:
    return [_rows(f.name, getattr(record, f.name)) if f.name in _ROWS
            else _checked(f.type, getattr(record, f.name))
            for f in _fields_of(type(record)) if f.name != skip]


def _rows(name: str, records: Any) -> list:
    if not isinstance(records, tuple) or any(type(r) is not _ROWS[name] for r in records):
        raise TypeError(f"{name} holds records of another class")
    return [_fields(r) for r in records]


def _record(cls: type, row: list, **given: Any) -> Any:
    fields = [f for f in _fields_of(cls) if f.name not in given]
    if len(_list(row)) != len(fields):
        raise ValueError("fields differ")
    values = {f.name: tuple(_record(_ROWS[f.name], r) for r in _list(v)) if f.name in _ROWS
              else _checked(f.type, v, read=True) for f, v in zip(fields, row)}
    return cls(**values, **given)


@lru_cache(maxsize=None)
def _annotation(annotation: str) -> tuple[bool, str]:
    """Whether an annotation allows None, and the type it names besides."""
    return annotation.endswith(" | None"), annotation.removesuffix(" | None")


def _checked(annotation: str, value: Any, read: bool = False) -> Any:
    """``value`` as JSON keeps it (tuples as lists) or, with ``read``, as the record holds it;
    a TypeError when it is not what ``annotation`` says."""
    optional, kind = _annotation(annotation)
    if value is None and optional:
        return None
    if kind == "str" and isinstance(value, str):
        return value
    if kind == "int" and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind == "float" and isinstance(value, _NUMBER) and not isinstance(value, bool):
        return value
    if kind == "bool" and isinstance(value, bool):
        return value
    if kind.startswith("Mapping[str, ") and isinstance(value, Mapping):
        # by exact type, a record's thousands of figures at C speed (bool is no number here)
        if (kind.removeprefix("Mapping[str, ") in ("float]", "int]")
                and set(map(type, value)) <= _TEXT and set(map(type, value.values())) <= _NUMBERS):
            return dict(value)
    if kind == "tuple[Mapping[str, Any], ...]" and isinstance(value, (list, tuple)):
        items = [dict(v) for v in value if isinstance(v, Mapping) and all(
            isinstance(k, str) and isinstance(x, (str, *_NUMBER)) for k, x in v.items())]
        if len(items) == len(value):
            return tuple(items) if read else items
    raise TypeError(f"a record field of type {annotation} holds {type(value).__name__}")
