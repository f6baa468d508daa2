"""Reading a 200 MB profiler trace: peak memory and time, beside json.load of the same file.

The trace is the real torch.profiler trace of samples/profile/gpt2_small.trace.json.gz (three
GPT-2 training steps on an H100) repeated until it is >= 200 MB: each copy shifted in time past
the one before, its correlation, External and flow ids and autograd sequence numbers shifted
so every copy stays a trace of its own steps. Each case runs in a child process of its own
and reports its peak RSS:
  irscope     profile_trace.read of the file, plain and gzipped: every kernel and memcpy row
              with its CPU context; the share spent resolving the contexts is printed apart;
  baseline    json.load of the plain file (the whole document in memory, no rows made).
Targets: peak RSS <= 300 MB for the 200 MB trace, plain and gzipped; every launch of every
copy read with its context (the copies' kernel count = copies x the sample's).

Run: .venv/bin/python benchmarks/bench_profile.py [--mb 200] [--keep DIR]
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "profile" / "gpt2_small.trace.json.gz"
RSS_LIMIT_MB = 300
# "ts": 4868175266550.405   "correlation": 545   "External id": 516   "id": 545
SHIFTED = re.compile(r'"(ts|correlation|External id|id|Sequence number)": (\d+)')

CHILD = """
import json, resource, sys, time
start = time.perf_counter()
if sys.argv[1] == "json.load":
    with open(sys.argv[2]) as fh:
        json.load(fh)
    figures = {}
else:
    from irscope.parsers import _profile, profile_trace
    resolve, spent = _profile.Timeline.contexts, []

    def timed(timeline):  # the time spent resolving launch contexts, apart from reading
        began = time.perf_counter()
        contexts = resolve(timeline)
        spent.append(time.perf_counter() - began)
        return contexts

    _profile.Timeline.contexts = timed
    with open(sys.argv[2], "rb") as fh:
        trace = profile_trace.read(fh)
    figures = {"kernels": len(trace.kernels), "errors": len(trace.diagnostics),
               "with_context": trace.totals["kernels_with_cpu_context"], "context_s": sum(spent)}
figures["seconds"] = time.perf_counter() - start
figures["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(figures))
"""


def repeated_trace(target_bytes: int, path: Path) -> tuple[int, int]:
    """Write the sample trace repeated to >= ``target_bytes``; (copies, kernels per copy)."""
    text = gzip.decompress(SAMPLE.read_bytes()).decode()
    start = text.index('"traceEvents": [') + len('"traceEvents": [')
    end = text.rindex("]")
    head, events, tail = text[:start], text[start:end].rstrip().rstrip(","), text[end:]
    sample = json.loads(text)["traceEvents"]
    times = [(e["ts"], e["ts"] + e.get("dur", 0)) for e in sample if "ts" in e
             and isinstance(e["ts"], (int, float))]
    period_us = math.ceil(max(t for _, t in times) - min(t for t, _ in times)) + 1000
    id_stride = 10 ** (len(str(max(int(m.group(2)) for m in SHIFTED.finditer(events)
                                   if m.group(1) != "ts"))) + 1)
    kernels = sum(1 for e in sample if e.get("cat") == "kernel")
    copies = math.ceil(target_bytes / len(events))
    with open(path, "w") as out:
        out.write(head)
        for copy in range(copies):
            def shift(match, copy=copy):
                step = period_us if match.group(1) == "ts" else id_stride
                return f'"{match.group(1)}": {int(match.group(2)) + copy * step}'

            out.write(("," if copy else "") + SHIFTED.sub(shift, events))
        out.write(tail)
    return copies, kernels


def child(case: str, path: Path) -> dict:
    output = subprocess.run([sys.executable, "-c", CHILD, case, str(path)],
                            capture_output=True, text=True, check=True).stdout
    return json.loads(output)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=200, help="size of the repeated trace")
    ap.add_argument("--keep", type=Path, help="write the traces here and keep them")
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="irscope-bench-profile-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        plain = work / "repeated.trace.json"
        started = time.perf_counter()
        copies, per_copy = repeated_trace(args.mb * 10**6, plain)
        packed = work / "repeated.trace.json.gz"
        with open(plain, "rb") as src, gzip.open(packed, "wb", compresslevel=1) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        size = plain.stat().st_size
        print(f"trace: {size / 1e6:.0f} MB ({packed.stat().st_size / 1e6:.0f} MB gzipped), "
              f"{copies} copies of the sample, made in {time.perf_counter() - started:.0f} s")
        base = child("json.load", plain)
        failures = 0
        print(f"{'case':<28} {'seconds':>8} {'peak RSS':>9} {'RSS vs json.load':>17}  target")
        print(f"{'json.load (baseline)':<28} {base['seconds']:8.1f} {base['rss_mb']:7.0f} MB")
        for label, path in (("profile_trace.read", plain), ("profile_trace.read (.gz)", packed)):
            ours = child("read", path)
            complete = (ours["kernels"] == ours["with_context"] == copies * per_copy
                        and not ours["errors"])
            ok = ours["rss_mb"] <= RSS_LIMIT_MB and complete
            failures += not ok
            print(f"{label:<28} {ours['seconds']:8.1f} {ours['rss_mb']:7.0f} MB "
                  f"{base['rss_mb'] / ours['rss_mb']:16.1f}x  {'PASS' if ok else 'FAIL'}")
            print(f"    {ours['kernels']:,} kernels, all with their CPU context: {complete}; "
                  f"contexts resolved in {ours['context_s']:.2f} s; "
                  f"{size / 1e6 / ours['seconds']:.0f} MB/s")
        print(f"target: peak RSS <= {RSS_LIMIT_MB} MB reading a {args.mb} MB trace")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
