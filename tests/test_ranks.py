"""Multi-process runs: per-rank units, the comparison of ranks, and `inspect --nproc` / a launcher
command on the CPU (gloo, 2 processes) end to end."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest
from conftest import run_cli
from inspect_helpers import SCRIPTS

from irscope.analysis.ranks import (RankUnit, code_digest, compare_ranks,
                                    process_neutral_digest, rank_of_path, ranked_name, split_rank)
from irscope.ingest import graphs, ingest
from irscope.store import Run

DDP = SCRIPTS / "ddp_small.py"
TORCHRUN = Path(sys.executable).with_name("torchrun")


# -- names and digests -----------------------------------------------------------------------
def test_rank_names_round_trip():
    assert ranked_name("[0/0] forward", 0) == "[0/0] forward"
    assert ranked_name("[0/0] forward", None) == "[0/0] forward"
    assert ranked_name("[0/0] forward", 3) == "[0/0] forward (rank 3)"
    assert split_rank("[0/0] forward (rank 3)") == ("[0/0] forward", 3)
    assert split_rank("[0/0] forward") == ("[0/0] forward", None)


def test_rank_of_path_reads_folder_and_log_names():
    assert rank_of_path("/r/staging/rank_2/torch_trace/x.log") == 2
    assert rank_of_path("/t/dedicated_log_torch_trace_rank_1_3gdv6b3d.log") == 1
    assert rank_of_path("/t/dedicated_log_torch_trace_3gdv6b3d.log") is None


def test_digest_ignores_addresses_object_ids_and_times():
    a = "TYPE_MATCH: ___check_type_id(L['x'], 139778586960768)\nGuard latency = 65.99 us\n0x7f00"
    b = "TYPE_MATCH: ___check_type_id(L['x'], 139724805497728)\nGuard latency = 81.78 us\n0x7e11"
    assert process_neutral_digest([a]) == process_neutral_digest([b])
    assert process_neutral_digest([a]) != process_neutral_digest([a.replace("'x'", "'y'")])


def test_digest_ignores_the_ids_of_checked_objects_and_types():
    """Guards of one graph on ranks 0 and 1 of a DDP job on two H200s (NCCL): a type's id is
    its static address, 8 digits here, and differs between the processes all the same."""
    rank0 = ("| | | +- ID_MATCH: ___check_obj_id(G['_GeneratorContextManager'], 71238784), "
             "type=<class 'contextlib._GeneratorContextManager'>\n"
             "| | +- TYPE_MATCH: ___check_type_id(L['self'], 72259952), type=<class "
             "'__main__.Small'>  # h = self.fc1(x)")
    rank1 = rank0.replace("71238784", "586376320").replace("72259952", "685155824")
    assert process_neutral_digest([rank0]) == process_neutral_digest([rank1])
    assert process_neutral_digest([rank0]) != process_neutral_digest(
        [rank0.replace("L['self']", "L['other']")])


def test_digest_ignores_which_gpu_each_rank_runs_on():
    """Texts of one graph traced by ranks 0 and 1 of a DDP job on two H200s (NCCL)."""
    rank0 = ('h: "f32[4, 16][16, 1]cuda:0" = torch._C._nn.linear(l_x_, w, b)\n'
             "buf0 = reader.storage(None, 512, device=device(type='cuda', index=0))\n"
             "TENSOR_MATCH: check_tensor(L['x'], Tensor, DispatchKeySet(CUDA), torch.float32, "
             "device=0, requires_grad=False, size=[4, 8], stride=[8, 1])")
    rank1 = rank0.replace("cuda:0", "cuda:1").replace("index=0", "index=1").replace(
        "device=0", "device=1")
    assert rank1 != rank0
    assert process_neutral_digest([rank0]) == process_neutral_digest([rank1])
    assert process_neutral_digest([rank0]) != process_neutral_digest(
        [rank0.replace("size=[4, 8]", "size=[4, 9]")])

def test_code_digest_reads_the_code_not_the_module_it_came_from():
    """A kernel of the H100 DDP capture, disassembled as filing does (line info inline):
    each rank compiles it from its own module (the GPU's index is in its source), whose path
    the SASS spells; the code that runs is what is compared."""
    from conftest import GPU_SAMPLES

    from irscope import nvtools

    if nvtools.find_tool("nvdisasm") is None:
        pytest.skip("nvdisasm is not installed")
    with Run.open(GPU_SAMPLES / "ddp_nccl") as run:
        unit = run.unit("triton_poi_fused_sum_0")
        sass = nvtools.disassemble(run.read_blob(run.stage(unit, "cubin").blob))
        ptx = run.read_text(run.stage(unit, "ptx"))
    for text in (sass, ptx):
        module = re.search(r'"(/[^"]+/c\w+\.py)"', text).group(1)
        other_rank = text.replace(module, module.replace("/c", "/crank1", 1))
        assert other_rank != text
        assert code_digest(other_rank) == code_digest(text)
        changed = text.replace("EXIT", "BPT.TRAP", 1).replace("ret;", "trap;", 1)
        assert changed != text and code_digest(changed) != code_digest(text)


# -- the comparison --------------------------------------------------------------------------
def _unit(rank, name="[0/0] forward", **kw):
    return RankUnit(rank=rank, framework="torch", name=name, **{
        "graph": "g1", "guards": "q1", "kernels": ("k0", "k1"), "kernels_launched": 2, **kw})


def test_identical_ranks_do_not_diverge():
    result = compare_ranks([_unit(0), _unit(1), _unit(2)])
    assert result.ranks == (0, 1, 2) and result.units == 1
    assert not result.diverged


def test_one_rank_compares_to_nothing():
    assert not compare_ranks([_unit(0, graph="a")]).diverged


def test_divergences_name_the_ranks_that_differ():
    result = compare_ranks([_unit(0), _unit(1, graph="g2", kernels=("k0", "k2")), _unit(2),
                            _unit(1, name="[0/1] forward", recompiles=1)])
    found = {(d.unit, d.aspect): d for d in result.divergences}
    assert found["[0/0] forward", "graph"].ranks == (1,)
    assert found["[0/0] forward", "graph"].groups == (("g1", (0, 2)), ("g2", (1,)))
    assert found["[0/0] forward", "kernels"].ranks == (1,)
    assert found["[0/1] forward", "presence"].groups == (("missing", (0, 2)), ("compiled", (1,)))
    assert found["(run)", "recompiles"].ranks == (1,)
    assert ("[0/0] forward", "guards") not in found
    assert result.count("graph") == 1


def test_a_kernel_compiled_into_a_shared_cache_is_on_every_rank_that_generates_it():
    """Ranks that share Triton's cache: rank 1 compiled k0 and k1, rank 0 loaded them. Only
    the kernel rank 0's graph does not generate is missing there."""
    graphs = [_unit(0, kernels=("k0", "k1")), _unit(1, kernels=("k0", "k1", "k2"))]
    kernels = [RankUnit(rank=1, framework="triton", name=name) for name in ("k0", "k1", "k2")]
    found = {(d.unit, d.aspect): d for d in compare_ranks(graphs + kernels).divergences}
    assert found["k2", "presence"].groups == (("missing", (0,)), ("compiled", (1,)))
    assert ("k0", "presence") not in found and ("k1", "presence") not in found


def test_kernel_count_divergence():
    result = compare_ranks([_unit(0), _unit(1, kernels_launched=3)])
    assert {(d.aspect, d.ranks) for d in result.divergences} >= {("kernel_count", (1,))}


# -- ingest: rank in names and in graph identity ---------------------------------------------
ENVELOPE = "V1124 12:51:54.792000 21830 torch/_dynamo/convert_frame.py:961] "


def _trace(rank: int | None, path: Path) -> Path:
    extra = {} if rank is None else {"rank": rank}
    start = {"dynamo_start": {"stack": [{"line": 3, "name": "forward", "filename": "m.py"}]},
             "frame_id": 0, "frame_compile_id": 0, "attempt": 0, **extra}
    graph = {"dynamo_output_graph": {"sizes": {}}, "frame_id": 0, "frame_compile_id": 0,
             "attempt": 0, "has_payload": "x", **extra}
    path.write_text(f"{ENVELOPE}{json.dumps(start)}\n{ENVELOPE}{json.dumps(graph)}\n"
                    "\tclass GraphModule(torch.nn.Module):\n\t    def forward(self, x):\n",
                    encoding="utf-8")
    return path


def test_each_rank_has_its_own_units(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    _trace(0, logs / "dedicated_log_torch_trace_rank_0_aaaa.log")
    _trace(None, logs / "dedicated_log_torch_trace_rank_1_bbbb.log")  # rank from the name
    run = Run.create(tmp_path / "run")
    ingest(run, [logs])
    units = {u.name: u for u in run.units("torch")}
    assert {"[0/0] forward", "[0/0] forward (rank 1)"} <= set(units)
    assert units["[0/0] forward"].attrs["rank"] == 0
    assert units["[0/0] forward (rank 1)"].attrs["rank"] == 1
    with run.transaction() as writer:  # a compile id matches only within its rank
        assert graphs.unit_for_compile(writer, "0/0", "forward", "x", rank=1) == \
            units["[0/0] forward (rank 1)"].id
        assert graphs.unit_for_compile(writer, "0/0", "forward", "x", rank=0) == \
            units["[0/0] forward"].id
        other = graphs.unit_for_compile(writer, "0/0", "forward", "x", rank=2)
    assert run.unit_by_id(other).name == "[0/0] forward (rank 2)"
    run.close()


# -- end to end on the CPU: gloo, two processes ----------------------------------------------
@pytest.fixture(scope="module")
def same_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp") / "same"
    result = run_cli("inspect", "--nproc", "2", "-o", out, DDP, cwd=DDP.parent)
    assert result.returncode == 0, result.stderr[-3000:]
    return out, result


@pytest.fixture(scope="module")
def branch_run(tmp_path_factory):
    if not TORCHRUN.is_file() and not shutil.which("torchrun"):
        pytest.skip("torchrun not installed")
    out = tmp_path_factory.mktemp("ddp") / "branch"
    launcher = str(TORCHRUN) if TORCHRUN.is_file() else "torchrun"
    result = run_cli("inspect", "-o", out, "--", launcher, "--nproc-per-node", "2",
                     DDP, "--branch", cwd=DDP.parent)
    assert result.returncode == 0, result.stderr[-3000:]
    return out, result


@pytest.mark.slow
def test_nproc_files_every_rank_apart(same_run):
    out, result = same_run
    assert "rank 0/2: done" in result.stdout and "rank 1/2: done" in result.stdout
    with Run.open(out) as run:
        assert run.meta["ranks"] == [0, 1]
        torch_units = run.units("torch")
        ranks = {u.attrs.get("rank") for u in torch_units}
        names = {u.name for u in torch_units}
    assert ranks == {0, 1}
    graphs_ = [n for n in names if "forward" in n and n.startswith("[")]
    assert any(n.endswith("(rank 1)") for n in graphs_)
    assert {split_rank(n)[0] for n in graphs_ if n.endswith("(rank 1)")} == \
        {n for n in graphs_ if not n.endswith(")")}
    listed = json.loads(run_cli("ls", out, "--rank", "1", "--json").stdout)
    assert listed and all(row["rank"] == 1 for row in listed)


@pytest.mark.slow
def test_identical_ranks_pass_the_gate(same_run):
    out, _ = same_run
    result = run_cli("ranks", out, "--strict")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "the same on every rank" in result.stdout
    doc = json.loads(run_cli("report", out, "--format", "json").stdout)
    assert doc["totals"]["ranks"] == 2 and doc["totals"]["ranks.diverge"] == 0
    assert doc["totals"]["rank0.graphs"] == doc["totals"]["rank1.graphs"] >= 1


@pytest.mark.slow
def test_a_rank_on_another_branch_diverges(branch_run, same_run):
    out, _ = branch_run
    result = run_cli("ranks", out, "--json")
    assert result.returncode == 0
    doc = json.loads(result.stdout)
    assert doc["ranks"] == [0, 1] and doc["diverged"]
    aspects = {(d["aspect"], tuple(d["ranks"])) for d in doc["divergences"]
               if "forward" in d["unit"]}
    assert ("graph", (1,)) in aspects and ("kernels", (1,)) in aspects
    kernels = next(d for d in doc["divergences"] if d["aspect"] == "kernels")
    assert any("tanh" in g["value"] for g in kernels["groups"])  # the branch rank 1 took
    assert run_cli("ranks", out, "--strict").returncode == 1
    gate = run_cli("diff", same_run[0], out, "--fail-on", "ranks.diverge > 0")
    assert gate.returncode == 1, gate.stdout + gate.stderr
    assert "ranks.diverge" in gate.stderr


@pytest.mark.slow
def test_a_plain_command_collects_its_python(tmp_path):
    """After --, a command without a launcher still collects: the process has no rank, so it
    writes into the run's own staging folder."""
    script = tmp_path / "one.py"
    script.write_text("import torch\nf = torch.compile(lambda x: torch.relu(x) * 2)\n"
                      "print(f(torch.ones(4)).sum().item())\n", encoding="utf-8")
    out = tmp_path / "run"
    result = run_cli("inspect", "-o", out, "--", sys.executable, script, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "8.0" in result.stdout
    with Run.open(out) as run:
        names = [u.name for u in run.units("torch")]
        assert "ranks" not in run.meta
    assert "[0/0] <lambda>" in names and not any("(rank" in n for n in names)


@pytest.mark.gpu
def test_two_gpus_with_nccl(tmp_path):
    """On two GPUs: each rank's Triton kernels are filed, linked from that rank's graphs, and
    the ranks compile the same."""
    torch = pytest.importorskip("torch")
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    out = tmp_path / "run"
    result = run_cli("inspect", "--nproc", "2", "-o", out, DDP, "--cuda", cwd=DDP.parent)
    assert result.returncode == 0, result.stderr[-3000:]
    with Run.open(out) as run:
        kernels = {u.id for u in run.units("triton")}
        graphs_ = {u.id: u.attrs.get("rank") for u in run.units("torch")}
        linked = {graphs_[r.src] for r in run.relations("launches")
                  if r.dst in kernels and r.src in graphs_}
    assert kernels and linked == {0, 1}
    assert run_cli("ranks", out, "--strict").returncode == 0


@pytest.mark.slow
def test_divergences_are_problems(branch_run):
    from irscope.read.ranks import rank_problems

    with Run.open(branch_run[0]) as run:
        problems = rank_problems(run)
    graph = [p for p in problems if p[2].startswith("graph differs")]
    assert graph and graph[0][0] == "rank divergence"
    assert graph[0][1].endswith("forward") and "rank 1 (" in graph[0][2]


def test_nproc_needs_a_count_and_a_script(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("print(1)\n", encoding="utf-8")
    assert run_cli("inspect", "--nproc", "0", "-o", tmp_path / "a", script).returncode == 2
    launched = run_cli("inspect", "--nproc", "2", "-o", tmp_path / "b", "--",
                       sys.executable, script)
    assert launched.returncode == 2 and "--nproc" in launched.stderr
