"""The runs captured on an H100 (samples/gpu/): what inspect filed there, checked independently."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter

import pytest

from conftest import GPU_SAMPLES
from ptx_helpers import reference_opcodes

from irscope.parsers import inductor, ptx, sass

# triton_poi_fused_relu_0 = async_compile.triton('triton_poi_fused_relu_0', '''
TRITON_DEF = re.compile(r"^(\w+) = async_compile\.triton\(", re.MULTILINE)
# /*0090*/                   HGMMA.64x128x16.F32 gdesc[UR4], RZ, !UPT ;
SASS_LINE = re.compile(r"^\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", re.MULTILINE)


def output_code(run, graph):
    return run.read_text(run.stage(graph, "inductor_output_code"))


def test_torch_graphs_launch_the_triton_kernels_their_output_code_defines(gpu_run):
    run = gpu_run("torch_cuda")
    graphs = {u.name.split("] ")[1]: u for u in run.units("torch") if "] " in u.name}
    assert set(graphs) == {"mlp", "activation_chain", "complex_activation", "post_norm_block",
                           "mlp_dead_gate"}
    units = {u.id: u for u in run.units()}
    for name, graph in graphs.items():
        defined = set(TRITON_DEF.findall(output_code(run, graph)))
        launched = {units[r.dst].name for r in run.relations("launches") if r.src == graph.id}
        # a kernel compiled in several configs is several units; its base name is the kernel
        assert {n.split("-")[0] for n in launched} == defined, name


def test_six_eager_ops_become_one_triton_kernel_on_the_gpu(gpu_run):
    run = gpu_run("torch_cuda")
    graph = next(u for u in run.units("torch") if u.name.endswith("complex_activation"))
    parsed = run.parsed(run.stage(graph, "inductor_output_code"))
    assert parsed.totals["kernels_launched"] == 1
    assert [k.backend for k in parsed.kernels] == ["triton"]
    fused = set(parsed.kernels[0].fused_ops)
    assert {"tanh", "sigmoid", "exp", "mul", "relu", "add"} <= fused


def test_dead_matmul_is_gone_from_the_gpu_output_code(gpu_run):
    run = gpu_run("torch_cuda")
    graph = next(u for u in run.units("torch") if u.name.endswith("mlp_dead_gate"))
    code = output_code(run, graph)
    parsed = run.parsed(run.stage(graph, "inductor_output_code"))
    assert parsed.extern_calls == {"mm": 2} == {"mm": code.count("extern_kernels.mm(")}


@pytest.mark.parametrize("sample", ["torch_cuda", "triton_kernels", "thunder_torch_compile"])
def test_every_triton_kernel_has_every_stage_and_correct_counts(gpu_run, sample):
    run = gpu_run(sample)
    kernels = run.units("triton")
    assert kernels
    for unit in kernels:
        kinds = [s.kind for s in run.stages(unit.id)]
        for kind in ("ttir", "ttgir", "llir", "ptx", "cubin", "sass"):
            assert kind in kinds, (unit.name, kind)
        text = run.read_text(run.stage(unit, "ptx"))
        assert Counter(dict(ptx.summarize_ptx(text))) == reference_opcodes(text), unit.name
        listing = run.read_text(run.stage(unit, "sass"))
        parsed = sass.parse(listing)
        assert sum(parsed.histogram.values()) == len(SASS_LINE.findall(listing)), unit.name
        resources = unit.attrs["resources"]
        assert all(r["registers"] > 0 for r in resources.values())


def test_hand_written_matmul_uses_hopper_tensor_cores(gpu_run):
    run = gpu_run("triton_kernels")
    matmul = run.unit("matmul_kernel")
    module = ptx.parse(run.read_text(run.stage(matmul, "ptx")))
    assert module.header.target.startswith("sm_90a") if hasattr(module, "header") else True
    assert any(op.startswith("wgmma") for op in module.histogram)
    sass_ops = run.parsed(run.stage(matmul, "sass")).histogram
    assert any(op.startswith("HGMMA") for op in sass_ops)


def test_jax_units_hold_every_stage_and_fusions(gpu_run):
    run = gpu_run("jax_cuda")
    names = {u.name for u in run.units("jax")}
    assert {"jit_mlp", "jit_activation_chain", "jit_complex_activation", "jit_post_norm_block",
            "jit_mlp_dead_gate"} <= names
    for name in ("jit_mlp", "jit_complex_activation"):
        unit = run.unit(name)
        kinds = {s.kind for s in run.stages(unit.id)}
        assert {"jaxpr", "stablehlo", "hlo_before_opt", "hlo_after_opt", "ptx"} <= kinds
        after = run.parsed(run.stage(unit, "hlo_after_opt"))
        before = run.parsed(run.stage(unit, "hlo_before_opt"))
        assert after.totals["entry_instructions"] < before.totals["entry_instructions"]
        assert after.totals["fusions"] >= 1
    dead = run.unit("jit_mlp_dead_gate")
    jaxpr = run.parsed(run.stage(dead, "jaxpr")).histogram
    assert jaxpr["dot_general"] == 3
    hlo = run.read_text(run.stage(dead, "hlo_after_opt"))
    # two GEMMs survive optimization (cuBLAS calls or Triton GEMM fusions), not three
    assert len(re.findall(r"kind=kCustom|custom_call_target=\"__cublas", hlo)) == 2


def test_fp32_to_bf16_diff_shows_the_conversions(tmp_path, cli):
    for name in ("torch_cuda", "torch_cuda_bf16"):
        shutil.copytree(GPU_SAMPLES / name, tmp_path / name)
    out = cli("diff", tmp_path / "torch_cuda", tmp_path / "torch_cuda_bf16", "--format", "json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["schema"] == "irscope.diff/1"
    text = json.dumps(doc)
    assert "cvt.f32.bf16" in text
    gate = cli("diff", tmp_path / "torch_cuda", tmp_path / "torch_cuda_bf16",
               "--fail-on", "ptx.op.cvt.f32.bf16 increased")
    assert gate.returncode == 1 and "cvt.f32.bf16" in gate.stderr + gate.stdout


@pytest.mark.parametrize("sample", ["torch_cuda", "triton_kernels", "jax_cuda",
                                    "thunder_torch_compile", "thunder_cuda", "jax_triton"])
def test_every_stage_lexes_losslessly_and_survives_damage(gpu_run, sample):
    """Each text stage of a real GPU run: no Error token, and mangled copies never crash."""
    from pygments.token import Error

    from irscope.parsers import registry
    from test_golden import mangled

    run = gpu_run(sample)
    seen = set()
    for stage in run.stages():
        if registry.get(stage.kind).binary or stage.blob in seen:
            continue
        seen.add(stage.blob)
        text = run.read_text(stage)
        tokens = list(registry.lexer(stage.kind).get_tokens_unprocessed(text))
        assert "".join(value for _, _, value in tokens) == text, stage.name
        assert not [v for _, token, v in tokens if token is Error], (stage.kind, stage.name)
        if registry.get(stage.kind).module and len(text) < 300_000:
            for version in mangled(text, seed=len(text))[:8]:
                crashes = [d.message for d in registry.parse(stage.kind, version).diagnostics
                           if d.message.startswith("parser error")]
                assert not crashes, (stage.kind, stage.name, crashes)


def test_kernel_metadata_is_tritons_and_dynamic_shared_memory_counts(gpu_run):
    """The matmul asks for 48 KiB of dynamic shared memory at launch: shared memory per block
    is the cubin's static bytes plus that, and occupancy is computed with both."""
    from irscope.analysis.occupancy import occupancy
    from irscope.read.figures import unit_figures_of

    run = gpu_run("triton_kernels")
    unit = run.unit("matmul_kernel")
    metadata = json.loads(run.read_text(run.stage(unit, "metadata")))
    assert metadata["name"] == "matmul_kernel" and metadata["shared"] > 16 * 1024
    (card,) = unit.attrs["resources"].values()
    assert card["shared_dynamic_bytes"] == metadata["shared"] == unit.attrs["shared"]
    (kernel,) = unit_figures_of(run, unit).kernels
    assert kernel.shared_static_bytes == card["shared_static_bytes"]
    assert kernel.shared_dynamic_bytes == metadata["shared"]
    assert kernel.shared_bytes == card["shared_static_bytes"] + metadata["shared"]
    expected = occupancy(90, metadata["num_warps"] * 32, card["registers"], kernel.shared_bytes)
    assert kernel.occupancy == round(expected.ratio, 4)
    assert kernel.occupancy_limiter == card["occupancy_limiter"] == expected.limiter


def test_thunder_torch_compile_regions_launch_their_graphs_kernels_on_the_gpu(gpu_run):
    """Thunder's torch.compile executor on an H200: each fusion region of the final traces
    launches the Dynamo graph its first call compiled, and that graph the Triton kernels its
    output code defines; the region's operations are those its trace lists."""
    run = gpu_run("thunder_torch_compile")
    [thunder] = run.units("thunder")
    units = {u.id: u for u in run.units()}
    traces = {s.name: run.read_text(s) for s in run.stages(thunder.id)}
    regions = {}
    for relation in run.relations("launches"):
        if relation.src == thunder.id:
            regions[relation.attrs["region"]] = units[relation.dst]
    # every region the final traces call, independently: "TorchCompileN(" call sites
    called = set(re.findall(r"\b(TorchCompile\d+)\(", traces["forward execution"]
                            + traces["backward execution"]))
    assert set(regions) == called and called
    for region, graph in regions.items():
        defined = set(TRITON_DEF.findall(output_code(run, graph)))
        launched = {units[r.dst].name.split("-")[0] for r in run.relations("launches")
                    if r.src == graph.id}
        assert launched == defined and defined, region
        for kernel in (r.dst for r in run.relations("launches") if r.src == graph.id):
            kinds = {s.kind for s in run.stages(kernel)}
            assert {"ttir", "ttgir", "llir", "ptx", "cubin", "sass"} <= kinds


def test_jax_triton_kernel_is_launched_by_the_jit_that_calls_it_on_the_gpu(gpu_run):
    """jax_triton on an H200: the Triton kernel that triton_call compiled is a unit with its
    stages, launched by the jit whose optimized HLO calls it (one custom call)."""
    run = gpu_run("jax_triton")
    units = {u.id: u for u in run.units()}
    caller = run.unit("jit_add")
    hlo = run.read_text(run.stage(caller, "hlo_after_opt"))
    assert len(re.findall(r'custom_call_target="triton_kernel_call"', hlo)) == 1
    launched = [units[r.dst] for r in run.relations("launches") if r.src == caller.id]
    assert [u.name for u in launched] == ["add_kernel"]
    [kernel] = launched
    assert [s.kind for s in run.stages(kernel.id)] == ["ttir", "ttgir", "llir", "ptx"]
    text = run.read_text(run.stage(kernel, "ptx"))
    assert re.search(r"^\.visible \.entry add_kernel\(", text, re.MULTILINE)
    assert Counter(dict(ptx.summarize_ptx(text))) == reference_opcodes(text)


def test_ddp_over_nccl_ranks_compile_the_same_and_launch_what_they_define(gpu_run):
    """torchrun with 2 ranks of DDP over NCCL on two H200s: each rank's graph launches the
    Triton kernels its own output code defines, every kernel holds one copy of each stage,
    and the ranks compiled the same (guards name rank 1's GPU and its object ids, which
    differ, and must not count)."""
    from irscope.read.ranks import read_rank_comparison

    run = gpu_run("ddp_nccl")
    units = {u.id: u for u in run.units()}
    forwards = [u for u in run.units("torch") if u.name.startswith("[4/0] forward")]
    assert sorted(u.attrs.get("rank") for u in forwards) == [0, 1]
    for graph in forwards:  # its forward's and its backward's output code
        defined = {name for stage in run.stages(graph.id) if stage.kind == "inductor_output_code"
                   for name in TRITON_DEF.findall(run.read_text(stage))}
        launched = {units[r.dst].name.split("-")[0] for r in run.relations("launches")
                    if r.src == graph.id}
        assert launched == defined and len(defined) == 4, graph.name
    for kernel in run.units("triton"):
        names = [s.name for s in run.stages(kernel.id)]  # not "ptx (2)": one copy each
        assert len(names) == len(set(names)), (kernel.name, names)
        assert {"ttir", "ttgir", "llir", "ptx", "cubin", "sass"} <= set(names)
    comparison = read_rank_comparison(run)
    assert comparison.ranks == (0, 1) and not comparison.diverged, comparison.divergences


def test_thunder_nvfuser_regions_launch_the_kernels_they_compiled_on_the_gpu(gpu_run):
    """Thunder with nvFuser on an H200: each nvFuser region the final traces call launches the
    kernels its first call compiled (nvFuser names every fusion's kernels alike, so each
    region's are kept apart as it runs), each with nvFuser's CUDA, PTX and SASS; a region whose
    definition sums runs a reduction kernel."""
    run = gpu_run("thunder_cuda")
    [thunder] = run.units("thunder")
    units = {u.id: u for u in run.units()}
    traces = {s.name: run.read_text(s) for s in run.stages(thunder.id)}
    called = {role: set(re.findall(r"\b(nvFusion\d+)\(", traces[f"{role} execution"]))
              for role in ("forward", "backward")}
    kernels: dict[str, list] = {}
    for relation in run.relations("launches"):
        assert relation.src == thunder.id
        region = relation.attrs["region"]
        assert region in called[relation.attrs["role"]]
        kernels.setdefault(region, []).append(units[relation.dst])
    assert set(kernels) == called["forward"] | called["backward"] and len(kernels) == 3
    for region, launched in kernels.items():
        definition = traces[f"{region} fusion definition"]
        schedulers = {u.name.split()[-1].split("_f")[0] for u in launched}
        assert ("reduction" in schedulers) == ("fd.ops.sum(" in definition), region
        for kernel in launched:
            assert kernel.framework == "nvfuser" and kernel.attrs["region"] == region
            name = kernel.name.rsplit(" ", 1)[1]
            assert [s.kind for s in run.stages(kernel.id)] == ["cuda_source", "ptx", "sass"]
            assert f"__global__ void nvfuser_{name}(" in run.read_text(
                run.stage(kernel, "cuda_source"))
            text = run.read_text(run.stage(kernel, "ptx"))
            assert re.search(rf"^\.visible \.entry _ZN3nvf\d+nvfuser_{name}E", text, re.M)
            assert Counter(dict(ptx.summarize_ptx(text))) == reference_opcodes(text)
            listing = run.read_text(run.stage(kernel, "sass"))  # as nvdisasm wrote it there
            assert f"nvfuser_{name}E" in listing
            assert sass.parse(listing).totals["instructions"] == len(SASS_LINE.findall(listing))


def test_the_summary_keeps_names_and_counts_apart_for_every_framework(gpu_run):
    """Thunder with nvFuser: `thunder` and `nvfuser` are longer than the other names."""
    from irscope.read.summary import read_summary
    from irscope.reports.summary import lines

    said = [line.plain for line in lines(read_summary(gpu_run("thunder_cuda")))]
    assert "  nvfuser 4 kernels" in said and "  thunder 1 function" in said


@pytest.mark.parametrize("name", ["torch_cuda", "gpt2_provenance", "thunder_cuda"])
def test_the_summary_counts_what_the_full_parse_counts_without_parsing(gpu_run, name):
    """The opcode histograms `inspect` prints as the script ends come from the parsers' one
    regex pass, not a parse of every kernel; they are the full parse's, stage by stage and
    summed, and leave the parse cache as it was."""
    from collections import Counter

    from irscope.parsers import registry
    from irscope.read.summary import TOP_OPCODES, read_summary

    run = gpu_run(name)
    cached = run.db.execute("SELECT count(*) FROM stats").fetchone()[0]
    summed = {"ptx": Counter(), "sass": Counter()}
    for stage in run.stages(kinds=("ptx", "sass")):
        text = run.read_text(stage)
        full = registry.parse(stage.kind, text).histogram
        assert Counter(run.histogram(stage)) == Counter(full) and full
        summed[stage.kind].update(full)
    assert summed["ptx"] and summed["sass"]
    summary = read_summary(run)
    for kind, top in (("ptx", summary.top_ptx_opcodes), ("sass", summary.top_sass_opcodes)):
        by_count = sorted(summed[kind].items(), key=lambda item: (-item[1], item[0]))
        assert list(top.items()) == by_count[:TOP_OPCODES]
    assert run.db.execute("SELECT count(*) FROM stats").fetchone()[0] == cached
