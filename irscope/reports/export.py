"""Runs written as Parquet tables that query engines read: one dataset, partitioned by run.

``DIR/<table>/run_id=<id>/part-0.parquet`` for every table of ``reports.tables`` (hive
partitioning: DuckDB, Spark, Trino, BigQuery and pyarrow read it as one table with a
``run_id`` column), and ``DIR/_schema.json`` naming the schema version and each table's
columns. Exporting a run replaces its partitions and leaves every other run's alone, so a
nightly job adds its run to the dataset without rewriting the rest. Rows are written in
batches as they are read, so memory stays bounded by a batch, not by the run.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from irscope.errors import InputError, MissingDependency
from irscope.read.view import RunView
from irscope.reports.tables import COLUMNS, SCHEMA, run_id, run_tables

SCHEMA_FILE = "_schema.json"
# rows turned into one Arrow table (a row group) at a time: the export of 12,000 units peaked
# at 505 MB with 50,000 (each row is a dict until written), at 420 MB with 20,000, no slower
BATCH_ROWS = 20_000
_TYPES = {"string": "string", "int64": "int64", "float64": "float64", "bool": "bool_"}


@dataclass(frozen=True)
class Exported:
    """One run written: its id and how many rows each table received."""

    run_id: str
    name: str
    rows: dict[str, int]


def pyarrow_modules():
    """pyarrow and pyarrow.parquet, or a clear error naming the extra that brings them."""
    try:
        import pyarrow
        import pyarrow.parquet
    except ModuleNotFoundError:
        raise MissingDependency("pyarrow", "irscope export", "export") from None
    return pyarrow, pyarrow.parquet


def arrow_schema(table: str):
    """The Arrow schema of ``table`` (run_id first, as COLUMNS orders it)."""
    pa, _ = pyarrow_modules()
    return pa.schema([(name, getattr(pa, _TYPES[kind])()) for name, kind in COLUMNS[table]])


def prepare(folder: Path) -> None:
    """Make ``folder`` a dataset of this schema, or check that it is one."""
    schema_file = folder / SCHEMA_FILE
    if folder.exists() and not folder.is_dir():
        raise InputError(f"{folder}: a file, not a folder (export writes a dataset folder)")
    if schema_file.is_file():
        try:
            found = json.loads(schema_file.read_text(encoding="utf-8")).get("schema")
        except (OSError, ValueError, AttributeError) as exc:
            raise InputError(f"{schema_file}: unreadable ({exc})") from None
        if found != SCHEMA:
            raise InputError(f"{folder}: an export of schema {found!r}, not {SCHEMA}; "
                             f"export into another folder")
        return
    if folder.exists() and any(folder.iterdir()):
        raise InputError(f"{folder}: exists and is not an irscope export (no {SCHEMA_FILE})")
    folder.mkdir(parents=True, exist_ok=True)
    document = {"schema": SCHEMA, "partitioning": "hive: <table>/run_id=<id>/part-0.parquet",
                "tables": {name: dict(columns) for name, columns in COLUMNS.items()}}
    schema_file.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


def export_run(view: RunView, folder: Path) -> Exported:
    """Write one run's tables into the dataset at ``folder`` (made by ``prepare``),
    replacing what an earlier export of the same run wrote."""
    pa, pq = pyarrow_modules()
    rid = run_id(view.meta, str(view.path))
    rows: dict[str, int] = {}
    for table, stream in run_tables(view).items():
        target = folder / table / f"run_id={rid}"
        scratch = Path(tempfile.mkdtemp(prefix=".tmp-", dir=folder))
        schema = arrow_schema(table)
        columns = [name for name, _ in COLUMNS[table]]
        written = 0
        with pq.ParquetWriter(scratch / "part-0.parquet", schema.remove(0)) as writer:
            for batch in _batches(stream):
                data = {name: [row.get(name) for row in batch] for name in columns[1:]}
                writer.write_table(pa.table(data, schema=schema.remove(0)))
                written += len(batch)
        if target.exists():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(scratch, target)
        rows[table] = written
    return Exported(rid, view.name, rows)


def _batches(rows, size: int = BATCH_ROWS):
    batch = []
    for row in rows:
        batch.append(row)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
