"""The rows a run holds (units, stages, relations, events), read from the index without trusting it."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from irscope.errors import RunError
from irscope.store.schema import ATTR_TYPES, ATTR_VALUE_TYPES


@dataclass(frozen=True)
class Unit:
    """A compiled thing: a Dynamo graph, a jitted JAX function, a Triton kernel."""

    id: int
    name: str
    framework: str
    source_file: str | None = None
    source_line: int | None = None
    attrs: dict[str, Any] = field(default_factory=dict)

    # Typed views of the attributes readers use most; ATTR_TYPES already checked their types.
    @property
    def rank(self) -> int | None:
        """The rank that compiled the unit; None for a one-process run or a shared kernel."""
        rank = self.attrs.get("rank")
        return rank if isinstance(rank, int) and not isinstance(rank, bool) else None

    @property
    def launch_metadata(self) -> dict[str, Any]:
        """A kernel's launch metadata: its compiler's (``metadata``) with the unit's own
        ``num_warps``, ``shared``, ``target`` and ``arch`` over it."""
        metadata = dict(self.attrs.get("metadata") or {})
        metadata.update({k: self.attrs[k] for k in ("num_warps", "shared", "target", "arch")
                         if k in self.attrs})
        return metadata

    @property
    def kernel_hash(self) -> str | None:
        """A Triton kernel's cache hash (what tells autotuning's configurations apart)."""
        return self.attrs.get("hash")

    @property
    def autotune_best(self) -> bool:
        """Whether autotuning chose this configuration of its kernel."""
        return bool(self.attrs.get("autotune_best"))


@dataclass(frozen=True)
class Stage:
    """One IR of a unit: its kind (see irscope.parsers.registry), a label and its blob."""

    id: int
    unit_id: int
    kind: str
    name: str
    position: int
    blob: str
    size: int
    origin: str | None = None


@dataclass(frozen=True)
class Relation:
    """A directed link between units, e.g. graph --launches--> kernel."""

    src: int
    kind: str
    dst: int
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Event:
    """Something that happened while compiling: a graph break, a recompilation, a failure."""

    id: int
    unit_id: int | None
    kind: str
    data: dict[str, Any]


def text_value(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def optional_text(value: Any) -> str | None:
    return None if value is None else text_value(value)


def integer_value(value: Any, default: int | None = None) -> int | None:
    """An index cell as an int; a crafted or damaged cell of another type gives ``default``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return default


def unit_from_row(row) -> Unit:
    return Unit(integer_value(row[0], 0), text_value(row[1]), text_value(row[2]), optional_text(row[3]),
                integer_value(row[4]), attrs_from_json(row[5]))


def attrs_from_json(text: Any) -> dict[str, Any]:
    """A unit's or relation's attributes, without values of a type no writer gives them."""
    attrs = json_object(text)
    for key in [key for key in attrs if key in ATTR_TYPES]:  # a unit holds a few of them
        value, expected = attrs[key], ATTR_TYPES[key]
        if value is None:
            continue
        if not isinstance(value, expected) or isinstance(value, bool) and expected is not bool:
            del attrs[key]
        elif key in ATTR_VALUE_TYPES:
            wanted = ATTR_VALUE_TYPES[key]
            attrs[key] = {k: v for k, v in value.items()
                          if isinstance(v, wanted) and not isinstance(v, bool)}
    return attrs


# The types of a stage row as irscope writes it (origin may be NULL): read as they are.
STAGE_ROW = (int, int, str, str, int, str, int)
STAGE_ROWS = frozenset({(*STAGE_ROW, str), (*STAGE_ROW, type(None))})


_STAGE_FIELDS = ("id", "unit_id", "kind", "name", "position", "blob", "size", "origin")


def stage_from_row(row, _new=object.__new__, _set=object.__setattr__) -> Stage:
    if tuple(map(type, row)) in STAGE_ROWS:  # as irscope writes it: its fields set at once
        stage = _new(Stage)  # (a frozen dataclass's __init__ sets them one by one: a run
        _set(stage, "__dict__", dict(zip(_STAGE_FIELDS, row)))  # of 500,000 stages reads
        return stage  # in two thirds of the time)
    return Stage(integer_value(row[0], 0), integer_value(row[1], 0), text_value(row[2]), text_value(row[3]),
                 integer_value(row[4], 0), text_value(row[5]), integer_value(row[6], 0), optional_text(row[7]))



def json_object(text: Any) -> dict[str, Any]:
    """A stored JSON object, or {} when the index holds something else (damage, a crafted row)."""
    value = json_value(text)
    return value if isinstance(value, dict) else {}


def json_text(value: Any, sort_keys: bool = False) -> str:
    """``value`` as standard JSON (RFC 8259), which SQLite's JSON functions read: a float that
    is not finite (an autotuner times a configuration it cannot run as inf) is written as
    null, where Python's own ``Infinity`` and ``NaN`` make them fail on the whole row."""
    try:
        return json.dumps(value, default=str, sort_keys=sort_keys, allow_nan=False)
    except ValueError:
        return json.dumps(_finite(value), default=str, sort_keys=sort_keys, allow_nan=False)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def json_value(text: Any) -> Any:
    """A stored JSON value, or None where the index holds no JSON (damage)."""
    try:
        return json.loads(text)
    except (TypeError, ValueError, RecursionError):
        return None



STAGE_NAMES_SHOWN = 12  # of a unit's stages, in a message saying that none is the one asked for


def pick_unit(units: list[Unit], key: str | int, where: Path) -> Unit:
    """The unit of ``units`` with id or exact name ``key``, else the one whose name holds it."""
    for u in units:
        if str(u.id) == str(key) or u.name == key:
            return u
    matches = [u for u in units if str(key) in u.name]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise RunError(f"{where}: no unit named {key!r}")
    raise RunError(f"{where}: {key!r} matches {len(matches)} units "
                   f"({listed([u.name for u in matches], 5)})")


def pick_stage(stages: list[Stage], unit: Unit, key: str) -> Stage:
    """The stage of ``stages`` (a unit's) named ``key``, else the first of that kind."""
    for s in stages:
        if s.name == key:
            return s
    for s in stages:
        if s.kind == key:
            return s
    if not stages:
        raise RunError(f"unit {unit.name!r} has no stage {key!r} (it has none)")
    kinds = ", ".join(dict.fromkeys(s.kind for s in stages))
    raise RunError(f"unit {unit.name!r} has no stage {key!r} (its kinds: {kinds}; names: "
                   f"{listed(numbered_runs([s.name for s in stages]), STAGE_NAMES_SHOWN)})")


def listed(names: list[str], shown: int) -> str:
    """The first ``shown`` of ``names``, joined, and how many more there are."""
    more = f", … ({len(names) - shown} more)" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def numbered_runs(names: list[str]) -> list[str]:
    """``names`` with the numbered ones of each name told as one range, in order of first
    sight: chromium_event#1, chromium_event#2, ... chromium_event#181 -> chromium_event#1..#181
    (two stay as they are)."""
    groups: dict[tuple[str, bool], list[int]] = {}  # (name or base, numbered) -> numbers
    for name in names:
        base, mark, number = name.rpartition("#")
        if mark and base and number.isdigit():
            groups.setdefault((base, True), []).append(int(number))
        else:
            groups.setdefault((name, False), [])
    out = []
    for (name, numbered), found in groups.items():
        if not numbered:
            out.append(name)
        elif len(found) < 3:
            out += [f"{name}#{n}" for n in found]
        else:
            out.append(f"{name}#{min(found)}..#{max(found)}")
    return out
