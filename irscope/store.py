"""The run store: run.json, content-addressed blobs and a schema-versioned SQLite index.

A run holds units (compiled things), each with ordered stages (IR text or binaries kept
as blobs) and relations between units. Blobs up to INLINE_MAX bytes live in the index
(schema 2 on), larger ones as files under blobs/: a run of many small dumps costs a few
files, not one per artifact. From schema 3 on every blob is kept zstandard-compressed,
in the index and in files alike; a blob is still named by the SHA-256 of its uncompressed
bytes, and readers only ever see those bytes. Runs of older schemas are read as they are
and written as their schema says. Nothing stored is ever executed: blobs are bytes, the
index is SQLite, metadata is JSON.

A run may come from anywhere, so reading one trusts nothing in it: a blob is named by 64 hex
digits and read only from a regular file under blobs/ (never through a link, never a FIFO or
device), in bounded size; index rows of the wrong type or with damaged JSON are read as
empty values; a run the user cannot write is opened read-only.
"""

from __future__ import annotations

import datetime as _dt
import errno
import functools
import hashlib
import itertools
import json
import os
import re
import sqlite3
import stat
import tempfile
import threading
import urllib.parse
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from irscope.errors import RunError

if TYPE_CHECKING:
    from irscope.parsers.base import ParseResult

# 3: blobs compressed; 2: small blobs inside the index (blob_data); 1: every blob a file
SCHEMA_VERSION = 3
INLINE_FROM_SCHEMA = 2
COMPRESSED_FROM_SCHEMA = 3
INLINE_MAX = 256 * 1024  # bytes before compression
ZSTD_LEVEL = 6  # about 170 MB/s on IR text, a tenth of the size; level 9 saves 3% at half speed
RUN_JSON, INDEX, BLOBS = "run.json", "index.sqlite", "blobs"
DEFAULT_ROOT = Path(".irscope") / "runs"
WRITE_WAIT_S = 900  # how long a writer waits for another process's ingest to finish
READ_WAIT_MS = 60_000  # statements outside a transaction wait this long for a lock
ROLLUPS_KEPT = 4  # roll-ups kept per run (reports of other filters, of another irscope)
CACHE_WAIT_MS = 200  # caching parsed figures is optional: never stall a reader for it
MAX_BLOB_BYTES = 1 << 30  # larger blobs, stored or uncompressed, are refused as damage
# A blob's name: the SHA-256 of its bytes, "3f5a...e1" (64 lower-case hex digits).
BLOB_NAME = re.compile(r"[0-9a-f]{64}")
_NUMBER = (int, float)
# Every attribute a writer gives units and relations, with its type: a value of another type
# (a damaged or crafted index) is left out when the unit is read, as if the run had not
# recorded it. tests/test_hostile_attrs.py fails on a writer's attribute missing here.
ATTR_TYPES: dict[str, type | tuple[type, ...]] = {
    **dict.fromkeys(("output_codes", "compile_times", "metadata", "config", "resources", "ptxas",
                     "target", "signature", "constexprs", "figures", "executors"), dict),
    **dict.fromkeys(("rank", "num_warps", "num_stages", "num_ctas", "guard_count",
                     "graph_op_count", "graph_node_count", "xla_module", "shared", "order",
                     "error_line", "compile"), int),
    **dict.fromkeys(("hash", "origin", "compile_id", "called_from", "called_by", "group",
                     "kernel", "status", "xla_dump", "ttir_error", "error", "error_file",
                     "error_source", "pass_dump", "role", "output_code", "via", "region",
                     "executor", "thunder"), str),
    **dict.fromkeys(("eager_op", "autotune_best", "cache_hit", "valid", "interpret"), bool),
    **dict.fromkeys(("compile_seconds", "lowering_seconds", "compile_time_us"), _NUMBER),
    **dict.fromkeys(("problems", "warnings", "autotune_candidates", "ranks", "regions", "grid"),
                    list),
    "arch": (int, str),
}
# Mappings whose values readers compute with: every value must be of this type.
ATTR_VALUE_TYPES: dict[str, type | tuple[type, ...]] = {"compile_times": _NUMBER,
                                                        "output_codes": str}
# What a run directory may hold; "staging" is the collection folder of a run being captured.
_RUN_ENTRIES = {RUN_JSON, INDEX, BLOBS, "staging", INDEX + "-wal", INDEX + "-shm",
                INDEX + "-journal"}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS units (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    framework TEXT NOT NULL,
    source_file TEXT,
    source_line INTEGER,
    attrs TEXT NOT NULL DEFAULT '{}',
    UNIQUE (framework, name)
);
CREATE TABLE IF NOT EXISTS stages (
    id INTEGER PRIMARY KEY,
    unit_id INTEGER NOT NULL REFERENCES units(id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    position INTEGER NOT NULL,
    blob TEXT NOT NULL,
    size INTEGER NOT NULL,
    origin TEXT,
    UNIQUE (unit_id, kind, name)
);
CREATE TABLE IF NOT EXISTS relations (
    src INTEGER NOT NULL REFERENCES units(id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    dst INTEGER NOT NULL REFERENCES units(id) ON DELETE CASCADE,
    attrs TEXT NOT NULL DEFAULT '{}',
    UNIQUE (src, kind, dst)
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY,
    unit_id INTEGER REFERENCES units(id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    data TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS stats (
    blob TEXT NOT NULL,
    kind TEXT NOT NULL,
    version INTEGER NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (blob, kind, version)
);
CREATE TABLE IF NOT EXISTS blob_data (
    blob TEXT PRIMARY KEY,
    data BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS stages_unit ON stages(unit_id);
CREATE INDEX IF NOT EXISTS stages_blob ON stages(blob);
CREATE INDEX IF NOT EXISTS events_unit ON events(unit_id, kind);
"""
# Every change to what a run holds bumps meta's "generation" (whoever makes it: an older
# irscope, the sqlite3 shell), so a roll-up kept at one generation is never read at another.
GENERATION_TRIGGERS = tuple(f"count_{table}_{change.lower()}"
                            for table in ("units", "stages", "relations", "events")
                            for change in ("INSERT", "UPDATE", "DELETE"))
_COUNT_CHANGES = ";\n".join(
    ["CREATE TABLE IF NOT EXISTS rollups (key TEXT PRIMARY KEY, generation INTEGER NOT NULL, "
     "data BLOB NOT NULL)",
     "INSERT OR IGNORE INTO meta VALUES ('generation', '0')"]
    + [f"CREATE TRIGGER IF NOT EXISTS {name} AFTER {name.rsplit('_', 1)[1].upper()} ON "
       f"{name.split('_')[1]} BEGIN UPDATE meta SET value = CAST(value AS INTEGER) + 1 "
       f"WHERE key = 'generation'; END" for name in GENERATION_TRIGGERS])


@dataclass(frozen=True)
class Unit:
    """A compiled thing: a Dynamo graph, a jitted JAX function, a Triton kernel."""

    id: int
    name: str
    framework: str
    source_file: str | None = None
    source_line: int | None = None
    attrs: dict[str, Any] = field(default_factory=dict)


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


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def _optional_text(value: Any) -> str | None:
    return None if value is None else _text(value)


def _integer(value: Any, default: int | None = None) -> int | None:
    """An index cell as an int; a crafted or damaged cell of another type gives ``default``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return default


def _unit(row) -> Unit:
    return Unit(_integer(row[0], 0), _text(row[1]), _text(row[2]), _optional_text(row[3]),
                _integer(row[4]), _attrs(row[5]))


def _attrs(text: Any) -> dict[str, Any]:
    """A unit's or relation's attributes, without values of a type no writer gives them."""
    attrs = _json_object(text)
    for key, expected in ATTR_TYPES.items():
        value = attrs.get(key)
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
_STAGE_ROW = (int, int, str, str, int, str, int)
_STAGE_ROWS = frozenset({(*_STAGE_ROW, str), (*_STAGE_ROW, type(None))})


def _stage(row) -> Stage:
    if tuple(map(type, row)) in _STAGE_ROWS:
        return Stage(*row)
    return Stage(_integer(row[0], 0), _integer(row[1], 0), _text(row[2]), _text(row[3]),
                 _integer(row[4], 0), _text(row[5]), _integer(row[6], 0), _optional_text(row[7]))


def default_run_dir(name: str = "run", root: Path | None = None) -> Path:
    """A fresh directory name ``<root>/<timestamp>-<name>`` (root: ./.irscope/runs)."""
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "run"
    base = (root or DEFAULT_ROOT) / f"{stamp}-{safe}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class BlobRef:
    """A blob already in the store: its SHA-256 and size (stages can point at it directly)."""

    blob: str
    size: int


def _zstandard():
    """The zstandard module, needed only for runs of schema 3 and later."""
    try:
        import zstandard
    except ImportError:
        raise RunError("compressed runs need the zstandard package "
                       "(pip install zstandard)") from None
    return zstandard


def compress(data: bytes) -> bytes:
    """One zstandard frame holding ``data`` (its size recorded in the frame header)."""
    return _zstandard().ZstdCompressor(level=ZSTD_LEVEL).compress(data)


def decompress(data: bytes) -> bytes:
    """The bytes of one zstandard frame, whether or not its header records their size."""
    return _zstandard().ZstdDecompressor().decompressobj().decompress(data)


class BlobSink:
    """Streams bytes into the store, hashing as it goes, so large artifacts never sit in memory.

    Bytes are held in memory up to the run's inline limit and spill to a temporary file
    beyond it (compressed on the way in a compressed run), so a small artifact never costs
    a file.
    """

    def __init__(self, run: "Run"):
        self._run = run
        self._hash = hashlib.sha256()
        self._size = 0
        self._head = bytearray()
        self._fh = None  # the temporary file, or a zstandard writer into it
        self._tmp = ""

    def write(self, data: bytes) -> None:
        self._hash.update(data)
        self._size += len(data)
        if self._fh is not None:
            self._fh.write(data)
            return
        self._head += data
        if len(self._head) > self._run.inline_max:
            fd, self._tmp = tempfile.mkstemp(dir=self._run.path / BLOBS, prefix=".tmp-")
            self._fh = os.fdopen(fd, "wb")
            if self._run.compressed:
                writer = _zstandard().ZstdCompressor(level=ZSTD_LEVEL)
                self._fh = writer.stream_writer(self._fh, closefd=True)
            self._fh.write(self._head)
            self._head = bytearray()

    def close(self) -> BlobRef:
        """Finish the blob and file it under its digest (dropping the copy if already stored)."""
        key = self._hash.hexdigest()
        if self._fh is None:
            self._run._store(key, bytes(self._head))
            return BlobRef(key, self._size)
        self._fh.close()
        target = self._run.blob_path(key)
        if target.exists():
            os.unlink(self._tmp)
        else:
            target.parent.mkdir(exist_ok=True)
            os.replace(self._tmp, target)
        return BlobRef(key, self._size)

    def discard(self) -> None:
        if self._fh is not None:
            self._fh.close()
        if self._tmp and os.path.exists(self._tmp):
            os.unlink(self._tmp)


class Run:
    """An open run directory. Reads are plain; writes go through ``transaction()``."""

    def __init__(self, path: Path, db: sqlite3.Connection, meta: dict[str, Any],
                 schema: int = SCHEMA_VERSION, writable: bool = True):
        self.path = path
        self.db = db
        self.meta = meta
        self.schema = schema
        self.writable = writable  # False: opened read-only (the user may not write the run)
        # Blobs up to this size go into the index; -1 (every blob a file) for schema-1 runs.
        self.inline_max = INLINE_MAX if schema >= INLINE_FROM_SCHEMA else -1
        self.compressed = schema >= COMPRESSED_FROM_SCHEMA
        self._blob_root = os.path.join(path, BLOBS)
        self._blob_table = True  # until a look-up finds no blob_data table
        self._stored: set[str] = set()  # digests known to be on disk, to skip a stat each

    # -- opening -------------------------------------------------------------------
    @classmethod
    def create(cls, path: str | os.PathLike, meta: dict[str, Any] | None = None) -> "Run":
        """Create the run at ``path`` (or open it if it already is one) and record ``meta``."""
        path = Path(path)
        fresh = not (path / INDEX).exists()
        if fresh and path.exists() and not path.is_dir():
            raise RunError(f"{path}: exists and is not a directory")
        if fresh and path.exists() and set(os.listdir(path)) - _RUN_ENTRIES:
            raise RunError(f"{path}: exists and is not an irscope run")
        (path / BLOBS).mkdir(parents=True, exist_ok=True)
        try:
            db = _connect(path / INDEX, wal=fresh)
            # One idempotent script in one transaction: a concurrent creator waits for it.
            db.executescript(f"BEGIN IMMEDIATE; {_SCHEMA} {_COUNT_CHANGES}; INSERT OR IGNORE "
                             f"INTO meta VALUES ('schema_version', '{SCHEMA_VERSION}'); COMMIT;")
            db.close()
        except sqlite3.DatabaseError as exc:
            raise RunError(f"{path / INDEX}: cannot write the index ({exc})") from None
        run = cls.open(path)
        if not fresh:
            if meta:
                run.update_meta(meta)
            return run
        run.update_meta({"irscope_run": SCHEMA_VERSION, **(meta or {})})
        return run

    @classmethod
    def open(cls, path: str | os.PathLike, read_only: bool = False) -> "Run":
        """Open an existing run; refuses missing, damaged and newer-schema runs clearly.

        A run the user cannot write (a shared folder, a read-only mount) is opened read-only,
        as is any with ``read_only``: reading never needs write access.
        """
        path = Path(path)
        if not path.exists():
            raise RunError(f"{path}: no such run")
        index = path / INDEX
        if not index.is_file():
            raise RunError(f"{path}: not an irscope run (no {INDEX})")
        if not os.access(index, os.R_OK):
            raise RunError(f"{index}: permission denied: the run cannot be read")
        writable = not read_only and os.access(index, os.W_OK) and os.access(path, os.W_OK)
        db, row, problem = None, None, None
        modes = ("rw", "ro", "immutable") if writable else (
            ("immutable",) if _wal_at_rest(index) else ("ro", "immutable"))
        for mode in modes:
            try:
                db = _connect(index, mode=mode)
                row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
                break
            except sqlite3.OperationalError as exc:  # cannot open or lock it this way
                problem = problem or exc
                writable = False
                if db is not None:
                    db.close()
                    db = None
            except sqlite3.DatabaseError as exc:
                if db is not None:
                    db.close()
                raise RunError(f"{index}: damaged index ({exc})") from None
        if db is None:
            raise RunError(f"{index}: cannot open the index ({problem})")
        version = _integer(row[0], 0) if row else 0
        if version > SCHEMA_VERSION:
            raise RunError(f"{path}: made by a newer irscope (run schema {version}, this "
                           f"irscope reads up to {SCHEMA_VERSION}); upgrade irscope")
        if version < 1:
            raise RunError(f"{path / INDEX}: damaged index (no schema version)")
        return cls(path, db, _read_meta(path), version, writable)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "Run":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- metadata ------------------------------------------------------------------
    def update_meta(self, changes: dict[str, Any]) -> None:
        """Merge ``changes`` into run.json (as another writer may have left it), atomically."""
        merged = {**self.meta, **_read_meta(self.path), **changes}
        self.meta = {k: v for k, v in merged.items() if k != "damaged" or "damaged" in changes}
        _atomic_write(self.path / RUN_JSON, json.dumps(self.meta, indent=2, default=str).encode())

    @property
    def name(self) -> str:
        return self.meta.get("name") or self.path.name

    # -- blobs ---------------------------------------------------------------------
    def blob_path(self, blob: str) -> Path:
        """Where a large blob's file is (its bytes compressed in a compressed run)."""
        return self.path / BLOBS / _checked_name(blob, self.path)[:2] / blob

    def put_blob(self, data: bytes) -> str:
        """Store ``data`` once by its SHA-256; returns the digest."""
        key = digest(data)
        self._store(key, data)
        return key

    def _store(self, key: str, data: bytes) -> None:
        """Keep ``data`` under ``key``: in the index when small (within the caller's
        transaction, so a rollback takes it too), else as a file written atomically;
        compressed in a compressed run. A blob already kept is not compressed again."""
        if len(data) <= self.inline_max:
            if self.compressed:
                if self.db.execute("SELECT 1 FROM blob_data WHERE blob=?", (key,)).fetchone():
                    return
                data = compress(data)
            self.db.execute("INSERT OR IGNORE INTO blob_data (blob, data) VALUES (?, ?)",
                            (key, data))
            return
        if key in self._stored:
            return
        folder = os.path.join(self._blob_root, key[:2])
        target = os.path.join(folder, key)
        if not os.path.exists(target):
            os.makedirs(folder, exist_ok=True)
            _atomic_write(Path(target), compress(data) if self.compressed else data)
        self._stored.add(key)

    def put_blob_file(self, source: str | os.PathLike, chunk: int = 1 << 20) -> BlobRef:
        """Store a file's bytes by streaming them (memory stays flat for large files)."""
        sink = BlobSink(self)
        try:
            with open(source, "rb") as fh:
                while block := fh.read(chunk):
                    sink.write(block)
        except BaseException:
            sink.discard()
            raise
        return sink.close()

    def blob_sink(self) -> BlobSink:
        """A streaming blob writer: ``write()`` pieces, then ``close()`` for its BlobRef."""
        return BlobSink(self)

    def read_blob(self, blob: str) -> bytes:
        """The blob's bytes as they were stored (uncompressed), from the index or its file.

        Only a blob named by its digest, kept in the index or in a regular file under blobs/
        of at most MAX_BLOB_BYTES, is read: anything else is a RunError naming the damage.
        """
        _checked_name(blob, self.path)
        data = None
        if self._blob_table:
            try:
                row = self.db.execute("SELECT data FROM blob_data WHERE blob=?",
                                      (blob,)).fetchone()
            except sqlite3.OperationalError:  # a schema-1 index: every blob is a file
                self._blob_table, row = False, None
            if row is not None:
                data = row[0]
        if data is None:
            data = _read_blob_file(self.path, blob)
        if not isinstance(data, (bytes, memoryview)):
            raise RunError(f"{self.path}: blob {blob[:12]} is damaged (the index holds "
                           f"{type(data).__name__}, not bytes)")
        if not self.compressed:
            return bytes(data)
        try:
            return _bounded_decompress(data)
        except _zstandard().ZstdError as exc:
            raise RunError(f"{self.path}: blob {blob[:12]} is damaged ({exc})") from None
        except _TooLarge:
            raise RunError(f"{self.path}: blob {blob[:12]} is damaged (more than "
                           f"{MAX_BLOB_BYTES >> 20} MiB once uncompressed)") from None

    def blob_chunks(self, blob: str, size: int = 1 << 20) -> Iterator[bytes]:
        """The blob's bytes (uncompressed) in pieces of about ``size``: a large blob is never
        all in memory at once. The same checks as ``read_blob``."""
        _checked_name(blob, self.path)
        if self._blob_table:
            try:
                inline = self.db.execute("SELECT 1 FROM blob_data WHERE blob=?",
                                         (blob,)).fetchone()
            except sqlite3.OperationalError:
                inline = None
            if inline:
                yield self.read_blob(blob)  # at most the inline limit
                return
        with os.fdopen(_open_blob_file(self.path, blob), "rb") as fh:
            source = _zstandard().ZstdDecompressor().stream_reader(fh) if self.compressed else fh
            total = 0
            try:
                while piece := source.read(size):
                    total += len(piece)
                    if total > MAX_BLOB_BYTES:
                        raise RunError(f"{self.path}: blob {blob[:12]} is damaged (more than "
                                       f"{MAX_BLOB_BYTES >> 20} MiB once uncompressed)")
                    yield piece
            except _zstandard().ZstdError as exc:
                raise RunError(f"{self.path}: blob {blob[:12]} is damaged ({exc})") from None

    def read_text(self, stage: Stage) -> str:
        return self.read_blob(stage.blob).decode("utf-8", errors="replace")

    # -- writing -------------------------------------------------------------------
    @property
    def read_only(self) -> bool:
        """A run whose run.json says ``"read_only": true`` (a committed sample), or one opened
        read-only, is never written."""
        return bool(self.meta.get("read_only")) or not self.writable

    @contextmanager
    def transaction(self) -> Iterator["Writer"]:
        """All-or-nothing writes; other processes wait (SQLite's lock) rather than corrupt."""
        if not self.writable:
            raise RunError(f"{self.path}: cannot write to this run (no write access); copy it "
                           f"to add to it")
        if self.read_only:
            raise RunError(f"{self.path}: a read-only run (see its run.json); copy it to add to it")
        try:
            self.db.execute(f"PRAGMA busy_timeout = {WRITE_WAIT_S * 1000}")
            self.db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise RunError(f"{self.path}: cannot write ({exc}); another irscope may be "
                           f"writing to this run") from None
        finally:
            self.db.execute(f"PRAGMA busy_timeout = {READ_WAIT_MS}")
        try:
            yield Writer(self)
        except BaseException:
            self.db.rollback()
            raise
        else:
            self.db.commit()

    # -- reading -------------------------------------------------------------------
    def units(self, framework: str | None = None) -> list[Unit]:
        sql = "SELECT id, name, framework, source_file, source_line, attrs FROM units"
        rows = self.db.execute(sql + (" WHERE framework=?" if framework else "") + " ORDER BY id",
                               (framework,) if framework else ())
        return [_unit(r) for r in rows]

    def unit(self, key: str | int) -> Unit:
        """A unit by id, exact name, or unique name prefix/substring."""
        return pick_unit(self.units(), key, self.path)

    def counts(self) -> tuple[int, int]:
        """How many units and stages the run holds."""
        try:
            units = self.db.execute("SELECT count(*) FROM units").fetchone()[0]
            stages = self.db.execute("SELECT count(*) FROM stages").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise RunError(f"{self.path / INDEX}: damaged index ({exc})") from None
        return units, stages

    def unit_named(self, framework: str, name: str) -> Unit | None:
        """The unit of ``framework`` called exactly ``name``, if any."""
        row = self.db.execute("SELECT id, name, framework, source_file, source_line, attrs "
                              "FROM units WHERE framework=? AND name=?", (framework, name)
                              ).fetchone()
        return _unit(row) if row else None

    def unit_by_id(self, unit_id: int) -> Unit:
        row = self.db.execute("SELECT id, name, framework, source_file, source_line, attrs "
                              "FROM units WHERE id=?", (unit_id,)).fetchone()
        if row is None:
            raise RunError(f"{self.path}: no unit {unit_id}")
        return _unit(row)

    def stages(self, unit_id: int | None = None, kinds: Iterable[str] | None = None
               ) -> list[Stage]:
        """The stages of the run (or of one unit), only those of ``kinds`` when given."""
        sql = "SELECT id, unit_id, kind, name, position, blob, size, origin FROM stages"
        where, args = [], []
        if unit_id is not None:
            where.append("unit_id=?")
            args.append(unit_id)
        if kinds is not None:
            kinds = sorted(set(kinds))
            where.append(f"kind IN ({', '.join('?' * len(kinds))})")
            args += kinds
        order = " ORDER BY unit_id, position, id" if unit_id is None else " ORDER BY position, id"
        rows = self.db.execute(sql + (" WHERE " + " AND ".join(where) if where else "") + order,
                               args)
        return [_stage(r) for r in rows]

    def stage_outlines(self) -> dict[int, list[tuple[str, str, int]]]:
        """Unit id -> (kind, name, size) of each of its stages in order: what a listing of
        every stage shows, without building a Stage per row (a run may hold 500,000)."""
        outlines: dict[int, list[tuple[str, str, int]]] = {}
        for unit_id, kind, name, size in self.db.execute(
                "SELECT unit_id, kind, name, size FROM stages ORDER BY unit_id, position, id"):
            outlines.setdefault(_integer(unit_id, 0), []).append(
                (_text(kind), _text(name), _integer(size, 0)))
        return outlines

    def stage(self, unit: Unit, key: str) -> Stage:
        """A unit's stage by kind or name (first of that kind when several)."""
        return pick_stage(self.stages(unit.id), unit, key)

    def units_holding(self, kind: str, blob: str, framework: str | None = None) -> list[int]:
        """Ids of the units (of ``framework``) with a stage of ``kind`` whose content is ``blob``."""
        sql = ("SELECT DISTINCT units.id FROM stages JOIN units ON units.id = stages.unit_id "
               "WHERE stages.kind=? AND stages.blob=?")
        args: tuple = (kind, blob)
        if framework:
            sql, args = sql + " AND units.framework=?", args + (framework,)
        return [row[0] for row in self.db.execute(sql + " ORDER BY units.id", args)]

    def units_where(self, framework: str, attr: str, value: Any) -> list[Unit]:
        """The units of ``framework`` whose attribute ``attr`` equals ``value``."""
        rows = self.db.execute(
            "SELECT id, name, framework, source_file, source_line, attrs FROM units "
            "WHERE framework=? AND json_extract(attrs, '$.' || ?) = ? ORDER BY id",
            (framework, attr, value))
        return [_unit(r) for r in rows]

    def units_with_key(self, framework: str, attr: str, key: str) -> list[int]:
        """Ids of the units of ``framework`` whose mapping attribute ``attr`` has ``key``."""
        rows = self.db.execute(
            "SELECT id FROM units WHERE framework=? AND json_type(attrs, ?) IS NOT NULL "
            "ORDER BY id", (framework, f'$.{attr}."{key}"'))
        return [row[0] for row in rows]

    def units_from_file(self, framework: str, source_file: str) -> list[Unit]:
        """The units of ``framework`` compiled from ``source_file`` (e.g. an Inductor kernel path)."""
        return [u for u in self.units(framework) if u.source_file == source_file]

    def relations(self, kind: str | None = None) -> list[Relation]:
        sql = "SELECT src, kind, dst, attrs FROM relations"
        rows = self.db.execute(sql + (" WHERE kind=?" if kind else ""), (kind,) if kind else ())
        return [Relation(_integer(r[0], 0), _text(r[1]), _integer(r[2], 0), _attrs(r[3]))
                for r in rows]

    def events(self, kind: str | None = None) -> list[Event]:
        sql = "SELECT id, unit_id, kind, data FROM events"
        rows = self.db.execute(sql + (" WHERE kind=?" if kind else "") + " ORDER BY id",
                               (kind,) if kind else ())
        return [Event(_integer(r[0], 0), _integer(r[1]), _text(r[2]), _json_object(r[3]))
                for r in rows]

    # -- roll-ups, cached until the next change --------------------------------------
    def generation(self) -> int | None:
        """How many changes to units, stages, relations and events the index has counted;
        None when it does not count them (a run of an older irscope, a damaged index):
        nothing kept with ``keep_rollup`` is then trusted."""
        try:
            triggers = self.db.execute(
                f"SELECT count(*) FROM sqlite_master WHERE type='trigger' AND name IN "
                f"({', '.join('?' * len(GENERATION_TRIGGERS))})",
                GENERATION_TRIGGERS).fetchone()[0]
            row = self.db.execute("SELECT value FROM meta WHERE key='generation'").fetchone()
        except sqlite3.DatabaseError:
            return None
        if triggers != len(GENERATION_TRIGGERS) or row is None:
            return None
        return _integer(row[0])

    def rollup(self, key: str, generation: int | None) -> bytes | None:
        """What ``keep_rollup`` kept under ``key`` at ``generation`` (the current one, as
        ``generation()`` gave it), or None."""
        if generation is None or not self.compressed:
            return None
        try:
            row = self.db.execute("SELECT data FROM rollups WHERE key=? AND generation=?",
                                  (key, generation)).fetchone()
            return _bounded_decompress(row[0]) if row and isinstance(row[0], bytes) else None
        except (sqlite3.DatabaseError, _TooLarge, _zstandard().ZstdError):
            return None

    def keep_rollup(self, key: str, generation: int | None, data: bytes) -> None:
        """Keep ``data``, computed from the run as it was at ``generation``, under ``key``;
        only if nothing changed since (else, or when the run cannot be written, nothing is
        kept). A run that does not count its changes starts counting here, and keeps its
        first roll-up next time. Runs of schemas before compression keep none."""
        if self.read_only or self.db.in_transaction or not self.compressed:
            return
        try:
            self.db.execute(f"PRAGMA busy_timeout = {CACHE_WAIT_MS}")
            self.db.execute("BEGIN IMMEDIATE")
            try:
                if generation is None or self.generation() != generation:
                    for statement in _COUNT_CHANGES.split(";\n"):
                        self.db.execute(statement)
                else:
                    self.db.execute("DELETE FROM rollups WHERE key=? OR generation!=?",
                                    (key, generation))
                    self.db.execute("INSERT INTO rollups VALUES (?, ?, ?)",
                                    (key, generation, compress(data)))
                    self.db.execute("DELETE FROM rollups WHERE rowid NOT IN (SELECT rowid "
                                    f"FROM rollups ORDER BY rowid DESC LIMIT {ROLLUPS_KEPT})")
            except BaseException:
                self.db.rollback()
                raise
            self.db.commit()
        except sqlite3.DatabaseError:
            pass  # read-only, busy or damaged: the next report computes it again
        finally:
            self.db.execute(f"PRAGMA busy_timeout = {READ_WAIT_MS}")

    # -- parsed statistics, cached ---------------------------------------------------
    def parsed(self, stage: Stage) -> ParseResult:
        """The parser's frozen result for a stage, rebuilt from the cache when the blob was
        parsed before (the cache holds ``to_jsonable(result)``, every field)."""
        # the parsers load on the first parse: `irscope --help` opens no run and needs none
        from irscope.parsers import registry
        from irscope.parsers.base import to_jsonable

        version = registry.parser_version(stage.kind)
        row = self.db.execute("SELECT data FROM stats WHERE blob=? AND kind=? AND version=?",
                              (stage.blob, stage.kind, version)).fetchone()
        cached = _json_object(row[0]) if row else None
        if cached:
            return registry.from_json(stage.kind, cached)
        result = registry.parse(stage.kind, self.read_text(stage))
        if self.read_only:
            return result
        row = (stage.blob, stage.kind, version, json.dumps(to_jsonable(result)))
        if self.db.in_transaction:  # inside a writer's transaction: cached with its writes
            self.db.execute("INSERT OR REPLACE INTO stats VALUES (?, ?, ?, ?)", row)
            return result
        try:
            self.db.execute(f"PRAGMA busy_timeout = {CACHE_WAIT_MS}")
            self.db.execute("INSERT OR REPLACE INTO stats VALUES (?, ?, ?, ?)", row)
        except sqlite3.OperationalError:
            pass  # read-only or busy run: the figures are still right, just not cached
        finally:
            self.db.execute(f"PRAGMA busy_timeout = {READ_WAIT_MS}")
        return result


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
    names = ", ".join(u.name for u in matches[:5])
    raise RunError(f"{where}: {key!r} matches {len(matches)} units ({names}, ...)")


def pick_stage(stages: list[Stage], unit: Unit, key: str) -> Stage:
    """The stage of ``stages`` (a unit's) named ``key``, else the first of that kind."""
    for s in stages:
        if s.name == key:
            return s
    for s in stages:
        if s.kind == key:
            return s
    have = ", ".join(s.name for s in stages) or "none"
    raise RunError(f"unit {unit.name!r} has no stage {key!r} (it has: {have})")


class Writer:
    """Write handle inside a transaction: units, stages, relations, events.

    With ``keep_all`` (an ingest sets it) a stage never replaces one of the same kind and
    name holding other bytes: the newcomer is filed as ``name (2)``, ``name (3)``...
    """

    def __init__(self, run: Run):
        self.run = run
        self.db = run.db
        self.keep_all = False

    def collect_orphans(self, keep: Iterable[str] = ()) -> int:
        """Delete what a killed writer left under blobs/: blob files no stage names and
        temporary files. Safe only here, inside a transaction: no other writer is filing.
        ``keep``: blobs stored ahead of the stages that will name them (spared). Returns how
        many files went."""
        root = self.run.path / BLOBS
        if not root.is_dir() or root.is_symlink():
            return 0
        named = {row[0] for row in self.db.execute("SELECT DISTINCT blob FROM stages")}
        named.update(keep)
        removed = 0
        for top in os.scandir(root):
            if top.name.startswith(".tmp-") and top.is_file(follow_symlinks=False):
                removed += _unlink(top.path)
            if len(top.name) != 2 or not top.is_dir(follow_symlinks=False):
                continue
            for entry in os.scandir(top.path):
                stray = entry.name.startswith(".tmp-") or (
                    BLOB_NAME.fullmatch(entry.name) is not None and entry.name not in named)
                if stray and not entry.is_dir(follow_symlinks=False):
                    removed += _unlink(entry.path)
        for entry in os.scandir(self.run.path):
            if entry.name.startswith(".tmp-") and entry.is_file(follow_symlinks=False):
                removed += _unlink(entry.path)
        self.run._stored.clear()
        return removed

    def add_unit(self, name: str, framework: str, source_file: str | None = None,
                 source_line: int | None = None, attrs: dict[str, Any] | None = None) -> int:
        """Insert the unit or merge into the existing one of that framework and name."""
        row = self.db.execute("SELECT id, attrs, source_file, source_line FROM units "
                              "WHERE framework=? AND name=?", (framework, name)).fetchone()
        if row:
            merged = {**json.loads(row[1]), **(attrs or {})}
            self.db.execute("UPDATE units SET attrs=?, source_file=?, source_line=? WHERE id=?",
                            (json.dumps(merged, default=str), source_file or row[2],
                             source_line or row[3], row[0]))
            return row[0]
        cur = self.db.execute(
            "INSERT INTO units (name, framework, source_file, source_line, attrs) "
            "VALUES (?, ?, ?, ?, ?)",
            (name, framework, source_file, source_line, json.dumps(attrs or {}, default=str)))
        return cur.lastrowid

    def rename_unit(self, unit_id: int, name: str) -> None:
        """Give the unit another name (unique within its framework, like every name)."""
        self.db.execute("UPDATE units SET name=? WHERE id=?", (name, unit_id))

    def update_attrs(self, unit_id: int, attrs: dict[str, Any]) -> None:
        """Merge ``attrs`` into the unit's attributes."""
        unit = self.run.unit_by_id(unit_id)
        self.add_unit(unit.name, unit.framework, attrs=attrs)

    def add_stage(self, unit_id: int, kind: str, data: bytes | str | BlobRef,
                  name: str | None = None, origin: str | None = None) -> int:
        """Attach ``data`` (bytes, text, or a blob already stored) to the unit as a stage.

        A stage of the same kind and name on that unit is replaced.
        """
        from irscope.parsers import registry

        if isinstance(data, BlobRef):
            blob, size = data.blob, data.size
        else:
            if isinstance(data, str):
                data = data.encode("utf-8")
            blob, size = self.run.put_blob(data), len(data)
        name = name or kind
        if self.keep_all:
            name = self._free_name(unit_id, kind, name, blob)
        cur = self.db.execute(
            "INSERT INTO stages (unit_id, kind, name, position, blob, size, origin) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (unit_id, kind, name) DO UPDATE SET "
            "blob=excluded.blob, size=excluded.size, origin=excluded.origin",
            (unit_id, kind, name, registry.get(kind).order, blob, size, origin))
        return cur.lastrowid

    def _free_name(self, unit_id: int, kind: str, name: str, blob: str) -> str:
        """``name``, or the first ``name (n)`` that holds nothing or these very bytes."""
        candidate, n = name, 1
        while True:
            row = self.db.execute("SELECT blob FROM stages WHERE unit_id=? AND kind=? AND name=?",
                                  (unit_id, kind, candidate)).fetchone()
            if row is None or row[0] == blob:
                return candidate
            n += 1
            candidate = f"{name} ({n})"

    def add_relation(self, src: int, kind: str, dst: int, attrs: dict[str, Any] | None = None):
        """Link two units (kept once per source, kind and destination)."""
        self.db.execute("INSERT OR IGNORE INTO relations VALUES (?, ?, ?, ?)",
                        (src, kind, dst, json.dumps(attrs or {}, default=str)))

    def add_event(self, kind: str, data: dict[str, Any], unit_id: int | None = None) -> None:
        """Record an event once per unit. Events with a reason are the same event when their
        reasons are (spacing aside): a second source adds only what it knows more (a line)."""
        if isinstance(data.get("reason"), str):
            data = {**data, "reason": " ".join(data["reason"].split())}
            for event_id, old_text in self.db.execute(
                    "SELECT id, data FROM events WHERE unit_id IS ? AND kind=?", (unit_id, kind)):
                old = _json_object(old_text)
                if " ".join(str(old.get("reason", "")).split()) == data["reason"]:
                    merged = json.dumps({**data, **old, "reason": data["reason"]}, default=str,
                                        sort_keys=True)
                    self.db.execute("UPDATE events SET data=? WHERE id=?", (merged, event_id))
                    return
        text = json.dumps(data, default=str, sort_keys=True)
        self.db.execute("INSERT INTO events (unit_id, kind, data) SELECT ?, ?, ? WHERE NOT EXISTS "
                        "(SELECT 1 FROM events WHERE unit_id IS ? AND kind=? AND data=?)",
                        (unit_id, kind, text, unit_id, kind, text))


def _json_object(text: Any) -> dict[str, Any]:
    """A stored JSON object, or {} when the index holds something else (damage, a crafted row)."""
    try:
        value = json.loads(text)
    except (TypeError, ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


class _TooLarge(Exception):
    """A blob past MAX_BLOB_BYTES."""


def _checked_name(blob: Any, run_path: Path) -> str:
    """``blob`` when it is a digest; a name like ``../../x`` or ``/etc/passwd`` is damage."""
    if not isinstance(blob, str) or not BLOB_NAME.fullmatch(blob):
        shown = repr(blob)[:40]
        raise RunError(f"{run_path}: damaged index: a stage names blob {shown}, which is not "
                       f"a SHA-256 digest")
    return blob


def _open_blob_file(run_path: Path, blob: str) -> int:
    """A descriptor of blobs/<ab>/<digest>, opened without following a link at any step and
    only when it is a regular file (a FIFO would block, a device never end) of at most
    MAX_BLOB_BYTES."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    opened: list[int] = []
    try:
        folder = os.open(os.path.join(run_path, BLOBS), flags | os.O_DIRECTORY)
        opened.append(folder)
        sub = os.open(blob[:2], flags | os.O_DIRECTORY, dir_fd=folder)
        opened.append(sub)
        fd = os.open(blob, flags | os.O_NONBLOCK, dir_fd=sub)
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_BLOB_BYTES:
            os.close(fd)
            if not stat.S_ISREG(info.st_mode):
                raise RunError(f"{run_path}: blob {blob[:12]} is not a regular file: refused")
            raise RunError(f"{run_path}: blob {blob[:12]} is damaged ({info.st_size:,} bytes, "
                           f"more than {MAX_BLOB_BYTES >> 20} MiB)")
        return fd
    except FileNotFoundError:
        raise RunError(f"{run_path}: blob {blob[:12]} is missing") from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise RunError(f"{run_path}: blob {blob[:12]} is reached through a symbolic link "
                           f"or is not a file: refused") from None
        raise RunError(f"{run_path}: blob {blob[:12]} cannot be read "
                       f"({exc.strerror or exc})") from None
    finally:
        for fd in reversed(opened):
            os.close(fd)


def _read_blob_file(run_path: Path, blob: str) -> bytes:
    """The stored bytes of a blob's file (see ``_open_blob_file``), up to MAX_BLOB_BYTES."""
    fd = _open_blob_file(run_path, blob)
    try:
        chunks, size = [], 0
        while chunk := os.read(fd, min(1 << 20, MAX_BLOB_BYTES + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_BLOB_BYTES:
                raise RunError(f"{run_path}: blob {blob[:12]} is damaged (grew past "
                               f"{MAX_BLOB_BYTES >> 20} MiB while read)")
        return b"".join(chunks)
    except OSError as exc:
        raise RunError(f"{run_path}: blob {blob[:12]} cannot be read "
                       f"({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def _bounded_decompress(data: bytes) -> bytes:
    """The bytes of one zstandard frame, never more than MAX_BLOB_BYTES of them."""
    reader = _zstandard().ZstdDecompressor().stream_reader(bytes(data), read_across_frames=False)
    out = reader.read(MAX_BLOB_BYTES + 1)
    if len(out) > MAX_BLOB_BYTES:
        raise _TooLarge()
    return out


def _wal_at_rest(index: Path) -> bool:
    """True for a write-ahead-log index that no process has open: no -shm file (SQLite makes
    one for as long as any connection is open) and no -wal file holding commits. A reader
    opens such an index as immutable: "ro" would create both files beside it."""
    try:
        with open(index, "rb") as fh:
            header = fh.read(20)
        wal = os.stat(f"{index}-wal").st_size if os.path.exists(f"{index}-wal") else 0
    except OSError:
        return False
    return header[18:20] == b"\x02\x02" and not os.path.exists(f"{index}-shm") and wal == 0


def _connect(path: Path, wal: bool = False, mode: str = "rw") -> sqlite3.Connection:
    """A connection; ``wal`` switches a new index to write-ahead logging (it persists).

    ``mode`` "ro" reads without write access (a WAL index still needs its -shm file or a
    writable folder), "immutable" reads a run nobody can be writing (a read-only folder).
    Text that is not UTF-8 (a damaged or crafted index) is read with replacement characters.
    """
    if mode == "rw":
        db = sqlite3.connect(path, timeout=60, isolation_level=None)
    else:
        query = "mode=ro" if mode == "ro" else "immutable=1"
        uri = f"file:{urllib.parse.quote(str(Path(path).absolute()))}?{query}"
        db = sqlite3.connect(uri, timeout=60, isolation_level=None, uri=True)
    db.text_factory = functools.partial(bytes.decode, encoding="utf-8", errors="replace")
    db.execute(f"PRAGMA busy_timeout = {READ_WAIT_MS}")
    db.execute("PRAGMA foreign_keys = ON")
    if mode != "rw":
        return db
    # With write-ahead logging a commit needs no fsync to keep the index consistent; a power
    # cut may lose the last ingest, never corrupt the run.
    db.execute("PRAGMA synchronous = NORMAL")
    if wal:
        try:
            db.execute("PRAGMA journal_mode = WAL")
        except sqlite3.OperationalError:
            pass  # read-only media: rollback journal is fine
    return db


def _read_meta(path: Path) -> dict[str, Any]:
    """run.json as a dict (plain JSON, never executed); a damaged file is reported, not fatal."""
    try:
        meta = json.loads((path / RUN_JSON).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        return {"damaged": f"{RUN_JSON}: {exc}"}
    return meta if isinstance(meta, dict) else {"damaged": f"{RUN_JSON}: not an object"}


_TMP_NAMES = itertools.count()


def _unlink(path: str) -> int:
    try:
        os.unlink(path)
    except OSError:
        return 0
    return 1


def _atomic_write(target: Path, data: bytes) -> None:
    """Write to a private temporary name, then rename: readers never see a partial file."""
    tmp = os.path.join(os.path.dirname(target),
                       f".tmp-{os.getpid()}-{threading.get_ident()}-{next(_TMP_NAMES)}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def find_runs(root: Path | None = None) -> list[Path]:
    """Run directories under ``root`` (default ./.irscope/runs), oldest first; a folder that
    cannot be looked into is listed when it may be a run (``runs`` shows why it cannot)."""
    root = root or DEFAULT_ROOT
    try:
        if not root.is_dir():
            return []
        entries = list(root.iterdir())
    except PermissionError:
        raise RunError(f"{root}: permission denied: cannot list the runs") from None
    return sorted(p for p in entries if _is_run(p))


def _modified(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _is_run(path: Path) -> bool:
    try:
        return (path / INDEX).is_file()
    except PermissionError:
        return path.is_dir()


def locate_run(spec: str, root: Path | None = None) -> Path:
    """The run a user means by ``spec``: a path, "latest", or a run name/prefix under root."""
    path = Path(spec)
    try:
        if (path / INDEX).is_file():
            return path
    except PermissionError:
        raise RunError(f"{path}: permission denied: the run cannot be read") from None
    runs = find_runs(root)
    if spec == "latest":
        if not runs:
            raise RunError(f"no runs under {root or DEFAULT_ROOT}")
        return max(runs, key=lambda p: (_modified(p / INDEX), p.name))
    by_name = [p for p in runs if p.name == spec or p.name.endswith(f"-{spec}")]
    if by_name:
        return by_name[-1]  # folders start with a timestamp: the newest run of that name
    named = [p for p in runs if p.name.startswith(spec)]
    named = named or [p for p in runs if "-" in p.name and spec in p.name]
    if len(named) == 1:
        return named[0]
    if len(named) > 1:
        listing = ", ".join(p.name for p in named[:4])
        raise RunError(f"{spec!r} matches {len(named)} runs ({listing}, ...): be more precise")
    if path.exists():
        raise RunError(f"{path}: not an irscope run (no {INDEX})")
    raise RunError(f"{spec}: no such run (nor a run named so under {root or DEFAULT_ROOT})")
