"""`irscope inspect script.py` against plain `python script.py`, warm caches, side by side.

Each seed example is run once both ways to warm the caches (Inductor's FX graph and kernel
caches, Triton's cache, and irscope's cache of XLA dumps, kept in a folder of this
benchmark's own), then the two commands alternate ``--repeat`` times and the median wall
times are compared. Target: at most 15% overhead.

Run: python benchmarks/bench_inspect.py [--repeat 3] [seed_jax.py ...]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "samples" / "scripts"
SEEDS = ("seed_torch.py", "seed_jax.py")
TARGET = 0.15


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)
    elapsed = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"{' '.join(command)}: exit {done.returncode}\n{done.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def measure(script: Path, repeat: int, workdir: Path) -> dict[str, float]:
    """Median wall and CPU seconds of python script and irscope inspect script, alternating."""
    env = {**os.environ, "NO_COLOR": "1", "IRSCOPE_CACHE_DIR": str(workdir / "dump-cache")}
    runs = iter(range(10**6))

    def plain() -> list[str]:
        return [sys.executable, str(script)]

    def inspected() -> list[str]:
        return [sys.executable, "-m", "irscope", "inspect", "-o",
                str(workdir / f"{script.stem}-{next(runs)}"), str(script)]

    timed(plain(), env), timed(inspected(), env)  # warm every cache both ways
    baseline, irscope = [], []
    for _ in range(repeat):
        baseline.append(timed(plain(), env))
        irscope.append(timed(inspected(), env))
    return {"wall": statistics.median(w for w, _ in baseline),
            "cpu": statistics.median(c for _, c in baseline),
            "inspect_wall": statistics.median(w for w, _ in irscope),
            "inspect_cpu": statistics.median(c for _, c in irscope)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="timed runs of each command")
    ap.add_argument("scripts", nargs="*", default=SEEDS, metavar="SCRIPT",
                    help=f"seed scripts to measure (default: {' '.join(SEEDS)})")
    args = ap.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="irscope-bench-inspect-"))
    rows, ok = [], True
    try:
        for name in args.scripts:
            rows.append((name, measure(SCRIPTS / name, args.repeat, workdir)))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"{'script':<14}{'python':>9}{'inspect':>9}{'wall +':>9}{'cpu python':>12}"
          f"{'cpu inspect':>13}{'cpu +':>8}  wall target <= {TARGET:.0%}")
    for name, m in rows:
        wall, cpu = m["inspect_wall"] / m["wall"] - 1, m["inspect_cpu"] / m["cpu"] - 1
        ok &= wall <= TARGET
        print(f"{name:<14}{m['wall']:>8.2f}s{m['inspect_wall']:>8.2f}s{wall:>+9.1%}"
              f"{m['cpu']:>11.2f}s{m['inspect_cpu']:>12.2f}s{cpu:>+8.1%}  "
              f"{'pass' if wall <= TARGET else 'FAIL'}")
    print(f"medians of {args.repeat} alternating warm-cache runs; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
