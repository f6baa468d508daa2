"""PTX analysis speed on >= 50 MB of real PTX, side by side with the notebook line-split counter.

The PTX is the public corpus (IRSCOPE_CORPUS or ../shared/corpus/ptx), samples/ptx and
Triton ahead-of-time compiles of samples/scripts/triton_kernels.py (sm_80 and sm_90a).
Three parts, each against the line-split counter over the same text in the same run:

- in memory, the modules joined and repeated to 50 MB: the opcode histogram (target: 3x
  the counter) and the full parse with blocks and loops (target: 0.75x), in CPU time;
- as a user runs it, `irscope ptx FILES --json` over those modules and samples/ptx copied
  to ~650 files of 50 MB in all, wall time from start to exit against the counter reading
  the same files (target: 0.5x);
- the text output of one generated file of many small kernels, at two sizes: CPU time per
  kernel (flat: linear in the kernels) and peak memory (bounded by the file, not the
  kernels), beside the counter over the same file.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from irscope.parsers import ptx  # noqa: E402

CORPUS = Path(os.environ.get("IRSCOPE_CORPUS", ROOT.parent / "shared" / "corpus")) / "ptx"
TARGET_MB = 50
HISTOGRAM_TARGET, PARSE_TARGET, CLI_TARGET = 3.0, 0.75, 0.5
TEXT_KERNELS = (20_000, 100_000)  # the two sizes of the generated many-kernel file


def line_split_counter(text: str) -> list[tuple[str, int]]:
    """The notebook helper: first whitespace token of every non-empty line, counted."""
    counts: Counter = Counter()
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        counts[line.split()[0]] += 1
    return counts.most_common()


def full_parse(text: str):
    return ptx.parse(text)


def from_version(text: str) -> str:
    """The module from its `.version` line on: drops a `cuobjdump -ptx` banner, which is not PTX."""
    start = text.find(".version")
    return text[text.rfind("\n", 0, start) + 1:] if start > 0 else text


def real_modules(samples: bool = False) -> list[tuple[str, str]]:
    """(name, text) of every real PTX module at hand: corpus, Triton compiles and, with
    ``samples``, samples/ptx (one of them cut short on purpose, as files a user gives may be)."""
    paths = sorted(CORPUS.glob("*.ptx"))
    if samples:
        paths += sorted((ROOT / "samples" / "ptx").glob("*.ptx"))
    modules = [(p.name, p.read_text(encoding="utf-8", errors="replace")) for p in paths]
    try:
        from kernels import compile_aot

        for kernel in ("add_kernel", "softmax_kernel", "matmul_kernel", "layernorm_gelu_kernel"):
            for arch in (80, 90):
                modules.append((f"{kernel}.sm{arch}.ptx", compile_aot(kernel, arch=arch)["ptx"]))
    except ImportError:
        print("triton not installed: no Triton PTX", file=sys.stderr)
    if not modules:
        raise SystemExit(f"no PTX found in {CORPUS}")
    return modules


def build_corpus(target_mb: int, modules: list[tuple[str, str]]) -> str:
    """The modules (from their `.version` line) joined and repeated to ``target_mb`` MB."""
    base = "\n".join(from_version(text) for _, text in modules)
    repeat = -(-target_mb * 1_000_000 // len(base))
    return "\n".join([base] * repeat)


def best_time(fn, text: str, runs: int) -> tuple[float, float, object]:
    """Best wall-clock and best CPU (process) seconds over ``runs`` calls, and the result.

    CPU time is reported beside wall time because the machine may be shared: it counts only
    this process, so a busy neighbour inflates the wall figure, not the CPU one.
    """
    wall, cpu, result = float("inf"), float("inf"), None
    for _ in range(runs):
        result = None
        gc.collect()
        start, start_cpu = time.perf_counter(), time.process_time()
        result = fn(text)
        wall = min(wall, time.perf_counter() - start)
        cpu = min(cpu, time.process_time() - start_cpu)
    return wall, cpu, result


def peak_mib(fn, text: str) -> float:
    """Peak Python allocation while ``fn`` runs (tracemalloc, a separate untimed run)."""
    gc.collect()
    tracemalloc.start()
    fn(text)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 2**20


def in_memory(text: str, files: int, runs: int) -> bool:
    """The histogram and the full parse against the counter, over one 50 MB text."""
    size_mb = len(text.encode()) / 1e6
    print(f"in memory: {size_mb:.1f} MB ({files} distinct modules, repeated), "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    base_wall, base_cpu, base_hist = best_time(line_split_counter, text, runs)
    fast_wall, fast_cpu, fast_hist = best_time(ptx.summarize_ptx, text, runs)
    full_wall, full_cpu, module = best_time(full_parse, text, max(1, runs - 2))
    agree = dict(fast_hist) == dict(module.histogram)
    base = dict(base_hist)
    junk = sum(n for tok, n in base.items()
               if tok in ("{", "}") or tok.startswith(("@", "$", ".", "//")))
    rows = [("line-split counter (baseline)", base_wall, base_cpu, None),
            ("irscope summarize_ptx (histogram)", fast_wall, fast_cpu, HISTOGRAM_TARGET),
            ("irscope parse (kernels, blocks, loops)", full_wall, full_cpu, PARSE_TARGET)]
    print(f"  {'contender':40} {'wall s':>7} {'cpu s':>7} {'MB/s cpu':>8} {'x base cpu':>10} "
          f"{'x base wall':>11}  target (cpu)")
    ok = agree
    for name, wall, cpu, target in rows:
        ratio = base_cpu / cpu
        verdict = ""
        if target is not None:
            ok &= ratio >= target
            verdict = f">= {target:.2f}x: {'PASS' if ratio >= target else 'FAIL'}"
        print(f"  {name:40} {wall:7.3f} {cpu:7.3f} {size_mb / cpu:8.1f} {ratio:9.2f}x "
              f"{base_wall / wall:10.2f}x  {verdict}")
    print(f"  histogram agrees with full parse: {agree}  ({module.totals['instructions']:,} "
          f"instructions, {module.totals['kernels']:,} kernels, {module.totals['blocks']:,} "
          f"blocks, {module.totals['loops']:,} loops)")
    print(f"  baseline miscounts: {junk:,} lines of braces, guards, labels, directives and "
          f"comments counted as opcodes; {len(base):,} distinct 'opcodes' vs "
          f"{len(dict(fast_hist)):,}")
    del module, fast_hist, base_hist
    print(f"  peak memory (tracemalloc): line-split {peak_mib(line_split_counter, text):.0f} "
          f"MiB, summarize_ptx {peak_mib(ptx.summarize_ptx, text):.0f} MiB, parse "
          f"{peak_mib(full_parse, text):.0f} MiB; text {len(text) / 2**20:.0f} MiB")
    return ok


# `python -m irscope ARGS` that reports its own peak RSS in KiB on its last stderr line (the
# kernel's high-water mark of this program; ru_maxrss would count the benchmark it forked from)
PEAK_REPORTING = """import re, resource, runpy, sys
sys.argv = ['irscope', *sys.argv[1:]]
try:
    runpy.run_module('irscope', run_name='__main__')
finally:
    try:
        with open('/proc/self/status') as status:
            peak = re.search(r'VmHWM:\\s*(\\d+)', status.read()).group(1)
    except OSError:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(peak, file=sys.stderr)
"""


def irscope(args: list[str]) -> tuple[float, float, float, int]:
    """Wall and CPU seconds (its worker processes included), peak RSS of the main process in
    MiB and exit status of one `irscope` command with its output discarded, as a user runs it."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", PEAK_REPORTING, *args],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return wall, cpu, int(done.stderr.split()[-1]) / 1024, done.returncode


def count_files(paths: list[Path]) -> float:
    """Wall seconds of the line-split counter reading and counting every file."""
    start = time.perf_counter()
    for path in paths:
        line_split_counter(path.read_text(encoding="utf-8", errors="replace"))
    return time.perf_counter() - start


def many_files(modules: list[tuple[str, str]], folder: Path, runs: int) -> bool:
    """`irscope ptx FILES --json` from start to exit against the counter over the same files,
    alternating, best of ``runs`` each."""
    paths, total, i = [], 0, 0
    while total < TARGET_MB * 1_000_000:
        name, text = modules[i % len(modules)]
        path = folder / f"{i:04d}_{name}"
        path.write_text(text)
        paths.append(path)
        total += len(text.encode())
        i += 1
    base = ours = float("inf")
    cpu = 0.0
    for _ in range(runs):
        base = min(base, count_files(paths))
        wall, cpu_s, _, status = irscope(["ptx", str(folder / "*.ptx"), "--json"])
        if status not in (0, 1):  # 1: a sample that is deliberately broken
            raise SystemExit(f"irscope ptx failed with status {status}")
        if wall < ours:
            ours, cpu = wall, cpu_s
    ratio = base / ours
    print(f"many files: {len(paths)} files, {total / 1e6:.1f} MB, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"  line-split counter reading the files   {base:6.2f} s wall")
    print(f"  irscope ptx FILES --json, start to exit {ours:6.2f} s wall ({cpu:.2f} s CPU in "
          f"all processes)  {ratio:.2f}x the counter  >= {CLI_TARGET}x: "
          f"{'PASS' if ratio >= CLI_TARGET else 'FAIL'}")
    return ratio >= CLI_TARGET


def many_kernels(count: int) -> str:
    """A module of ``count`` small kernels: a load, a compare, a guarded branch, a store."""
    head = ".version 8.4\n.target sm_90a\n.address_size 64\n\n"
    return head + "".join(f"""
.visible .entry k{i}(
	.param .u64 .ptr .global .align 1 k{i}_param_0
)
.maxntid 128, 1, 1
{{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<4>;
	.reg .b64 	%rd<2>;

	ld.param.u64 	%rd1, [k{i}_param_0];
	mov.u32 	%r1, %tid.x;
	setp.gt.s32 	%p1, %r1, 63;
	@%p1 bra 	$L__BB{i}_2;
	ld.global.b32 	%r2, [%rd1];
	add.s32 	%r3, %r2, 1;
	st.global.b32 	[%rd1], %r3;
$L__BB{i}_2:
	ret;

}}
""" for i in range(count))


def text_output(folder: Path) -> bool:
    """`irscope ptx FILE` of many kernels at two sizes: the time per kernel stays flat and
    the peak memory follows the file, not the kernels."""
    print("text output of one file of many kernels:")
    per_kernel = []
    for count in TEXT_KERNELS:
        path = folder / f"kernels_{count}.ptx"
        path.write_text(many_kernels(count))
        base = count_files([path])
        wall, cpu, peak, status = irscope(["ptx", str(path)])
        if status:
            raise SystemExit(f"irscope ptx failed with status {status}")
        per_kernel.append(cpu / count)
        print(f"  {count:>7,} kernels, {path.stat().st_size / 1e6:5.1f} MB: line-split "
              f"counter {base:5.2f} s, irscope ptx {wall:6.2f} s wall, {cpu:.2f} s CPU = "
              f"{1e6 * cpu / count:5.1f} us CPU per kernel, {base / wall:.2f}x the counter; "
              f"peak RSS {peak:.0f} MiB")
    growth = per_kernel[1] / per_kernel[0]
    linear = growth < 1.5
    print(f"  CPU per kernel x{growth:.2f} from {TEXT_KERNELS[0]:,} to {TEXT_KERNELS[1]:,} "
          f"kernels (linear: < 1.5x): {'PASS' if linear else 'FAIL'}")
    return linear


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=TARGET_MB, help="in-memory text size in MB")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per contender (best kept)")
    parser.add_argument("--part", choices=("memory", "files", "text"), action="append",
                        help="only these parts (default: all)")
    args = parser.parse_args()
    parts = args.part or ["memory", "files", "text"]
    ok = True
    if "memory" in parts:
        modules = real_modules()
        ok &= in_memory(build_corpus(args.mb, modules), len(modules), args.runs)
    folder = Path(tempfile.mkdtemp(prefix="irscope-bench-ptx-"))
    try:
        if "files" in parts:
            ok &= many_files(real_modules(samples=True), folder, max(1, args.runs - 2))
        if "text" in parts:
            ok &= text_output(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
