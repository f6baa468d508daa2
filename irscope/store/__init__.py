"""The run store, the only part of irscope that speaks SQL: a run is ``run.json``, an SQLite
index of units, stages, relations and events, and content-addressed, compressed blobs.

``run`` opens and reads a run, ``writer`` writes one in a transaction, ``records`` holds the
rows it reads, ``blobs`` the content, ``schema`` the layout and ``locate`` finds runs. Nothing
stored is ever executed: blobs are bytes, the index is SQLite, metadata is JSON.
"""

from irscope.store.blobs import BlobRef, BlobSink, compress, decompress, digest
from irscope.store.locate import default_run_dir, find_runs, locate_run
from irscope.store.records import Event, Relation, Stage, Unit, pick_stage, pick_unit
from irscope.store.run import Run
from irscope.store.schema import (ATTR_TYPES, ATTR_VALUE_TYPES, BLOB_NAME, BLOBS, DEFAULT_ROOT,
                                  INDEX, INLINE_MAX, MAX_BLOB_BYTES, RUN_JSON, SCHEMA_VERSION)
from irscope.store.writer import Writer

__all__ = ["ATTR_TYPES", "ATTR_VALUE_TYPES", "BLOB_NAME", "BLOBS", "DEFAULT_ROOT", "INDEX",
           "INLINE_MAX", "MAX_BLOB_BYTES", "RUN_JSON", "SCHEMA_VERSION", "BlobRef", "BlobSink",
           "Event", "Relation", "Run", "Stage", "Unit", "Writer", "compress", "decompress",
           "default_run_dir", "digest", "find_runs", "locate_run", "pick_stage", "pick_unit"]
