"""NVIDIA tools on real Triton compiles: ptxas's spill figures, the content cache, parallel filing."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from irscope import nvtools
from irscope.analysis.occupancy import occupancy
from irscope.analysis.kernels import KernelRecord, kernel_records, parse_ptxas_log
from irscope.parsers.sass import SassKernel, SassModule

# A ptxas 12/13 report for two kernels, a device function with a frame of its own, and the
# older "smem/cmem" form of the Used line.
PTXAS_LOG = """\
ptxas info    : 35 bytes gmem
ptxas info    : Function properties for __internal_trig_reduction_slowpathd
    40 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'spill_kernel' for 'sm_90a'
ptxas info    : Function properties for spill_kernel
    1408 bytes stack frame, 3236 bytes spill stores, 2724 bytes spill loads
ptxas info    : Used 168 registers, used 1 barriers, 1408 bytes cumulative stack size
ptxas info    : Compiling entry function 'old_kernel' for 'sm_80'
ptxas info    : Function properties for old_kernel
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 24 registers, 1024 bytes smem, 380 bytes cmem[0], 8 bytes cmem[2]
"""


def test_ptxas_log_figures_per_entry_function():
    figures = parse_ptxas_log(PTXAS_LOG)
    assert figures == {
        "spill_kernel": {"registers": 168, "barriers": 1, "stack_frame_bytes": 1408,
                         "spill_store_bytes": 3236, "spill_load_bytes": 2724},
        "old_kernel": {"registers": 24, "shared_bytes": 1024, "const_bytes": 388,
                       "stack_frame_bytes": 0, "spill_store_bytes": 0, "spill_load_bytes": 0}}
    assert parse_ptxas_log("") == {} and parse_ptxas_log("ptxas fatal : nonsense") == {}


def _module(histogram: dict[str, int], **resources) -> SassModule:
    kernel = SassKernel("k", sum(histogram.values()), histogram, resources=resources)
    return SassModule(kind="sass", arch=90, kernels=(kernel,))


def test_kernel_records_take_spills_from_ptxas_and_local_traffic_from_sass():
    module = _module({"STL.64": 2, "LDL": 3, "FFMA": 10}, threads_per_block=256)
    usage = {"k": {"registers": 72, "stack_bytes": 32, "shared_bytes": 1024, "local_bytes": 0}}
    ptxas = {"k": {"registers": 72, "stack_frame_bytes": 32, "spill_store_bytes": 0,
                   "spill_load_bytes": 0}}
    (record,) = kernel_records(module, usage, ptxas, {"num_warps": 8, "shared": 16384}).values()
    card = occupancy(90, 256, 72, 1024 + 16384)
    assert record == KernelRecord(
        "k", arch=90, registers=72, spill_store_bytes=0, spill_load_bytes=0,
        stack_frame_bytes=32, local_bytes=0, local_store_bytes=16, local_load_bytes=12,
        shared_static_bytes=1024, shared_dynamic_bytes=16384, threads_per_block=256,
        occupancy=round(card.ratio, 4), occupancy_limiter=card.limiter)
    assert record.shared_bytes == 17408
    assert KernelRecord.from_entry("k", record.to_entry(), {"num_warps": 8}) == record


def test_kernel_records_without_ptx_have_no_spill_figures():
    module = _module({"STL": 4})
    (record,) = kernel_records(module, {"k": {"registers": 40, "stack_bytes": 16}}, {},
                               {"num_warps": 4}).values()
    assert record.spill_store_bytes is None and "spill_store_bytes" not in record.to_entry()
    assert record.stack_frame_bytes == 16 and record.local_store_bytes == 16
    assert record.threads_per_block == 128 and record.shared_bytes == 0


def test_entries_of_older_runs_keep_their_meaning():
    """Before spills came from ptxas, entries kept STL/LDL bytes as ``spill_*``, the static
    shared memory as ``shared_bytes`` and the frame as ``stack_bytes``; launch metadata that
    arrives after the cubin sets the dynamic shared memory and the occupancy it leaves."""
    old = {"arch": 90, "registers": 32, "spill_stores": 8, "spill_loads": 4, "shared_bytes": 1024,
           "stack_bytes": 16, "dynamic_shared_bytes": 0}
    record = KernelRecord.from_entry("k", old, {"num_warps": 4, "shared": 65536})
    assert (record.spill_store_bytes, record.local_store_bytes, record.local_load_bytes) == (
        None, 8, 4)
    assert (record.shared_static_bytes, record.shared_dynamic_bytes) == (1024, 65536)
    assert record.stack_frame_bytes == 16
    card = occupancy(90, 128, 32, 1024 + 65536)
    assert (record.occupancy, record.occupancy_limiter) == (round(card.ratio, 4), card.limiter)


# -- real compiles -------------------------------------------------------------------------

triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402

needs_tools = pytest.mark.skipif(
    not (nvtools.find_tool("ptxas") and nvtools.find_tool("nvdisasm")
         and nvtools.find_tool("cuobjdump")), reason="ptxas, nvdisasm or cuobjdump not found")


@triton.jit
def sincos_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.sin(x) * tl.cos(x * 3.0), mask=mask)


@triton.jit
def wide_tile_kernel(a_ptr, b_ptr, c_ptr, K, N, BM: tl.constexpr, BN: tl.constexpr,
                     BK: tl.constexpr):
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


def _compile(fn, signature: dict, constexprs: dict, **options) -> dict:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    source = ASTSource(fn=fn, signature={**signature, **dict.fromkeys(constexprs, "constexpr")},
                       constexprs=constexprs)
    compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32), options=options)
    return {"ptx": compiled.asm["ptx"], "cubin": compiled.asm["cubin"], "name": compiled.name,
            "metadata": compiled.metadata._asdict()}


@pytest.fixture(scope="module")
def spilling():
    """A 128x256 fp32 accumulator in 128 threads held to 168 registers: ptxas spills."""
    return _compile(wide_tile_kernel, {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32",
                                       "K": "i32", "N": "i32"},
                    {"BM": 128, "BN": 256, "BK": 32}, num_warps=4, maxnreg=168)


@pytest.fixture(scope="module")
def sincos():
    """sin/cos range reduction keeps a local array: stack and local traffic, no spills."""
    return _compile(sincos_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
                    {"BLOCK": 1024}, num_warps=4)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private, empty tool cache; returns its folder."""
    monkeypatch.setenv("IRSCOPE_CACHE_DIR", str(tmp_path / "irscope-cache"))
    return tmp_path / "irscope-cache" / nvtools.CACHE_FOLDER


def _ptxas_v(ptx: str, tmp_path: Path) -> str:
    """What `ptxas -v` prints, run here by hand on the PTX."""
    path = tmp_path / "kernel.ptx"
    path.write_text(ptx)
    done = subprocess.run([str(nvtools.find_tool("ptxas")), "-v", "--gpu-name=sm_90a", str(path),
                           "-o", str(tmp_path / "kernel.cubin")], capture_output=True, text=True,
                          check=True)
    return done.stderr


@needs_tools
def test_spills_equal_ptxas_v_on_a_kernel_that_spills(spilling, tmp_path, cache):
    log = _ptxas_v(spilling["ptx"], tmp_path)
    frame, stores, loads = map(int, re.search(
        r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", log).groups())
    registers = int(re.search(r"Used (\d+) registers", log).group(1))
    assert stores > 0 and loads > 0
    assert nvtools.ptx_target(spilling["ptx"]) == "sm_90a"
    figures = nvtools.ptxas_usage(spilling["ptx"])[spilling["name"]]
    assert (figures["spill_store_bytes"], figures["spill_load_bytes"],
            figures["stack_frame_bytes"], figures["registers"]) == (stores, loads, frame, registers)
    from irscope.ingest.triton_cache import analyse_cubin

    resources = analyse_cubin(spilling["cubin"], spilling["ptx"], spilling["metadata"]).resources
    entry = resources[spilling["name"]]
    assert (entry["spill_store_bytes"], entry["spill_load_bytes"]) == (stores, loads)
    assert entry["registers"] == registers and entry["stack_frame_bytes"] == frame
    record = KernelRecord.from_entry(spilling["name"], entry, spilling["metadata"])
    assert record.shared_dynamic_bytes == spilling["metadata"]["shared"] > 0
    assert record.shared_bytes == entry["shared_static_bytes"] + entry["shared_dynamic_bytes"]


@needs_tools
def test_local_array_is_no_spill(sincos, tmp_path, cache):
    """Filed with its PTX stage: spills 0 as ptxas says, the stack frame and STL/LDL kept apart."""
    from irscope.ingest.triton_cache import file_cubin
    from irscope.store import Run

    log = _ptxas_v(sincos["ptx"], tmp_path)
    assert "0 bytes spill stores, 0 bytes spill loads" in log
    run = Run.create(tmp_path / "run")
    with run.transaction() as writer:
        unit = writer.add_unit("sincos_kernel", "triton", attrs={"num_warps": 4})
        writer.add_stage(unit, "ptx", sincos["ptx"])
        file_cubin(writer, unit, sincos["cubin"], origin="test")
    entry = run.unit("sincos_kernel").attrs["resources"]["sincos_kernel"]
    assert entry["spill_store_bytes"] == entry["spill_load_bytes"] == 0
    assert entry["stack_frame_bytes"] > 0
    assert entry["local_store_bytes"] > 0 and entry["local_load_bytes"] > 0
    assert entry["threads_per_block"] == 128 and entry["arch"] == 90


@needs_tools
def test_a_filed_cubin_keeps_the_histograms_its_analysis_counted(sincos, tmp_path, cache,
                                                                  monkeypatch):
    """The analysis counts its SASS's and PTX's opcodes where it runs (inspect: while the
    program runs); the run reads them back without a count, equal to the full parse's, and
    counts again where a cached row is damaged."""
    from collections import Counter

    from irscope.ingest.triton_cache import file_cubin
    from irscope.parsers import registry
    from irscope.store import Run

    run = Run.create(tmp_path / "run")
    with run.transaction() as writer:
        unit = writer.add_unit("sincos_kernel", "triton", attrs={"num_warps": 4})
        writer.add_stage(unit, "ptx", sincos["ptx"])
        file_cubin(writer, unit, sincos["cubin"], origin="test")
    stages = run.stages(kinds=("ptx", "sass"))
    full = {s.kind: registry.parse(s.kind, run.read_text(s)).histogram for s in stages}
    assert sorted(full) == ["ptx", "sass"] and all(full.values())
    with monkeypatch.context() as patched:
        patched.setattr(registry, "histogram", lambda kind, text: pytest.fail("counted"))
        assert {s.kind: Counter(run.histogram(s)) for s in stages} == {
            kind: Counter(counts) for kind, counts in full.items()}
    run.db.execute("UPDATE stats SET data='{\"IADD3\": \"many\"}' WHERE kind='sass#histogram'")
    sass = next(s for s in stages if s.kind == "sass")
    assert Counter(run.histogram(sass)) == Counter(full["sass"])


# -- the cache -----------------------------------------------------------------------------

@pytest.fixture
def counted_runs(monkeypatch):
    """Every tool process started, as (tool name, first argument)."""
    started = []
    real = nvtools._run

    def run(tool, args, *rest, **options):
        started.append((Path(tool).name, args[0] if args else None))
        return real(tool, args, *rest, **options)

    monkeypatch.setattr(nvtools, "_run", run)
    return started


@needs_tools
def test_cache_hit_runs_no_tool(sincos, cache, counted_runs):
    first = (nvtools.disassemble(sincos["cubin"]), nvtools.resource_usage(sincos["cubin"]),
             nvtools.ptxas_usage(sincos["ptx"]))
    assert [name for name, _ in counted_runs] == ["nvdisasm", "cuobjdump", "ptxas"]
    assert len([p for p in cache.rglob("*") if p.is_file()]) == 3
    again = (nvtools.disassemble(sincos["cubin"]), nvtools.resource_usage(sincos["cubin"]),
             nvtools.ptxas_usage(sincos["ptx"], "sm_90a"))
    assert again == first and len(counted_runs) == 3
    assert nvtools.ptxas_usage(sincos["ptx"] + "// other\n") == first[2]
    assert len(counted_runs) == 4  # other text, other key
    for runs in (5, 6):  # sm_90a code cannot be assembled for sm_90: failures are not kept
        assert nvtools.ptxas_usage(sincos["ptx"], "sm_90") == {} and len(counted_runs) == runs


@needs_tools
@pytest.mark.parametrize("damage", [b"", b"garbage", None])
def test_damaged_entry_is_computed_again(sincos, cache, counted_runs, damage):
    text = nvtools.disassemble(sincos["cubin"])
    (entry,) = [p for p in cache.rglob("*") if p.is_file()]
    entry.write_bytes(damage if damage is not None else entry.read_bytes()[:-20])
    assert nvtools.disassemble(sincos["cubin"]) == text and len(counted_runs) == 2
    assert nvtools.disassemble(sincos["cubin"]) == text and len(counted_runs) == 2  # mended


@needs_tools
def test_empty_cache_dir_switches_the_cache_off(sincos, tmp_path, monkeypatch, counted_runs):
    monkeypatch.setenv("IRSCOPE_CACHE_DIR", "")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert nvtools.cache_folder() is None
    assert nvtools.disassemble(sincos["cubin"]) == nvtools.disassemble(sincos["cubin"])
    assert len(counted_runs) == 2 and not list(tmp_path.iterdir())


def test_prune_drops_least_recently_used_entries(cache):
    import os

    for i in range(10):
        nvtools._cache_write(cache, f"{i:02d}" + "0" * 62, "x" * 1000 + str(i))
        os.utime(nvtools._entry(cache, f"{i:02d}" + "0" * 62), (1000 + i, 1000 + i))
    sizes = {p.name[:2]: p.stat().st_size for p in cache.rglob("*") if p.is_file()}
    assert nvtools.prune(cache, limit=sum(sizes.values()) // 2) == 5
    assert sorted(p.name[:2] for p in cache.rglob("*") if p.is_file()) == [
        f"{i:02d}" for i in range(5, 10)]


# -- parallel filing -----------------------------------------------------------------------

def _triton_cache(folder: Path, kernels: list[dict]) -> Path:
    """Triton cache entries <hash>/<name>.{ptx,ttir,cubin,json} of compiled kernels."""
    for i, compiled in enumerate(kernels):
        entry = folder / f"{i:02x}{'0' * 62}"
        entry.mkdir(parents=True)
        name = compiled["name"]
        (entry / f"{name}.ttir").write_text(f"// ttir of {name}\n")
        (entry / f"{name}.ptx").write_text(compiled["ptx"])
        (entry / f"{name}.cubin").write_bytes(compiled["cubin"])
        (entry / f"{name}.json").write_text(json.dumps({**compiled["metadata"], "name": name,
                                                        "hash": entry.name}, default=str))
    return folder


def _filed(run) -> dict:
    return {unit.name: (unit.attrs, sorted((s.kind, s.blob) for s in run.stages(unit.id)))
            for unit in run.units()}


@pytest.mark.slow
@needs_tools
def test_parallel_filing_equals_serial_filing(sincos, spilling, tmp_path, monkeypatch):
    sys.path.insert(0, str(Path(__file__).parent))
    from kernels import compile_aot

    from irscope.ingest import ingest
    from irscope.store import Run

    kernels = [sincos, spilling, *(compile_aot(k) for k in ("add_kernel", "softmax_kernel",
                                                            "matmul_kernel"))]
    kernels.append({**kernels[2], "name": "add_kernel_copy",  # the same cubin again
                    "ptx": kernels[2]["ptx"] + "// another compile\n"})
    source = _triton_cache(tmp_path / "triton", kernels)
    filed = {}
    for label, workers, cache in (("serial", 1, ""), ("parallel", 4, str(tmp_path / "c")),
                                  ("warm", 4, str(tmp_path / "c"))):
        monkeypatch.setenv("IRSCOPE_CACHE_DIR", cache)
        run = Run.create(tmp_path / label)
        report = ingest(run, [source], workers=workers)
        assert not report.skipped and report.artifacts == 4 * len(kernels)
        filed[label] = _filed(run)
    assert filed["parallel"] == filed["serial"] == filed["warm"]
    assert len(filed["serial"]) == len(kernels)
    for name, (attrs, stages) in filed["serial"].items():
        assert "sass" in {kind for kind, _ in stages}, name
        (entry,) = attrs["resources"].values()
        assert "spill_store_bytes" in entry and "occupancy" in entry, name


def test_cache_command_counts_and_clears_tool_results(tmp_path, cli):
    """`irscope cache` shows the NVIDIA tool results beside the XLA dumps and clears both."""
    from irscope.store import Run

    run = Run.open(Path(__file__).resolve().parent.parent / "samples" / "gpu" / "triton_kernels")
    unit = run.unit("add_kernel")
    cubin = run.read_blob(next(s for s in run.stages(unit.id) if s.kind == "cubin").blob)
    env = {"IRSCOPE_CACHE_DIR": str(tmp_path / "cache")}
    program = ("import sys; from irscope import nvtools; "
               "print(nvtools.disassemble(open(sys.argv[1], 'rb').read()) is not None)")
    (tmp_path / "k.cubin").write_bytes(cubin)
    done = subprocess.run([sys.executable, "-c", program, str(tmp_path / "k.cubin")],
                          env={**os.environ, **env}, capture_output=True,
                          text=True, check=True)
    assert done.stdout.strip() == "True"
    shown = json.loads(cli("cache", "--json", env=env).stdout)
    assert shown["tool_results"] >= 1 and shown["tool_bytes"] > 0
    cleared = cli("cache", "--clear", env=env)
    assert cleared.returncode == 0 and "cleared" in cleared.stdout
    assert json.loads(cli("cache", "--json", env=env).stdout)["tool_results"] == 0
