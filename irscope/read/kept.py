"""What readers derive from a whole run, kept in the run between them as the report's records
are: under a key naming it and a digest of the code that derives it, at the run's generation
(any change to its units, stages, relations or events makes it stale). A run comes from
anywhere, so what is read back is checked before it is used, and built again when it fails."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from irscope.read.view import RunView

# The modules whose code decides what a run's derived figures hold, by package folder.
_FIGURE_CODE = ("analysis", "parsers", "read", "reports")
_FIGURE_MODULES = ("store.py",)


def kept_json(run: RunView, name: str, build: Callable[[], Any],
              valid: Callable[[Any], bool]) -> Any:
    """``build()``'s plain JSON value for ``run``, kept in the run under ``name``: read back
    when the run has not changed since and ``valid`` accepts it, else built and kept (when the
    run can be written)."""
    key = f"{name}:{code_digest()}"
    generation = run.generation()
    data = run.rollup(key, generation)
    if data is not None:
        try:
            value = json.loads(data)
        except (ValueError, RecursionError):  # damaged or crafted: built again
            value = None
        if value is not None and valid(value):
            return value
    value = build()
    run.keep_rollup(key, generation, json.dumps(value, separators=(",", ":")).encode())
    return value


@lru_cache(maxsize=1)
def code_digest(*record_classes: type) -> str:
    """A digest of the code that computes a run's figures (and of ``record_classes``' fields,
    where what is kept holds them)."""
    root = Path(__file__).resolve().parents[1]
    files = sorted(p for folder in _FIGURE_CODE for p in (root / folder).glob("*.py"))
    files += [root / name for name in _FIGURE_MODULES]
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0")
        try:
            digest.update(path.read_bytes())
        except OSError:
            digest.update(b"unreadable")
    for cls in record_classes:
        digest.update(repr([(f.name, f.type) for f in dataclasses.fields(cls)]).encode())
    return digest.hexdigest()[:16]


def int_keyed(value: Any, row: Callable[[Any], bool]) -> bool:
    """Whether ``value`` is a JSON object of unit ids (as text) to rows ``row`` accepts."""
    return isinstance(value, dict) and all(
        key.isdigit() and row(item) for key, item in value.items())
