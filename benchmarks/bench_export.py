"""`irscope export` at scale, and the dataset queried as teams query it.

1. Exporting the 12,000-unit benchmark run (``scale_run.py``): wall seconds and peak RSS of
   `irscope export` in a process of its own (targets: <= 15 s, <= 500 MB).
2. 100 exported runs (copies of the committed H100 sample runs under names of their own)
   queried by DuckDB for "top 10 kernels by spills across runs" (target <= 2 s), beside the
   same answer computed by opening each run with irscope (what a team without the export
   does).
Run: python benchmarks/bench_export.py [UNITS]
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
EXPORT_TARGET_S, EXPORT_TARGET_MB, QUERY_TARGET_S = 15.0, 500, 2.0
RUNS = 100
TOP_BY_SPILLS = """
SELECT r.name, k.unit, k.spill_store_bytes + k.spill_load_bytes AS spills, k.registers
FROM read_parquet('{d}/kernels/*/*.parquet', hive_partitioning=true) k
JOIN read_parquet('{d}/runs/*/*.parquet', hive_partitioning=true) r USING (run_id)
WHERE k.spill_store_bytes IS NOT NULL ORDER BY spills DESC, k.registers DESC, r.name, k.unit
LIMIT 10"""


def main(units: int = 12_000) -> int:
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(ROOT))
    try:
        import duckdb
        import pyarrow  # noqa: F401
    except ModuleNotFoundError as exc:
        print(f"skipped: {exc.name} is not installed (pip install 'irscope[export]' duckdb)")
        return 0
    from report_scale import measured
    from scale_run import build_scale_run

    with tempfile.TemporaryDirectory(prefix="irscope-bench-export-") as folder:
        folder = Path(folder)
        build_scale_run(folder / "scale", units).close()
        first = measured("export", folder / "scale", "-o", folder / "one")
        met = first["wall"] <= EXPORT_TARGET_S and first["rss"] / 1e6 <= EXPORT_TARGET_MB
        print(f"export of a {units:,}-unit run: {first['wall']:.2f} s wall "
              f"(target <= {EXPORT_TARGET_S:.0f} s), {first['cpu']:.2f} s CPU, peak "
              f"{first['rss'] / 1e6:.0f} MB (target <= {EXPORT_TARGET_MB} MB): "
              f"{'PASS' if met else 'FAIL'}")

        runs = _copies(folder / "runs", RUNS)
        start = time.perf_counter()
        measured("export", *runs, "-o", folder / "many")
        print(f"export of {RUNS} sample runs: {time.perf_counter() - start:.2f} s")
        start = time.perf_counter()
        rows = duckdb.sql(TOP_BY_SPILLS.format(d=folder / "many")).fetchall()
        query_s = time.perf_counter() - start
        start = time.perf_counter()
        direct = _top_by_spills(runs)
        direct_s = time.perf_counter() - start
        same = [tuple(r[:3]) for r in rows] == [tuple(r[:3]) for r in direct]
        print(f"top 10 kernels by spills across {RUNS} runs: DuckDB {query_s:.2f} s "
              f"(target <= {QUERY_TARGET_S:.0f} s) vs opening each run {direct_s:.2f} s "
              f"({direct_s / query_s:.1f}x), same answer: {same}")
        return 0 if same and met and query_s <= QUERY_TARGET_S else 1


def _copies(root: Path, count: int) -> list[Path]:
    """``count`` runs: the committed GPU sample runs copied round-robin, each named apart."""
    samples = sorted(p for p in (ROOT / "samples" / "gpu").iterdir() if (p / "run.json").is_file())
    runs = []
    for i in range(count):
        target = root / f"nightly-{i:03d}"
        shutil.copytree(samples[i % len(samples)], target)
        meta = json.loads((target / "run.json").read_text())
        meta.update(name=f"nightly-{i:03d}", started=f"2026-{1 + i // 28:02d}-{1 + i % 28:02d}")
        (target / "run.json").write_text(json.dumps(meta))
        runs.append(target)
    return runs


def _top_by_spills(runs: list[Path]) -> list[tuple]:
    import irscope

    found = []
    for path in runs:
        with irscope.open_run(path) as run:
            found += [(run.name, unit.name, k.spill_bytes, k.registers)
                      for unit in run.figures().units for k in unit.kernels
                      if k.spill_bytes is not None]
    return sorted(found, key=lambda r: (-r[2], -(r[3] or 0), r[0], r[1]))[:10]


if __name__ == "__main__":
    raise SystemExit(main(*map(int, sys.argv[1:2])))
