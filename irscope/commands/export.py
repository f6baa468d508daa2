"""`irscope export RUN... -o DIR`: runs as Parquet tables, one dataset partitioned by run."""

from __future__ import annotations

from pathlib import Path

from irscope.console import note, print_json, progress


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "export", help="write runs as Parquet tables (units, kernels, figures...) for DuckDB, "
                       "Spark, pandas",
        description="Write each run's units, stages, kernels, launches, figures, histogram "
                    "rows, lint findings and rank divergences as Parquet, one dataset "
                    "partitioned by run (DIR/<table>/run_id=<id>/). Exporting a run again "
                    "replaces it; other runs in DIR stay. Schema: docs/export.md. Needs "
                    "pyarrow (pip install 'irscope[export]').",
        epilog="query: duckdb -c \"SELECT unit, kernel, registers FROM "
               "read_parquet('DIR/kernels/*/*.parquet', hive_partitioning=true) ORDER BY "
               "spill_store_bytes DESC LIMIT 10\"")
    parser.add_argument("runs", nargs="+", metavar="RUN",
                        help="run directories, run names under ./.irscope/runs, or 'latest'")
    parser.add_argument("-o", "--output", required=True, type=Path, metavar="DIR",
                        help="the dataset folder (created; an existing export is added to)")
    parser.add_argument("--json", action="store_true", help="print what was written as JSON")
    parser.set_defaults(func=run)


def run(args) -> int:
    from irscope.read.view import RunView
    from irscope.reports.export import export_run, prepare, pyarrow_modules
    from irscope.store import Run, locate_run

    pyarrow_modules()  # missing: one line naming the extra, before any work
    paths = [locate_run(spec) for spec in args.runs]
    prepare(args.output)
    written = []
    with progress("exporting", total=len(paths), delay=1.0) as bar:
        for path in paths:
            with Run.open(path, read_only=True) as opened:
                written.append(export_run(RunView(opened), args.output))
            bar.advance(1, description=path.name)
    if args.json:
        print_json({"dataset": str(args.output), "runs": [
            {"run_id": w.run_id, "name": w.name, "rows": w.rows} for w in written]})
    else:
        for w in written:
            note(f"{w.name}: run_id {w.run_id}, {w.rows.get('units', 0):,} units, "
                 f"{w.rows.get('kernels', 0):,} kernels, {w.rows.get('figures', 0):,} figures")
        note(f"wrote {len(written)} run{'s' * (len(written) != 1)} to {args.output}")
    return 0
