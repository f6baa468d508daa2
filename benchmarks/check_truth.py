"""Check a run's roll-ups against independent counts and print them side by side.

Run: python benchmarks/check_truth.py RUN [--kernels N]

For each graph: kernels generated, launched and extern calls against the output code's own
definitions and call() lines; run totals against the sum over distinct graphs; for each
Triton kernel: registers and static shared memory against `cuobjdump -res-usage`, spill bytes
and stack frame against `ptxas -v`, and SASS instructions against `nvdisasm -c`. Exits 1 on
any mismatch.
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from truth_helpers import (DEFINITION, PTXAS_FRAME, RES_USAGE, SASS_INSTRUCTION,  # noqa: E402
                           TARGET, call_launches, distinct_output_codes, run_tool)

from irscope.reports.build import build_report  # noqa: E402
from irscope.read.figures import read_run_figures  # noqa: E402
from irscope.store import Run, locate_run  # noqa: E402


def kernel_truth(item):
    """(registers, static shared, spill stores, spill loads, stack frame, SASS instructions)."""
    name, ptx, cubin = item
    usage = {m[0]: tuple(map(int, m[1:])) for m in RES_USAGE.findall(
        run_tool("cuobjdump", ["-res-usage"], cubin, ".cubin"))}
    registers, _stack, shared, _local = usage[name]
    spills = (None, None, None)
    if ptx:
        arch = TARGET.search(ptx.decode()).group(1)
        found = PTXAS_FRAME.search(run_tool("ptxas", ["-v", f"--gpu-name={arch}", "-o",
                                                       "/dev/null"], ptx, ".ptx"))
        frame, stores, loads = map(int, found.groups())
        spills = (stores, loads, frame)
    instructions = len(SASS_INSTRUCTION.findall(run_tool("nvdisasm", ["-c"], cubin, ".cubin")))
    return (registers, shared, *spills, instructions)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("run")
    ap.add_argument("--kernels", type=int, default=0, help="check only the first N kernels")
    args = ap.parse_args()
    run = Run.open(locate_run(args.run))
    figures = read_run_figures(run)
    by_id = {u.unit_id: u for u in figures.units}
    bad = 0
    rows = [("figure", "irscope", "independent")]
    generated = launched = 0
    for unit in run.units("torch"):
        codes = distinct_output_codes(run, unit)
        if not codes:
            continue
        got = by_id[unit.id]
        want = (sum(len(DEFINITION.findall(c)) for c in codes),
                sum(call_launches(c)[0] for c in codes), sum(call_launches(c)[1] for c in codes))
        generated, launched = generated + want[0], launched + want[1]
        have = (got.kernels_generated, got.kernels_launched, got.extern_calls)
        roles = "+".join(c.role or c.stage for c in got.output_codes)
        rows.append((f"{unit.name} [{roles}] generated/launched/extern", "/".join(map(str, have)),
                     "/".join(map(str, want))))
        bad += have != want
    report = build_report(run)
    for key, want in (("kernels_generated", generated), ("kernels_launched", launched)):
        have = report.totals.get(key, 0)
        rows.append((f"run {key}", str(have), str(want)))
        bad += have != want
    kernels = sorted(run.units("triton"), key=lambda u: u.name)
    kernels = kernels[:args.kernels] if args.kernels else kernels
    items = []
    for unit in kernels:
        stages = {s.kind: s for s in run.stages(unit.id)}
        (kernel,) = by_id[unit.id].kernels
        ptx = run.read_blob(stages["ptx"].blob) if "ptx" in stages else None
        items.append((kernel.name, ptx, run.read_blob(stages["cubin"].blob)))
    with ThreadPoolExecutor() as pool:
        truths = list(pool.map(kernel_truth, items))
    mismatched = 0
    for unit, truth in zip(kernels, truths):
        (kernel,) = by_id[unit.id].kernels
        stages = {s.kind: s for s in run.stages(unit.id)}
        sass = run.parsed(stages["sass"]).totals["instructions"]
        have = (kernel.registers, kernel.shared_static_bytes, kernel.spill_store_bytes,
                kernel.spill_load_bytes, kernel.stack_frame_bytes, sass)
        if have != truth:
            mismatched += 1
            rows.append((f"{unit.name} regs/smem/spill st/spill ld/frame/SASS",
                         "/".join(map(str, have)), "/".join(map(str, truth))))
    rows.append((f"kernels checked (registers, shared, spills, frame, SASS instructions)",
                 f"{len(kernels) - mismatched} equal", f"{len(kernels)}"))
    bad += mismatched
    width = max(len(r[0]) for r in rows)
    for name, have, want in rows:
        print(f"{name:<{width}}  {have:>12}  {want:>12}")
    print("mismatches:", bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
