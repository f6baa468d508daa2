"""`make bench`: run every benchmarks/bench_*.py in turn and print their side-by-side figures."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    failed = []
    for script in sorted(HERE.glob("bench_*.py")):
        print(f"\n=== {script.name} ===", flush=True)
        start = time.perf_counter()
        rc = subprocess.call([sys.executable, str(script), *sys.argv[1:]])
        print(f"--- {script.name}: exit {rc} in {time.perf_counter() - start:.1f} s", flush=True)
        if rc:
            failed.append(script.name)
    if failed:
        print("failed: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
