"""The run store, the only part of irscope that speaks SQL: a run is ``run.json``, an SQLite
index of units, stages, relations and events, and content-addressed, compressed blobs.

``run`` opens and reads a run, ``writer`` writes one in a transaction, ``records`` holds the
rows it reads, ``blobs`` the content, ``schema`` the layout and ``locate`` finds runs. Nothing
stored is ever executed: blobs are bytes, the index is SQLite, metadata is JSON.
"""

import importlib

# Public name -> the module of this package that defines it. Each module is imported when one
# of its names is first asked for, so a light user (the writer lock before a script starts,
# `irscope --help`) does not pay for SQLite and zstandard.
_HOMES = {
    **dict.fromkeys(("BlobRef", "BlobSink", "compress", "decompress", "digest"), "blobs"),
    **dict.fromkeys(("default_run_dir", "find_runs", "locate_run"), "locate"),
    "WriterLock": "lock",
    **dict.fromkeys(("Event", "Relation", "Stage", "Unit", "pick_stage", "pick_unit"),
                    "records"),
    "Run": "run",
    **dict.fromkeys(("ATTR_TYPES", "ATTR_VALUE_TYPES", "BLOB_NAME", "BLOBS", "DEFAULT_ROOT",
                     "INDEX", "INLINE_MAX", "MAX_BLOB_BYTES", "RUN_JSON", "SCHEMA_VERSION"),
                    "schema"),
    "Writer": "writer",
}


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'irscope.store' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"irscope.store.{_HOMES[name]}"), name)
    globals()[name] = value
    return value


__all__ = ["ATTR_TYPES", "ATTR_VALUE_TYPES", "BLOB_NAME", "BLOBS", "DEFAULT_ROOT", "INDEX",
           "INLINE_MAX", "MAX_BLOB_BYTES", "RUN_JSON", "SCHEMA_VERSION", "BlobRef", "BlobSink",
           "Event", "Relation", "Run", "Stage", "Unit", "Writer", "WriterLock", "compress",
           "decompress", "default_run_dir", "digest", "find_runs", "locate_run", "pick_stage",
           "pick_unit"]
