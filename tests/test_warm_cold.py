"""Warm equals cold: `irscope inspect` over warm caches captures what the cold run captured.

One script compiles user Triton kernels ahead of time (``triton.compile`` of an ASTSource,
no GPU needed), a forward, backward and inference graph under ``torch.compile`` (Inductor's
C++ kernels) and a JAX step with scan and vmap. It is inspected twice over the same private
caches: the first run compiles everything, the second loads it all from Inductor's, Triton's
and irscope's caches. Both runs must hold the same units, the same compiled artifacts (kind,
name, content) and the same "launches" relations.
"""

from __future__ import annotations

import json
import os
import re
import time

import pytest
from inspect_helpers import SCRIPTS, def_line, inspect, write

from irscope.store import Run

SCRIPT = f'''
import sys
sys.path.insert(0, {str(SCRIPTS)!r})
import jax
import jax.numpy as jnp
import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
import triton_kernels as k

target = GPUTarget("cuda", 80, 32)
for name in ("add_kernel", "softmax_kernel"):
    signature, constexprs = k.SIGNATURES[name]
    src = ASTSource(fn=getattr(k, name), constexprs=constexprs,
                    signature={{**signature, **{{c: "constexpr" for c in constexprs}}}})
    triton.compile(src, target=target, options={{"num_warps": 4}})


def block(x, w):
    return torch.nn.functional.gelu(x @ w).sum()


x, w = torch.randn(16, 32), torch.randn(32, 32, requires_grad=True)
torch.compile(block)(x, w).backward()
with torch.no_grad():
    torch.compile(block)(x, w)


@jax.jit
def scan_norms(h, xs):
    def cell(h, x):
        h = jnp.tanh(h + x)
        return h, h.sum()
    h, sums = jax.lax.scan(cell, h, xs)
    return jax.vmap(lambda r: r / jnp.linalg.norm(r))(xs), sums


scan_norms(jnp.zeros(8), jnp.ones((4, 8)))[1].block_until_ready()
print("compiled")
'''

# What records how a compile went rather than what it made, and so differs on a warm run by
# design: the trace's raw records, guards (they print addresses), torch's cache hit/miss and
# metrics metadata, and the pass-by-pass graphs Inductor logs only when it compiles.
NOT_COMPARED_KINDS = {"raw", "guards"}
# before_pre_grad_graph, after_pre_grad_graph, before_post_grad_graph#2, after_joint_graph
COMPILE_ONLY_GRAPH = re.compile(r"^(?:before|after)_(?:pre_grad|post_grad|joint)_graph\b")


def compared(framework: str, kind: str, name: str) -> bool:
    if kind in NOT_COMPARED_KINDS or (framework == "torch" and kind == "metadata"):
        return False
    return not (kind == "fx_graph" and COMPILE_ONLY_GRAPH.match(name))


def captured(run: Run) -> dict[str, set]:
    """A run's units, compiled artifacts and launches, by name (ids differ between runs)."""
    units = {u.id: u for u in run.units()}
    named = {i: (u.framework, u.name) for i, u in units.items()}
    return {
        "units": {(u.framework, u.name, u.source_file, u.source_line) for u in units.values()},
        "stages": {(named[s.unit_id], s.kind, s.name, s.blob) for s in run.stages()
                   if compared(units[s.unit_id].framework, s.kind, s.name)},
        "launches": {(named[r.src], named[r.dst], r.attrs.get("order"), r.attrs.get("role"))
                     for r in run.relations("launches")},
    }


@pytest.fixture(scope="module")
def cold_and_warm(tmp_path_factory):
    folder = tmp_path_factory.mktemp("warm-cold")
    script = write(folder, "model.py", SCRIPT)
    caches = {"TORCHINDUCTOR_CACHE_DIR": str(folder / "inductor"),
              "TRITON_CACHE_DIR": str(folder / "triton"),
              "IRSCOPE_CACHE_DIR": str(folder / "irscope-cache")}
    runs = []
    for state in ("cold", "warm"):
        result = inspect(script, run=folder / state, env=caches)
        assert result.returncode == 0, result.stderr[-3000:]
        assert "compiled" in result.stdout
        runs.append((Run.open(folder / state), result.stderr))
    yield runs
    for run, _ in runs:
        run.close()


@pytest.mark.slow
def test_inspect_prints_each_graph_as_forward_backward_or_inference(cold_and_warm):
    for _, printed in cold_and_warm:
        # kernels launched per call: [0/0] block (forward 2, backward 2), [0/1] block (inference 2)
        line = next(line for line in printed.splitlines() if "launched per call" in line)
        assert re.search(r"\[0/0\] block \(forward \d+, backward \d+\)", line), line
        assert re.search(r"\[0/1\] block \(inference \d+\)", line), line


@pytest.mark.slow
def test_the_second_run_was_served_from_the_caches(cold_and_warm):
    (cold, _), (warm, _) = cold_and_warm
    for run, hit in ((cold, False), (warm, True)):
        assert {u.attrs.get("cache_hit") for u in run.units("triton")} == {hit}
        cache_events = {s.name.rstrip("#0123456789") for s in run.stages() if s.kind == "metadata"}
        assert ("fx_graph_cache_hit" in cache_events) is hit, cache_events
        assert ("fx_graph_cache_miss" in cache_events) is not hit, cache_events


@pytest.mark.slow
def test_warm_run_holds_the_units_of_the_cold_run(cold_and_warm):
    cold, warm = (captured(run) for run, _ in cold_and_warm)
    frameworks = {framework for framework, *_ in cold["units"]}
    assert {"torch", "cpp", "triton", "jax"} <= frameworks
    assert warm["units"] == cold["units"]


@pytest.mark.slow
def test_warm_run_holds_every_compiled_artifact_of_the_cold_run(cold_and_warm):
    cold, warm = (captured(run) for run, _ in cold_and_warm)
    kinds = {kind for _, kind, _, _ in cold["stages"]}
    assert {"cpp_kernel", "inductor_output_code", "aot_graph", "ttir", "ptx", "cubin", "sass",
            "hlo_after_opt", "llir", "stablehlo"} <= kinds
    assert warm["stages"] - cold["stages"] == set()
    assert cold["stages"] - warm["stages"] == set()


@pytest.mark.slow
def test_warm_run_links_each_graph_to_the_kernels_of_the_cold_run(cold_and_warm):
    cold, warm = (captured(run) for run, _ in cold_and_warm)
    roles = {role for _, _, _, role in cold["launches"]}
    assert roles == {"forward", "backward", "inference"}
    assert warm["launches"] == cold["launches"]


# -- Inductor's Triton kernels from a warm cache, without a GPU ----------------------------
OUTPUT_CODE = '''# AOT ID: ['0_inference']
from torch._inductor.runtime import triton_helpers

# kernel path: {path}
# Topologically Sorted Source Nodes: [add], Original ATen: [aten.add]
add_kernel = async_compile.triton('add_kernel', \'\'\'
import triton
\'\'\', device_str='cuda')


def call(args):
    add_kernel.run(buf0, buf1, buf2, 1024, stream=stream0)
'''


def trace_of(output_code: str) -> str:
    """A TORCH_TRACE log holding one graph's output code, as torch writes it."""
    record = {"inductor_output_code": {"filename": "/tmp/c.py"}, "frame_id": 0,
              "frame_compile_id": 0, "attempt": 0, "has_payload": "0"}
    payload = "".join(f"\t{line}\n" for line in output_code.splitlines())
    return (f"V1124 13:44:24.056000 9936 torch/_inductor/graph.py:2745] "
            f"{json.dumps(record)}\n{payload}")


def stored_while_running(run: Run, data: bytes, seconds: float = 30) -> bool:
    """Whether the run's blob store holds ``data`` within ``seconds`` (waiting on state)."""
    from irscope.errors import RunError
    from irscope.store import digest

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if run.read_blob(digest(data)) == data:
                return True
        except RunError:
            pass
        time.sleep(0.05)
    return False


def test_a_kernel_loaded_from_a_warm_cache_is_analysed_while_the_program_runs(tmp_path,
                                                                               monkeypatch):
    """What the output code names and no compile hook saw (Inductor loads a warm cache's
    kernels without compiling) is found in Triton's cache while the program runs, and filed
    as a compile hook files an Inductor kernel: its module as source, the line of its def."""
    import triton
    from kernels import kernels_module
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from irscope import nvtools
    from irscope.filing.folder import file_staging
    from irscope.collectors.staging import Staging
    from irscope.filing.watch import StagingWatch

    if not any(nvtools.find_tool(tool) for tool in nvtools.TOOLS):
        pytest.skip("no nvdisasm or cuobjdump")
    module = SCRIPTS / "triton_kernels.py"  # the kernel's file, as its TTIR names it
    # two configurations, as autotuning compiles them, into a Triton cache: a warm cache
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    kernels = kernels_module()
    signature, constexprs = kernels.SIGNATURES["add_kernel"]
    source = ASTSource(fn=kernels.add_kernel, constexprs=constexprs,
                       signature={**signature, **{c: "constexpr" for c in constexprs}})
    compiles = [triton.compile(source, target=GPUTarget("cuda", 80, 32),
                               options={"num_warps": warps}) for warps in (4, 8)]
    cubin = compiles[0].asm["cubin"]
    run = Run.create(tmp_path / "run")
    staging = Staging(run.path / "staging").create()
    environ = {"TRITON_CACHE_DIR": os.environ["TRITON_CACHE_DIR"], "TRITON_HOME": str(tmp_path)}
    watch = StagingWatch(staging, run.path, environ, started=time.time())
    watch.start()
    (staging.torch_trace / "dedicated_log_torch_trace_0.log").write_text(
        trace_of(OUTPUT_CODE.format(path=module)))
    # the program still runs: nothing has filed it yet
    assert stored_while_running(run, cubin), "the cached kernel was not stored while running"
    prepared = watch.finish()[staging.root]
    assert prepared.inductor_kernels == [("add_kernel", str(module))]
    notes, complete = file_staging(run, staging, environ=environ, prepared=prepared)
    assert complete, notes
    first, second = sorted(c.metadata.hash for c in compiles)  # named in hash order
    kernels = {u.name: u for u in run.units("triton")}
    assert set(kernels) == {"add_kernel", f"add_kernel-{second[:8]}"}
    assert kernels["add_kernel"].attrs["hash"] == first
    for kernel in kernels.values():
        assert kernel.attrs["cache_hit"] is True and kernel.source_file == str(module)
        assert kernel.source_line == def_line(module, "add_kernel")
        assert run.read_text(run.stage(kernel, "python_source")) == module.read_text()
        assert {"ttir", "ptx", "cubin", "sass"} <= {s.kind for s in run.stages(kernel.id)}
    graph = next(u for u in run.units("torch") if u.name.startswith("[0/0]"))
    assert {(r.src, r.dst) for r in run.relations("launches")} == {
        (graph.id, kernel.id) for kernel in kernels.values()}
    run.close()


def test_a_large_triton_cache_is_listed_once_for_every_kernel_looked_for(tmp_path, monkeypatch):
    """A user's Triton cache holds thousands of entries of other programs: the kernels of a
    run are looked for in one listing of it (each entry's folder read once, not once per
    kernel), finding what a glob per kernel finds; entries written since, and files added
    to an entry not yet whole, are found after a rescan."""
    from irscope.filing.inductor_cache import CacheIndex, find_entries

    cache, module = tmp_path / "triton-cache", "/tmp/torchinductor_u/ab/cmodule.py"

    def entry(folder: str, name: str, path: str, whole: bool = True) -> None:
        (cache / folder).mkdir(parents=True)
        (cache / folder / f"{name}.json").write_text("{}")
        (cache / folder / f"{name}.ttir").write_text(f'#loc = loc("{path}":1:0)\n')
        if whole:
            (cache / folder / f"__grp__{name}.json").write_text("{}")

    names = [f"triton_poi_fused_{i}" for i in range(20)]
    for i in range(400):  # other programs' kernels, and two configurations of each of ours
        entry(f"E{i:03d}", names[i % 20], module if i < 40 else f"/other/{i}.py")
    environ = {"TRITON_CACHE_DIR": str(cache), "TRITON_HOME": str(tmp_path)}
    listed = []
    real = os.listdir
    monkeypatch.setattr(os, "listdir", lambda path: listed.append(path) or real(path))
    index = CacheIndex()
    found = {name: find_entries(name, module, environ, index) for name in names}
    monkeypatch.setattr(os, "listdir", real)
    assert len(listed) == 400  # each entry once, for 20 kernels
    for name in names:  # what a glob per kernel finds
        assert found[name] == sorted(
            p.parent for p in cache.glob(f"*/{name}.json")
            if module in (p.parent / f"{name}.ttir").read_text())
    assert sum(map(len, found.values())) == 40
    entry("NEW", names[1], module, whole=False)  # a compile worker's, still being written
    assert len(find_entries(names[1], module, environ, index)) == 2  # not listed again yet
    index.rescan()
    assert len(find_entries(names[1], module, environ, index)) == 3
    stamp = (cache / "NEW").stat().st_mtime_ns
    (cache / "NEW" / f"{names[2]}.json").write_text("{}")  # another kernel's file lands
    (cache / "NEW" / f"{names[2]}.ttir").write_text(f'#loc = loc("{module}":1:0)\n')
    os.utime(cache / "NEW", ns=(stamp, stamp))  # in the same tick of a coarse clock
    index.rescan()
    assert cache / "NEW" in find_entries(names[2], module, environ, index)


def test_a_kernel_a_compile_worker_makes_is_analysed_while_the_program_runs(tmp_path,
                                                                            monkeypatch):
    """Inductor's compile workers compile out of the program's hooks, and its output code may
    name a kernel before they are done: the watch looks again until Triton's cache holds the
    compile whole, and analyses it while the program runs (not all at its end); and again
    after, for autotuning's other configurations, which finish later."""
    import triton
    from kernels import kernels_module
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from irscope import nvtools
    from irscope.filing.folder import file_staging
    from irscope.collectors.staging import Staging
    from irscope.filing.watch import StagingWatch

    if not any(nvtools.find_tool(tool) for tool in nvtools.TOOLS):
        pytest.skip("no nvdisasm or cuobjdump")
    module = SCRIPTS / "triton_kernels.py"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    run = Run.create(tmp_path / "run")
    staging = Staging(run.path / "staging").create()
    staging.write_config({"staging": str(staging.root)})  # when the collection began
    environ = {"TRITON_CACHE_DIR": os.environ["TRITON_CACHE_DIR"], "TRITON_HOME": str(tmp_path)}
    watch = StagingWatch(staging, run.path, environ, started=time.time() - 1)
    watch.start()
    (staging.torch_trace / "dedicated_log_torch_trace_0.log").write_text(
        trace_of(OUTPUT_CODE.format(path=module)))  # named, not compiled yet
    time.sleep(0.3)  # the watch has looked for it, and found nothing
    kernels = kernels_module()
    signature, constexprs = kernels.SIGNATURES["add_kernel"]
    source = ASTSource(fn=kernels.add_kernel, constexprs=constexprs,
                       signature={**signature, **{c: "constexpr" for c in constexprs}})
    compiles = []
    for warps in (4, 8):  # the second configuration once the first was analysed
        compiles.append(triton.compile(source, target=GPUTarget("cuda", 80, 32),
                                       options={"num_warps": warps}))
        assert stored_while_running(run, compiles[-1].asm["cubin"]), \
            f"the worker's kernel (num_warps={warps}) was not analysed while running"
    prepared = watch.finish()[staging.root]
    assert len(prepared.analyses) == 2
    notes, complete = file_staging(run, staging, environ=environ, prepared=prepared)
    assert complete, notes
    kernels = run.units("triton")
    assert sorted(k.attrs["hash"] for k in kernels) == sorted(c.metadata.hash for c in compiles)
    for kernel in kernels:
        assert kernel.attrs["cache_hit"] is False  # written while the program ran
        assert {"ttir", "ptx", "cubin", "sass"} <= {s.kind for s in run.stages(kernel.id)}
