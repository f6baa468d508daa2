"""The run store's layout: its files, the index schema, limits, and the types of unit attributes."""

from __future__ import annotations

import re
from pathlib import Path



# 3: blobs compressed; 2: small blobs inside the index (blob_data); 1: every blob a file
SCHEMA_VERSION = 3
INLINE_FROM_SCHEMA = 2
COMPRESSED_FROM_SCHEMA = 3
INLINE_MAX = 256 * 1024  # bytes before compression
# zstd's default level: 500-800 MB/s on IR text, a ninth of the size; level 6 saves 5-15% of
# the bytes at a third of the speed. Any level's frames read alike.
ZSTD_LEVEL = 3
RUN_JSON, INDEX, BLOBS = "run.json", "index.sqlite", "blobs"
DEFAULT_ROOT = Path(".irscope") / "runs"
WRITE_WAIT_S = 900  # how long a writer waits for another process's ingest to finish
READ_WAIT_MS = 60_000  # statements outside a transaction wait this long for a lock
ROLLUPS_KEPT = 16  # roll-ups kept per run: a report's records and what readers derive beside
# them (kept.py), for a few filters or irscope versions
CACHE_WAIT_MS = 200  # caching parsed figures is optional: never stall a reader for it
# Stages larger than this are parsed again rather than cached: their cached result reads back
# no faster than the text parses (a 38 MB, 100,000-kernel PTX: 6.7 s either way) and writing
# it costs seconds and hundreds of MB.
STATS_CACHE_MAX_BYTES = 8 << 20
STATS_BATCH = 256  # parse results cached together, in one transaction
# SQLite's page cache while a transaction writes (KiB): past SQLite's 2 MiB default, a large
# ingest spills and rewrites its dirty index pages again and again (a 90 MB TORCH_TRACE log:
# 324,000 page writes instead of 7,000); the default is back once the transaction ends.
WRITE_CACHE_KIB = 64 << 10
META_MAX_BYTES = 16 << 20  # run.json larger than this is damage, not metadata
MAX_BLOB_BYTES = 1 << 30  # larger blobs, stored or uncompressed, are refused as damage
# A blob's name: the SHA-256 of its bytes, "3f5a...e1" (64 lower-case hex digits).
BLOB_NAME = re.compile(r"[0-9a-f]{64}")
NUMBER = (int, float)
# Every attribute a writer gives units and relations, with its type: a value of another type
# (a damaged or crafted index) is left out when the unit is read, as if the run had not
# recorded it. tests/test_hostile_attrs.py fails on a writer's attribute missing here.
ATTR_TYPES: dict[str, type | tuple[type, ...]] = {
    **dict.fromkeys(("output_codes", "compile_times", "metadata", "config", "resources", "ptxas",
                     "target", "signature", "constexprs", "figures", "executors", "window"), dict),
    **dict.fromkeys(("rank", "num_warps", "num_stages", "num_ctas", "guard_count",
                     "graph_op_count", "graph_node_count", "xla_module", "shared", "order",
                     "error_line", "compile", "kernel_time_ns"), int),
    **dict.fromkeys(("hash", "origin", "compile_id", "called_from", "called_by", "group",
                     "kernel", "status", "xla_dump", "ttir_error", "error", "error_file",
                     "error_source", "pass_dump", "role", "output_code", "via", "region",
                     "executor", "thunder", "profiler", "trace"), str),
    **dict.fromkeys(("eager_op", "autotune_best", "cache_hit", "valid", "interpret"), bool),
    **dict.fromkeys(("compile_seconds", "lowering_seconds", "compile_time_us"), NUMBER),
    **dict.fromkeys(("problems", "warnings", "autotune_candidates", "ranks", "regions", "grid",
                     "devices"), list),
    "arch": (int, str),
}
# Mappings whose values readers compute with: every value must be of this type.
ATTR_VALUE_TYPES: dict[str, type | tuple[type, ...]] = {"compile_times": NUMBER,
                                                        "output_codes": str}
# What a run directory may hold; "staging" is the collection folder of a run being captured.
LOCK_FILE = "writer.lock"  # held by the one irscope writing the run (store/lock.py)
RUN_ENTRIES = {RUN_JSON, INDEX, BLOBS, "staging", INDEX + "-wal", INDEX + "-shm",
               INDEX + "-journal", LOCK_FILE}

SCHEMA = """
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
COUNT_ONE_CHANGE = "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'"
COUNT_CHANGES = ";\n".join(
    ["CREATE TABLE IF NOT EXISTS rollups (key TEXT PRIMARY KEY, generation INTEGER NOT NULL, "
     "data BLOB NOT NULL)",
     "INSERT OR IGNORE INTO meta VALUES ('generation', '0')"]
    + [f"CREATE TRIGGER IF NOT EXISTS {name} AFTER {name.rsplit('_', 1)[1].upper()} ON "
       f"{name.split('_')[1]} BEGIN {COUNT_ONE_CHANGE}; END" for name in GENERATION_TRIGGERS])
