"""Many ranks: a 64-rank job filed rank by rank, compared, and browsed.

The job is made from real 2-rank NCCL captures on two H100s (tests/dump_helpers.many_rank_job:
rank 0 of samples/gpu/dumps/ddp_buckets copied as ranks 0-62, each trace's records renumbered,
and rank 1 of ddp_branch, which takes another branch, as rank 63), each rank with the Triton
cache of its job, filed one ingest a rank as `irscope inspect` files ranks. Each measure is
printed beside its baseline from the same run:

- ingest: the peak Python memory (tracemalloc) and the time of each rank's ingest, against
  rank 0's (filed first, alone): memory bounded by one rank's means the ratio stays near 1;
- `irscope ranks` on the 64-rank run, against the same on the 2-rank run (target <= 10 s);
- the TUI's rank filter: `r` pressed through every rank, each key to the frame that shows its
  units, against one key typed into the unit filter of the same run (target < 150 ms a key).
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_tui import frame_probes, idle, wait_for  # noqa: E402
from dump_helpers import many_rank_job  # noqa: E402

from irscope.ingest import ingest  # noqa: E402
from irscope.store import Run  # noqa: E402

RANKS = 64
RANKS_TARGET, KEY_TARGET = 10.0, 0.150
SIZE = (120, 40)


def file_ranks(job, run: Run) -> list[tuple[float, int]]:
    """(seconds, peak bytes) of each rank's ingest."""
    measured = []
    for rank, paths in job:
        tracemalloc.start()
        start = time.perf_counter()
        ingest(run, paths, rank=rank)
        seconds = time.perf_counter() - start
        measured.append((seconds, tracemalloc.get_traced_memory()[1]))
        tracemalloc.stop()
    return measured


def time_ranks_command(path: Path) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "irscope", "ranks", str(path)], check=True,
                   capture_output=True)
    return time.perf_counter() - start


async def time_rank_keys(path: Path) -> tuple[list[float], float]:
    """Seconds from each `r` to the frame showing that rank's units (every rank in turn),
    and from one key typed into the unit filter to its frame."""
    from textual import events

    from irscope.tui.app import IrscopeApp

    app = IrscopeApp(path)
    async with app.run_test(size=SIZE) as pilot:
        navigator, tree = app.navigator, app.navigator.stage_tree
        await wait_for(lambda: app.viewer.lines and tree.badges, timeout=120)
        await idle(app)
        drawn = frame_probes(navigator)
        tree.focus()
        await pilot.pause()
        keys = []
        for expected in (*range(RANKS), None):
            start = time.perf_counter()
            app._driver.send_message(events.Key("r", "r"))
            while not (navigator.rank == expected and drawn["tree"] > start
                       and drawn["tree"] >= drawn["filled"] > start):
                await asyncio.sleep(0.001)
            keys.append(drawn["tree"] - start)
        navigator.filter.focus()
        await pilot.pause()
        start = time.perf_counter()
        app._driver.send_message(events.Key("t", "t"))
        while not (navigator.applied == "t" and drawn["filter"] > start
                   and drawn["tree"] >= drawn["filled"]):
            await asyncio.sleep(0.001)
        return keys, max(drawn["filter"], drawn["tree"]) - start


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        job = many_rank_job(Path(tmp), RANKS)
        run = Run.create(Path(tmp) / "run64")
        measured = file_ranks(job, run)
        run.close()
        pair = Run.create(Path(tmp) / "run2")
        file_ranks([job[0], job[-1]], pair)
        pair.close()
        ranks_64 = statistics.median(time_ranks_command(Path(tmp) / "run64") for _ in range(3))
        ranks_2 = statistics.median(time_ranks_command(Path(tmp) / "run2") for _ in range(3))
        keys, filter_key = asyncio.run(time_rank_keys(Path(tmp) / "run64"))
    first_s, first_peak = measured[0]
    worst_peak = max(peak for _, peak in measured)
    print(f"{'measure':<44} {'value':>10} {'baseline':>10} {'ratio':>7}  target")
    rows = [
        ("ingest peak memory, largest of 64 ranks (MB)", worst_peak / 1e6, first_peak / 1e6,
         "~1x"),
        ("ingest time, median of 64 ranks (s)",
         statistics.median(s for s, _ in measured), first_s, "-"),
        ("`irscope ranks`, 64 ranks vs 2 ranks (s)", ranks_64, ranks_2, f"<= {RANKS_TARGET:.0f} s"),
        ("rank filter key, max of 65 (ms)", max(keys) * 1000, filter_key * 1000,
         f"< {KEY_TARGET * 1000:.0f} ms"),
    ]
    for name, value, base, target in rows:
        print(f"{name:<44} {value:10.2f} {base:10.2f} {value / base:6.2f}x  {target}")
    print(f"(rank filter keys, ms: median {statistics.median(keys) * 1000:.0f}; ingest peaks, "
          f"MB: first {first_peak / 1e6:.1f}, last {measured[-1][1] / 1e6:.1f}; baselines: "
          "rank 0's ingest, `irscope ranks` on ranks 0 and 63 alone, a unit-filter key)")
    ok = ranks_64 <= RANKS_TARGET and max(keys) < KEY_TARGET and worst_peak < 2 * first_peak
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
