"""`irscope report` over a run of 1,000 real Triton units: target under 2 s (JSON, warm cache);
then a run of 12,000 units (``report_scale.py``): first JSON report at most 10 s, cached at most
1 s, first diff at most 10 s, with ls, ls --json and the TUI's figures beside them, each with its
peak RSS.

Builds the run from ahead-of-time compiles of the four sample kernels (TTIR, TTGIR, LLVM IR,
PTX and cubin per unit), each unit's texts made unique by a trailing comment so that a cold
cache really parses 4,000 stages. Times `irscope report RUN --format json` in process with
the parse cache cold and warm, and every other format warm. ``bench_report.py scale [N]``
runs only the 12,000-unit (or N-unit) case, which needs no compiler.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

UNITS = 1000
TARGET_S = 2.0
KERNELS = ("add_kernel", "softmax_kernel", "matmul_kernel", "layernorm_gelu_kernel")
COMMENT = {"ttir": "// unit {}", "ttgir": "// unit {}", "llir": "; unit {}", "ptx": "// unit {}"}


def build_run(path: Path):
    """1,000 units; nvdisasm/cuobjdump run once per kernel, their SASS and resources reused."""
    from kernels import compile_aot

    from irscope.ingest.triton_cache import file_cubin
    from irscope.store import Run

    compiled = [compile_aot(k) for k in KERNELS]
    run = Run.create(path, {"name": "bench-1000"})
    derived: dict[int, tuple[str | None, dict]] = {}
    with run.transaction() as w:
        for i in range(UNITS):
            asm = compiled[i % len(compiled)]
            name = f"{asm['name']}_{i}"
            unit = w.add_unit(name, "triton", "triton_kernels.py", i + 1)
            for kind, comment in COMMENT.items():
                w.add_stage(unit, kind, asm[kind] + "\n" + comment.format(i) + "\n")
            if i < len(compiled):
                file_cubin(w, unit, asm["cubin"])
                sass = [s for s in run.stages(unit) if s.kind == "sass"]
                derived[i] = (run.read_text(sass[0]) if sass else None,
                              run.unit(name).attrs.get("resources", {}))
                continue
            sass, resources = derived[i % len(compiled)]
            w.add_stage(unit, "cubin", asm["cubin"])
            if sass:
                w.add_stage(unit, "sass", sass + f"\n// unit {i}\n")
            w.add_unit(name, "triton", attrs={"resources": resources})
    return run


def timed(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one in-process `irscope ARGV` (the machine may be shared)."""
    from irscope.cli import main

    wall, cpu = time.perf_counter(), time.process_time()
    code = main(argv)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if code:
        raise SystemExit(f"irscope {' '.join(argv)} exited {code}")
    return wall, cpu


def decode_cache(path: Path) -> tuple[float, float]:
    """Baseline floor: only decoding every cached parser result, as any consumer must."""
    import json
    import sqlite3

    wall, cpu = time.perf_counter(), time.process_time()
    db = sqlite3.connect(path / "index.sqlite")
    for (data,) in db.execute("SELECT data FROM stats"):
        json.loads(data)
    db.close()
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> int:
    import report_scale

    if sys.argv[1:2] == ["scale"]:
        return report_scale.main(*map(int, sys.argv[2:3]))
    code = thousand_units()
    print(f"\n=== {report_scale.__doc__.splitlines()[0]}")
    return report_scale.main() or code


def thousand_units() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run"
        start = time.perf_counter()
        run = build_run(path)
        run.db.execute("DELETE FROM stats")
        run.close()
        print(f"built a run of {UNITS} units in {time.perf_counter() - start:.1f} s")
        out = Path(tmp) / "report"
        rows = [("json, cold parse cache", timed(["report", str(path), "-o", f"{out}.json"]))]
        rows.append(("json, warm parse cache", timed(["report", str(path), "-o", f"{out}.json"])))
        for fmt in ("csv", "md", "html", "table"):
            rows.append((f"{fmt}, warm parse cache",
                         timed(["report", str(path), "--format", fmt, "-o", f"{out}.{fmt}"])))
        rows.append(("baseline: decode the parse cache", decode_cache(path)))
        size = Path(f"{out}.json").stat().st_size

    warm = rows[1][1][0]
    floor = rows[-1][1][0]
    print(f"\n{'irscope report, ' + str(UNITS) + ' units':<34} {'wall s':>8} {'cpu s':>8} "
          f"{'vs 2 s':>8} {'vs floor':>9}")
    for label, (wall, cpu) in rows:
        print(f"{label:<34} {wall:>8.3f} {cpu:>8.3f} {wall / TARGET_S:>7.2f}x "
              f"{wall / floor:>8.1f}x")
    print(f"\nJSON report: {size / 1e6:.1f} MB")
    verdict = "PASS" if warm < TARGET_S else "FAIL"
    print(f"{verdict}: warm JSON report {warm:.3f} s (target < {TARGET_S:.0f} s)")
    return 0 if warm < TARGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
