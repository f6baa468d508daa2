"""Fuzz: what `irscope ingest` collects. Names that collide (same-stem files in different
folders, per-rank logs of one name, several TORCH_TRACE logs of one name, XLA dumps of two
processes in one folder), type-confused and mutated TORCH_TRACE records, malformed Triton
metadata, links out of a dump, a full disk and a killed ingest. Nothing collected may be lost:
every distinct input file (or record payload) is a stage of the run, and a bad record is kept
raw with a diagnostic while everything else is filed."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from fuzz_helpers import (SAMPLES, SECRET, changed, check, digest, irscope, mutate, problems,
                          rng, stage_digests, tree_state)

pytestmark = pytest.mark.fuzz  # make test runs the campaign; make test-fast leaves it out

DUMPS = SAMPLES / "gpu" / "dumps" / "trust_torch.tar.gz"
PTX = (SAMPLES / "ptx" / "add_kernel.sm80.ptx").read_bytes()
TTIR = (SAMPLES / "mlir" / "add_kernel.sm80.ttir").read_bytes()
HLO_BEFORE = (SAMPLES / "hlo" / "jit_mlp_dead_gate.before_optimizations.txt").read_bytes()
HLO_AFTER = (SAMPLES / "hlo" / "jit_mlp_dead_gate.cpu_after_optimizations.txt").read_bytes()
# "ingested 4 artifacts from 4 sources: 3 new units, 5 new stages"
SUMMARY = re.compile(r"ingested (\d+) artifacts from (\d+) sources: (\d+) new units, "
                     r"(\d+) new stages")


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> Path:
    """The committed raw dumps of one GPU process: TORCH_TRACE, TORCH_LOGS, Triton cache."""
    folder = tmp_path_factory.mktemp("dumps")
    with tarfile.open(DUMPS) as tar:
        tar.extractall(folder, filter="data")
    return folder / "w"


def _ingest(tmp_path: Path, *paths, **limits):
    run = tmp_path / "run"
    outcome = irscope("ingest", *paths, "-o", run, cwd=tmp_path, **limits)
    return run, outcome


def _lost(run: Path, expected: dict[str, bytes]) -> list[str]:
    """``loss: ...`` for each expected content (by label) the run holds no stage of."""
    if not (run / "index.sqlite").is_file():
        return ["loss: no run was made"]
    held = stage_digests(run)
    return [f"loss: {label} was not filed" for label, data in expected.items()
            if digest(data) not in held]


def _summary_counts(outcome, files: int) -> list[str]:
    """The summary line must count what was filed: every file given, each its own stage."""
    match = SUMMARY.search(outcome.stdout)
    if not match:
        return [f"no summary line: {outcome.stdout[-200:]!r}"]
    artifacts, _, _, stages = map(int, match.groups())
    if artifacts < files or stages < files:
        return [f"loss: summary counts {artifacts} artifacts, {stages} stages for {files} files"]
    return []


# -- colliding names ---------------------------------------------------------------------------
def _write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_same_stem_files_in_different_folders(tmp_path):
    files = {f"{arch}/kernel.ptx": PTX.replace(b"sm_80", f"sm_{arch[2:]}".encode())
             for arch in ("sm80", "sm90", "sm100")}
    files["sm80/kernel.ttir"] = TTIR
    files["sm90/kernel.ttir"] = TTIR.replace(b"add_kernel", b"add_kernel_v2")
    for name, data in files.items():
        _write(tmp_path / "in" / name, data)
    run, outcome = _ingest(tmp_path, tmp_path / "in")
    found = problems(outcome, ok=(0,)) + _lost(run, files) + _summary_counts(outcome, len(files))
    check("ingest/collide/same-stem", found, outcome)


def test_same_stem_files_given_one_by_one(tmp_path):
    a = _write(tmp_path / "a" / "k.ptx", PTX)
    b = _write(tmp_path / "b" / "k.ptx", PTX.replace(b"sm_80", b"sm_90"))
    run, outcome = _ingest(tmp_path, a, b)
    found = problems(outcome, ok=(0,)) + _lost(run, {"a/k.ptx": a.read_bytes(),
                                                     "b/k.ptx": b.read_bytes()})
    check("ingest/collide/same-stem-args", found, outcome)


def test_one_file_changed_between_two_ingests(tmp_path):
    path = _write(tmp_path / "k.ptx", PTX)
    run, first = _ingest(tmp_path, path)
    path.write_bytes(PTX.replace(b"sm_80", b"sm_90"))
    _, second = _ingest(tmp_path, path)
    found = problems(first, ok=(0,)) + problems(second, ok=(0,))
    found += _lost(run, {"the first k.ptx": PTX, "the second k.ptx": path.read_bytes()})
    meta = json.loads((run / "run.json").read_text())
    if len(meta.get("ingests", [])) != 2:
        found.append(f"provenance: run.json keeps {len(meta.get('ingests', []))} of 2 ingests")
    check("ingest/collide/re-ingest", found, second)


def test_rank_logs_of_one_name(tmp_path, dumps):
    log = (dumps / "logs.txt").read_bytes()
    files = {f"rank{r}/train.log": log.replace(b"[0/0]", f"[0/0] rank{r}".encode()) + b"\n"
             * r for r in range(3)}
    for name, data in files.items():
        _write(tmp_path / "in" / name, data)
    run, outcome = _ingest(tmp_path, tmp_path / "in")
    found = problems(outcome, ok=(0,)) + _lost(run, files)
    check("ingest/collide/rank-logs", found, outcome)


def test_rank_logs_are_named_by_rank(tmp_path, dumps):
    """One log name from several ranks, the rank told by the folder (``rank1/``, ``rank_2/``)
    or by torchrun's ``[rank3]:`` line prefix: each log is its rank's stage and unit, and each
    rank's compiles its own units, never ``train.log (2)`` beside rank 0's."""
    log = (dumps / "logs.txt").read_bytes()
    r = rng("ingest/collide/rank-names")
    ranks = {0: "rank0/train.log", 1: "rank1/train.log", 2: "logs/rank_2/train.log",
             3: "combined/train.log"}
    files = {}
    for rank, name in ranks.items():
        data = log.replace(b"import math", f"import math  # rank {rank}".encode())
        if rank == 3:
            data = b"".join(b"[rank3]:" + line for line in data.splitlines(keepends=True))
        files[name] = _write(tmp_path / "in" / name, data).read_bytes()
    order = r.sample(sorted(ranks), len(ranks))
    run, outcome = _ingest(tmp_path, *(tmp_path / "in" / ranks[k] for k in order))
    found = problems(outcome, ok=(0,)) + _lost(run, files)
    if not found:
        db = sqlite3.connect(f"file:{run / 'index.sqlite'}?mode=ro", uri=True)
        logs = {name: json.loads(attrs).get("rank") for name, attrs in db.execute(
            "SELECT stages.name, units.attrs FROM stages JOIN units ON units.id = unit_id "
            "WHERE kind='torch_log'")}
        codes = {name for (name,) in db.execute(
            "SELECT DISTINCT units.name FROM stages JOIN units ON units.id = unit_id "
            "WHERE kind='inductor_output_code'")}
        db.close()
        expected = {"train.log": 0, **{f"train.log (rank {k})": k for k in (1, 2, 3)}}
        if logs != expected:
            found.append(f"logs filed as {sorted(logs.items())}, not {sorted(expected.items())}")
        for rank in (1, 2, 3):
            if not any(name.endswith(f"(rank {rank})") for name in codes):
                found.append(f"rank {rank}'s output code is not in a unit of rank {rank}")
    check("ingest/collide/rank-names", found, outcome)


def test_output_codes_renamed_on_collision_are_recorded_by_their_filed_name(tmp_path):
    """Output codes of one graph filed under one stage name (two sources, three captures):
    the store files each newcomer as ``name (n)``, and the graph's ``output_codes`` attribute
    must name the stage that holds each code, not the name it was offered."""
    from irscope.ingest import graphs
    from irscope.store import Run

    r = rng("ingest/collide/output-code-names")
    codes = [(SAMPLES / "inductor" / name).read_text() for name in
             ("complex_activation.output_code.py", "mlp_dead_gate.output_code.py")]
    codes += [codes[r.randrange(2)] + f"\n# capture {r.randrange(1 << 30)}\n"]
    run = Run.create(tmp_path / "run")
    with run.transaction() as writer:
        writer.keep_all = True
        unit = writer.add_unit("[0/0] forward", "torch")
        for code in r.sample(codes, len(codes)):
            graphs.add_output_code(writer, unit, code, "output_code", "test")
    held = {s.name: run.read_text(s) for s in run.stages() if s.kind == graphs.OUTPUT_CODE}
    keys = run.unit_by_id(unit).attrs["output_codes"]
    run.close()
    found = [f"loss: {len(held)} output code stages for {len(codes)} codes"] if len(
        held) != len(codes) else []
    for key, name in keys.items():
        if name not in held or graphs.output_code_key(held[name]) != key:
            found.append(f"output_codes names {name!r} for a code it does not hold")
    if len(keys) != len(codes):
        found.append(f"{len(keys)} output codes recorded for {len(codes)}")
    check("ingest/collide/output-code-names", found)


def test_three_trace_logs_of_one_name(tmp_path, dumps):
    trace = (dumps / "trace" / "dedicated_log_torch_trace_429mjk2q.log").read_bytes()
    payloads = {}
    for n in range(3):
        marked = trace.replace(b"# AOT ID: ['0_forward']", f"# AOT ID: ['0_forward'] #{n}".encode())
        _write(tmp_path / "in" / f"host{n}" / "trace.log", marked)
        code = _first_output_code(marked)
        payloads[f"output code of log {n}"] = code
    run, outcome = _ingest(tmp_path, tmp_path / "in")
    found = problems(outcome, ok=(0,)) + _lost(run, payloads)
    check("ingest/collide/three-traces", found, outcome)


def _first_output_code(trace: bytes) -> bytes:
    """The payload of the first inductor_output_code record, as the ingest stores it."""
    lines = trace.split(b"\n")
    start = next(i for i, line in enumerate(lines) if b'"inductor_output_code"' in line)
    body = []
    for line in lines[start + 1:]:
        if not line.startswith(b"\t"):
            break
        body.append(line[1:])
    return b"\n".join(body) + b"\n"


def test_xla_dumps_of_two_processes_in_one_folder(tmp_path):
    files = {
        "module_0001.jit_f.before_optimizations.txt": HLO_BEFORE,
        "module_0001.jit_f.cpu_after_optimizations.txt": HLO_AFTER,
        "module_0001.jit_g.before_optimizations.txt": HLO_BEFORE.replace(b"jit_mlp", b"jit_g"),
        "module_0001.jit_g.cpu_after_optimizations.txt": HLO_AFTER.replace(b"jit_mlp", b"jit_g"),
        "module_0001.jit_f_grad.before_optimizations.txt": HLO_BEFORE + b"\n// grad\n",
        "module_0002.jit_f.before_optimizations.txt": HLO_BEFORE + b"\n// again\n",
    }
    for name, data in files.items():
        _write(tmp_path / "dump" / name, data)
    other = {"module_0001.jit_f.before_optimizations.txt": HLO_BEFORE + b"\n// other dump\n"}
    for name, data in other.items():
        _write(tmp_path / "dump2" / name, data)
    run, outcome = _ingest(tmp_path, tmp_path / "dump", tmp_path / "dump2")
    found = problems(outcome, ok=(0,)) + _lost(run, {**files, **{f"dump2/{k}": v
                                                                 for k, v in other.items()}})
    check("ingest/collide/xla-modules", found, outcome)


# -- bad records -------------------------------------------------------------------------------
ENVELOPE = "V1124 12:04:02.490000 455 torch/_dynamo/convert_frame.py:1] "
CONFUSED = [
    {"dynamo_start": {"stack": [{"name": ["f"], "filename": ["a.py"], "line": "12"}]},
     "frame_id": 0, "frame_compile_id": 0},
    {"dynamo_start": {"stack": [{"name": "f", "filename": {"x": 1}, "line": [3]}]},
     "frame_id": 1, "frame_compile_id": 0},
    {"dynamo_start": "not a dict", "frame_id": 2, "frame_compile_id": 0},
    {"dynamo_start": {"stack": "not a list"}, "frame_id": 3, "frame_compile_id": 0},
    {"dynamo_start": {"stack": [1, None]}, "frame_id": 4, "frame_compile_id": 0},
    {"str": [["a"], 1]}, {"str": ["a", [1]]}, {"str": ["a", {"k": 1}]}, {"str": "x"},
    {"dynamo_output_graph": {}, "frame_id": [0], "frame_compile_id": {"a": 1}},
    {"dynamo_output_graph": {}, "frame_id": 0, "frame_compile_id": 0, "rank": [1]},
    {"dynamo_output_graph": {}, "frame_id": 0, "frame_compile_id": 0,
     "compiled_autograd_id": {"x": [1]}},
    {"artifact": {"name": ["x"], "encoding": "string"}, "frame_id": 0, "frame_compile_id": 0},
    {"artifact": {"name": {"a": 1}}, "frame_id": 0, "frame_compile_id": 0},
    {"artifact": {"name": "recompile_reasons", "encoding": "json"}, "frame_id": 0,
     "frame_compile_id": 0},
    {"artifact": {"name": "dynamo_graph_break_reason"}, "frame_id": 0, "frame_compile_id": 0},
    {"artifact": {"name": "fx_graph_cache_hit"}, "frame_id": 0, "frame_compile_id": 0},
    {"compilation_metrics": {"co_name": ["f"], "co_filename": {"a": 1}, "co_firstlineno": "x",
                             "restart_reasons": 5, "guard_count": "many",
                             "recompile_reason": {"x": 1}, "fail_type": ["t"],
                             "entire_frame_compile_time_s": "slow"},
     "frame_id": 0, "frame_compile_id": 0},
    {"compilation_metrics": {"restart_reasons": "one reason"}, "frame_id": 5,
     "frame_compile_id": 0},
    {"compilation_metrics": [1, 2], "frame_id": 6, "frame_compile_id": 0},
    {"inductor_output_code": {"filename": ["x"]}, "frame_id": 0, "frame_compile_id": 0},
    {"frame_id": 0, "frame_compile_id": 0},
    {"chromium_event": {}, "frame_id": 0, "frame_compile_id": 0, "has_payload": 5},
]
PAYLOADS = {"recompile_reasons": '{"reasons": 5}', "fx_graph_cache_hit": '[1, {"key": []}]',
            "dynamo_graph_break_reason": "\x00\xff binary", "chromium_event": "{not json"}


def _confused_trace() -> tuple[bytes, dict[str, bytes]]:
    """A TORCH_TRACE log of type-confused records, and the payloads it must keep."""
    lines, kept = [], {}
    for n, record in enumerate(CONFUSED):
        lines.append(ENVELOPE + json.dumps(record))
        name = (record.get("artifact") or {}).get("name") if isinstance(
            record.get("artifact"), dict) else None
        kind = next(iter(record))
        payload = PAYLOADS.get(name if isinstance(name, str) else kind,
                               f"payload of record {n}\nline two")
        lines += ["\t" + line for line in payload.split("\n")]
        kept[f"payload of record {n}"] = payload.encode("utf-8", "surrogateescape")
    return ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass"), kept


def test_type_confused_trace_records(tmp_path):
    data, _ = _confused_trace()
    path = _write(tmp_path / "trace.log", data)
    good = _write(tmp_path / "k.ptx", PTX)
    run, outcome = _ingest(tmp_path, path, good)
    found = problems(outcome, ok=(0,)) + _lost(run, {"k.ptx beside the trace": PTX})
    if not found and len(stage_digests(run)) < 10:
        found.append(f"loss: only {len(stage_digests(run))} stages from {len(CONFUSED)} records")
    check("ingest/records/type-confused", found, outcome)


@pytest.mark.parametrize("index", range(len(CONFUSED)))
def test_each_confused_record_alone(tmp_path, index):
    record = CONFUSED[index]
    path = _write(tmp_path / "trace.log", (ENVELOPE + json.dumps(record) + "\n\tpayload\n"
                                           ).encode())
    run, outcome = _ingest(tmp_path, path)
    check(f"ingest/records/confused-{index}", problems(outcome, ok=(0,)), outcome)


TRACE_MUTATIONS = ("truncated", "flipped", "bad_utf8", "nul", "shuffled", "long_line")


@pytest.mark.parametrize("how", TRACE_MUTATIONS)
def test_mutated_trace(tmp_path, dumps, how):
    trace = (dumps / "trace" / "dedicated_log_torch_trace_429mjk2q.log").read_bytes()
    head = trace[:400_000]
    path = _write(tmp_path / "trace.log", mutate(head, how, rng(f"trace:{how}")))
    run, outcome = _ingest(tmp_path, path)
    check(f"ingest/records/mutated-trace/{how}", problems(outcome, ok=(0, 1)), outcome)


def _triton_entry(dumps: Path, tmp_path: Path) -> tuple[Path, str]:
    source = next(p for p in sorted((dumps / "triton_cache").iterdir())
                  if any(f.suffix == ".ttir" for f in p.iterdir()))
    entry = tmp_path / "cache" / source.name
    shutil.copytree(source, entry)
    stem = next(f.stem for f in entry.iterdir() if f.suffix == ".ttir")
    return entry, stem


METADATA = {
    "not-json": b"{oops", "not-utf8": b"\xff\xfe{}", "list": b"[1, 2]", "string": b'"x"',
    "null": b"null", "name-list": b'{"name": ["k"], "hash": 5}',
    "types": b'{"name": "k", "num_warps": "four", "num_stages": [1], "shared": "lots", '
             b'"target": "sm90", "hash": {"a": 1}, "arch": [9]}',
    "target-types": b'{"target": {"arch": [90], "backend": 5, "warp_size": "x"}}',
    "deep": b"[" * 100_000 + b"]" * 100_000, "empty": b"",
}


@pytest.mark.parametrize("variant", sorted(METADATA))
def test_malformed_triton_metadata(tmp_path, dumps, variant):
    entry, stem = _triton_entry(dumps, tmp_path)
    (entry / f"{stem}.json").write_bytes(METADATA[variant])
    ttir = (entry / f"{stem}.ttir").read_bytes()
    run, outcome = _ingest(tmp_path, tmp_path / "cache")
    found = problems(outcome, ok=(0,)) + _lost(run, {"the entry's TTIR": ttir})
    check(f"ingest/triton-metadata/{variant}", found, outcome)


def test_links_out_of_a_dump_are_not_followed(tmp_path, dumps):
    entry, stem = _triton_entry(dumps, tmp_path)
    outside = _write(tmp_path / "outside" / "secret.ptx", PTX.replace(b"add_kernel",
                                                                   SECRET.encode()))
    (entry / f"{stem}.ptx").unlink()
    (entry / f"{stem}.ptx").symlink_to(outside)
    (tmp_path / "cache" / "stray.ptx").symlink_to(outside)
    (tmp_path / "cache" / "linked_dir").symlink_to(tmp_path / "outside",
                                                   target_is_directory=True)
    run, outcome = _ingest(tmp_path, tmp_path / "cache")
    found = problems(outcome, ok=(0,))
    if digest(outside.read_bytes()) in stage_digests(run):
        found.append("read outside: a link out of the dump was followed into the run")
    check("ingest/links-out", found, outcome)


# -- the machine -------------------------------------------------------------------------------
def test_disk_full_while_ingesting(tmp_path):
    noise = rng("disk-full").randbytes(400_000).hex().encode()  # compresses to half at best
    big = _write(tmp_path / "in" / "big.llir",
                 (SAMPLES / "llir" / "add_kernel.sm80.llir").read_bytes() + b"; " + noise)
    _write(tmp_path / "in" / "k.ptx", PTX)
    run, outcome = _ingest(tmp_path, tmp_path / "in", file_size=200_000)
    found = problems(outcome, ok=(1,))
    if outcome.returncode == 0:
        found.append("a full disk went unnoticed")
    meta = run / "run.json"
    if meta.is_file() and not json.loads(meta.read_text()).get("partial"):
        found.append("the run is not marked partial")
    check("ingest/disk-full", found, outcome)
    assert big.is_file()


def test_killed_ingest_is_marked_and_its_leftovers_collected(tmp_path):
    folder = tmp_path / "many"
    for n in range(1500):
        _write(folder / f"k{n:04d}.ptx", PTX.replace(b"add_kernel", f"k{n:04d}".encode()))
    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "irscope", "ingest", str(folder), "-o",
                             str(run)], cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 20
    while not (run / "index.sqlite").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    found = []
    meta = json.loads((run / "run.json").read_text()) if (run / "run.json").is_file() else {}
    if meta and not meta.get("partial"):
        found.append("a killed ingest left the run unmarked")
    listing = irscope("runs", "--root", tmp_path, cwd=tmp_path)
    found += problems(listing, ok=(0,))
    if "partial" not in listing.stdout:
        found.append(f"`irscope runs` does not show the run as partial: {listing.stdout!r}")
    orphan = run / "blobs" / "ee" / ("ee" * 32)
    _write(orphan, b"left by a killed writer")
    _write(run / "blobs" / ".tmp-123-1-0", b"half a blob")
    again = irscope("ingest", SAMPLES / "ptx" / "add_kernel.sm80.ptx", "-o", run, cwd=tmp_path)
    found += problems(again, ok=(0,))
    if orphan.exists() or (run / "blobs" / ".tmp-123-1-0").exists():
        found.append("orphan blobs of the killed ingest were not collected")
    meta = json.loads((run / "run.json").read_text())
    ingests = meta.get("ingests", [])
    if len(ingests) != 2 or "ended" in ingests[0] or "ended" not in ingests[1]:
        found.append(f"provenance: the killed and the finished ingest not both kept: {ingests}")
    if not meta.get("partial"):  # the killed ingest's files are still not in the run
        found.append("a run missing a killed ingest's files is not marked partial")
    check("ingest/killed", found, again)


def test_ingest_writes_nothing_outside_the_run(tmp_path):
    _write(tmp_path / "in" / "a" / "k.ptx", PTX)
    _write(tmp_path / "in" / "b" / "k.ttir", TTIR)
    before = tree_state(tmp_path)
    run, outcome = _ingest(tmp_path, tmp_path / "in")
    outside = changed(before, tree_state(tmp_path, skip=run))
    found = problems(outcome, ok=(0,)) + ([f"written outside the run: {outside}"]
                                          if outside else [])
    check("ingest/writes-only-the-run", found, outcome)


def test_output_code_over_the_spill_size_is_keyed_in_pieces(tmp_path):
    """An output code past 4 MiB is streamed into its blob and keyed without being read
    whole; the key is the one a small code of the same text gets (trailing blanks aside)."""
    body = "def call(args):\n" + "".join(f"    buf{n} = empty((4,), 'ü')  # {n}\n"
                                          for n in range(160_000)) + "\n\n  \n"
    record = {"inductor_output_code": {"filename": "x.py"}, "frame_id": 0, "frame_compile_id": 0}
    lines = [ENVELOPE + json.dumps(record)] + ["\t" + line for line in body.split("\n")]
    path = _write(tmp_path / "trace.log", ("\n".join(lines) + "\n").encode())
    run, outcome = _ingest(tmp_path, path)
    found = problems(outcome, ok=(0,))
    db = sqlite3.connect(run / "index.sqlite")
    keys = [json.loads(a).get("output_codes", {})
            for (a,) in db.execute("SELECT attrs FROM units")]
    db.close()
    if len(body) < 4 << 20 or not any(digest(body.rstrip().encode()) in k for k in keys):
        found.append("the large output code's key is not the key of its text")
    check("ingest/large-output-code", found, outcome)
