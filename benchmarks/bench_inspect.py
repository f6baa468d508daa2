"""`irscope inspect script.py` against plain `python script.py`, cold and warm caches, side by side.

Workloads that run on the CPU without downloads (on a GPU where there is one; set
CUDA_VISIBLE_DEVICES= and JAX_PLATFORMS=cpu to keep them on the CPU): a 6-layer transformer
in plain PyTorch under torch.compile (two training steps, then inference), a JAX training
step with a scan and a vmap, and the seed examples. Each cache state is measured on its
own, the same for both commands:

- cold: every command starts from empty caches (Inductor's FX graph and kernel caches,
  Triton's, JAX's compilation cache, irscope's cache of XLA dumps and tool output);
- warm: the caches are filled once by each command, then both read the same caches.

Python's bytecode: an installed irscope has its modules compiled; a checkout run with
PYTHONDONTWRITEBYTECODE=1 compiles each of its modules at every start (0.4 s a command on
a 2-core machine). Both commands therefore run with bytecode kept under the bench's own
folder (PYTHONPYCACHEPREFIX), written before the first timed run; ``--bytecode-as-is`` keeps
the environment's setting instead.

The two commands alternate ``--repeat`` times and the median wall times are compared, as a
ratio; the load average before and after is printed (the machine may be shared). Targets on the realistic workloads: at most +10% warm and +15% cold (+15% warm on the
seeds). ``filing`` is the median ``filing_s`` of the inspected runs (run.json): the time
spent filing after the script ended.

``--provenance`` adds what Inductor's provenance records cost (``inspect --provenance``):
inspect without them against inspect with them, warm caches (the setting is part of
Inductor's cache key: both were filled first), on the torch workloads. On an H100 (torch
2.11), a warm 12-layer GPT-2 training run of 6 steps (benchmarks/workloads/gpt2_train.py,
4 FX graph cache hits) took 47.4/48.1/47.9 s with TORCH_TRACE alone and 49.5/50.3/51.2 s with
TORCH_TRACE and INDUCTOR_PROVENANCE=1, three alternating rounds: +2.4 s (+5%) of compile
time, all of it before the first step ends; the steady steps were the same (28.5-31.5 ms both
ways). An earlier single pair of 8-step runs took 37.7 and 38.1 s (capture_timing_gpu.sh).

Run: python benchmarks/bench_inspect.py [--repeat 3] [--states warm,cold] [--bytecode-as-is]
         [--provenance] [WORKLOAD ...]      (e.g. jax_train seed_jax: the JAX workloads only)
"""

from __future__ import annotations

import argparse
import json
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
# workload -> (script and arguments, warm target, cold target)
WORKLOADS = {
    "transformer": (("small_transformer.py", "--layers", "6", "--steps", "2"), 0.10, 0.15),
    "jax_train": (("jax_train.py", "--steps", "3"), 0.10, 0.15),
    "seed_torch": (("seed_torch.py",), 0.15, None),
    "seed_jax": (("seed_jax.py",), 0.15, None),
}
STATES = ("warm", "cold")
TORCH_SCRIPTS = ("small_transformer.py", "seed_torch.py")  # where Inductor's records apply
CACHE_VARIABLES = {"TORCHINDUCTOR_CACHE_DIR": "inductor", "TRITON_CACHE_DIR": "triton",
                   "JAX_COMPILATION_CACHE_DIR": "jax", "IRSCOPE_CACHE_DIR": "irscope"}


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


BYTECODE: dict[str, str] = {}  # how both commands keep Python bytecode (set by main)


def cache_env(root: Path) -> dict[str, str]:
    """An environment whose compiler caches all live under ``root``."""
    environ = {k: v for k, v in os.environ.items()
               if not (BYTECODE and k == "PYTHONDONTWRITEBYTECODE")}
    return {**environ, "NO_COLOR": "1", **BYTECODE,
            **{name: str(root / folder) for name, folder in CACHE_VARIABLES.items()}}


def compile_bytecode(prefix: Path) -> None:
    """Keep both commands' bytecode under ``prefix``, irscope's compiled ahead as an install
    compiles it (the workloads' own modules are compiled by their first run)."""
    BYTECODE["PYTHONPYCACHEPREFIX"] = str(prefix)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "irscope"),
                    str(ROOT / "parsers"), str(ROOT / "tui")], env=cache_env(prefix / "none"),
                   stdout=subprocess.DEVNULL, check=False)


def measure(workload: str, state: str, repeat: int, workdir: Path) -> dict[str, float]:
    """Median wall and CPU seconds of python and irscope inspect on one workload, alternating,
    and the median time the inspected runs spent filing."""
    (script, *args), _, _ = WORKLOADS[workload]
    plain = [sys.executable, str(SCRIPTS / script), *args]
    runs = iter(range(10**6))

    def inspected() -> tuple[list[str], Path]:
        out = workdir / f"{workload}-{state}-{next(runs)}"
        return [sys.executable, "-m", "irscope", "inspect", "-o", str(out), "--",
                str(SCRIPTS / script), *args], out

    def caches(label: str) -> dict[str, str]:
        root = workdir / f"caches-{workload}-{label}"
        if state == "cold":
            shutil.rmtree(root, ignore_errors=True)
        return cache_env(root)

    if state == "warm":  # fill the shared caches, both ways
        timed(plain, caches("shared"))
        timed(inspected()[0], caches("shared"))
    baseline, irscope, filing = [], [], []
    for _ in range(repeat):
        baseline.append(timed(plain, caches("plain" if state == "cold" else "shared")))
        command, out = inspected()
        irscope.append(timed(command, caches("inspect" if state == "cold" else "shared")))
        filing.append(json.loads((out / "run.json").read_text())["filing_s"])
        shutil.rmtree(out, ignore_errors=True)
    return {"wall": statistics.median(w for w, _ in baseline),
            "cpu": statistics.median(c for _, c in baseline),
            "inspect_wall": statistics.median(w for w, _ in irscope),
            "inspect_cpu": statistics.median(c for _, c in irscope),
            "filing": statistics.median(filing)}


def measure_provenance(workload: str, repeat: int, workdir: Path) -> tuple[float, float]:
    """Median wall seconds of irscope inspect with Inductor's provenance records off (its
    default) and on (--provenance), alternating, over warm caches both filled first."""
    (script, *args), _, _ = WORKLOADS[workload]
    env = cache_env(workdir / f"caches-{workload}-provenance")
    arms = {"off": env, "on": {**env, "INDUCTOR_PROVENANCE": "1"}}
    runs = iter(range(10**6))

    def inspected(arm: str) -> float:
        out = workdir / f"{workload}-provenance-{next(runs)}"
        wall, _ = timed([sys.executable, "-m", "irscope", "inspect", "-o", str(out), "--",
                         str(SCRIPTS / script), *args], arms[arm])
        shutil.rmtree(out, ignore_errors=True)
        return wall

    for arm in arms:  # fill both caches
        inspected(arm)
    walls: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(repeat):
        for arm in arms:
            walls[arm].append(inspected(arm))
    return statistics.median(walls["off"]), statistics.median(walls["on"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="timed runs of each command")
    ap.add_argument("--states", default=",".join(STATES), help="cache states to measure")
    ap.add_argument("--bytecode-as-is", action="store_true",
                    help="keep the environment's bytecode setting (default: both commands "
                         "keep bytecode under the bench's folder, irscope's compiled ahead)")
    ap.add_argument("--provenance", action="store_true",
                    help="also time Inductor's provenance records, off against on (torch "
                         "workloads, warm caches)")
    ap.add_argument("workloads", nargs="*", default=list(WORKLOADS), metavar="WORKLOAD",
                    help=f"any of {', '.join(WORKLOADS)} (default: all)")
    args = ap.parse_args()
    states = args.states.split(",")
    unknown = [w for w in args.workloads if w not in WORKLOADS] + [
        s for s in states if s not in STATES]
    if unknown:
        ap.error(f"unknown workload or cache state: {', '.join(unknown)}")
    workdir = Path(tempfile.mkdtemp(prefix="irscope-bench-inspect-"))
    rows, ok, provenance = [], True, []
    load_before = os.getloadavg()[0]
    try:
        if not args.bytecode_as_is:
            compile_bytecode(workdir / "pycache")
        for workload in args.workloads:
            for state in states:
                m = measure(workload, state, args.repeat, workdir)
                rows.append((workload, state, m))
                print(f"{workload} {state}: python {m['wall']:.2f}s, inspect "
                      f"{m['inspect_wall']:.2f}s, filing {m['filing']:.2f}s", file=sys.stderr,
                      flush=True)
            if args.provenance and WORKLOADS[workload][0][0] in TORCH_SCRIPTS:
                provenance.append((workload, *measure_provenance(workload, args.repeat,
                                                                 workdir)))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"{'workload':<13}{'caches':<7}{'python':>8}{'inspect':>9}{'ratio':>7}{'wall +':>8}"
          f"{'cpu +':>8}{'filing':>8}  target")
    for workload, state, m in rows:
        ratio, cpu = m["inspect_wall"] / m["wall"], m["inspect_cpu"] / m["cpu"] - 1
        _, *targets = WORKLOADS[workload]
        target = dict(zip(STATES, targets))[state]
        passed = target is None or ratio - 1 <= target
        ok &= passed
        verdict = "-" if target is None else f"<= {target:.0%} {'pass' if passed else 'FAIL'}"
        print(f"{workload:<13}{state:<7}{m['wall']:>7.2f}s{m['inspect_wall']:>8.2f}s"
              f"{ratio:>7.3f}{ratio - 1:>+8.1%}{cpu:>+8.1%}{m['filing']:>7.2f}s  {verdict}")
    for workload, off, on in provenance:
        print(f"{workload:<13}warm   inspect, provenance off {off:.2f}s, on {on:.2f}s: ratio "
              f"{on / off:.3f} ({on / off - 1:+.1%})")
    print(f"medians of {args.repeat} alternating runs; load average {load_before:.1f} "
          f"before, {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} CPUs; bytecode "
          f"{'as the environment has it' if args.bytecode_as_is else 'kept'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
