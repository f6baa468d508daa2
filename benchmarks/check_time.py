"""Check a run captured with `irscope inspect --profile` against the issue's figures.

Prints, for each run given: the kernels in the profiled window and their time, the sum of the
per-kernel rows against the profiler's own total (within 1%), the Triton and XLA launches left
unjoined (0), the kernels of one name timed apart in forward and backward, the GEMM and
attention kernels present as externs under their graph, and what stays unjoined and why.
Exits 1 when a check fails.

    python benchmarks/check_time.py RUN [RUN...]
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict

from irscope.read.timing import read_time
from irscope.store import Run, locate_run

GEMM_WORDS = ("gemm", "cutlass", "cublas", "sm90_xmma", "sm80_xmma", "ampere", "hopper")
ATTENTION_WORDS = ("fmha", "flash", "attention", "sdpa")


def check(path: str) -> bool:
    with Run.open(locate_run(path)) as run:
        time = read_time(run)
        if time is None:
            print(f"{path}: no profiler trace in the run")
            return False
        kernels = [k for k in time.kernels if k.kind == "kernel"]
        launches = sum(k.launches for k in kernels)
        total = sum(k.total_ns for k in kernels)
        off = abs(total - time.trace_kernel_time_ns) / time.trace_kernel_time_ns \
            if time.trace_kernel_time_ns else 0.0
        compiled = [k for k in kernels if k.name.startswith("triton_")
                    or k.origin in ("triton", "xla") or (k.origin == "unjoined" and "XLA" in k.how)]
        unjoined_compiled = [k for k in compiled if not k.joined]
        phases = defaultdict(set)
        for k in kernels:
            if k.phase and k.graph:
                phases[(k.graph, k.name)].add(k.phase)
        apart = sum(1 for found in phases.values() if len(found) > 1)
        externs = Counter()
        for k in kernels:
            name = k.name.lower()
            kind = ("attention" if any(w in name for w in ATTENTION_WORDS) else
                    "gemm" if any(w in name for w in GEMM_WORDS) else None)
            if kind:
                externs[(kind, "extern under a graph" if k.origin == "extern" and k.graph
                         else k.origin)] += k.launches
        print(f"{path}: {launches:,} kernel launches, {total / 1e6:,.3f} ms in the window "
              f"(window {time.window_ns / 1e6:,.3f} ms, {time.traces} trace(s) on "
              f"{', '.join(time.devices) or 'an unnamed GPU'})")
        print(f"  per-kernel sum {total:,} ns vs the profiler's total "
              f"{time.trace_kernel_time_ns:,} ns: {off:.4%} apart (<= 1%: {off <= 0.01})")
        print(f"  Triton/XLA launches {sum(k.launches for k in compiled):,}, unjoined "
              f"{sum(k.launches for k in unjoined_compiled)} (0: {not unjoined_compiled})")
        ambiguous = sum(k.launches for k in kernels if k.candidates > 1)
        print(f"  joined to one configuration of several alike: {ambiguous} launches")
        print(f"  kernels of one name timed apart in forward and backward: {apart}")
        for (kind, where), count in sorted(externs.items()):
            print(f"  {kind} launches {where}: {count}")
        print(f"  unjoined: {time.unjoined_ns / 1e6:,.3f} ms "
              f"({time.unjoined_ns / total:.1%})" if total else "  unjoined: 0")
        reasons = Counter()
        for k in kernels:
            if not k.joined:
                reasons[k.how] += k.launches
        for how, count in reasons.most_common(6):
            print(f"    {count:6} {how}")
        for window in time.windows:
            print(f"  window: {dict(window)}")
        return off <= 0.01 and not unjoined_compiled


if __name__ == "__main__":
    results = [check(path) for path in sys.argv[1:]]
    sys.exit(0 if results and all(results) else 1)
