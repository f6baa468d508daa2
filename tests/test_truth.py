"""Every roll-up irscope shows, recomputed independently on real GPU captures.

The committed GPU runs (samples/gpu/*) and the raw dumps of one H100 process
(samples/gpu/dumps/trust_torch.tar.gz: TORCH_TRACE, TORCH_LOGS, TORCH_COMPILE_DEBUG, Inductor's
cache, Triton's cache and TRITON_KERNEL_DUMP of samples/scripts/trust_torch.py) are filed,
then each figure is checked against a source that shares no code with irscope: the output
code's own definitions and calls read with this file's regexes, `cuobjdump -res-usage`,
`ptxas -v` and `nvdisasm -c` run here on the stored PTX and cubins, and the trace's own
compile ids.
"""

from __future__ import annotations

import re
import tarfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import GPU_SAMPLES
from truth_helpers import (AOT_ID, DEFINITION, KERNEL_PATH, PTXAS_FRAME, RES_USAGE,
                           SASS_INSTRUCTION, TARGET, call_launches, distinct_output_codes,
                           run_tool)

from irscope.analysis.ranks import split_rank
from irscope.reports import summary
from irscope.read.summary import read_summary
from irscope.analysis.occupancy import occupancy
from irscope.ingest import ingest
from irscope.nvtools import find_tool
from irscope.reports.build import build_report
from irscope.read.figures import read_run_figures
from irscope.store import Run

DUMPS = GPU_SAMPLES / "dumps" / "trust_torch.tar.gz"
NVDISASM_KERNELS = 8
SAMPLE_RUNS = sorted(p.name for p in GPU_SAMPLES.iterdir() if (p / "index.sqlite").is_file())


@pytest.fixture(autouse=True)
def tools():
    for name in ("cuobjdump", "ptxas", "nvdisasm"):
        if find_tool(name) is None:
            pytest.skip(f"{name} not found (Triton's wheel ships it)")


@pytest.fixture(scope="module")
def trust_run(tmp_path_factory):
    """The H100 dumps of trust_torch.py filed together, as a user's `irscope ingest` would."""
    folder = tmp_path_factory.mktemp("trust")
    with tarfile.open(DUMPS) as archive:
        archive.extractall(folder, filter="data")
    run = Run.create(folder / "run")
    report = ingest(run, [folder / "w"])
    return run, report, folder / "w"


@pytest.fixture(scope="module", params=["trust_torch (dumps)", *SAMPLE_RUNS])
def any_run(request, trust_run):
    """The filed dumps, then each committed GPU sample run."""
    if request.param in SAMPLE_RUNS:
        return Run.open(GPU_SAMPLES / request.param, read_only=True)
    return trust_run[0]


# -- graphs: one unit each, kernels summed over distinct output codes -------------------------
def test_one_unit_per_graph_whatever_the_sources(trust_run):
    run, _, dumps = trust_run
    trace = next((dumps / "trace").glob("*.log")).read_text()
    # {"dynamo_start": ..., "frame_id": 0, "frame_compile_id": 1, ...}
    compiles = set(re.findall(r'\{"inductor_output_code".*?"frame_id": (\d+), '
                              r'"frame_compile_id": (\d+)', trace))
    graphs = read_run_figures(run).graphs
    assert sorted(g.name.split("]")[0] + "]" for g in graphs) == sorted(
        f"[{f}/{c}]" for f, c in compiles)
    # every debug folder, .debug copy, cached output code and log block joined a graph
    assert not [u.name for u in run.units("torch") if not u.name.startswith(("[", "("))]
    assert not [u.name for u in run.units("file") if u.name.endswith(".debug")]


def test_graph_figures_equal_the_output_code_of_every_role(any_run):
    run = any_run
    figures = {u.unit_id: u for u in read_run_figures(run).units}
    for unit in run.units("torch"):
        codes = distinct_output_codes(run, unit)
        if not codes:
            continue
        got = figures[unit.id]
        assert got.kernels_generated == sum(len(DEFINITION.findall(c)) for c in codes)
        assert got.kernels_launched == sum(call_launches(c)[0] for c in codes)
        assert got.extern_calls == sum(call_launches(c)[1] for c in codes)
        assert sorted(c.role for c in got.output_codes) == sorted(
            AOT_ID.search(c).group(1) for c in codes)


def test_forward_and_backward_are_both_counted(trust_run):
    run = trust_run[0]
    step = next(g for g in read_run_figures(run).graphs if g.name.startswith("[0/0]"))
    roles = {c.role: c for c in step.output_codes}
    assert set(roles) == {"forward", "backward"}
    assert step.kernels_launched == roles["forward"].kernels_launched + roles[
        "backward"].kernels_launched
    text = summary.to_text(read_summary(run))
    assert f"forward {roles['forward'].kernels_launched}" in text
    assert f"backward {roles['backward'].kernels_launched}" in text


def test_run_totals_are_sums_over_distinct_graphs(any_run):
    run = any_run
    graphs = [u for u in run.units("torch") if distinct_output_codes(run, u)]
    report = build_report(run)
    if not graphs:
        assert "kernels_generated" not in report.totals
        return
    assert report.totals["graphs"] == len(graphs)
    assert report.totals["kernels_generated"] == sum(
        len(DEFINITION.findall(c)) for u in graphs for c in distinct_output_codes(run, u))
    assert report.totals["kernels_launched"] == sum(
        call_launches(c)[0] for u in graphs for c in distinct_output_codes(run, u))
    assert read_summary(run).kernels_generated == report.totals["kernels_generated"]


def test_recompiles_are_compiles_not_reasons(trust_run):
    run, _, dumps = trust_run
    trace = next((dumps / "trace").glob("*.log")).read_text()
    recompiled = set(re.findall(r'\{"dynamo_start".*?"frame_id": (\d+), "frame_compile_id": '
                                r'([1-9]\d*)', trace))
    assert read_summary(run).recompiles == len(recompiled) == 2
    # the log repeats the trace's reasons, with blank space at their ends: one event each
    for unit in run.units("torch"):
        reasons = [e.data["reason"] for e in run.events("recompile") if e.unit_id == unit.id]
        assert len(reasons) == len(set(r.strip() for r in reasons))


# -- kernels: linked by identity; resources equal NVIDIA's tools --------------------------------
def test_launches_link_the_kernel_compiled_from_the_named_module(any_run):
    run = any_run
    by_id = {u.id: u for u in run.units()}
    for relation in run.relations("launches"):
        kernel = by_id[relation.dst]
        if kernel.framework != "triton" or "output_code" not in relation.attrs:
            continue  # (a jit calling a jax_triton kernel has no output code)
        named = {Path(path).name: name for code in distinct_output_codes(
            run, by_id[relation.src]) for path, name in KERNEL_PATH.findall(code)}
        function = split_rank(kernel.name)[0].split("-")[0]  # "k-8b2673e7 (rank 1)" -> "k"
        if Path(kernel.source_file).name not in named:  # a kernel the ranks share, compiled
            assert len(kernel.attrs.get("ranks", ())) > 1  # from a module of another rank's
            assert function in named.values()
            continue
        assert function == named[Path(kernel.source_file).name]


def test_kernel_names_reused_across_dtypes_stay_apart(trust_run):
    run = trust_run[0]
    by_id = {u.id: u for u in run.units()}
    forward = {u.name: u for u in run.units("torch")}
    fp32, bf16 = (next(u for n, u in forward.items() if n.startswith(p)) for p in ("[0/0]",
                                                                                   "[0/1]"))
    targets = {g.id: {by_id[r.dst].source_file for r in run.relations("launches")
                      if r.src == g.id} for g in (fp32, bf16)}
    assert targets[fp32.id] and targets[bf16.id] and not targets[fp32.id] & targets[bf16.id]


def compiled_kernels(run) -> list:
    """The run's Triton kernels with a cubin (a jax_triton kernel ends at its PTX, which XLA
    compiles); skips a run that has none."""
    kernels = [u for u in run.units("triton") if any(s.kind == "cubin" for s in run.stages(u.id))]
    if not kernels:
        pytest.skip("no Triton kernel of this run holds a cubin")
    return kernels


def test_registers_and_shared_memory_equal_cuobjdump(any_run):
    run = any_run
    figures = {u.unit_id: u for u in read_run_figures(run).units}
    for unit in compiled_kernels(run):
        cubin = next(s for s in run.stages(unit.id) if s.kind == "cubin")
        usage = {m[0]: tuple(map(int, m[1:])) for m in RES_USAGE.findall(
            run_tool("cuobjdump", ["-res-usage"], run.read_blob(cubin.blob), ".cubin"))}
        (kernel,) = figures[unit.id].kernels
        registers, _stack, shared, _local = usage[kernel.name]
        assert kernel.registers == registers
        assert kernel.shared_static_bytes == shared
        assert kernel.shared_dynamic_bytes == int(unit.attrs.get("shared") or 0)
        threads = int(unit.attrs["num_warps"]) * 32
        card = occupancy(90, threads, registers, shared + kernel.shared_dynamic_bytes)
        assert kernel.arch == 90 and kernel.occupancy == round(card.ratio, 4)


def test_spills_equal_ptxas_and_local_arrays_are_no_spills(trust_run):
    run = trust_run[0]
    figures = {u.unit_id: u for u in read_run_figures(run).units}
    local_array = False
    for unit in run.units("triton"):
        ptx = run.read_blob(next(s for s in run.stages(unit.id) if s.kind == "ptx").blob)
        arch = TARGET.search(ptx.decode()).group(1)
        frame, stores, loads = map(int, PTXAS_FRAME.search(run_tool(
            "ptxas", ["-v", f"--gpu-name={arch}", "-o", "/dev/null"], ptx, ".ptx")).groups())
        (kernel,) = figures[unit.id].kernels
        assert (kernel.spill_store_bytes, kernel.spill_load_bytes) == (stores, loads)
        assert kernel.stack_frame_bytes == frame
        if frame and not stores:
            local_array = True
            assert kernel.local_store_bytes and not figures[unit.id].spill_bytes
    assert local_array, "the sin/cos kernel keeps a local array"


def test_sass_instruction_counts_equal_nvdisasm(any_run):
    """nvdisasm takes over a second a cubin: the first kernels of each run, disassembled side
    by side."""
    units = sorted(compiled_kernels(any_run), key=lambda u: u.name)[:NVDISASM_KERNELS]
    parsed, cubins = [], []
    for unit in units:
        stages = {s.kind: s for s in any_run.stages(unit.id)}
        parsed.append(any_run.parsed(stages["sass"]).totals["instructions"])
        cubins.append(any_run.read_blob(stages["cubin"].blob))
    with ThreadPoolExecutor(max_workers=2) as pool:
        listings = pool.map(lambda cubin: run_tool("nvdisasm", ["-c"], cubin, ".cubin"), cubins)
        assert parsed == [len(SASS_INSTRUCTION.findall(text)) for text in listings]


def test_global_atomics_are_categorised(trust_run):
    run = trust_run[0]
    unit = run.unit("histogram_kernel")
    sass = run.read_text(run.stage(unit, "sass"))
    atomics = len(re.findall(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?(?:RED|REDG|ATOMG)\b",
                             sass, re.M))
    assert atomics and run.parsed(run.stage(unit, "sass")).categories["global_atomic"] \
        == atomics


def test_rotated_loop_of_a_runtime_trip_count_is_found(trust_run):
    run = trust_run[0]
    ptx = run.parsed(run.stage(run.unit("row_sum_kernel"), "ptx"))
    loops = [loop for kernel in ptx.kernels for loop in kernel.loops]
    assert loops, "row_sum_kernel's `for start in range(0, n_cols, BLOCK)` is a loop"


def test_dump_and_cache_of_one_compile_are_one_unit(trust_run):
    run, _, dumps = trust_run
    cache_entries = [p for p in (dumps / "triton_cache").iterdir()
                     if any(f.suffix == ".ttir" for f in p.iterdir())]
    dumped = list((dumps / "triton_dump").iterdir())
    assert len(dumped) == len(cache_entries) == len(run.units("triton"))
    for unit in run.units("triton"):  # the dump has no metadata: the cache entry's is kept
        assert unit.attrs.get("num_warps") and "shared" in unit.attrs, unit.name


def test_kernel_modules_are_python_source_not_output_code(trust_run):
    """Inductor's cache holds each generated Triton kernel's module (it imports from
    torch._inductor too): it joins its kernel as Python source, never a graph of 0 kernels."""
    run, _, dumps = trust_run
    modules = [p for p in (dumps / "inductor_cache").rglob("*.py")
               if "@triton.jit" in p.read_text() and "def call(" not in p.read_text()]
    assert modules
    for stage in run.stages():
        if stage.kind == "inductor_output_code":
            assert "def call(" in run.read_text(stage), stage.origin
    joined = {Path(s.origin).name for u in run.units("triton") for s in run.stages(u.id)
              if s.kind == "python_source" and s.origin}
    assert {p.name for p in modules} <= joined


def test_ls_and_report_show_one_shared_memory_figure(cli):
    """Shared memory per block is static + dynamic in `ls`, `report` and the figures alike."""
    import json

    run = GPU_SAMPLES / "triton_kernels"
    listed = json.loads(cli("ls", run, "--json").stdout)
    reported = json.loads(cli("report", run, "--format", "json").stdout)
    unit = Run.open(run).unit("matmul_kernel")
    (kernel,) = read_run_figures(Run.open(run), [unit]).units[0].kernels
    assert kernel.shared_dynamic_bytes > 0
    row = next(u for u in (listed["units"] if isinstance(listed, dict) else listed)
               if u["name"] == "matmul_kernel")
    figures = next(u["figures"] for u in reported["units"] if u["name"] == "matmul_kernel")
    assert row["figures"]["smem_B"] == figures["shared_bytes"] == kernel.shared_bytes


def test_a_cached_kernel_s_source_ir_is_not_called_python(trust_run):
    """Triton's <name>.source is the TTIR a compile started from when it began from an AST:
    filed as TTIR ('ttir source'), never as the kernel's Python source."""
    run = trust_run[0]
    for unit in run.units("triton"):
        for stage in run.stages(unit.id):
            head = run.read_text(stage)[:200] if stage.kind == "python_source" else ""
            assert not head.startswith(("#loc", "module")), (unit.name, stage.origin)
    sources = [s for u in run.units("triton") for s in run.stages(u.id) if s.name == "ttir source"]
    assert sources and all("tt.func" in run.read_text(s) for s in sources)


def test_kernels_compiled_while_the_program_ran_are_cache_misses(tmp_path):
    """A kernel that no compile hook saw is taken from Triton's cache: a cache hit when its
    entry was there before the program started, a miss (compiled by Inductor's workers) when
    it was written while the program ran, as a cold run on a GPU compiles them."""
    import json
    import os

    from irscope.filing.inductor_cache import stage_cached_kernels
    from irscope.collectors.staging import Staging
    from irscope.collectors.triton import SIDECAR

    with tarfile.open(DUMPS) as archive:
        archive.extractall(tmp_path, filter="data")
    cache = tmp_path / "w" / "triton_cache"
    run = Run.create(tmp_path / "run")
    ingest(run, [tmp_path / "w" / "trace"])
    entry_hash = {entry.name: json.loads(meta.read_text())["hash"]
                  for entry in cache.iterdir() for meta in entry.glob("*.json")
                  if not meta.name.startswith("__grp__")}

    def staged(name: str, fresh: set[str]) -> dict[str, bool]:
        """Compile hash -> cache_hit of each kernel staged, the entries of ``fresh`` written
        after the collection started and the others an hour before."""
        staging = Staging(tmp_path / name).create()
        started = staging.write_config({}).stat().st_mtime
        for entry in cache.iterdir():
            for path in entry.iterdir():
                when = started + 1 if entry.name in fresh else started - 3600
                os.utime(path, (when, when))
        sidecars = [json.loads((folder / SIDECAR).read_text()) for folder in
                    stage_cached_kernels(run, staging, {"TRITON_CACHE_DIR": str(cache)})]
        return {sidecar["hash"]: sidecar["cache_hit"] for sidecar in sidecars}

    before = staged("warm", set())
    assert len(before) >= 2 and all(before.values())  # every entry older than the program
    compiled = next(entry for entry, kernel in sorted(entry_hash.items()) if kernel in before)
    after = staged("cold", {compiled})
    assert set(after) == set(before)
    assert [kernel for kernel, hit in after.items() if not hit] == [entry_hash[compiled]]
    run.close()
