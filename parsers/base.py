"""The one small interface every parser module shares: diagnostics, results, JSON form."""

from __future__ import annotations

import dataclasses
import functools
import gc
import re
import threading
import types
import typing
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

_Result = TypeVar("_Result", bound="ParseResult")


@dataclass(frozen=True)
class Diagnostic:
    """A problem found in the input: 1-based line (0 when not tied to one) and a message."""

    line: int
    message: str
    severity: str = "warning"


@dataclass(frozen=True)
class ParseResult:
    """Base of every parser's result: the kind, an op histogram, and diagnostics.

    Parser modules subclass it (frozen) and add their own fields. ``histogram`` maps an
    op name to its count, most frequent first; ``totals`` holds headline figures
    (instructions, kernels, fusions, ...) that reports and the TUI show without knowing
    the format.
    """

    kind: str
    histogram: Mapping[str, int] = field(default_factory=dict)
    totals: Mapping[str, int | float] = field(default_factory=dict)
    diagnostics: tuple[Diagnostic, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """Plain JSON-able dict of every field (dataclasses, tuples and mappings expanded)."""
        return to_jsonable(self)

    @classmethod
    def from_json(cls: type[_Result], data: Mapping[str, Any]) -> _Result:
        """The result ``to_jsonable(result)`` was made from, rebuilt from its type hints
        (keys the class does not know are left out; missing ones take their defaults)."""
        return from_jsonable(cls, data)


def sorted_histogram(counts: Mapping[str, int] | Iterable[str]) -> dict[str, int]:
    """Histogram as a dict ordered by count (descending), then name, so output is stable."""
    if not isinstance(counts, Mapping):
        counts = Counter(counts)
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


_SCALARS = (str, int, float, bool, type(None))


def to_jsonable(value: Any) -> Any:
    """Convert frozen dataclasses, tuples, sets and mappings to plain JSON types."""
    if type(value) in _SCALARS:  # most values of a large result: answered first
        return value
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    names = _field_names(type(value))
    if names is not None:
        return {name: to_jsonable(getattr(value, name)) for name in names}
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(to_jsonable(v) for v in value)
    return value


@functools.lru_cache(maxsize=None)
def _field_names(cls: type) -> tuple[str, ...] | None:
    """A dataclass's field names (a named tuple's too), looked up once per class."""
    if dataclasses.is_dataclass(cls):
        return tuple(f.name for f in dataclasses.fields(cls))
    return None


def from_jsonable(hint: Any, value: Any) -> Any:
    """``value`` (plain JSON) rebuilt as type ``hint``: frozen dataclasses and named tuples
    field by field, tuples, sets and mappings (integer keys from their JSON strings),
    ``X | None``; anything typed ``Any`` as it is."""
    return _converter(hint)(value)


def _same(value: Any) -> Any:
    return value


@functools.lru_cache(maxsize=None)
def _converter(hint: Any) -> Callable[[Any], Any]:
    """The function that rebuilds a value of type ``hint`` from JSON, made once per type:
    the cached parse results of a large stage hold hundreds of thousands of values."""
    origin = typing.get_origin(hint)
    if hint is Any or hint in (str, int, float, bool, type(None)):
        return _same
    if origin in (typing.Union, types.UnionType):
        options = [h for h in typing.get_args(hint) if h is not type(None)]
        if len(options) != 1:
            return _same
        inner = _converter(options[0])
        return lambda value: None if value is None else inner(value)
    if dataclasses.is_dataclass(hint):
        fields = [(name, _converter(h)) for name, h in _field_hints(hint).items()]

        def dataclass_of(value: Any) -> Any:
            if not isinstance(value, Mapping):
                return value
            return hint(**{name: convert(value[name]) for name, convert in fields
                           if name in value})
        return dataclass_of
    if isinstance(hint, type) and issubclass(hint, tuple) and hasattr(hint, "_fields"):
        fields = [_converter(h) for h in _field_hints(hint).values()]  # a NamedTuple: a list
        return lambda value: None if value is None else hint(
            *(convert(item) for convert, item in zip(fields, value)))
    args = typing.get_args(hint)
    if origin in (dict, Mapping, typing.Mapping) or hint in (dict, Mapping):
        key, item = args or (Any, Any)
        keys, items = (int if key is int else _converter(key)), _converter(item)
        if keys is _same and items is _same:
            return lambda value: None if value is None else dict(value)
        return lambda value: None if value is None else {
            keys(k): items(v) for k, v in value.items()}
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            item = _converter(args[0])
            if item is _same:
                return lambda value: None if value is None else tuple(value)
            return lambda value: None if value is None else tuple(item(v) for v in value)
        if args:
            parts = [_converter(h) for h in args]
            return lambda value: None if value is None else tuple(
                convert(v) for convert, v in zip(parts, value))
        return lambda value: None if value is None else tuple(value)
    if origin in (list, set, frozenset):
        item = _converter(args[0] if args else Any)
        return lambda value: None if value is None else origin(item(v) for v in value)
    return _same


@functools.cache
def _field_hints(cls: type) -> dict[str, Any]:
    """Resolved field types of a dataclass or named tuple (string annotations evaluated)."""
    hints = typing.get_type_hints(cls)
    names = ([f.name for f in dataclasses.fields(cls) if f.init]
             if dataclasses.is_dataclass(cls) else list(cls._fields))
    return {name: hints[name] for name in names}


_Parse = TypeVar("_Parse", bound=Callable[..., Any])
_gc_lock = threading.Lock()
_gc_pauses = 0
_gc_was_enabled = False


def gc_paused(parse: _Parse) -> _Parse:
    """Run ``parse`` with the cyclic garbage collector paused, then restore it.

    A large module becomes hundreds of thousands of small tuples with no reference cycles,
    and every few hundred allocations the collector would walk them all again (a fifth of
    a PTX parse's time). Nested and concurrent calls (TUI workers) share one pause.
    """

    @functools.wraps(parse)
    def paused(*args, **kwargs):
        global _gc_pauses, _gc_was_enabled
        with _gc_lock:
            if _gc_pauses == 0:
                _gc_was_enabled = gc.isenabled()
                gc.disable()
            _gc_pauses += 1
        try:
            return parse(*args, **kwargs)
        finally:
            with _gc_lock:
                _gc_pauses -= 1
                if _gc_pauses == 0 and _gc_was_enabled:
                    gc.enable()

    return paused  # type: ignore[return-value]


# frames in library code (`triton/language/standard.py` inside `tl.max`, `jax/_src/...`), and
# (group "never") frames that are never the user's: irscope's collectors, which run the script
# and wrap the compilers, and frozen standard modules (`<frozen runpy>`), in runs made before
# the JAX collector kept them out of the compilers' records
LIBRARY_PATH_RE = re.compile(
    r'[/\\](?:site-packages|dist-packages|triton[/\\]language|jax[/\\]_src)[/\\]'
    r'|(?P<never>^<frozen |[/\\]irscope[/\\]collectors[/\\])')


def user_frame(frames: tuple[str, ...]) -> str | None:
    """The innermost "file:line" of a call stack (innermost first) outside library code, else
    its innermost library frame; never irscope's or a frozen module's. The PTX, LLVM IR, SASS
    and MLIR parsers all name a line's location so."""
    library = None
    for frame in frames:
        match = LIBRARY_PATH_RE.search(frame)
        if match is None:
            return frame
        if library is None and match.group("never") is None:
            library = frame
    return library


def unescaped(text: str, escape: re.Pattern[str], byte_of: Callable[[str], bytes]) -> str:
    """``text`` as a compiler printed it, each ``escape`` (group 1: what follows the
    backslash) replaced by the bytes ``byte_of`` makes of it, read as UTF-8: a path with a
    non-ASCII character reads as the path the other stages name (``café/t.py``)."""
    if "\\" not in text:
        return text
    data, at = bytearray(), 0
    for match in escape.finditer(text):
        data += text[at:match.start()].encode() + byte_of(match.group(1))
        at = match.end()
    data += text[at:].encode()
    return data.decode("utf-8", "replace")
