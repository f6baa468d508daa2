"""Fuzz: `irscope ingest` of hostile sizes and shapes, built from a real TORCH_TRACE log (the
committed GPU dumps) and a real Triton cache entry and XLA dump. Oversized payload and
envelope lines (sparse files: no disk, no memory spent on them), JSON nested too deeply,
decompression bombs, two ranks' records interleaved in one log, compressed logs and tarballs
of dumps, and tarballs that reach outside themselves. Each case asserts what is kept: every
good record and file filed, the bad one reported in a line naming its file (and line), in
memory bounded by the record read, not the file."""

from __future__ import annotations

import gzip
import io
import json
import lzma
import re
import sqlite3
import tarfile
from pathlib import Path

import pytest
import zstandard
from fuzz_helpers import SAMPLES, SECRET, changed, check, digest, irscope, problems, rng, \
    stage_digests, tree_state

pytestmark = pytest.mark.fuzz  # make test runs the campaign; make test-fast leaves it out

DUMPS = SAMPLES / "gpu" / "dumps" / "trust_torch.tar.gz"
TRACE = "w/trace/dedicated_log_torch_trace_429mjk2q.log"
HLO = {"module_0001.jit_mlp.before_optimizations.txt":
       SAMPLES / "hlo" / "jit_mlp_dead_gate.before_optimizations.txt",
       "module_0001.jit_mlp.cpu_after_optimizations.txt":
       SAMPLES / "hlo" / "jit_mlp_dead_gate.cpu_after_optimizations.txt"}
ENVELOPE = "V1124 12:04:02.490000 455 torch/_dynamo/convert_frame.py:1] "
# V1124 12:04:02.490000 455 torch/_dynamo/convert_frame.py:1] {"dynamo_start": ...
RECORD_START = re.compile(rb"^[VIWEFD]\d{4} ", re.M)
GIB = 1 << 30
RSS_BOUND_MB = 200  # an ingest of the sample trace holds about 40 MB
DEEP = 100_000  # nesting of the hostile JSON


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> Path:
    """The committed raw dumps of one GPU process: TORCH_TRACE, TORCH_LOGS, Triton cache."""
    folder = tmp_path_factory.mktemp("dumps")
    with tarfile.open(DUMPS) as tar:
        tar.extractall(folder, filter="data")
    return folder


@pytest.fixture(scope="module")
def trace(dumps) -> bytes:
    return (dumps / TRACE).read_bytes()


@pytest.fixture(scope="module")
def filed(tmp_path_factory, dumps) -> set[str]:
    """The stage digests an ingest of the unchanged log files: what every case must keep."""
    folder = tmp_path_factory.mktemp("plain")
    outcome = irscope("ingest", dumps / TRACE, "-o", folder / "run", cwd=folder)
    assert outcome.returncode == 0, outcome.stderr
    return stage_digests(folder / "run")


def _records(trace: bytes) -> list[bytes]:
    """The log cut before each envelope line: each piece one record, payload lines and all."""
    starts = [m.start() for m in RECORD_START.finditer(trace)] + [len(trace)]
    return [trace[a:b] for a, b in zip(starts, starts[1:])]


def _middle(trace: bytes) -> tuple[bytes, bytes]:
    """The log cut in two at the record boundary nearest its middle."""
    records = _records(trace)
    half = len(records) // 2
    return b"".join(records[:half]), b"".join(records[half:])


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _line_of(data: bytes) -> int:
    """The 1-based number of the line that starts after ``data``."""
    return data.count(b"\n") + 1


def _ingest(tmp_path: Path, *paths, env: dict | None = None, rss: bool = True):
    run = tmp_path / "run"
    return run, irscope("ingest", *paths, "-o", run, cwd=tmp_path, env=env, rss=rss)


def _kept(run: Path, expected: set[str], what: str) -> list[str]:
    if not (run / "index.sqlite").is_file():
        return [f"loss: no run was made ({what})"]
    missing = expected - stage_digests(run)
    return [f"loss: {len(missing)} of {len(expected)} stages of {what} not filed"] if missing \
        else []


def _bounded(outcome, bound: float = RSS_BOUND_MB) -> list[str]:
    peak = outcome.peak_rss_mb
    return [] if peak is not None and peak < bound else [f"memory: peak RSS {peak} MB"]


def _said(outcome, *words: str) -> list[str]:
    """A warning line holding every one of ``words`` (a file and line, a limit)."""
    lines = outcome.stderr.splitlines()
    if any(all(w in line for w in words) for line in lines):
        return []
    return [f"no line saying {' / '.join(words)}: {outcome.stderr[-400:]!r}"]


# -- records too large to hold ----------------------------------------------------------------
def _sparse(path: Path, before: bytes, gap: int, after: bytes) -> Path:
    """``before``, ``gap`` zero bytes that take no disk, then ``after``."""
    with open(path, "wb") as fh:
        fh.write(before)
        fh.seek(gap, io.SEEK_CUR)
        fh.write(after)
    return path


# what opens the GiB line, what follows it, the limit the warning names
GIB_LINES = {
    "payload": ((ENVELOPE + json.dumps({"artifact": {"name": "huge", "encoding": "string"},
                                        "frame_id": 0, "frame_compile_id": 0}) + "\n\t"),
                b"\n", "256 MiB"),
    "envelope": (ENVELOPE + '{"chromium_event": {}, "frame_id": 0, "frame_compile_id": 0, "x": "',
                 b'"}\n\tits payload\n', "16 MiB"),
}


@pytest.mark.parametrize("line", sorted(GIB_LINES))
def test_a_gib_line_is_skipped_and_the_rest_filed(tmp_path, trace, filed, line):
    """A GiB payload line (its record past the limit) or envelope line (past what one can
    hold), amid the log's records: that record is skipped with a line saying where and why."""
    opening, closing, limit = GIB_LINES[line]
    head, tail = _middle(trace)
    path = _sparse(tmp_path / "trace.log", head + opening.encode(), GIB, closing + tail)
    run, outcome = _ingest(tmp_path, path)
    found = problems(outcome, ok=(0,)) + _kept(run, filed, "the log's other records")
    found += _bounded(outcome) + _said(outcome, f"{path}:{_line_of(head)}", limit)
    check(f"ingest/bounds/gib-{line}-line", found, outcome)


def test_the_record_limit_is_the_environments(tmp_path, trace, filed):
    """IRSCOPE_MAX_RECORD_MB lowers the limit: a 3 MiB payload (held in memory below the
    size that streams it) is skipped at 1 MiB, a 3 MiB envelope line too."""
    head, tail = _middle(trace)
    payload = {"artifact": {"name": "big", "encoding": "string"}, "frame_id": 0,
               "frame_compile_id": 0}
    big = (ENVELOPE + json.dumps(payload) + "\n").encode() + b"\tx" * (3 << 19) + b"\n"
    long = (ENVELOPE + json.dumps({"chromium_event": {}, "pad": "y" * (3 << 20)})).encode()
    path = tmp_path / "trace.log"
    path.write_bytes(head + big + long + b"\n" + tail)
    run, outcome = _ingest(tmp_path, path, env={"IRSCOPE_MAX_RECORD_MB": "1"})
    found = problems(outcome, ok=(0,)) + _kept(run, filed, "the log's other records")
    found += _said(outcome, f"{path}:{_line_of(head)}", "1 MiB")
    found += _said(outcome, f"{path}:{_line_of(head + big)}", "1 MiB")
    if digest(big[big.index(b"\n") + 2:]) in stage_digests(run):
        found.append("the payload past the limit was filed")
    check("ingest/bounds/record-limit-env", found, outcome)


# -- JSON nested too deeply ---------------------------------------------------------------------
def _deep(depth: int = DEEP) -> str:
    return "[" * depth + "]" * depth


def _deep_records() -> list[tuple[str, dict, str]]:
    """(case, envelope, payload): a record with JSON nested too deeply where a reader parses."""
    frame = {"frame_id": 7, "frame_compile_id": 0}
    return [
        ("envelope", {"chromium_event": {}, **frame, "deep": "@"}, "{}"),
        ("chromium-payload", {"chromium_event": {}, **frame}, _deep()),
        ("guards-payload", {"dynamo_guards": {}, **frame}, _deep()),
        ("cache-artifact", {"artifact": {"name": "fx_graph_cache_hit", "encoding": "json"},
                            **frame}, _deep()),
        ("recompile-reasons", {"artifact": {"name": "recompile_reasons", "encoding": "json"},
                               **frame}, _deep()),
        ("failure-reason", {"compilation_metrics": {"fail_type": "x", "fail_reason": "@"},
                            **frame}, ""),
    ]


def _record_text(envelope: dict, payload: str, depth: int = DEEP) -> bytes:
    head = ENVELOPE + json.dumps(envelope).replace('"@"', _deep(depth))
    return (head + "".join("\n\t" + line for line in payload.split("\n") if payload)
            + "\n").encode()


@pytest.mark.parametrize("case", [c for c, _, _ in _deep_records()])
def test_json_nested_too_deeply_in_one_record(tmp_path, trace, filed, dumps, case):
    """The record is kept raw with a warning; the rest of the log, and a Triton cache entry
    and an XLA dump given in the same command, are filed."""
    _, envelope, payload = next(r for r in _deep_records() if r[0] == case)
    depth = 900 if case == "failure-reason" else DEEP  # parsed, then printed and stored
    head, tail = _middle(trace)
    path = tmp_path / "trace.log"
    path.write_bytes(head + _record_text(envelope, payload, depth) + tail)
    entry = next(p for p in sorted((dumps / "w" / "triton_cache").iterdir())
                 if any(f.suffix == ".ttir" for f in p.iterdir()))
    xla = tmp_path / "xla"
    xla.mkdir()
    for name, sample in HLO.items():
        (xla / name).write_bytes(sample.read_bytes())
    run, outcome = _ingest(tmp_path, path, entry, xla)
    others = {digest(f.read_bytes()) for f in [*entry.iterdir(), *xla.iterdir()]
              if f.suffix in (".ttir", ".ttgir", ".llir", ".ptx", ".txt")}
    found = problems(outcome, ok=(0,)) + _kept(run, filed, "the log's other records")
    found += _kept(run, others, "the Triton entry and the XLA dump")
    check(f"ingest/bounds/deep-json/{case}", found, outcome)


# -- ranks ------------------------------------------------------------------------------------
def test_two_ranks_interleaved_in_one_log_file_into_their_own_units(tmp_path, trace):
    """Each record carries its rank: the log files as each rank's log alone does, rank 1's
    compiles units of their own (``[0/0] forward (rank 1)``) beside rank 0's."""
    def stamped(rank: int) -> list[bytes]:
        return [re.sub(rb"(\] \{.*?)\}(\r?\n|$)", lambda m: m.group(1) + b', "rank": %d}'
                       % rank + m.group(2), record, count=1) for record in _records(trace)]
    ranks = [stamped(0), stamped(1)]
    alone = {}
    for rank, records in enumerate(ranks):
        (tmp_path / f"rank{rank}").mkdir()
        alone[rank] = _ingest(tmp_path / f"rank{rank}",
                              _write(tmp_path / f"rank{rank}" / "trace.log", b"".join(records)))
    r = rng("ingest/bounds/interleaved-ranks")
    merged = []
    while ranks[0] or ranks[1]:
        side = r.randrange(2) if ranks[0] and ranks[1] else (0 if ranks[0] else 1)
        merged.append(ranks[side].pop(0))
    run, outcome = _ingest(tmp_path, _write(tmp_path / "trace.log", b"".join(merged)))
    found = problems(outcome, ok=(0,))
    for rank, (one, how) in alone.items():
        found += problems(how, ok=(0,)) + _kept(run, stage_digests(one), f"rank {rank}'s log")
    if not found:
        expected = {**_torch_units(alone[0][0]), **_torch_units(alone[1][0])}
        both = _torch_units(run)
        if both != expected or len(expected) != 2 * len(_torch_units(alone[0][0])):
            found.append(f"silent mix: {len(both)} units {sorted(both.items())[:4]}..., not "
                         f"the {len(expected)} of two ranks")
    check("ingest/bounds/interleaved-ranks", found, outcome)


def _torch_units(run: Path) -> dict[str, int | None]:
    db = sqlite3.connect(f"file:{run / 'index.sqlite'}?mode=ro", uri=True)
    try:
        return {name: json.loads(attrs).get("rank") for name, attrs in
                db.execute("SELECT name, attrs FROM units WHERE framework='torch'")}
    finally:
        db.close()


# -- compressed inputs and tarballs ---------------------------------------------------------
COMPRESSORS = {
    "gz": lambda data: gzip.compress(data, compresslevel=1),
    "zst": lambda data: zstandard.ZstdCompressor(level=1).compress(data),
    "xz": lambda data: lzma.compress(data, preset=0),
}


@pytest.mark.parametrize("suffix", sorted(COMPRESSORS))
def test_a_compressed_log_files_as_the_plain_one(tmp_path, trace, filed, suffix):
    path = tmp_path / f"trace.log.{suffix}"
    path.write_bytes(COMPRESSORS[suffix](trace))
    run, outcome = _ingest(tmp_path, path)
    found = problems(outcome, ok=(0,)) + _kept(run, filed, f"the .{suffix} log")
    if not found and stage_digests(run) != filed:
        found.append("the compressed log filed stages the plain one does not")
    check(f"ingest/compressed/log.{suffix}", found, outcome)


def test_a_truncated_compressed_log_keeps_the_records_before_the_damage(tmp_path, trace):
    data = gzip.compress(trace, compresslevel=1)
    path = tmp_path / "trace.log.gz"
    path.write_bytes(data[:len(data) * 2 // 3])
    run, outcome = _ingest(tmp_path, path)
    found = problems(outcome, ok=(0,)) + _said(outcome, str(path), "damaged gzip data")
    if not found and len(stage_digests(run)) < 100:
        found.append(f"loss: only {len(stage_digests(run))} stages before the damage")
    check("ingest/compressed/truncated-gz", found, outcome)


TAR_MODES = {"tar": "w", "tar.gz": "w:gz", "tar.xz": "w:xz", "tar.zst": "zst"}


def _dump_folder(dumps: Path, tmp_path: Path) -> Path:
    """A folder of dumps of every kind ingest reads: trace, TORCH_LOGS, Triton entry, XLA."""
    folder = tmp_path / "dumps"
    (folder / "trace").mkdir(parents=True)
    (folder / "trace" / "trace.log").write_bytes((dumps / TRACE).read_bytes())
    (folder / "logs.txt").write_bytes((dumps / "w" / "logs.txt").read_bytes())
    entry = next(p for p in sorted((dumps / "w" / "triton_cache").iterdir())
                 if any(f.suffix == ".ttir" for f in p.iterdir()))
    (folder / "cache" / entry.name).mkdir(parents=True)
    for f in entry.iterdir():
        (folder / "cache" / entry.name / f.name).write_bytes(f.read_bytes())
    (folder / "xla").mkdir()
    for name, sample in HLO.items():
        (folder / "xla" / name).write_bytes(sample.read_bytes())
    return folder


def _tar(folder: Path, target: Path, mode: str) -> Path:
    if mode != "zst":
        with tarfile.open(target, mode) as tar:
            tar.add(folder, arcname=folder.name)
        return target
    with open(target, "wb") as fh, zstandard.ZstdCompressor().stream_writer(fh) as out, \
            tarfile.open(fileobj=out, mode="w|") as tar:
        tar.add(folder, arcname=folder.name)
    return target


@pytest.mark.parametrize("kind", sorted(TAR_MODES))
def test_a_tarball_of_dumps_files_as_the_folder(tmp_path, dumps, kind):
    folder = _dump_folder(dumps, tmp_path)
    (tmp_path / "plain").mkdir()
    plain, first = _ingest(tmp_path / "plain", folder)
    archive = _tar(folder, tmp_path / f"dumps.{kind}", TAR_MODES[kind])
    run, outcome = _ingest(tmp_path, archive)
    found = problems(first, ok=(0,)) + problems(outcome, ok=(0,))
    found += _kept(run, stage_digests(plain), f"the .{kind} of the dump folder")
    if not found:
        origins = {o for (o,) in sqlite3.connect(run / "index.sqlite").execute(
            "SELECT DISTINCT origin FROM stages")}
        if not any(o and o.startswith(f"{archive}/dumps/") for o in origins) or any(
                o and "irscope-ingest-" in o for o in origins):
            found.append(f"stages do not name the archive: {sorted(origins)[:3]}")
        if _torch_units(run) != _torch_units(plain):
            found.append("units named otherwise than the folder's")
    check(f"ingest/compressed/{kind}", found, outcome)


def test_a_hostile_tarball_writes_nothing_outside_and_files_the_rest(tmp_path):
    """Members named outside it, links out, a device, a FIFO, a member over another, a nested
    archive: only the regular files inside are filed; nothing lands outside the run."""
    ptx = (SAMPLES / "ptx" / "add_kernel.sm80.ptx").read_bytes()
    secret = tmp_path / "secret.ptx"
    secret.write_bytes(ptx.replace(b"add_kernel", SECRET.encode()))
    inner = io.BytesIO()
    with tarfile.open(fileobj=inner, mode="w:gz") as tar:
        _member(tar, "inner.ptx", ptx.replace(b"add_kernel", b"inner_kernel"))
    archive = tmp_path / "in" / "hostile.tar.gz"
    archive.parent.mkdir()
    with tarfile.open(archive, "w:gz") as tar:
        _member(tar, "good/k.ptx", ptx)
        _member(tar, "../escaped.ptx", ptx)
        _member(tar, str(tmp_path / "absolute.ptx"), ptx)
        _member(tar, "good/../../escaped2.ptx", ptx)
        _member(tar, "good/link.ptx", type=tarfile.SYMTYPE, linkname=str(secret))
        _member(tar, "good/rel.ptx", type=tarfile.SYMTYPE, linkname="../../secret.ptx")
        _member(tar, "good/hard.ptx", type=tarfile.LNKTYPE, linkname=str(secret))
        _member(tar, "good/copy.ptx", type=tarfile.LNKTYPE, linkname="good/k.ptx")
        _member(tar, "good/dev", type=tarfile.CHRTYPE, devmajor=1, devminor=5)
        _member(tar, "good/fifo", type=tarfile.FIFOTYPE)
        _member(tar, "good/k.ptx/below", ptx)
        _member(tar, "nested.tar.gz", inner.getvalue())
    before = tree_state(tmp_path)
    run, outcome = _ingest(tmp_path, archive)
    found = problems(outcome, ok=(0,))
    outside = changed(before, tree_state(tmp_path, skip=run))
    if outside:
        found.append(f"written outside the run: {outside}")
    held = stage_digests(run) if (run / "index.sqlite").is_file() else set()
    if digest(secret.read_bytes()) in held:
        found.append("read outside: a link out of the archive was followed")
    found += _kept(run, {digest(ptx), digest(ptx.replace(b"add_kernel", b"inner_kernel"))},
                   "the archive's own files")
    for member in ("../escaped.ptx", "good/link.ptx", "good/hard.ptx", "good/dev"):
        found += _said(outcome, f"{archive}/{member}", "skipped")
    check("ingest/tarball/hostile", found, outcome)


def _member(tar: tarfile.TarFile, name: str, data: bytes = b"", **fields) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    for key, value in fields.items():
        setattr(info, key, value)
    tar.addfile(info, io.BytesIO(data) if data else None)


# -- decompression bombs ------------------------------------------------------------------------
class _Zeros(io.RawIOBase):
    """``size`` zero bytes, read without holding them."""

    def __init__(self, size: int):
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = min(len(buffer), self.left)
        buffer[:n] = bytes(n)
        self.left -= n
        return n


def _zstd_stream(path: Path, *parts) -> Path:
    """``parts`` (bytes, or a count of zero bytes) zstandard-compressed into ``path``."""
    zeros = bytes(1 << 20)
    with open(path, "wb") as fh, zstandard.ZstdCompressor(level=1).stream_writer(fh) as out:
        for part in parts:
            if isinstance(part, bytes):
                out.write(part)
                continue
            for _ in range(part >> 20):
                out.write(zeros)
    return path


def test_a_zstd_bomb_inside_a_log_is_read_in_bounded_memory(tmp_path, trace, filed):
    """0.9 GiB of zeros on one line between the log's records, in a 30 KB file."""
    head, tail = _middle(trace)
    path = _zstd_stream(tmp_path / "trace.log.zst", head, 920 << 20, b"\n" + tail)
    run, outcome = _ingest(tmp_path, path)
    found = problems(outcome, ok=(0,)) + _kept(run, filed, "the log's records around the bomb")
    found += _bounded(outcome) + _said(outcome, f"{path}:{_line_of(head)}", "skipped")
    check("ingest/bombs/zstd-in-log", found, outcome)


def test_a_zstd_bomb_file_is_refused_at_the_file_limit(tmp_path):
    path = _zstd_stream(tmp_path / "kernel.ptx.zst", b"// ptx\n", 920 << 20)
    good = tmp_path / "k.ptx"
    good.write_bytes((SAMPLES / "ptx" / "add_kernel.sm80.ptx").read_bytes())
    run, outcome = _ingest(tmp_path, path, good, env={"IRSCOPE_MAX_FILE_MB": "64"})
    found = problems(outcome, ok=(0,)) + _bounded(outcome) + _said(outcome, str(path), "64 MiB")
    found += _kept(run, {digest(good.read_bytes())}, "the file beside the bomb")
    check("ingest/bombs/zstd-file", found, outcome)


def test_a_tarball_bomb_stops_at_the_expansion_limit(tmp_path):
    ptx = (SAMPLES / "ptx" / "add_kernel.sm80.ptx").read_bytes()
    path = tmp_path / "bomb.tar.zst"
    with open(path, "wb") as fh, zstandard.ZstdCompressor(level=1).stream_writer(fh) as out, \
            tarfile.open(fileobj=out, mode="w|") as tar:
        _member(tar, "k.ptx", ptx)
        info = tarfile.TarInfo("zeros.ptx")
        info.size = 920 << 20
        tar.addfile(info, _Zeros(info.size))
    run, outcome = _ingest(tmp_path, path, env={"IRSCOPE_MAX_EXPANDED_MB": "256"})
    found = problems(outcome, ok=(0,)) + _bounded(outcome) + _said(outcome, str(path), "256 MiB")
    found += _kept(run, {digest(ptx)}, "the member before the bomb")
    check("ingest/bombs/tar-zst", found, outcome)
