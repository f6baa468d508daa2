"""Lightning Thunder under ``irscope inspect``: a real ``thunder.jit`` of a small MLP on the CPU.

These run in the Thunder lane (``make test-thunder``: ``.venv-thunder`` with the pinned
Thunder and the torch it works with, see ``requirements/thunder.txt``); elsewhere they skip.
What irscope files is checked against what Thunder's own API says in the same process.
"""

from __future__ import annotations

import json
import re

import pytest
from inspect_helpers import base_name, def_line, inspect, kernel_names, write

from irscope.parsers import registry
from irscope.store import Run

pytest.importorskip("thunder")
pytestmark = pytest.mark.thunder

MLP_SCRIPT = '''
import json, os, sys
import thunder
import torch
from torch import nn

executors = None
if sys.argv[1:] == ["torch_compile"]:
    from thunder.executors.torch_compile import torch_compile_ex
    executors = [torch_compile_ex]

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
step = thunder.jit(model, executors=executors) if executors else thunder.jit(model)  # JIT
loss = step(torch.randn(2, 8)).square().mean()
loss.backward()
print("loss", round(loss.item(), 6))
with open(os.environ["THUNDER_SEEN"], "w") as out:  # Thunder's own account of the compile
    json.dump({"forward": str(thunder.last_traces(step)[-1]),
               "backward": str(thunder.last_backward_traces(step)[-1]),
               "traces": [str(t) for t in thunder.last_traces(step)]}, out)
'''


def _inspect(tmp_path, *args):
    script = write(tmp_path, "mlp.py", MLP_SCRIPT)
    seen = tmp_path / "seen.json"
    result = inspect(script, *args, run=tmp_path / "run", env={"THUNDER_SEEN": str(seen)},
                     options=("--only", "torch"))
    assert result.returncode == 0, result.stderr[-3000:]
    return script, result, json.loads(seen.read_text(encoding="utf-8"))


def _jit_line(script) -> int:
    return next(n for n, line in enumerate(script.read_text().splitlines(), 1) if "# JIT" in line)


def test_torch_executor_traces_are_the_units_stages(tmp_path):
    script, result, seen = _inspect(tmp_path)
    assert "loss" in result.stdout
    with Run.open(tmp_path / "run") as run:
        [unit] = run.units("thunder")
        assert (unit.name, unit.source_file, unit.source_line) == (
            "Sequential", str(script), _jit_line(script))
        stages = {s.name: run.read_text(s) for s in run.stages(unit.id)}
        kinds = {s.kind for s in run.stages(unit.id)}
    assert kinds == {"thunder_trace"}
    assert stages["forward execution"] == seen["forward"]
    assert stages["backward execution"] == seen["backward"]
    names = list(stages)
    assert names[0] == "00 initial" and names[-1] == "backward execution"
    assert any(name.endswith("Grad transform pass") for name in names)
    assert any(name.endswith("operator executors") for name in names)  # executor assignment
    # the split's forward among the forward traces, its backward opening the backward ones
    splits = [n for n in names if re.match(r"\d+ autograd split$", n)]
    assert len(splits) == 2 and [n for n in names if n.endswith("autograd split")] == splits
    assert names.index(splits[0]) < names.index("forward execution") < names.index(splits[1])
    # every trace Thunder lists, then the execution transform's steps and the backward trace
    assert set(seen["traces"]) <= set(stages.values())
    others = [n for n, text in stages.items() if text not in seen["traces"]]
    assert others[-1] == "backward execution" and others[:-1] and all(
        re.match(r"\d+ (operator executors|always executors|\w+ fusion pass|autograd split)$", n)
        for n in others[:-1])
    for text in stages.values():
        assert registry.detect(text) == "thunder_trace"
    forward = registry.parse("thunder_trace", stages["forward execution"])
    assert forward.function == "computation" and forward.totals["fusions"] == 0
    assert forward.histogram == {"torch.nn.functional.linear": 2, "torch.gt": 1, "torch.where": 1}


FUNCTION_SCRIPT = '''
import thunder, torch


def gelu_scale(x, w):
    return torch.nn.functional.gelu(x @ w) * 2.0


f = thunder.jit(gelu_scale)
f(torch.randn(4, 8), torch.randn(8, 8))
f(torch.randn(6, 8), torch.randn(8, 8))  # other shapes: Thunder compiles again
print("misses", thunder.cache_misses(f))
'''


def test_a_function_compiled_twice_is_one_unit(tmp_path):
    script = write(tmp_path, "fn.py", FUNCTION_SCRIPT)
    result = inspect(script, run=tmp_path / "run", options=("--only", "torch"))
    assert result.returncode == 0 and "misses 2" in result.stdout, result.stderr[-3000:]
    with Run.open(tmp_path / "run") as run:
        [unit] = run.units("thunder")
        names = [s.name for s in run.stages(unit.id)]
    assert (unit.name, unit.source_line) == ("gelu_scale", def_line(script, "gelu_scale"))
    second = [n for n in names if n.startswith("compile 2: ")]
    assert second and len(second) == len(names) - len(second)  # the same steps, twice
    assert "compile 2: forward execution" in names and "backward execution" not in names


@pytest.mark.slow
def test_torch_compile_regions_launch_inductor_graphs(tmp_path):
    _, _, seen = _inspect(tmp_path, "torch_compile")
    with Run.open(tmp_path / "run") as run:
        [unit] = run.units("thunder")
        regions = {r["name"]: r for r in unit.attrs["regions"]}
        assert {(r["executor"], r["role"]) for r in regions.values()} == {
            ("torchcompile", "forward"), ("torchcompile", "backward")}
        stages = {s.name: run.read_text(s) for s in run.stages(unit.id)}
        assert stages["forward execution"] == seen["forward"]
        for role in ("forward", "backward"):  # Thunder's count of a region's ops, and the text's
            parsed = registry.parse("thunder_trace", stages[f"{role} execution"])
            [fusion] = parsed.fusions
            assert fusion.ops == regions[fusion.name]["ops"] and fusion.name in stages[
                f"{role} execution"]
        graphs = {r.dst: r.attrs["region"] for r in run.relations("launches") if r.src == unit.id}
        assert sorted(graphs.values()) == sorted(regions)
        for graph_id, region in graphs.items():
            graph = run.unit_by_id(graph_id)
            frame = int(graph.attrs["compile_id"].split("/")[0])
            assert frame in regions[region]["dynamo_frames"]
            codes = [run.read_text(s) for s in run.stages(graph_id)
                     if s.kind == "inductor_output_code"]
            named = set().union(*(kernel_names(code) for code in codes))
            launched = {base_name(run.unit_by_id(r.dst).name) for r in run.relations("launches")
                        if r.src == graph_id}
            assert named and launched == named  # Inductor's kernels, linked as for torch.compile
