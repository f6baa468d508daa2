"""Ingest speed and memory: a 2,000+ artifact Triton cache, TORCH_TRACE logs beside tlparse,
and a 1 GB gzipped TORCH_TRACE log beside the same log uncompressed.

(1) A folder of Triton cache entries made from real sm_90 compiles (names and texts varied)
    is ingested; artifacts per second and peak RSS are reported, with `cp -r` of the same
    folder as the floor any ingest has to pay.
(2) The real TORCH_TRACE logs of the corpus, one by one and concatenated to >= 90 MB, are
    ingested by irscope and rendered by tlparse (the newest release, requirements/test.txt)
    in the same run, alternating. Targets on the 90 MB log: >= 3x tlparse's speed, peak RSS
    <= 50 MB.
(3) The sample GPU trace (samples/gpu/dumps) repeated to 1 GB, in a temporary folder, is
    ingested as it is and gzipped (gzip -6 of the trace, that member repeated). Targets: the
    gzipped log at >= 80% of the plain log's speed, peak RSS <= 300 MB.

Run: .venv/bin/python benchmarks/bench_ingest.py [--cases cache,logs,gzip] [--entries N]
     [--keep DIR]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("IRSCOPE_CORPUS", ROOT.parent / "shared" / "corpus"))
BIG_LOG_BYTES = 90 * 10**6
RSS_LIMIT_MB = 50  # on the 90 MB log
SPEED_TARGET = 3.0  # x tlparse's speed on the 90 MB log
GZIP_LOG_BYTES = 10**9
GZIP_RSS_LIMIT_MB = 300
GZIP_SPEED_TARGET = 0.8  # of the plain log's speed
GZIP_REPEATS = 2  # runs of each (alternating), the best kept
SAMPLE_DUMPS = ROOT / "samples" / "gpu" / "dumps" / "trust_torch.tar.gz"
IR_FILES = ("ttir", "ttgir", "llir", "ptx")
CASES = ("cache", "logs", "gzip")


def measure(argv: list[str]) -> tuple[float, float, int, float]:
    """(wall seconds, peak RSS in MB, exit status, CPU seconds) of one child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    return (elapsed, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status),
            usage.ru_utime + usage.ru_stime)


def best_of(repeats: int, *commands: list[str], fresh: list[Path] = ()) -> list[tuple]:
    """Each command run ``repeats`` times, interleaved (a shared machine's load hits both
    alike); the fastest run of each, with its peak RSS, status and CPU time."""
    best: list[tuple | None] = [None] * len(commands)
    for _ in range(repeats):
        for i, argv in enumerate(commands):
            for path in fresh:
                shutil.rmtree(path, ignore_errors=True)
            result = measure(argv)
            if best[i] is None or result[0] < best[i][0]:
                best[i] = result
    return best


def irscope_ingest(paths: list[Path], run: Path) -> list[str]:
    return [sys.executable, "-m", "irscope", "ingest", *map(str, paths), "-o", str(run)]


def build_cache(folder: Path, entries: int) -> int:
    """``entries`` Triton cache entries (6 files each) from real compiles; returns the file count.

    Texts are varied per entry; the cubins come from 12 distinct compiles, so SASS is
    disassembled 12 times and reused for identical cubins, as in a real cache of variants.
    """
    sys.path.insert(0, str(ROOT / "tests"))
    from kernels import compile_aot

    compiled = [compile_aot(kernel, num_warps=warps)
                for kernel in ("add_kernel", "softmax_kernel", "matmul_kernel")
                for warps in (1, 2, 4, 8)]
    for i in range(entries):
        asm = compiled[i % len(compiled)]
        name = f"{asm['name']}_{i}"
        entry = folder / f"{i:08x}{'0' * 56}"
        entry.mkdir(parents=True)
        for ext in IR_FILES:  # each text differs, so every artifact is a distinct blob
            text = asm[ext].replace(asm["name"], name)
            (entry / f"{name}.{ext}").write_text(f"{text}\n// variant {i}\n")
        (entry / f"{name}.cubin").write_bytes(asm["cubin"])
        meta = {**asm["metadata"], "name": name, "hash": entry.name}
        (entry / f"{name}.json").write_text(json.dumps(meta, default=str))
    return entries * (len(IR_FILES) + 2)


def concatenate(logs: list[Path], target: Path, size_at_least: int = BIG_LOG_BYTES,
                gzipped: bool = False) -> int:
    """Repeat ``logs`` into one file of at least ``size_at_least`` bytes, each copy
    newline-terminated; ``gzipped``: each copy a gzip member (level 6) of its own, as `cat`
    of gzipped files makes, compressed once. Returns the bytes of the log."""
    size = 0
    copies = [log.read_bytes() for log in logs]
    copies = [data if data.endswith(b"\n") else data + b"\n" for data in copies]
    written = [gzip.compress(data, compresslevel=6) for data in copies] if gzipped else copies
    with open(target, "wb") as out:
        while size < size_at_least:
            for data, member in zip(copies, written):
                out.write(member)
                size += len(data)
    return size


def sample_trace(folder: Path) -> Path:
    """The TORCH_TRACE log of the committed GPU dumps, extracted into ``folder``."""
    with tarfile.open(SAMPLE_DUMPS) as tar:
        member = next(m for m in tar.getmembers() if "/trace/" in m.name and m.isfile())
        tar.extractall(folder, members=[member], filter="data")
    return folder / member.name


def row(label: str, ours: float, theirs: float | None, note: str, ok: bool) -> str:
    ratio = f"{theirs / ours:6.2f}x" if theirs else "      "
    base = f"{theirs:8.2f}" if theirs is not None else "        "
    return f"{label:<34} {ours:8.2f} {base} {ratio}  {note:<28} {'PASS' if ok else 'FAIL'}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=",".join(CASES),
                    help=f"which cases to run, of {', '.join(CASES)}")
    ap.add_argument("--entries", type=int, default=400, help="Triton cache entries (x6 files)")
    ap.add_argument("--keep", type=Path, help="build inputs here and keep them")
    ap.add_argument("--repeats", type=int, default=3, help="runs per timed case (best kept)")
    ap.add_argument("--build-cache", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.build_cache:  # in a child, so Triton's memory never counts in the RSS figures
        print(build_cache(args.build_cache, args.entries))
        return 0
    cases = set(args.cases.split(","))
    work = args.keep or Path(tempfile.mkdtemp(prefix="irscope-bench-ingest-"))
    work.mkdir(parents=True, exist_ok=True)
    # irscope's cache (tool outputs, XLA dumps): the benchmark's own, cold, never the user's
    os.environ["IRSCOPE_CACHE_DIR"] = str(work / "irscope-cache")
    shutil.rmtree(work / "irscope-cache", ignore_errors=True)
    # irscope as installed, its bytecode compiled once (pip does so at install): a checkout run
    # with PYTHONDONTWRITEBYTECODE compiles every module at every start (60 ms of each call)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "irscope"),
                    str(ROOT / "parsers")], stdout=subprocess.DEVNULL)
    failures = 0
    print(f"{'case':<34} {'irscope':>8} {'baseline':>8} {'speed':>7}  {'figures':<28} target")
    try:
        if "cache" in cases:
            failures += triton_cache_case(work, args.entries)
        if "logs" in cases:
            failures += trace_logs_case(work, args.repeats)
        if "gzip" in cases:
            failures += gzip_case(work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


def triton_cache_case(work: Path, entries: int) -> int:
    cache = work / "triton_cache"
    shutil.rmtree(cache, ignore_errors=True)
    files = int(subprocess.check_output([sys.executable, __file__, "--build-cache",
                                         str(cache), "--entries", str(entries)]))
    copy_s = measure(["cp", "-r", str(cache), str(work / "copy")])[0]
    secs, rss, rc, _ = measure(irscope_ingest([cache], work / "run_cache"))
    ok = rc == 0 and files >= 2000
    print(row(f"(1) {files} artifacts vs cp -r", secs, copy_s,
              f"{files / secs:,.0f} art/s, {rss:.0f} MB", ok))
    return not ok


def trace_logs_case(work: Path, repeats: int) -> int:
    tlparse = shutil.which("tlparse") or str(Path(sys.executable).with_name("tlparse"))
    logs = sorted((CORPUS / "torch_logs").glob("torch_trace_*"))
    if not logs or not Path(tlparse).exists():
        print("(2) skipped: corpus TORCH_TRACE logs or tlparse not found")
        return 1
    failures = 0
    one_by_one = theirs_each = 0.0
    for log in logs:
        one_by_one += measure(irscope_ingest([log], work / f"run_{log.stem}"))[0]
        theirs_each += measure([tlparse, str(log), "-o", str(work / "tl_small"),
                                "--overwrite", "--no-browser"])[0]
    corpus_run = work / "run_corpus"
    (ours, rss, rc, _), = best_of(repeats, irscope_ingest(logs, corpus_run), fresh=[corpus_run])
    ok = rc == 0 and ours <= theirs_each
    failures += not ok
    print(row(f"(2) {len(logs)} corpus logs", ours, theirs_each,
              f"one call; {rss:.0f} MB peak", ok))
    print(row("    the same, one call per log", one_by_one, theirs_each,
              "Python start-up per call", True).replace("PASS", "info"))
    big = work / "big_trace.log"
    size = concatenate(logs, big)
    big_run = work / "run_big"
    (secs, rss, rc, cpu), (base, base_rss, _, base_cpu) = best_of(
        repeats, irscope_ingest([big], big_run),
        [tlparse, str(big), "-o", str(work / "tl_big"), "--overwrite", "--no-browser"],
        fresh=[big_run])
    ok = rc == 0 and base / secs >= SPEED_TARGET and rss <= RSS_LIMIT_MB
    failures += not ok
    print(row(f"(2) {size / 1e6:.0f} MB log (best of {repeats})", secs, base,
              f"{rss:.0f} MB peak (tlparse {base_rss:.0f})", ok))
    print(f"    {size / 1e6 / secs:.1f} MB/s irscope, {size / 1e6 / base:.1f} MB/s tlparse; "
          f"CPU {cpu:.2f} s vs {base_cpu:.2f} s; targets >= {SPEED_TARGET:.0f}x, peak RSS "
          f"<= {RSS_LIMIT_MB} MB")
    return failures


def gzip_case(work: Path) -> int:
    trace = sample_trace(work / "sample")
    plain, packed = work / "gpu_trace_1gb.log", work / "gpu_trace_1gb.log.gz"
    size = concatenate([trace], plain, GZIP_LOG_BYTES)
    concatenate([trace], packed, GZIP_LOG_BYTES, gzipped=True)
    runs = [work / "run_plain", work / "run_gzip"]
    for run in runs:
        shutil.rmtree(run, ignore_errors=True)
    (ours, rss, rc, _), (base, base_rss, base_rc, _) = best_of(
        GZIP_REPEATS, irscope_ingest([packed], runs[1]), irscope_ingest([plain], runs[0]),
        fresh=runs)
    ratio = base / ours
    ok = rc == 0 == base_rc and ratio >= GZIP_SPEED_TARGET and rss <= GZIP_RSS_LIMIT_MB
    print(row(f"(3) {size / 1e9:.1f} GB log gzipped vs plain", ours, base,
              f"{rss:.0f} MB peak (plain {base_rss:.0f})", ok))
    from irscope.files import inflater

    print(f"    {size / 1e6 / ours:.1f} MB/s gzipped ({packed.stat().st_size / 1e6:.0f} MB "
          f"file, inflated by {inflater().__name__}), {size / 1e6 / base:.1f} MB/s plain: "
          f"{ratio:.2f} of the plain speed; targets >= {GZIP_SPEED_TARGET:.0%}, peak RSS <= "
          f"{GZIP_RSS_LIMIT_MB} MB")
    return not ok


if __name__ == "__main__":
    raise SystemExit(main())
