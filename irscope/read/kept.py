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


def kept(run: RunView, key: str, build: Callable[[], Any], encode: Callable[[Any], bytes | None],
         decode: Callable[[bytes | None], Any]) -> Any:
    """What ``build()`` derives from ``run``, kept in the run under ``key``: ``decode`` reads
    it back (None: nothing kept, damaged or crafted) while the run is unchanged, else it is
    built and kept as ``encode`` writes it (when the run can be written and it encodes)."""
    generation = run.generation()
    found = decode(run.rollup(key, generation))
    if found is not None:
        return found
    value = build()
    data = encode(value)
    if data is not None:
        run.keep_rollup(key, generation, data)
    return value


def kept_json(run: RunView, name: str, build: Callable[[], Any],
              valid: Callable[[Any], bool]) -> Any:
    """``build()``'s plain JSON value for ``run``, kept under ``name`` (``kept``): read back
    when ``valid`` accepts it."""
    def decode(data: bytes | None) -> Any:
        try:
            value = json.loads(data) if data is not None else None
        except (ValueError, RecursionError):  # damaged or crafted: built again
            return None
        return value if value is not None and valid(value) else None

    return kept(run, f"{name}:{code_digest()}", build,
                lambda value: json.dumps(value, separators=(",", ":")).encode(), decode)


@lru_cache(maxsize=None)  # once for each set of record classes
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
