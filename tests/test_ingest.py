"""Ingest of real dumps: TORCH_TRACE, TORCH_LOGS, Inductor cache, XLA dump, Triton cache."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from conftest import SAMPLES, corpus_files
from ingest_helpers import SCRIPTS, record_kinds, torch_dumps, write_triton_entry
from irscope.ingest import ingest
from irscope.store import Run
from torch_helpers import jit_jax_seeds

SEEDS = ("mlp", "activation_chain", "complex_activation", "post_norm_block", "mlp_dead_gate")


@pytest.fixture(scope="module")
def dumps() -> Path:
    pytest.importorskip("torch")
    return torch_dumps()


@pytest.fixture(scope="module")
def torch_run(dumps, tmp_path_factory):
    run = Run.create(tmp_path_factory.mktemp("torch") / "run")
    report = ingest(run, [dumps / "trace", dumps / "trace_gb"])
    return run, report


def _def_line(name: str) -> int:
    text = (SCRIPTS / "seed_torch.py").read_text().splitlines()
    return next(i for i, line in enumerate(text, 1) if line.startswith(f"def {name}("))


def test_torch_trace_units_are_dynamo_compiles_named_by_function(torch_run):
    run, report = torch_run
    names = {u.name for u in run.units("torch")}
    for frame, seed in enumerate(SEEDS):
        assert f"[{frame}/0] {seed}" in names
    assert {"[0/1] mlp", "[0/2] mlp"} <= names  # the --recompile calls
    mlp = run.unit("[0/0] mlp")
    assert mlp.source_file.endswith("seed_torch.py") and mlp.source_line == _def_line("mlp")
    assert mlp.attrs["compile_times"]["entire_frame_compile_time_s"] > 0
    assert not report.skipped


def test_torch_trace_stages_match_the_records(torch_run, dumps):
    run, _ = torch_run
    log = next((dumps / "trace").glob("*.log"))
    kinds = Counter(record_kinds(log))
    stages = [s for u in run.units("torch") if "seed_torch" in (u.source_file or "")
              for s in run.stages(u.id)]
    by_kind = Counter(s.kind for s in stages)
    assert by_kind["inductor_output_code"] == kinds["inductor_output_code"]
    assert by_kind["aot_graph"] == kinds["aot_inference_graph"] + kinds["aot_forward_graph"]
    assert sum(s.name.startswith("dynamo_output_graph") for s in stages) == \
        kinds["dynamo_output_graph"]
    order = [s.kind for s in run.stages(run.unit("[0/0] mlp").id) if s.kind != "raw"]
    assert order.index("fx_graph") < order.index("aot_graph") < order.index(
        "inductor_output_code")
    code = run.read_text(run.stage(run.unit("[0/0] mlp"), "inductor_output_code"))
    assert "def call(" in code


def test_unknown_records_are_kept_raw_never_dropped(torch_run, dumps):
    run, _ = torch_run
    log = next((dumps / "trace").glob("*.log"))
    chromium = record_kinds(log).count("chromium_event")
    raw = [s for s in run.stages() if s.kind == "raw" and s.name.startswith("chromium_event#")
           and s.origin.startswith(str(log))]
    assert chromium > 0 and len(raw) == chromium
    assert run.read_text(raw[0]).startswith('{"chromium_event"')


def test_recompiles_graph_breaks_and_cache_events(torch_run):
    run, _ = torch_run
    recompiles = run.events("recompile")
    assert any("size mismatch" in e.data["reason"] for e in recompiles)
    assert all(run.unit(e.unit_id).name.endswith(" mlp") for e in recompiles)
    breaks = run.events("graph_break")
    assert len(breaks) == 1  # one break, reported once though Dynamo restarts the frame
    assert breaks[0].data["line"] == 6 and "print" in breaks[0].data["explanation"]
    assert run.events("cache_miss") and run.events("compile_time")


def test_graph_units_launch_their_cpp_kernels(torch_run):
    run, _ = torch_run
    pytest.importorskip("irscope.parsers.inductor")
    names = {u.id: u.name for u in run.units()}
    for seed in SEEDS:
        unit = next(u for u in run.units("torch") if u.name.endswith(f"] {seed}"))
        code = run.read_text(run.stage(unit, "inductor_output_code"))
        defined = set(re.findall(r"^(cpp_fused_\w+) = async_compile\.cpp", code, re.M))
        launched = {names[r.dst].split("-")[0] for r in run.relations("launches")
                    if r.src == unit.id}
        assert defined and launched == defined
    for cpp in run.units("cpp"):
        assert 'extern "C"' in run.read_text(run.stage(cpp, "cpp_kernel"))


def test_torch_logs_text(dumps, tmp_path):
    """A log alone: each compile's output code and recompilations go to that compile's graph."""
    run = Run.create(tmp_path / "run")
    report = ingest(run, [dumps / "logs.txt"])
    assert report.sources == [(str(dumps / "logs.txt"), "torch_logs")]
    assert run.stage(run.unit("(log) logs.txt"), "torch_log")
    text = (dumps / "logs.txt").read_text()
    # [0/1] [__output_code] Output code:  -- counted independently, by compile id
    compiles = re.findall(r"\[(\d+/\d+)\] \[__output_code\] Output code:", text)
    codes = {}
    for unit in run.units("torch"):
        for stage in run.stages(unit.id):
            if stage.kind == "inductor_output_code":
                codes.setdefault(unit.attrs.get("compile_id"), []).append(run.read_text(stage))
    assert sorted(codes) == sorted(set(compiles))
    assert sum(map(len, codes.values())) == len(compiles)
    assert all("def call(" in c and "[__output_code]" not in c and "written to" not in c
               for cs in codes.values() for c in cs)
    # one recompile event per guard failure listed under "Recompiling function", on its compile
    failures = re.findall(r"\[(\d+/\d+)\] \[__recompiles\]\s+- (.*)$", text, re.M)
    events = run.events("recompile")
    assert len(events) == len(failures) and len({e.unit_id for e in events}) == len(
        set(cid for cid, _ in failures)) == text.count("Recompiling function mlp")
    for event in events:
        assert run.unit_by_id(event.unit_id).attrs["compile_id"] in {c for c, _ in failures}
        assert event.data["line"] == 12 and event.data["function"] == "mlp"


def test_reingest_is_idempotent(dumps, tmp_path):
    run = Run.create(tmp_path / "run")
    ingest(run, [dumps / "trace_gb"])
    before = (len(run.units()), len(run.stages()), len(run.events()), len(run.relations()))
    ingest(run, [dumps / "trace_gb"])
    assert (len(run.units()), len(run.stages()), len(run.events()), len(run.relations())) \
        == before


def test_xla_dump_modules_become_jax_units(tmp_path):
    pytest.importorskip("jax")
    dump = jit_jax_seeds()
    run = Run.create(tmp_path / "run")
    ingest(run, [dump])
    modules = {m.group(1) for p in dump.iterdir()
               if (m := re.match(r"module_\d+\.(.+)\.before_optimizations\.txt$", p.name))}
    dumped = [u for u in run.units("jax") if "xla_dump" in u.attrs]
    assert {u.name.split(" (module ")[0] for u in dumped} == modules
    # every compilation is a unit of its own: recompiles of one name are not merged
    numbers = {int(m.group(1)) for p in dump.iterdir()
               if (m := re.match(r"module_(\d+)\..+\.before_optimizations\.txt$", p.name))}
    assert sorted(u.attrs["xla_module"] for u in dumped) == sorted(numbers)
    jaxprs = {p.stem for p in dump.glob("*.jaxpr")}
    assert jaxprs and {u.name for u in run.units("jax") if "xla_dump" not in u.attrs} == jaxprs
    mlp = run.unit("jit_mlp")
    kinds = [s.kind for s in run.stages(mlp.id)]
    for kind in ("hlo_before_opt", "hlo_after_opt", "buffer_assignment", "memory_usage"):
        assert kind in kinds
    assert kinds.index("hlo_before_opt") < kinds.index("hlo_after_opt")
    ll = sorted(p for p in dump.glob("module_*.jit_mlp.*.ll"))
    assert sum(k == "llir" for k in kinds) == len(ll)
    assert "HloModule" in run.read_text(run.stage(mlp, "hlo_after_opt"))


def test_triton_cache_entries_become_kernel_units(tmp_path):
    pytest.importorskip("triton")
    cache = tmp_path / "cache"
    write_triton_entry(cache, "add_kernel")
    write_triton_entry(cache, "softmax_kernel")
    second = write_triton_entry(cache, "add_kernel", num_warps=8)
    run = Run.create(tmp_path / "run")
    report = ingest(run, [cache])
    names = sorted(u.name for u in run.units("triton"))
    first, second = sorted(p.name for p in cache.iterdir() if (p / "add_kernel.json").exists())
    assert names == sorted(["add_kernel", "softmax_kernel", f"add_kernel-{second[:8]}"])
    # configurations are named by hash, not by the order they are filed in (a warm run files
    # the one it compiled before those it found in the cache)
    later = Run.create(tmp_path / "later")
    ingest(later, [cache / second])
    ingest(later, [cache / first, cache / next(p.name for p in cache.iterdir()
                                                if (p / "softmax_kernel.json").exists())])
    assert sorted(u.name for u in later.units("triton")) == names
    unit = run.unit("softmax_kernel")
    kinds = [s.kind for s in run.stages(unit.id)]
    pipeline = [k for k in kinds if k in ("ttir", "ttgir", "llir", "ptx", "cubin")]
    assert pipeline == ["ttir", "ttgir", "llir", "ptx", "cubin"]
    assert unit.attrs["num_warps"] == 4 and ".target sm_90" in run.read_text(
        run.stage(unit, "ptx"))
    assert {run.unit(n).attrs["num_warps"] for n in ("add_kernel", f"add_kernel-{second[:8]}")} \
        == {4, 8}
    assert report.artifacts == 3 * 6


def test_same_artifact_from_two_places_is_one_blob(tmp_path):
    pytest.importorskip("triton")
    write_triton_entry(tmp_path / "a", "add_kernel")
    write_triton_entry(tmp_path / "b", "add_kernel")
    run = Run.create(tmp_path / "run")
    ingest(run, [tmp_path / "a"])
    ingest(run, [tmp_path / "b"])
    files = [p.name for p in (run.path / "blobs").rglob("*") if p.is_file()]
    inline = [row[0] for row in run.db.execute("SELECT blob FROM blob_data")]
    assert sorted(files + inline) == sorted({s.blob for s in run.stages()})


def test_corpus_torch_logs_all_ingest_and_the_corrupted_one_warns(corpus, tmp_path):
    logs = corpus_files("torch_logs")
    run = Run.create(tmp_path / "run")
    report = ingest(run, logs)
    assert not report.skipped
    assert {p for p, _ in report.sources} == {str(p) for p in logs}
    corrupted = [w for w in report.warnings if "simple_corrupted_json" in w]
    assert len(corrupted) == 1 and "malformed JSON" in corrupted[0]
    simple = corpus / "torch_logs" / "torch_trace_tlparse_simple.log"
    chromium = record_kinds(simple).count("chromium_event")
    kept = [s for s in run.stages() if s.origin and s.origin.startswith(f"{simple}:")
            and s.name.startswith("chromium_event#")]
    assert len(kept) == chromium


def test_inductor_cache_folder_files_code_and_never_loads_pickles(dumps, tmp_path):
    cache = dumps / "inductor_cache"
    run = Run.create(tmp_path / "run")
    report = ingest(run, [cache])
    skipped = dict(report.skipped)
    assert skipped.get(str(cache / "fxgraph")) == "pickled cache entries, never loaded"
    assert not [p for p in skipped if p.endswith(".so")]
    # every C++ file is kept; a kernel's compiled source joins the kernel's unit, and only
    # kernels the output code defines are C++ kernel units (not the CPU-capability probes)
    cpp_files = sorted(str(p) for p in cache.rglob("*.cpp"))
    kept = sorted(s.origin for s in run.stages() if s.origin and s.origin.endswith(".cpp"))
    assert cpp_files and kept == cpp_files
    code = [s for s in run.stages() if s.kind == "inductor_output_code"]
    assert code and all("def call(" in run.read_text(s) for s in code)
    defined = set()
    for stage in {s.blob: s for s in code}.values():
        defined |= set(CPP_KERNEL.findall(run.read_text(stage)))
    assert len(run.units("cpp")) == len(defined)
    probes = [u for u in run.units("file") if u.attrs.get("origin", "").endswith(".cpp")]
    assert all("_chk_kernel" in run.read_text(run.stages(u.id)[0]) for u in probes)


# cpp_fused_relu_0 = async_compile.cpp_pybinding([...], r'''<source>''')
CPP_KERNEL = re.compile(r"^(cpp_fused_\w+) = async_compile\.cpp\w*\(.*?'''\n(.*?)'''", re.M | re.S)


def test_large_payload_is_streamed_into_one_blob(tmp_path):
    payload = "".join(f"line {i} " + "x" * 100 + "\n" for i in range(60_000))  # ~6.6 MB
    log = tmp_path / "big.log"
    envelope = ('V1122 13:00:00.000000 1 torch/_inductor/graph.py:1] {"inductor_output_code": '
                '{"filename": "x.py"}, "frame_id": 0, "frame_compile_id": 0, "attempt": 0}\n')
    start = ('V1122 13:00:00.000000 1 torch/_dynamo/convert_frame.py:1] {"dynamo_start": '
             '{"stack": [{"line": 3, "name": "model", "filename": "m.py"}]}, "frame_id": 0, '
             '"frame_compile_id": 0, "attempt": 0}\n')
    log.write_text(start + envelope + "".join("\t" + ln for ln in payload.splitlines(True)))
    run = Run.create(tmp_path / "run")
    report = ingest(run, [log])
    stage = run.stage(run.unit("[0/0] model"), "inductor_output_code")
    assert stage.size == len(payload.encode()) and run.read_text(stage) == payload
    assert not report.warnings


def test_truncated_trace_keeps_what_it_can_and_warns(corpus, tmp_path):
    source = (corpus / "torch_logs" / "torch_trace_tlparse_comp_metrics.log").read_bytes()
    cut = source.rfind(b'{"', 0, len(source) // 2) + 10  # inside an envelope's JSON
    log = tmp_path / "truncated.log"
    log.write_bytes(source[:cut])
    run = Run.create(tmp_path / "run")
    report = ingest(run, [log])
    assert any("truncated.log" in w and "unreadable record" in w for w in report.warnings)
    kept = [s for s in run.stages() if s.name.startswith("unparsed#")]
    assert len(kept) == 1 and run.units("torch")


def test_kernel_dump_folder_without_metadata_is_named_by_its_files(tmp_path):
    pytest.importorskip("triton")
    entry = write_triton_entry(tmp_path / "dump", "add_kernel")
    for extra in entry.glob("*.json"):
        extra.unlink()
    run = Run.create(tmp_path / "run")
    ingest(run, [tmp_path / "dump"])
    unit = run.unit("add_kernel")
    assert unit.framework == "triton" and unit.attrs["hash"] == entry.name
    assert [s.kind for s in run.stages(unit.id)][:5] == ["ttir", "ttgir", "llir", "ptx", "cubin"]


def test_xla_gpu_dump_names_group_by_module(tmp_path):
    """GPU dump names (module names with dots, sm_X.Y prefixes) group into one unit each."""
    hlo = "HloModule {name}\n\nENTRY main {{\n  ROOT p = f32[] parameter(0)\n}}\n"
    names = {"module_0012.SyncTensorsGraph.147": "SyncTensorsGraph.147",
             "module_0003.jit_f": "jit_f"}
    suffixes = ("before_optimizations.txt", "sm_8.0_gpu_after_optimizations.txt",
                "sm_8.0_gpu_after_optimizations-buffer-assignment.txt", "ptx", "ir-with-opt.ll",
                "thunk_sequence.txt")
    for prefix, name in names.items():
        for suffix in suffixes:
            (tmp_path / f"{prefix}.{suffix}").write_text(hlo.format(name=name))
    run = Run.create(tmp_path / "run")
    ingest(run, [tmp_path])
    assert sorted(u.name for u in run.units()) == sorted(names.values())
    kinds = [s.kind for s in run.stages(run.unit("SyncTensorsGraph.147").id)]
    assert kinds == ["hlo_before_opt", "hlo_after_opt", "buffer_assignment", "llir", "ptx",
                     "text"]


def test_an_xla_module_whose_name_holds_a_newline_is_one_unit(tmp_path):
    """A crafted (or oddly named) module keeps its dump files together: one unit, not one
    loose file each."""
    from irscope.store import Run

    dump = tmp_path / "dump"
    dump.mkdir()
    for suffix, sample in (("before_optimizations.txt", "before_optimizations.txt"),
                           ("cpu_after_optimizations.txt", "cpu_after_optimizations.txt")):
        text = (SAMPLES / "hlo" / f"jit_mlp_dead_gate.{sample}").read_text()
        (dump / f"module_0001.jit_evil\nname.{suffix}").write_text(text)
    outcome = subprocess.run([sys.executable, "-m", "irscope", "ingest", str(dump), "-o",
                              str(tmp_path / "run")], capture_output=True, text=True)
    assert outcome.returncode == 0, outcome.stderr
    with Run.open(tmp_path / "run") as run:
        (unit,) = run.units()
        assert unit.framework == "jax" and unit.name == "jit_evil\nname"
        assert {s.kind for s in run.stages(unit.id)} == {"hlo_before_opt", "hlo_after_opt"}
