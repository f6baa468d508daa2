"""The provenance graph on real compiles: GPT-2 from an H100 (the committed sample, and its raw
trace when present), torch.compile on the CPU (C++ kernels, forward and backward), jax.jit on the
CPU, AOT-compiled Triton kernels; each checked against the compilers' own records read here
independently (the JSON of Inductor's provenance artifacts, the `# File:` comments)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from conftest import GPU_SAMPLES
from inspect_helpers import KERNEL_DEFINITION, inspect, write

from irscope.browse.follow import Follower
from irscope.browse.where import where
from irscope.read.provenance import (FX, KERNEL, KERNEL_DEF, LAUNCH, Node, fx_nodes_of,
                                     kernel_sources, provenance_graph, source_hits)
from irscope.read.view import RunView
from irscope.store import Run

GELU = 240  # modeling_gpt2.py: `hidden_states = self.act(hidden_states)` in GPT2MLP.forward
RAW_TRACE = Path("/work/raw/gpt2_small/trace")
# File "/x/modeling_gpt2.py", line 240, in forward
FRAME = re.compile(r'File "([^"]+)", line (\d+), in ')
# # [Provenance debug handles] triton_poi_fused_add_arange_0:1
HANDLE = re.compile(r"# \[Provenance debug handles\] (\S+)")


def open_view(path: Path) -> RunView:
    return RunView(Run.open(path, read_only=True))


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory) -> RunView:
    copy = tmp_path_factory.mktemp("prov") / "gpt2_provenance"
    shutil.copytree(GPU_SAMPLES / "gpt2_provenance", copy)
    return open_view(copy)


def follower(view: RunView) -> Follower:
    return Follower.of(view)


def recorded_launches(view: RunView, path_end: str, line: int) -> set[tuple[str, str]]:
    """(role, debug handle) of every launch whose stack trace Inductor recorded with
    ``path_end:line`` in it, read from the artifacts' JSON and the output codes' text."""
    found = set()
    for unit in view.units("torch"):
        stages = sorted(view.stages(unit.id), key=lambda s: s.id)
        role = None
        handles: set[str] = set()
        for stage in stages:
            if stage.kind == "inductor_output_code":
                text = view.read_text(stage)
                role = re.search(r"# AOT ID: \['\d+_(\w+)'\]", text).group(1)
                handles = set(HANDLE.findall(text))
            elif stage.name.startswith("inductor_provenance_tracking_kernel_stack_traces"):
                for handle, stacks in json.loads(view.read_text(stage)).items():
                    frames = {(p, int(n)) for s in stacks for p, n in FRAME.findall(s)}
                    if handle in handles and any(p.endswith(path_end) and n == line
                                                 for p, n in frames):
                        found.add((role, handle))
    return found


def test_gelu_line_lists_the_kernels_inductor_recorded_forward_and_backward(gpt2):
    graph = provenance_graph(gpt2)
    (path,) = graph.paths_named("modeling_gpt2.py")
    hits = source_hits(gpt2, path, GELU)
    listed = set()
    for hit in hits:
        assert hit.node.kind == LAUNCH and hit.kernels
        launch = [n for n in graph.nodes_at(hit.node.stage_id, hit.node.line)
                  if n.kind == LAUNCH][0]
        text = gpt2.read_text(next(s for s in gpt2.stages(hit.node.unit_id)
                                   if s.id == hit.node.stage_id)).splitlines()
        handle = HANDLE.search("\n".join(text[hit.node.line - 4:hit.node.line])).group(1)
        assert launch.name in handle
        listed.add((hit.role, handle))
    recorded = recorded_launches(gpt2, "modeling_gpt2.py", GELU)
    assert listed == recorded
    assert {role for role, _ in recorded} == {"forward", "backward"}
    assert len([r for r in recorded if r[0] == "forward"]) == 2  # the GELU of each layer
    assert len([r for r in recorded if r[0] == "backward"]) == 6


@pytest.mark.skipif(not RAW_TRACE.is_dir(), reason="the raw GPT-2 trace is not here")
def test_the_sample_holds_what_the_raw_trace_records():
    """The committed sample was filed from this trace: its records are the trace's."""
    records = 0
    for log in RAW_TRACE.glob("*.log"):
        records += log.read_text().count('"inductor_provenance_tracking_kernel_stack_traces"')
    view = open_view(GPU_SAMPLES / "gpt2_provenance")
    kept = [s for s in view.stages(kinds=("inductor_provenance",))
            if "kernel_stack_traces" in s.name]
    assert len(kept) == records == 4


def test_every_output_code_kernel_has_fx_nodes_with_their_python_lines(gpt2):
    graph = provenance_graph(gpt2)
    defs = {n for spans in graph.spans.values() for _, _, n in spans if n.kind == KERNEL_DEF}
    written = sum(len(KERNEL_DEFINITION.findall(gpt2.read_text(s)))
                  for s in gpt2.stages(kinds=("inductor_output_code",)))
    assert len(defs) == written == 30
    for node in defs:
        nodes = fx_nodes_of(gpt2, node)
        assert nodes, node
        located = [n for n in nodes if any(e.src.kind == "source" for e in graph.upstream(n))]
        assert located, node  # and their `# File:` lines where the dump prints one


def test_from_the_model_line_to_ttir_and_ptx_lines_and_back(gpt2):
    graph = provenance_graph(gpt2)
    (path,) = graph.paths_named("modeling_gpt2.py")
    found = where(gpt2, path, GELU)
    kernels = {k.unit: k for row in found.rows for k in row.kernels}
    assert len(kernels) == 6  # 4 kernels, 2 of them autotuned into two configurations
    for kernel in kernels.values():
        lines = {s.kind: s.lines for s in kernel.stages}
        assert lines["ttir"] and lines["ptx"] and lines["sass"]  # SASS filed with line info
        assert kernel.instructions > 0
    for row in found.rows:  # back: each kernel's sources name the model line
        for unit in (u for u in gpt2.units() if u.name in {k.unit for k in row.kernels}):
            assert (path, GELU) in kernel_sources(gpt2, unit.id, callers=True)


def test_following_an_fx_node_lands_on_the_same_node_by_records_not_names(gpt2):
    """`mul` is the GELU's `0.5 * x` in the Dynamo graph; `mul` names a dropout node of the
    post-grad graph: following goes by Inductor's records to `mul_8`, then to its kernel."""
    view = gpt2
    step = follower(view)
    unit = view.unit("[1/0] forward")
    stages = {s.name: s for s in view.stages(unit.id)}
    dynamo = stages["dynamo_output_graph"]
    lines = view.read_text(dynamo).splitlines()
    at = next(i for i, t in enumerate(lines) if t.strip().startswith("mul: "))
    stage, line = dynamo, at
    for _ in range(3):  # before/after pre-grad, then the joint graph
        found = step.follow(stage, line, 1)
        stage, line = found.target, found.cursor
    assert stage.name == "aot_joint_graph"
    assert view.read_text(stage).splitlines()[line].strip().startswith("mul_8: ")
    picked = step.follow(stage, line, 1)  # forward and backward both hold it: a picker
    assert [c.stage.name for c in picked.choices] == ["aot_forward_graph",
                                                      "aot_backward_graph"]
    stage, line = picked.choices[0].stage, picked.choices[0].cursor
    for _ in range(3):  # before and after post-grad, then the output code
        found = step.follow(stage, line, 1)
        stage, line = found.target, found.cursor
    assert stage.kind == "inductor_output_code"
    code = view.read_text(stage).splitlines()
    assert "triton_poi_fused_add_mul_pow_tanh_view_6.run(" in code[line]
    kernel = step.follow(stage, line, 1)
    assert kernel.target is not None and "pow_tanh_view_6" in kernel.note
    back = step.follow(kernel.target, 0, -1)
    assert back.target.id == stage.id and line in back.lines


def test_the_dynamo_graph_steps_back_to_the_source_line(gpt2):
    view = gpt2
    unit = view.unit("[1/0] forward")
    dynamo = next(s for s in view.stages(unit.id) if s.name == "dynamo_output_graph")
    lines = view.read_text(dynamo).splitlines()
    at = next(i for i, t in enumerate(lines) if t.strip().startswith("mul: "))
    found = follower(view).follow(dynamo, at, -1)
    assert found.source is not None and found.source.number == 66
    assert found.source.path.endswith("transformers/activations.py")


def test_a_run_without_records_links_by_comments_and_says_so(gpu_run):
    """The committed torch_cuda sample predates provenance: its graph comes from the output
    codes' comments alone, and its SASS was filed without line info."""
    view = RunView(gpu_run("torch_cuda"))
    graph = provenance_graph(view)
    assert graph and any("no Inductor provenance records" in n for n in graph.notes)
    (path,) = graph.paths_named("seed_torch.py")
    hits = source_hits(view, path, 14)  # return torch.relu(x @ w1) @ w2
    assert all(h.role == "inference" for h in hits)
    assert sorted((h.node.name, bool(h.kernels)) for h in hits) == [
        ("aten.mm", False), ("aten.mm", False), ("triton_poi_fused_relu_0", True)]
    unit = view.unit("triton_poi_fused_relu_0")
    ptx = next(s for s in view.stages(unit.id) if s.kind == "ptx")
    found = follower(view).follow(ptx, 30, 1)
    assert found.target.kind == "sass" and "no line info" in found.note


def test_user_triton_kernel_lines_both_ways(tmp_path):
    """A hand-written kernel (AOT-compiled for sm_90 on this machine): its `tl.dot` line
    reaches the TTIR's `tt.dot` and comes back to the same line, not to the decorator."""
    from tui_helpers import build_run

    view = open_view(build_run(tmp_path / "triton"))
    unit = view.unit("matmul_kernel")
    source = next(s for s in view.stages(unit.id) if s.kind == "python_source")
    lines = view.read_text(source).splitlines()
    dot = next(i for i, t in enumerate(lines) if "tl.dot(" in t)
    step = follower(view)
    down = step.follow(source, dot, 1)
    ttir = view.read_text(down.target).splitlines()
    assert down.target.kind == "ttir" and any("tt.dot" in ttir[n] for n in down.lines)
    line = next(n for n in down.lines if "tt.dot" in ttir[n])
    up = step.follow(down.target, line, -1)
    assert up.target.id == source.id and "tl.dot(" in lines[up.cursor]
    graph = provenance_graph(view)
    number = next(n.line for n in graph.source_nodes(unit.source_file)
                  if "tl.dot(" in graph.held[unit.source_file][n.line])
    (hit,) = source_hits(view, unit.source_file, number)
    assert hit.node == Node(KERNEL, unit.id) and hit.graph is None


@pytest.fixture(scope="module")
def cpu_torch(tmp_path_factory):
    """`irscope inspect` of a training step under torch.compile on the CPU (C++ kernels)."""
    folder = tmp_path_factory.mktemp("cpu")
    script = write(folder, "train.py", CPU_TRAIN)
    result = inspect(script, run=folder / "run", options=["--only", "torch", "--provenance"],
                     env={"TORCHINDUCTOR_CACHE_DIR": str(folder / "inductor")})  # cold
    assert result.returncode == 0, result.stderr[-3000:]
    return open_view(folder / "run"), script


CPU_TRAIN = '''import torch

def block(x, w1, w2, g):
    h = torch.nn.functional.gelu(x @ w1)
    h = h @ w2
    return torch.nn.functional.layer_norm(h + x, (x.shape[-1],), g)

x = torch.randn(32, 64, requires_grad=True)
w1 = torch.randn(64, 128, requires_grad=True)
w2 = torch.randn(128, 64, requires_grad=True)
g = torch.randn(64, requires_grad=True)
torch.compile(block)(x, w1, w2, g).sum().backward()
print("done", flush=True)
'''


@pytest.mark.slow
def test_cpu_inductor_cpp_kernels_forward_and_backward(cpu_torch):
    view, script = cpu_torch
    graph = provenance_graph(view)
    assert not graph.notes  # inspect --provenance turned Inductor's provenance on
    defs = {n for spans in graph.spans.values() for _, _, n in spans if n.kind == KERNEL_DEF}
    assert len(defs) == 4 and all(n.name.startswith("cpp_fused") for n in defs)
    for node in defs:  # every C++ kernel: its FX nodes, and its launch's stack trace
        launches = [e.dst for e in graph.downstream(node) if e.dst.kind == LAUNCH]
        assert launches and all(kernel_sources(view, Node(KERNEL, e.dst.unit_id).unit_id)
                                for launch in launches for e in graph.downstream(launch)
                                if e.dst.kind == KERNEL)
    roles = {h.role: h.node.name for h in source_hits(view, str(script), 4)}
    assert roles["forward"].startswith("cpp_fused_gelu") and "backward" in roles
    fx = [n for n in fx_nodes_of(view, next(n for n in defs if "gelu_0" in n.name))]
    assert fx and all(n.kind == FX for n in fx)


@pytest.fixture(scope="module")
def cpu_jax(tmp_path_factory):
    folder = tmp_path_factory.mktemp("jax")
    script = write(folder, "step.py", JAX_STEP)
    result = inspect(script, run=folder / "run", options=["--only", "jax"])
    assert result.returncode == 0, result.stderr[-3000:]
    return open_view(folder / "run"), script


JAX_STEP = '''import jax
import jax.numpy as jnp

def loss(w, x):
    h = jnp.tanh(x @ w)
    return jnp.mean(h * h)

step = jax.jit(jax.grad(loss))
print(step(jnp.ones((16, 8)), jnp.ones((4, 16))).shape, flush=True)
'''


@pytest.mark.slow
def test_jax_jit_lines_reach_equations_hlo_ops_and_fusions(cpu_jax):
    view, script = cpu_jax
    graph = provenance_graph(view)
    (path,) = graph.paths_named("step.py")
    hits = source_hits(view, path, 5)  # h = jnp.tanh(x @ w)
    assert any(h.node.kind == "fusion" for h in hits)
    located = {s.kind for s in view.stages() if graph.spans.get(s.id)}
    assert {"jaxpr", "stablehlo", "hlo_before_opt", "hlo_after_opt"} <= located
    jaxpr = next(s for s in view.stages() if s.kind == "jaxpr")
    equations = [line for line in view.read_text(jaxpr).splitlines() if " = " in line]
    assert equations and all(f"{path}:" in line for line in equations[:3])


def test_diff_pairs_a_renamed_kernel_with_itself_by_provenance(tmp_path):
    """Inductor renumbers kernels between versions: B's GELU kernel is `_8`, and `_6` (its
    name in A) is now another kernel's. The diff compares each kernel with itself."""
    from irscope.reports.build import build_report
    from irscope.reports.diff import diff_reports

    sides = {}
    for side in ("a", "b"):
        copy = tmp_path / side
        shutil.copytree(GPU_SAMPLES / "gpt2_provenance", copy)
        meta = json.loads((copy / "run.json").read_text())
        (copy / "run.json").write_text(json.dumps({**meta, "read_only": False}))
        sides[side] = copy
    gelu, other = "triton_poi_fused_add_mul_pow_tanh_view_6", "triton_poi_fused_add_arange_0"
    with Run.open(sides["b"]) as run, run.transaction() as writer:
        writer.rename_unit(run.unit(gelu).id, gelu[:-1] + "8")
        writer.rename_unit(run.unit(other).id, gelu)
    reports = []
    for side in ("a", "b"):
        with Run.open(sides[side], read_only=True) as run:
            reports.append(build_report(run))
    diff = diff_reports(*reports)
    pairs = {(u.a.name, u.b.name): u for u in diff.units if u.status == "matched"}
    renamed = pairs[(gelu, gelu[:-1] + "8")]
    assert renamed.matched_by == "provenance" and not renamed.changes
    assert pairs[(other, gelu)].matched_by == "provenance"


def test_aot_triton_kernel_line_to_ptx_and_sass_and_back(tmp_path):
    """matmul_kernel compiled here ahead of time for sm_90 (Triton keeps line info in the
    cubin): its `tl.dot` line reaches TTIR, PTX and SASS lines by their own locations, and
    SASS leads back to the line."""
    from kernels import compile_aot, kernels_module
    from tui_helpers import file_kernel

    compiled = compile_aot("matmul_kernel", arch=90)
    source = kernels_module().matmul_kernel.src  # the function as Triton read it
    run = Run.create(tmp_path / "aot", {"name": "aot"})
    with run.transaction() as writer:
        unit = file_kernel(writer, "matmul_kernel", compiled)
        writer.add_stage(unit, "python_source", source[source.index("def "):])
    run.close()
    view = open_view(tmp_path / "aot")
    step = follower(view)
    stages = {s.kind: s for s in view.stages(view.unit("matmul_kernel").id)}
    lines = view.read_text(stages["python_source"]).splitlines()
    dot = next(i for i, t in enumerate(lines) if "tl.dot(" in t)
    found, stage, line = {}, stages["python_source"], dot
    for _ in range(5):  # python -> ttir -> ttgir -> llir -> ptx -> sass
        result = step.follow(stage, line, 1)
        assert result.lines, (stage.kind, result.note)
        stage, line = result.target, result.lines[0]
        found[stage.kind] = result.lines
    assert set(found) == {"ttir", "ttgir", "llir", "ptx", "sass"}
    sass = view.read_text(stages["sass"]).splitlines()
    assert any("HGMMA" in sass[n] or "WGMMA" in sass[n] for n in found["sass"])
    back = step.follow(stages["sass"], found["sass"][0], -1)
    assert back.target.kind == "ptx" and back.lines


def test_xla_fusion_steps_into_its_kernel_ir_and_back(gpu_run):
    view = RunView(gpu_run("jax_cuda"))
    unit = view.unit("jit_post_norm_block")
    hlo = next(s for s in view.stages(unit.id) if s.kind == "hlo_after_opt")
    lines = view.read_text(hlo).splitlines()
    at = next(i for i, t in enumerate(lines) if t.strip().startswith("%loop_multiply_fusion ="))
    step = follower(view)
    down = step.follow(hlo, at, 1)
    assert down.target.name == "ir-no-opt · loop_multiply_fusion"
    assert step.follow(down.target, 0, 1).target.name == "ir-with-opt · loop_multiply_fusion"
    back = step.follow(down.target, 0, -1)
    assert back.target.id == hlo.id and at in back.lines
    (path,) = provenance_graph(view).paths_named("seed_jax.py")
    fusions = {h.node.name for h in source_hits(view, path, 29)}
    assert fusions == {"gemm_fusion_dot_general.2", "loop_multiply_fusion",
                       "gemm_fusion_dot_general.3"}


def test_thunder_region_steps_into_its_nvfuser_kernels_and_back(gpu_run):
    view = RunView(gpu_run("thunder_cuda"))
    unit = view.unit("Sequential")
    backward = next(s for s in view.stages(unit.id) if s.name == "backward execution")
    lines = view.read_text(backward).splitlines()
    at = next(i for i, t in enumerate(lines) if "= nvFusion1(" in t)
    step = follower(view)
    found = step.follow(backward, at, 1)  # the region compiled two kernels: a picker
    kernels = sorted(c.stage.unit_id for c in found.choices)
    assert [view.unit_by_id(k).name for k in kernels] == [
        "Sequential nvFusion1 pointwise_f0_c1_r0_g1", "Sequential nvFusion1 reduction_f0_c1_r0_g0"]
    back = step.follow(found.choices[0].stage, 0, -1)
    assert back.target.id == backward.id and at in back.lines


def test_where_command_prints_text_and_json_and_one_line_errors(cli):
    sample = GPU_SAMPLES / "gpt2_provenance"
    text = cli("where", sample, f"modeling_gpt2.py:{GELU}")
    assert text.returncode == 0, text.stderr
    assert "Launches and kernels (2 forward, 6 backward; 4 kernels, 6 compiled configurations)" \
        in text.stdout
    doc = json.loads(cli("where", sample, f"modeling_gpt2.py:{GELU}", "--json").stdout)
    assert doc["line"] == GELU and len(doc["rows"]) == 8
    assert {k["unit"] for row in doc["rows"] for k in row["kernels"]} >= {
        "triton_poi_fused_add_mul_pow_tanh_view_6"}
    lines = json.loads(cli("where", sample, "activations.py", "--json").stdout)["lines"]
    assert lines == [{"line": 66, "forward": 2, "backward": 6, "inference": 0, "other": 0,
                      "kernels": 4, "instructions": 624, "gpu_time_us": None}]
    for bad, code, message in (("nope.py:3", 1, "no file of that name"),
                               ("modeling_gpt2.py:x", 2, "'x' is not a line number")):
        result = cli("where", sample, bad)
        assert result.returncode == code and message in result.stderr
        assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1


def test_irscopes_own_frames_in_an_older_run_are_read_past(cli):
    """These JAX runs were captured while irscope's own frames (its bootstrap, its wraps of
    JAX, runpy) still reached the compilers' records: no front end names them."""
    for sample in ("jax_cuda", "jax_triton"):
        result = cli("where", GPU_SAMPLES / sample, "--files", "--json")
        files = json.loads(result.stdout)["files"]
        assert files and not [f for f in files if "/irscope/collectors/" in f
                              or f.startswith("<frozen")], sample


def test_without_inductors_provenance_records_the_comments_still_lead_to_the_lines(tmp_path):
    """inspect asks for Inductor's provenance records only with --provenance (and a warm
    cache logs them empty): the FX graphs' and output code's own comments must still lead
    every Triton kernel of the GPT-2 sample to the source lines it comes from."""
    import shutil
    import sqlite3

    from irscope.store import Run

    run_dir = tmp_path / "run"
    shutil.copytree(GPU_SAMPLES / "gpt2_provenance", run_dir)
    meta = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**meta, "read_only": False}))
    db = sqlite3.connect(run_dir / "index.sqlite")
    db.execute("DELETE FROM stages WHERE kind = 'inductor_provenance'")
    db.commit()
    db.close()
    with Run.open(run_dir, read_only=True) as run:
        view = RunView(run)
        kernels = view.units("triton")
        assert kernels
        for unit in kernels:
            assert kernel_sources(view, unit.id), unit.name


def test_the_source_view_reads_no_file_a_crafted_record_names(tmp_path):
    """A run's records may name any path: the source view reads Python source, or files in
    the run's working folder, from this machine, and says why it reads nothing else."""
    from types import SimpleNamespace

    from irscope.browse.source_view import readable_source

    secret = tmp_path / "secret.txt"
    secret.write_text("password\n")
    (tmp_path / "work").mkdir()
    inside = tmp_path / "work" / "notes.txt"
    inside.write_text("mine\n")
    view = SimpleNamespace(meta={"cwd": str(tmp_path / "work")})
    assert not readable_source(view, str(secret))
    assert not readable_source(view, "/etc/passwd")
    assert readable_source(view, str(inside))
    assert readable_source(view, __file__)  # Python source, wherever it is
    link = tmp_path / "work" / "link.txt"
    link.symlink_to(secret)
    assert not readable_source(view, str(link))  # a link out of the folder is not in it
