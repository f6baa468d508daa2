"""`irscope inspect script.py` against plain `python script.py`, cold and warm caches, side by side.

Each mode (plain, inspect) gets caches of its own (Inductor's, Triton's, JAX's persistent
cache and irscope's own), so both see the same state: the first run of each is cold, the
next ones warm; the warm runs alternate ``--repeat`` times and their medians are compared.
Workloads: the seed examples and two of the size people compile, runnable on the CPU without
downloads: a 6-layer transformer in plain PyTorch (forward and training steps) and a JAX
training step with a scan and a vmap. Targets: warm at most +10%, cold at most +15% on the
realistic workloads (+15% warm on the seeds).

Run: python benchmarks/bench_inspect.py [--repeat 3] [WORKLOAD ...]
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
# workload -> (script, arguments, warm target, cold target)
WORKLOADS = {
    "seed_torch": ("seed_torch.py", [], 0.15, None),
    "seed_jax": ("seed_jax.py", [], 0.15, None),
    "transformer": ("small_transformer.py", ["--layers", "6", "--steps", "2"], 0.10, 0.15),
    "jax_train": ("jax_train.py", ["--steps", "3"], 0.10, 0.15),
}


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


def measure(workload: str, repeat: int, workdir: Path) -> dict[str, float]:
    """Cold and median warm wall/CPU seconds of python and irscope inspect on one workload."""
    script, arguments, _, _ = WORKLOADS[workload]
    runs = iter(range(10**6))

    def env(mode: str) -> dict[str, str]:
        caches = workdir / f"{workload}-{mode}"
        return {**os.environ, "NO_COLOR": "1", "IRSCOPE_CACHE_DIR": str(caches / "irscope"),
                "TORCHINDUCTOR_CACHE_DIR": str(caches / "inductor"),
                "TRITON_CACHE_DIR": str(caches / "triton"),
                "JAX_COMPILATION_CACHE_DIR": str(caches / "jax")}

    def plain() -> list[str]:
        return [sys.executable, str(SCRIPTS / script), *arguments]

    def inspected() -> list[str]:
        return [sys.executable, "-m", "irscope", "inspect", "-o",
                str(workdir / f"{workload}-{next(runs)}"), str(SCRIPTS / script), *arguments]

    cold = timed(plain(), env("plain")), timed(inspected(), env("inspect"))
    baseline, irscope = [], []
    for _ in range(repeat):
        baseline.append(timed(plain(), env("plain")))
        irscope.append(timed(inspected(), env("inspect")))
    return {"cold": cold[0][0], "inspect_cold": cold[1][0],
            "wall": statistics.median(w for w, _ in baseline),
            "cpu": statistics.median(c for _, c in baseline),
            "inspect_wall": statistics.median(w for w, _ in irscope),
            "inspect_cpu": statistics.median(c for _, c in irscope)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="timed warm runs of each command")
    ap.add_argument("workloads", nargs="*", default=list(WORKLOADS), metavar="WORKLOAD",
                    choices=list(WORKLOADS), help=f"of {', '.join(WORKLOADS)} (default: all)")
    args = ap.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="irscope-bench-inspect-"))
    rows, ok = [], True
    try:
        for name in args.workloads:
            rows.append((name, measure(name, args.repeat, workdir)))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"{'workload':<13}{'cold py':>9}{'cold ins':>9}{'cold +':>8}{'warm py':>9}"
          f"{'warm ins':>9}{'warm +':>8}{'cpu +':>8}  targets")
    for name, m in rows:
        _, _, warm_target, cold_target = WORKLOADS[name]
        cold = m["inspect_cold"] / m["cold"] - 1
        wall, cpu = m["inspect_wall"] / m["wall"] - 1, m["inspect_cpu"] / m["cpu"] - 1
        passed = wall <= warm_target and (cold_target is None or cold <= cold_target)
        ok &= passed
        targets = f"warm <= {warm_target:.0%}" + (f", cold <= {cold_target:.0%}"
                                                  if cold_target is not None else "")
        print(f"{name:<13}{m['cold']:>8.2f}s{m['inspect_cold']:>8.2f}s{cold:>+8.1%}"
              f"{m['wall']:>8.2f}s{m['inspect_wall']:>8.2f}s{wall:>+8.1%}{cpu:>+8.1%}  "
              f"{targets}: {'pass' if passed else 'FAIL'}")
    print(f"cold: one run each on empty caches; warm: medians of {args.repeat} alternating runs; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
