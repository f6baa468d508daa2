"""Reading a 12,000-unit run: `report --format json` first and cached, `ls`, `ls --json`, `diff`
of two such runs, and `irscope open`'s figures (``read_run_figures``), each in a process of
its own so that its peak RSS is its own.

Targets (issue 28), wall time on this machine (printed with the load average): the first
JSON report at most 10 s, a cached one (a second report of the unchanged run) at most 1 s, and
the first `diff` (of B, not reported yet, and A) at most 10 s. The runs are built by
``scale_run.py`` from the committed H100 samples: their blobs are shared, so a first report parses each distinct stage once, as a run
of many ranks compiling the same graphs would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FIRST_TARGET_S, CACHED_TARGET_S, DIFF_TARGET_S = 10.0, 1.0, 10.0
# One measured step in a child: its wall and CPU seconds and peak RSS, as the last stderr line.
CHILD = """
import json, os, resource, sys, time
sys.path.insert(0, {root!r})
wall, cpu = time.perf_counter(), time.process_time()
if sys.argv[1] == "figures":
    from irscope.read.figures import read_run_figures
    from irscope.store import Run
    with Run.open(sys.argv[2]) as run:
        units = len(read_run_figures(run).units)
    code = 0 if units else 1
else:
    from irscope.cli import main
    code = main(sys.argv[1:])
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print("BENCH " + json.dumps({{"code": code, "wall": wall, "cpu": cpu, "rss": rss}}),
      file=sys.stderr)
"""


def measured(*argv) -> dict:
    """Run one step (``irscope ARGV``, or ``figures RUN``) in a child; its figures."""
    done = subprocess.run([sys.executable, "-c", CHILD.format(root=str(ROOT)), *map(str, argv)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          env={"NO_COLOR": "1", "PATH": "/usr/bin:/bin"})
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("BENCH ")]
    if not lines:
        raise SystemExit(f"{' '.join(map(str, argv))} failed:\n{done.stderr[-2000:]}")
    result = json.loads(lines[-1][6:])
    if result["code"]:
        raise SystemExit(f"{' '.join(map(str, argv))} exited {result['code']}")
    return result


def main(units: int = 12_000) -> int:
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(ROOT))
    from scale_run import SAMPLE, build_scale_run

    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp) / "a", Path(tmp) / "b"
        start = time.perf_counter()
        build_scale_run(a, units, "scale-a").close()
        build_scale_run(b, units, "scale-b", SAMPLE.with_name("torch_cuda_bf16")).close()
        print(f"built two runs of {units:,} units in {time.perf_counter() - start:.1f} s "
              f"({sum(f.stat().st_size for f in a.rglob('*') if f.is_file()) / 1e6:.0f} MB "
              f"each)")
        out = Path(tmp) / "out"
        rows = [
            ("report --format json, first", measured("report", a, "-f", "json", "-o", out),
             FIRST_TARGET_S),
            ("report --format json, cached", measured("report", a, "-f", "json", "-o", out),
             CACHED_TARGET_S),
            ("ls", measured("ls", a), None),
            ("ls --json", measured("ls", a, "--json"), None),
            ("diff A B --format json, first", measured("diff", b, a, "-f", "json", "-o", out),
             DIFF_TARGET_S),
            ("diff A B --format json, cached", measured("diff", b, a, "-f", "json", "-o", out),
             None),
            ("open: read_run_figures", measured("figures", a), None),
        ]
    print(f"\n{f'{units:,} units':<32} {'wall s':>8} {'cpu s':>8} {'peak MB':>8}  target "
          f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
    failed = []
    for label, figures, target in rows:
        verdict = ""
        if target is not None:
            verdict = f"<= {target:.0f} s " + ("PASS" if figures["wall"] <= target else "FAIL")
            if figures["wall"] > target:
                failed.append(label)
        print(f"{label:<32} {figures['wall']:>8.2f} {figures['cpu']:>8.2f} "
              f"{figures['rss'] / 1e6:>8.0f}  {verdict}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 12_000))
