"""Filing and joining 100,000 profiled launches: time and peak memory, beside their floors.

The trace is the real torch.profiler trace of samples/profile/gpt2_small.trace.json.gz (three
GPT-2 training steps on an H100) repeated until it holds >= 100,000 kernel launches (each
copy shifted in time and ids, as benchmarks/bench_profile.py makes it), filed with the cut
TORCH_TRACE of the same program, so every launch joins as in the real run. Each case runs in
a child process of its own:
  ingest      irscope ingest of the trace into the run: read, kept as launch columns and
              whole (peak RSS; the read alone is bench_profile.py's);
  join        read_time on the run: the launch columns decoded, folded into signatures,
              each joined to its unit and the rows rolled up (every launch counted);
  baseline    json.loads of the launch columns alone: the floor any reader of them pays.
Target: the join <= 2 s here; the ingest's peak RSS <= 300 MB.

Run: .venv/bin/python benchmarks/bench_time.py [--launches 100000]
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_profile import repeated_trace  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "samples" / "profile"
JOIN_LIMIT_S, RSS_LIMIT_MB = 2.0, 300

CHILD = """
import json, resource, sys, time
from pathlib import Path
case, run_path, trace = sys.argv[1:4]
figures = {}
start = time.perf_counter()
if case == "ingest":
    from irscope.ingest import ingest
    from irscope.store import Run
    with Run.open(run_path) as run:
        ingest(run, [Path(trace)])
elif case == "json.loads":
    from irscope.store import Run
    with Run.open(run_path) as run:
        (unit,) = run.units("profile")
        stage = next(s for s in run.stages(unit.id) if s.kind == "launches")
        read = time.perf_counter()
        json.loads(run.read_blob(stage.blob))
        figures["parse_s"] = time.perf_counter() - read
else:
    from irscope.analysis import launches
    from irscope.read.timing import read_time
    from irscope.store import Run
    spent = {}
    for name in ("decode_table", "signatures"):
        original = getattr(launches, name)
        def timed(*args, _original=original, _name=name):
            began = time.perf_counter()
            result = _original(*args)
            spent[_name] = time.perf_counter() - began
            if _name == "signatures":
                spent["distinct"] = len(result)
            return result
        setattr(launches, name, timed)
    import irscope.read.timing as joined
    joined.decode_table, joined.signatures = launches.decode_table, launches.signatures
    with Run.open(run_path) as run:
        time_of_run = read_time(run)
    figures.update(spent, launches=sum(k.launches for k in time_of_run.kernels
                                       if k.kind == "kernel"),
                   rows=len(time_of_run.kernels), unjoined=time_of_run.unjoined_ns,
                   total=time_of_run.kernel_time_ns, trace_total=time_of_run.trace_kernel_time_ns)
figures["seconds"] = time.perf_counter() - start
figures["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(figures))
"""


def child(case: str, run: Path, trace: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, case, str(run), str(trace)],
                          capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{case} failed:\n{done.stderr}")
    return json.loads(done.stdout.splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--launches", type=int, default=100_000)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="irscope-bench-time-"))
    try:
        sample = gzip.decompress((PROFILE / "gpt2_small.trace.json.gz").read_bytes())
        events = json.loads(sample)["traceEvents"]
        per_copy = sum(1 for e in events if e.get("cat") == "kernel")
        trace = work / "trace" / "repeated.trace.json"
        trace.parent.mkdir()
        copies, per_copy = repeated_trace(len(sample) * math.ceil(args.launches / per_copy),
                                          trace)
        logs = work / "torch_trace"
        logs.mkdir()
        (logs / "trace.log").write_bytes(
            gzip.decompress((PROFILE / "gpt2_small.torch_trace.log.gz").read_bytes()))
        run = work / "run"
        from irscope.ingest import ingest
        from irscope.store import Run

        with Run.create(run, {"name": "bench-time"}) as created:
            ingest(created, [logs])
        filed = child("ingest", run, trace)
        floor = child("json.loads", run, trace)
        joined = child("join", run, trace)
        print(f"trace: {trace.stat().st_size / 1e6:.0f} MB, {copies} copies of the sample's "
              f"{per_copy} kernel launches")
        print(f"{'case':<34} {'seconds':>8} {'peak RSS':>9}  target")
        ok_rss = filed["rss_mb"] <= RSS_LIMIT_MB
        print(f"{'ingest (read, keep, file)':<34} {filed['seconds']:8.2f} "
              f"{filed['rss_mb']:6.0f} MB  {'PASS' if ok_rss else 'FAIL'} (<= {RSS_LIMIT_MB} MB)")
        print(f"{'json.loads of the columns (floor)':<34} {floor['parse_s']:8.2f} "
              f"{floor['rss_mb']:6.0f} MB")
        complete = joined["launches"] == copies * per_copy and joined["total"] == \
            joined["trace_total"]
        ok_join = joined["seconds"] <= JOIN_LIMIT_S and complete
        print(f"{'read_time (decode, fold, join)':<34} {joined['seconds']:8.2f} "
              f"{joined['rss_mb']:6.0f} MB  {'PASS' if ok_join else 'FAIL'} "
              f"(<= {JOIN_LIMIT_S} s), {joined['seconds'] / floor['parse_s']:.1f}x the floor")
        print(f"    decode {joined['decode_table']:.2f} s, fold {joined['signatures']:.2f} s "
              f"into {joined['distinct']:,} signatures; {joined['launches']:,} launches in "
              f"{joined['rows']:,} rows, every one counted: {complete}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok_join and ok_rss else 1


if __name__ == "__main__":
    raise SystemExit(main())
