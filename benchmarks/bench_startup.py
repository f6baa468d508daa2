"""Start-up of short commands, against the code before the layers redesign (issue 17's baseline).

Times `irscope --version`, `irscope --help` and `irscope ls` of a committed GPU sample, each a
fresh `python -m irscope` process, median of ROUNDS, for this checkout and for BASELINE (a git
revision), each laid out as installed (``parsers/`` and ``tui/`` inside ``irscope/``) in a
temporary folder and put first on PYTHONPATH, with bytecode compiled ahead as pip does.

    python benchmarks/bench_startup.py [ROUNDS] [BASELINE]
"""

from __future__ import annotations

import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "eb21430^"  # the commit before the layers redesign
COMMANDS = {"--version": ["--version"], "--help": ["--help"],
            "ls (GPU sample)": ["ls", str(ROOT / "samples" / "gpu" / "torch_cuda")]}


def lay_out(source: Path, target: Path) -> Path:
    """``source``'s irscope as installed under ``target``; returns ``target``."""
    shutil.copytree(source / "irscope", target / "irscope",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for sub in ("parsers", "tui"):
        shutil.copytree(source / sub, target / "irscope" / sub,
                        ignore=shutil.ignore_patterns("__pycache__"))
    compileall.compile_dir(target, quiet=1)
    return target


def checkout(revision: str, target: Path) -> Path:
    """The tree of ``revision`` extracted into ``target``."""
    target.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision, "irscope", "parsers",
                              "tui"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target


def median_seconds(path: Path, args: list[str], rounds: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(path), "NO_COLOR": "1"}
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "irscope", *args], env=env, cwd=path,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    revision = sys.argv[2] if len(sys.argv) > 2 else BASELINE
    with tempfile.TemporaryDirectory() as tmp:
        base = lay_out(checkout(revision, Path(tmp) / "src-base"), Path(tmp) / "base")
        here = lay_out(ROOT, Path(tmp) / "here")
        print(f"median of {rounds} fresh processes; baseline {revision}")
        print(f"{'command':<20}{'baseline s':>12}{'now s':>10}{'ratio':>8}")
        for label, args in COMMANDS.items():
            before = median_seconds(base, args, rounds)
            after = median_seconds(here, args, rounds)
            print(f"{label:<20}{before:>12.3f}{after:>10.3f}{after / before:>8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
