"""An open run: run.json, content-addressed blobs and a schema-versioned SQLite index.

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

import functools
import itertools
import json
import os
import sqlite3
import stat
import threading
import urllib.parse
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping

from irscope.errors import RunError, RunWarning
from irscope.store.blobs import (BlobRef, BlobSink, TooLarge, bounded_decompress,
                                 checked_blob_name, compress, digest, open_blob_file,
                                 read_blob_file, zstandard_module)
from irscope.store.records import (Event, Relation, Stage, Unit, attrs_from_json, integer_value,
                                   json_object, json_value, pick_stage, pick_unit,
                                   stage_from_row, text_value, unit_from_row)
from irscope.store.schema import (BLOBS, CACHE_WAIT_MS, COMPRESSED_FROM_SCHEMA, COUNT_CHANGES,
                                  COUNT_ONE_CHANGE, GENERATION_TRIGGERS, INDEX,
                                  INLINE_FROM_SCHEMA, INLINE_MAX, MAX_BLOB_BYTES, META_MAX_BYTES,
                                  READ_WAIT_MS, ROLLUPS_KEPT, RUN_ENTRIES, RUN_JSON, SCHEMA,
                                  SCHEMA_VERSION, STATS_BATCH, STATS_CACHE_MAX_BYTES,
                                  WRITE_CACHE_KIB, WRITE_WAIT_S)
from irscope.store.writer import Writer, histogram_kind

READ_ONLY = "a read-only run (see its run.json); copy it to add to it"

if TYPE_CHECKING:
    from irscope.parsers.base import ParseResult


def where_clause(*conditions: tuple[str, Any]) -> tuple[str, list]:
    """(" WHERE a=? AND b IN (?, ?)", its arguments) for the (column, value) pairs given a
    value: one value, or a collection of them (matched with IN)."""
    where, args = [], []
    for column, value in conditions:
        if value is None:
            continue
        if isinstance(value, (str, int)):
            where.append(f"{column}=?")
            args.append(value)
        else:
            values = sorted(set(value))
            where.append(f"{column} IN ({', '.join('?' * len(values))})")
            args += values
    return (" WHERE " + " AND ".join(where) if where else ""), args


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
        self._wal_at_close = False  # made by create(durable=False): WAL once it is closed
        # parse results not yet cached (save_stats): (blob, kind, parser version, result)
        self._unsaved_stats: list[tuple] = []

    # -- opening -------------------------------------------------------------------
    @classmethod
    def create(cls, path: str | os.PathLike, meta: dict[str, Any] | None = None,
               durable: bool = True) -> "Run":
        """Create the run at ``path`` (or open it if it already is one) and record ``meta``.

        ``durable=False``: a run made here is written in one go, without waiting for the disk:
        until it is closed its index keeps a rollback journal (each page written once, not to
        a write-ahead log and again at its checkpoint) and synchronous is off; at close it
        turns to write-ahead logging, as every run is at rest. A power cut soon after may cost
        that new run, whose inputs are still there to file again; a process killed while
        filing leaves the journal that undoes its transaction. Meanwhile a reader waits for
        its commit (and from the moment its changes outgrow the write cache, for the rest of
        it). A run that already was is always written durably, with its write-ahead log.
        """
        path = Path(path)
        fresh = not (path / INDEX).exists()
        if fresh and path.exists() and not path.is_dir():
            raise RunError(f"{path}: exists and is not a directory")
        if fresh and path.exists() and set(os.listdir(path)) - RUN_ENTRIES:
            raise RunError(f"{path}: exists and is not an irscope run")
        if not fresh and _read_meta(path).get("read_only"):  # refused before anything is written
            raise RunError(f"{path}: {READ_ONLY}")
        (path / BLOBS).mkdir(parents=True, exist_ok=True)
        try:
            # write-ahead logging for every run written (a run made by a killed create below
            # is given it here), but the one create(durable=False) makes, until it is closed
            db = _connect(path / INDEX, wal=durable or not fresh)
            if fresh and not durable:
                db.execute("PRAGMA synchronous = OFF")
            # One idempotent script in one transaction: a concurrent creator waits for it.
            db.executescript(f"BEGIN IMMEDIATE; {SCHEMA} {COUNT_CHANGES}; INSERT OR IGNORE "
                             f"INTO meta VALUES ('schema_version', '{SCHEMA_VERSION}'); COMMIT;")
            db.close()
        except sqlite3.DatabaseError as exc:
            raise RunError(f"{path / INDEX}: cannot write the index ({exc})") from None
        run = cls.open(path)
        if fresh and not durable:
            run.db.execute("PRAGMA synchronous = OFF")
            run._wal_at_close = True
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
        for name in (INDEX, INDEX + "-wal", INDEX + "-shm", RUN_JSON):
            _refuse_link_or_device(path / name)
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
        try:
            foreign = _foreign_objects(db)
        except sqlite3.DatabaseError as exc:
            db.close()
            raise RunError(f"{index}: damaged index ({exc})") from None
        if foreign:
            db.close()
            raise RunError(f"{index}: damaged index (it holds {', '.join(foreign[:3])}, which "
                           f"irscope's schema does not define)")
        version = integer_value(row[0], 0) if row else 0
        if version > SCHEMA_VERSION:
            raise RunError(f"{path}: made by a newer irscope (run schema {version}, this "
                           f"irscope reads up to {SCHEMA_VERSION}); upgrade irscope")
        if version < 1:
            raise RunError(f"{path / INDEX}: damaged index (no schema version)")
        meta = _read_meta(path)
        if "damaged" in meta:  # the index holds the run: it is read, with a word of warning
            warnings.warn(f"{path}: {meta['damaged']}: the run's name, command and times are "
                          "unknown", RunWarning, stacklevel=2)
        return cls(path, db, meta, version, writable)

    def close(self) -> None:
        self.save_stats()
        if self._wal_at_close:  # a run made without its write-ahead log (create) is given it
            self._wal_at_close = False
            try:
                self.db.execute("PRAGMA journal_mode = WAL")
            except sqlite3.OperationalError:
                pass  # another process holds it open: it keeps its journal, which reads alike
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
        return self.path / BLOBS / checked_blob_name(blob, self.path)[:2] / blob

    def put_blob(self, data: bytes, key: str | None = None) -> str:
        """Store ``data`` once by its SHA-256 (``key``, where the caller has it already);
        returns the digest."""
        key = key or digest(data)
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
        checked_blob_name(blob, self.path)
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
            data = read_blob_file(self.path, blob)
        if not isinstance(data, (bytes, memoryview)):
            raise RunError(f"{self.path}: blob {blob[:12]} is damaged (the index holds "
                           f"{type(data).__name__}, not bytes)")
        if not self.compressed:
            return bytes(data)
        try:
            return bounded_decompress(data)
        except zstandard_module().ZstdError as exc:
            raise RunError(f"{self.path}: blob {blob[:12]} is damaged ({exc})") from None
        except TooLarge:
            raise RunError(f"{self.path}: blob {blob[:12]} is damaged (more than "
                           f"{MAX_BLOB_BYTES >> 20} MiB once uncompressed)") from None

    def blob_chunks(self, blob: str, size: int = 1 << 20) -> Iterator[bytes]:
        """The blob's bytes (uncompressed) in pieces of about ``size``: a large blob is never
        all in memory at once. The same checks as ``read_blob``."""
        checked_blob_name(blob, self.path)
        if self._blob_table:
            try:
                inline = self.db.execute("SELECT 1 FROM blob_data WHERE blob=?",
                                         (blob,)).fetchone()
            except sqlite3.OperationalError:
                inline = None
            if inline:
                yield self.read_blob(blob)  # at most the inline limit
                return
        with os.fdopen(open_blob_file(self.path, blob), "rb") as fh:
            source = zstandard_module().ZstdDecompressor().stream_reader(fh) if self.compressed else fh
            total = 0
            try:
                while piece := source.read(size):
                    total += len(piece)
                    if total > MAX_BLOB_BYTES:
                        raise RunError(f"{self.path}: blob {blob[:12]} is damaged (more than "
                                       f"{MAX_BLOB_BYTES >> 20} MiB once uncompressed)")
                    yield piece
            except zstandard_module().ZstdError as exc:
                raise RunError(f"{self.path}: blob {blob[:12]} is damaged ({exc})") from None

    def read_text(self, stage: Stage) -> str:
        return self.blob_text(stage.blob)

    def blob_text(self, blob: str) -> str:
        """A blob's bytes as text, bytes that are no UTF-8 replaced."""
        return self.read_blob(blob).decode("utf-8", errors="replace")

    # -- writing -------------------------------------------------------------------
    @property
    def read_only(self) -> bool:
        """A run whose run.json says ``"read_only": true`` (a committed sample), or one opened
        read-only, is never written."""
        return bool(self.meta.get("read_only")) or not self.writable

    @contextmanager
    def transaction(self, bulk: bool = False) -> Iterator["Writer"]:
        """All-or-nothing writes; other processes wait (SQLite's lock) rather than corrupt.

        ``bulk``: for a transaction of many rows (an ingest), which counts as one change to
        the run: the triggers that count each row's change (a fifth of what a stage's insert
        costs) are set aside until it ends, inside it, so no other writer ever sees them gone.
        """
        if not self.writable:
            raise RunError(f"{self.path}: cannot write to this run (no write access); copy it "
                           f"to add to it")
        if self.read_only:
            raise RunError(f"{self.path}: {READ_ONLY}")
        try:
            self.db.execute(f"PRAGMA busy_timeout = {WRITE_WAIT_S * 1000}")
            self.db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise RunError(f"{self.path}: cannot write ({exc}); another irscope may be "
                           f"writing to this run") from None
        finally:
            self.db.execute(f"PRAGMA busy_timeout = {READ_WAIT_MS}")
        cache = self.db.execute("PRAGMA cache_size").fetchone()[0]
        self.db.execute(f"PRAGMA cache_size = -{WRITE_CACHE_KIB}")
        counting = bulk and self.generation() is not None  # a run that counts its changes
        try:
            if counting:
                for name in GENERATION_TRIGGERS:
                    self.db.execute(f"DROP TRIGGER {name}")
            yield Writer(self)
            if counting:
                for statement in COUNT_CHANGES.split(";\n"):
                    self.db.execute(statement)
                self.db.execute(COUNT_ONE_CHANGE)
        except BaseException:
            self.db.rollback()
            raise
        else:
            self.db.commit()
        finally:
            self.db.execute(f"PRAGMA cache_size = {int(cache)}")

    # -- reading -------------------------------------------------------------------
    def units(self, framework: str | None = None) -> list[Unit]:
        sql = "SELECT id, name, framework, source_file, source_line, attrs FROM units"
        rows = self.db.execute(sql + (" WHERE framework=?" if framework else "") + " ORDER BY id",
                               (framework,) if framework else ())
        return [unit_from_row(r) for r in rows]

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
        return unit_from_row(row) if row else None

    def unit_by_id(self, unit_id: int) -> Unit:
        row = self.db.execute("SELECT id, name, framework, source_file, source_line, attrs "
                              "FROM units WHERE id=?", (unit_id,)).fetchone()
        if row is None:
            raise RunError(f"{self.path}: no unit {unit_id}")
        return unit_from_row(row)

    def stages(self, unit_id: int | None = None, kinds: Iterable[str] | None = None,
               units: Iterable[int] | None = None, blob: str | None = None) -> list[Stage]:
        """The stages of the run (or of one unit, or of ``units``), only those of ``kinds``
        and holding ``blob`` when given."""
        sql = "SELECT id, unit_id, kind, name, position, blob, size, origin FROM stages"
        where, args = where_clause(("unit_id", unit_id), ("unit_id", units), ("kind", kinds),
                                   ("blob", blob))
        order = " ORDER BY unit_id, position, id" if unit_id is None else " ORDER BY position, id"
        rows = self.db.execute(sql + where + order, args)
        return [stage_from_row(r) for r in rows]

    def stage_counts(self, kind: str | None) -> dict[int, int]:
        """Unit id -> how many stages of ``kind`` (None: of every kind) it holds (a run may
        hold 400,000 raw log records that a listing counts and reads only when asked)."""
        where = " WHERE kind=?" if kind is not None else ""
        return {integer_value(unit_id, 0): integer_value(count, 0) for unit_id, count in
                self.db.execute(f"SELECT unit_id, count(*) FROM stages{where} GROUP BY unit_id",
                                (kind,) if kind is not None else ())}

    def stage_kind_counts(self) -> dict[int, dict[str, int]]:
        """Unit id -> kind -> how many stages of that kind it holds, counted without reading
        them."""
        counts: dict[int, dict[str, int]] = {}
        for unit_id, kind, count in self.db.execute(
                "SELECT unit_id, kind, count(*) FROM stages GROUP BY unit_id, kind"):
            counts.setdefault(integer_value(unit_id, 0), {})[text_value(kind)] = \
                integer_value(count, 0)
        return counts

    def stage_kinds(self) -> list[str]:
        """The stage kinds the run holds."""
        return sorted(text_value(kind) for (kind,) in
                      self.db.execute("SELECT DISTINCT kind FROM stages"))

    def stage_outlines(self) -> dict[int, list[tuple[str, str, int]]]:
        """Unit id -> (kind, name, size) of each of its stages in order: what a listing of
        every stage shows, without building a Stage per row (a run may hold 500,000)."""
        outlines: dict[int, list[tuple[str, str, int]]] = {}
        for unit_id, kind, name, size in self.db.execute(
                "SELECT unit_id, kind, name, size FROM stages ORDER BY unit_id, position, id"):
            outlines.setdefault(integer_value(unit_id, 0), []).append(
                (text_value(kind), text_value(name), integer_value(size, 0)))
        return outlines

    def stage_rows(self) -> Iterator[tuple[int, int, str, str, int, str]]:
        """(id, unit id, kind, name, size, blob) of every stage in order, streamed from the
        index without building a Stage per row: what an export of every stage writes."""
        for row in self.db.execute("SELECT id, unit_id, kind, name, size, blob FROM stages "
                                   "ORDER BY unit_id, position, id"):
            yield (integer_value(row[0], 0), integer_value(row[1], 0), text_value(row[2]),
                   text_value(row[3]), integer_value(row[4], 0), text_value(row[5]))

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
        return self._units_matching(framework, "json_extract(attrs, '$.' || ?) = ?",
                                    (attr, value), lambda unit: unit.attrs.get(attr) == value)

    def units_of_ranks(self, framework: str, ranks: Iterable[int] | None) -> list[Unit]:
        """The units of ``framework`` that ``ranks`` compiled, with those of no rank (a
        single process's, a kernel of a cache several ranks shared); every unit of the
        framework when ``ranks`` is None."""
        if ranks is None:
            return self.units(framework)
        ranks = sorted(set(ranks))
        return self._units_matching(
            framework, "json_type(attrs, '$.rank') IS NOT 'integer' OR json_extract(attrs, "
            f"'$.rank') IN ({', '.join('?' * len(ranks))})", ranks,
            lambda unit: unit.rank in (None, *ranks))

    def units_with_key(self, framework: str, attr: str, key: str) -> list[int]:
        """Ids of the units of ``framework`` whose mapping attribute ``attr`` has ``key``."""
        return [unit.id for unit in self._units_matching(
            framework, "json_type(attrs, ?) IS NOT NULL", (f'$.{attr}."{key}"',),
            lambda unit: isinstance(unit.attrs.get(attr), dict) and key in unit.attrs[attr])]

    def _units_matching(self, framework: str, condition: str, args: Iterable[Any],
                        holds) -> list[Unit]:
        """The units of ``framework`` whose attributes meet the SQL ``condition``; where
        SQLite cannot read them, ``holds(unit)`` decides: runs filed before irscope wrote
        standard JSON may hold `Infinity` or `NaN`, on which SQLite's JSON functions fail."""
        rows = self.db.execute(
            "SELECT id, name, framework, source_file, source_line, attrs, json_valid(attrs) "
            f"FROM units WHERE framework=? AND CASE WHEN json_valid(attrs) THEN {condition} "
            "ELSE 1 END ORDER BY id", (framework, *args))
        units = []
        for row in rows:
            unit = unit_from_row(row)
            if row[6] or holds(unit):
                units.append(unit)
        return units

    def units_from_file(self, framework: str, source_file: str) -> list[Unit]:
        """The units of ``framework`` compiled from ``source_file`` (e.g. an Inductor kernel path)."""
        return [u for u in self.units(framework) if u.source_file == source_file]

    def relations(self, kind: str | None = None, sources: Iterable[int] | None = None
                  ) -> list[Relation]:
        """The run's relations (of ``kind``, from ``sources`` when given)."""
        where, args = where_clause(("kind", kind or None), ("src", sources))
        rows = self.db.execute("SELECT src, kind, dst, attrs FROM relations" + where, args)
        return [Relation(integer_value(r[0], 0), text_value(r[1]), integer_value(r[2], 0), attrs_from_json(r[3]))
                for r in rows]

    def events(self, kind: str | None = None) -> list[Event]:
        sql = "SELECT id, unit_id, kind, data FROM events"
        rows = self.db.execute(sql + (" WHERE kind=?" if kind else "") + " ORDER BY id",
                               (kind,) if kind else ())
        return [Event(integer_value(r[0], 0), integer_value(r[1]), text_value(r[2]), json_object(r[3]))
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
        return integer_value(row[0])

    def rollup(self, key: str, generation: int | None) -> bytes | None:
        """What ``keep_rollup`` kept under ``key`` at ``generation`` (the current one, as
        ``generation()`` gave it), or None."""
        if generation is None or not self.compressed:
            return None
        try:
            row = self.db.execute("SELECT data FROM rollups WHERE key=? AND generation=?",
                                  (key, generation)).fetchone()
            return bounded_decompress(row[0]) if row and isinstance(row[0], bytes) else None
        except (sqlite3.DatabaseError, TooLarge, zstandard_module().ZstdError):
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
                current = self.generation()
                if current is None:  # not counting: what was kept may predate any change
                    for statement in COUNT_CHANGES.split(";\n"):
                        self.db.execute(statement)
                    self.db.execute("DELETE FROM rollups")
                elif generation is None or current != generation:
                    pass  # changed since it was computed: kept next time
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
    def totals(self, stage: Stage) -> dict:
        """The parser's ``totals`` for a stage: from the cache without rebuilding the whole
        result when it holds them (a kernel's instruction count, asked of 600 kernels)."""
        cached = self._cached_field(stage, "totals")
        return cached if cached is not None else dict(self.parsed(stage).totals)

    def histogram(self, stage: Stage) -> Mapping[str, int]:
        """The opcode histogram of a stage: from the cache (the stage's whole parse, or its
        histogram counted ahead by the cubin's analysis), else counted by the parser's short
        way, neither parsed whole nor cached (the summary ``inspect`` prints as the script's
        run ends, of every kernel's PTX and SASS)."""
        from irscope.parsers import registry

        def counts(found: Any) -> bool:  # damaged or crafted rows are passed over
            return isinstance(found, dict) and all(type(n) is int for n in found.values())

        cached = self._cached_field(stage, "histogram")
        if not counts(cached):
            cached = self._cached(stage, histogram_kind(stage.kind))
        return cached if counts(cached) else registry.histogram(stage.kind,
                                                                self.read_text(stage))

    def _cached_field(self, stage: Stage, name: str) -> dict | None:
        """One mapping of a stage's cached parse result; None when it is not cached."""
        cached = self._cached(stage, stage.kind)
        found = cached.get(name) if isinstance(cached, dict) else None
        return found if isinstance(found, dict) else None

    def _cached(self, stage: Stage, kind: str) -> Any:
        """The stats cache's row ``kind`` of the stage's bytes at its parser's version, read
        as JSON; None when there is none or it is no JSON."""
        from irscope.parsers import registry

        row = self.db.execute("SELECT data FROM stats WHERE blob=? AND kind=? AND version=?",
                              (stage.blob, kind, registry.parser_version(stage.kind))
                              ).fetchone()
        return json_value(row[0]) if row else None

    def parsed(self, stage: Stage) -> ParseResult:
        """The parser's frozen result for a stage, rebuilt from the cache when the blob was
        parsed before (the cache holds ``to_jsonable(result)``, every field)."""
        # the parsers load on the first parse: `irscope --help` opens no run and needs none
        from irscope.parsers import registry
        from irscope.parsers.base import to_jsonable

        version = registry.parser_version(stage.kind)
        cached = self._cached(stage, stage.kind)
        if isinstance(cached, dict) and cached:
            try:
                return registry.from_json(stage.kind, cached)
            except (TypeError, ValueError, KeyError, AttributeError, RecursionError):
                pass  # a damaged or crafted cache entry: parsed again from the stage
        result = registry.parse(stage.kind, self.read_text(stage))
        if self.read_only or stage.size > STATS_CACHE_MAX_BYTES:
            return result
        if self.db.in_transaction:  # inside a writer's transaction: cached with its writes
            self.db.execute("INSERT OR REPLACE INTO stats VALUES (?, ?, ?, ?)",
                            (stage.blob, stage.kind, version, json.dumps(to_jsonable(result))))
            return result
        # written out when saved, not here: a reader waiting on this result (a stage being
        # followed, four side by side) does not wait on its JSON too
        self._unsaved_stats.append((stage.blob, stage.kind, version, result))
        if len(self._unsaved_stats) >= STATS_BATCH:
            self.save_stats()
        return result

    def save_stats(self) -> None:
        """Cache the parse results made since the last save, in one transaction (600 kernels
        parsed for the first time cost one commit, not 600); ``close`` saves them too."""
        from irscope.parsers.base import to_jsonable

        unsaved, self._unsaved_stats = self._unsaved_stats, []
        if not unsaved or self.db.in_transaction:
            return
        rows = [(blob, kind, version, json.dumps(to_jsonable(result)))
                for blob, kind, version, result in unsaved]
        try:
            self.db.execute(f"PRAGMA busy_timeout = {CACHE_WAIT_MS}")
            self.db.execute("BEGIN IMMEDIATE")
            try:
                self.db.executemany("INSERT OR REPLACE INTO stats VALUES (?, ?, ?, ?)", rows)
            except BaseException:
                self.db.rollback()
                raise
            self.db.commit()
        except sqlite3.DatabaseError:
            pass  # read-only, busy or damaged: the figures are still right, just not cached
        finally:
            self.db.execute(f"PRAGMA busy_timeout = {READ_WAIT_MS}")



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
    """A connection; ``wal`` switches the index to write-ahead logging (it persists: for an
    index that has it, nothing changes).

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
    """run.json as a dict (plain JSON, never executed); a damaged file is reported, not fatal.

    Read only as a regular file of the run's own folder (never through a link, never a FIFO
    or device, which could stall or flood a reader) and of bounded size and depth."""
    try:
        fd = os.open(path / RUN_JSON, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        return {"damaged": f"{RUN_JSON}: {exc.strerror or exc}"}
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return {"damaged": f"{RUN_JSON}: not a regular file"}
        if info.st_size > META_MAX_BYTES:
            return {"damaged": f"{RUN_JSON}: {info.st_size:,} bytes, over the "
                               f"{META_MAX_BYTES >> 20} MiB a run's metadata may take"}
        with os.fdopen(fd, "rb", closefd=False) as fh:
            meta = json.loads(fh.read(META_MAX_BYTES + 1).decode("utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        reason = "nested too deep" if isinstance(exc, RecursionError) else str(exc)
        return {"damaged": f"{RUN_JSON}: {reason}"}
    finally:
        os.close(fd)
    return meta if isinstance(meta, dict) else {"damaged": f"{RUN_JSON}: not an object"}


def _refuse_link_or_device(path: Path) -> None:
    """A run's own files are read from its own folder: a link (to another run, to a file
    anywhere) or a FIFO or device in its place is refused, as damage."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise RunError(f"{path}: unreadable ({exc.strerror or exc})") from None
    if stat.S_ISLNK(info.st_mode):
        raise RunError(f"{path}: a link; a run's files are read from its own folder only")
    if not stat.S_ISREG(info.st_mode):
        raise RunError(f"{path}: not a regular file")


def _foreign_objects(db: sqlite3.Connection) -> list[str]:
    """Views and triggers in the index that irscope's schema does not define (a crafted
    view can make every query recurse forever): "view v", "trigger t"."""
    rows = db.execute("SELECT type, name FROM sqlite_master WHERE type IN ('view', 'trigger')")
    return [f"{kind} {name}" for kind, name in rows
            if not (kind == "trigger" and name in GENERATION_TRIGGERS)]


_TMP_NAMES = itertools.count()


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
