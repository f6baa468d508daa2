"""`irscope inspect` on real scripts: seed examples under torch.compile and jax.jit, AOT Triton."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from inspect_helpers import (SCRIPTS, TRITON_AOT, TRITON_KERNELS, base_name, def_line,
                             inspect, kernel_names, write)

from irscope.read.summary import read_summary
from irscope.store import Run

SEEDS = ("mlp", "activation_chain", "complex_activation", "post_norm_block", "mlp_dead_gate")
TRITON_STAGES = {"python_source", "ttir", "ttgir", "llir", "ptx", "cubin", "metadata"}
JAX_STAGES = {"jaxpr", "stablehlo", "hlo_before_opt", "hlo_after_opt", "buffer_assignment",
              "memory_usage", "llir", "cost_analysis"}
# module_0012.jit__normal.before_optimizations.txt
MODULE_FILE = re.compile(r"^module_\d+\.(.+)\.before_optimizations\.txt$")
# [0/1] mlp
COMPILE_ID = re.compile(r"^\[(\d+)/(\d+)\] (\w+)$")


@pytest.fixture(scope="module")
def torch_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("torch") / "run"
    result = inspect(SCRIPTS / "seed_torch.py", "--recompile", run=out)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "seed_torch: done on cpu" in result.stdout
    with Run.open(out) as run:
        yield run, result


@pytest.fixture(scope="module")
def jax_cache(tmp_path_factory):
    """An XLA dump cache of the JAX tests' own, empty before the first run."""
    return {"IRSCOPE_CACHE_DIR": str(tmp_path_factory.mktemp("dump-cache"))}


@pytest.fixture(scope="module")
def jax_run(tmp_path_factory, jax_cache):
    out = tmp_path_factory.mktemp("jax") / "run"
    result = inspect(SCRIPTS / "seed_jax.py", run=out, options=["--keep-staging"], env=jax_cache)
    assert result.returncode == 0, result.stderr[-3000:]
    with Run.open(out) as run:
        yield run, result


def compile_records(run_path) -> list[dict]:
    """The JAX collector's record of each XLA compile (a kept staging folder's)."""
    merged: dict[int, dict] = {}
    path = run_path / "staging" / "jax" / "xla_dumps.jsonl"
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        merged.setdefault(record["compile"], {}).update(record)
    return [merged[n] for n in sorted(merged)]


def xla_stages(run, unit) -> dict:
    """(kind, name) -> blob of a JAX unit's stages."""
    return {(s.kind, s.name): s.blob for s in run.stages(unit.id)}


@pytest.mark.slow
def test_torch_seed_graphs_have_every_stage_and_their_source_line(torch_run):
    run, result = torch_run
    graphs = {m[3]: u for u in run.units("torch")
              if (m := COMPILE_ID.match(u.name)) and m[2] == "0"}
    assert set(SEEDS) <= set(graphs)
    for name in SEEDS:
        unit = graphs[name]
        kinds = {s.kind for s in run.stages(unit.id)}
        assert {"fx_graph", "aot_graph", "inductor_output_code", "guards"} <= kinds, name
        assert unit.source_file.endswith("seed_torch.py")
        assert unit.source_line == def_line(SCRIPTS / "seed_torch.py", name)
    assert f"irscope open {run.path}" in result.stderr


@pytest.mark.slow
def test_torch_recompilation_from_a_new_shape_names_the_failed_guard(torch_run):
    run, _ = torch_run
    mlp_compiles = [u for u in run.units("torch") if u.name.endswith("] mlp")]
    assert len(mlp_compiles) >= 2
    reasons = [e.data.get("reason", "") for e in run.events("recompile")]
    assert any("size mismatch" in r and "48" in r for r in reasons), reasons
    assert read_summary(run).recompiles >= 1


# cpp_fused_relu_0 = async_compile.cpp_pybinding(['float*'], r'''<the kernel's C++>''')
CPP_KERNEL = re.compile(r"^\w+ = async_compile\.cpp_pybinding\(\[[^\]]*\], r'''(.*?)'''",
                        re.M | re.S)


def test_torch_summary_says_how_many_generated_kernels_are_distinct(torch_run):
    """A kernel whose C++ two output codes define is one unit: the summary counts it in
    `kernels generated` for each, and says how many distinct kernels there are."""
    run, result = torch_run
    bodies = [body for unit in run.units("torch") for stage in run.stages(unit.id)
              if stage.kind == "inductor_output_code"
              for body in CPP_KERNEL.findall(run.read_text(stage))]
    data = read_summary(run)
    assert data.kernels_generated == len(bodies) > len(set(bodies)) == data.kernels_distinct
    assert data.units["cpp"] == len(set(bodies))
    assert (f"kernels generated {len(bodies)} ({len(set(bodies))} distinct; a kernel that "
            "several output codes define counts for each)") in result.stderr


@pytest.mark.slow
def test_torch_every_generated_kernel_is_linked_to_its_graph(torch_run):
    run, _ = torch_run
    by_id = {u.id: u for u in run.units()}
    launched: dict[int, set[str]] = {}
    for rel in run.relations("launches"):
        launched.setdefault(rel.src, set()).add(base_name(by_id[rel.dst].name))
    checked = 0
    for unit in run.units("torch"):
        code = [s for s in run.stages(unit.id) if s.kind == "inductor_output_code"]
        if not code:
            continue
        expected = kernel_names(run.read_text(code[0]))
        assert launched.get(unit.id, set()) == expected, unit.name
        checked += bool(expected)
    assert checked >= len(SEEDS)
    kernels = {u.name for u in run.units("cpp")}
    assert all(u.framework == "cpp" for u in run.units() if u.name.startswith("cpp_fused"))
    assert any("add_exp_mul_relu_sigmoid_tanh" in k for k in kernels)  # six ops, one kernel


def test_jax_seed_functions_have_every_stage(jax_run):
    run, _ = jax_run
    for name in SEEDS:
        unit = run.unit(f"jit_{name}")
        assert unit.framework == "jax"
        kinds = {s.kind for s in run.stages(unit.id)}
        assert JAX_STAGES <= kinds, (name, JAX_STAGES - kinds)
        assert unit.source_line == def_line(SCRIPTS / "seed_jax.py", name)
        assert "compile_seconds" in unit.attrs


def test_jax_units_match_the_xla_dump_modules(jax_run):
    run, _ = jax_run
    records = compile_records(run.path)
    # a cold dump cache: XLA dumped each compile into a folder of its own
    assert records and all(r.get("folder") and r.get("done") for r in records)
    dumped = [MODULE_FILE.match(p.name)[1] for p in (run.path / "staging" / "xla_compiles")
              .glob("*/module_*.before_optimizations.txt")]
    assert sorted(dumped) == sorted(r["module"] for r in records)
    compiled = [u for u in run.units("jax")
                if "hlo_before_opt" in {s.kind for s in run.stages(u.id)}]
    assert len(compiled) == len(dumped)  # one unit per XLA module, recompiles included
    assert {u.name.split(" (module")[0] for u in compiled} == set(dumped)
    assert sorted(u.attrs["xla_module"] for u in compiled) == list(range(1, len(records) + 1))
    for unit in compiled:  # every compile merged with what the JAX collector saw
        assert {"jaxpr", "stablehlo", "cost_analysis"} <= {s.kind for s in run.stages(unit.id)}


def test_jax_second_run_files_every_xla_dump_from_the_cache(jax_run, jax_cache, tmp_path):
    run, _ = jax_run
    cache = Path(jax_cache["IRSCOPE_CACHE_DIR"]) / "xla-dumps"
    assert len(list(cache.glob("*.zip"))) == len(compile_records(run.path))
    out = tmp_path / "warm"
    result = inspect(SCRIPTS / "seed_jax.py", run=out, options=["--keep-staging"], env=jax_cache)
    assert result.returncode == 0, result.stderr[-3000:]
    records = compile_records(out)
    assert records and all(r.get("cached") for r in records)  # XLA was asked for no dump
    assert not (out / "staging" / "xla_compiles").exists()
    with Run.open(out) as warm:
        for name in SEEDS:  # the same artifacts, byte for byte, as the cold run's
            cold_unit, warm_unit = run.unit(f"jit_{name}"), warm.unit(f"jit_{name}")
            assert xla_stages(warm, warm_unit) == xla_stages(run, cold_unit), name
            assert warm_unit.attrs["xla_module"] == cold_unit.attrs["xla_module"]


def test_jax_cost_analysis_counts_the_matmul_flops(jax_run):
    run, _ = jax_run
    unit = run.unit("jit_mlp")
    analyses = json.loads(run.read_text(run.stage(unit, "cost_analysis")))
    matmul_flops = 2 * 32 * 64 * 128 * 2  # two (32x64)@(64x128)-sized matmuls
    assert analyses["cost_analysis"]["flops"] >= matmul_flops
    assert analyses["memory_analysis"]["argument_size_in_bytes"] == 4 * (32 * 64 + 2 * 64 * 128)
    jaxpr = run.read_text(run.stage(unit, "jaxpr"))
    assert jaxpr.count("dot_general[") == 2


@pytest.mark.slow
def test_triton_second_run_over_a_warm_cache_still_has_every_kernel(tmp_path):
    script = write(tmp_path, "triton_aot.py", TRITON_AOT)
    env = {"TRITON_CACHE_DIR": str(tmp_path / "cache")}
    for attempt, out in enumerate((tmp_path / "cold", tmp_path / "warm")):
        result = inspect(script, run=out, env=env)
        assert result.returncode == 0, result.stderr[-3000:]
        assert "broken_kernel failed" in result.stdout
        with Run.open(out) as run:
            units = {u.name: u for u in run.units("triton")}
            assert set(TRITON_KERNELS) <= set(units)
            for name in TRITON_KERNELS:
                unit = units[name]
                assert TRITON_STAGES <= {s.kind for s in run.stages(unit.id)}, name
                assert unit.attrs["cache_hit"] is bool(attempt)
                assert unit.source_line == def_line(SCRIPTS / "triton_kernels.py", name)
                cached = list((tmp_path / "cache").glob(f"*/{name}.ptx"))
                assert run.read_text(run.stage(unit, "ptx")) == cached[0].read_text()
                # Triton's own metadata, not the collector's notes beside it in staging
                metadata = json.loads(run.read_text(run.stage(unit, "metadata")))
                assert metadata["name"] == name and metadata["num_warps"] == 4
                assert unit.attrs["num_warps"] == 4 and unit.attrs["shared"] == metadata["shared"]
            failures = run.events("compile_failure")
            assert [f.data["name"] for f in failures] == ["broken_kernel"]
            assert "arange" in failures[0].data["error"]
            assert read_summary(run).top_ptx_opcodes


def test_jax_seed_functions_are_the_users_and_eager_ops_are_set_apart(jax_run, jax_cache,
                                                                      tmp_path):
    from inspect_helpers import jax_script

    from irscope.store.units import is_hidden_by_default

    run, _ = jax_run
    assert not [u.name for u in run.units("jax") if is_hidden_by_default(u)]
    script = write(tmp_path, "eager.py", jax_script("double", tail="print(jnp.ones(2) + 1)"))
    result = inspect(script, run=tmp_path / "run", env=jax_cache)
    assert result.returncode == 0, result.stderr[-3000:]
    with Run.open(tmp_path / "run") as eager:
        hidden = {u.name: u for u in eager.units("jax") if is_hidden_by_default(u)}
        assert "jit_double" not in hidden and "jit_add" in hidden
        line = script.read_text().splitlines().index("print(jnp.ones(2) + 1)") + 1
        assert hidden["jit_add"].attrs["called_from"] == f"{script}:{line}"


# -- filing while the script runs ---------------------------------------------------------
def wait_for(condition, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_json_lines_are_taken_once_their_line_is_complete(tmp_path):
    from irscope.filing.watch import JsonLines

    path = tmp_path / "records.jsonl"
    lines = JsonLines(path)
    assert lines.read() == []
    path.write_bytes(b'{"a": 1}\n{"b":')
    assert lines.read() == [{"a": 1}]
    with open(path, "ab") as fh:
        fh.write(b' 2}\nnot json\n{"c": 3}')
    assert lines.read() == [{"b": 2}]
    assert lines.read(final=True) == [{"c": 3}]  # the program has ended: the last line too


def test_a_finished_compile_is_kept_in_the_dump_cache_while_the_script_runs(tmp_path):
    from irscope.collectors import xla_dump_cache
    from irscope.collectors.staging import Staging, append_record, close_records
    from irscope.filing.watch import StagingWatch

    staging, cache, key = Staging(tmp_path / "staging").create(), tmp_path / "cache", "jit_f-0a"
    watch = StagingWatch(staging)
    watch.start()
    folder = staging.xla_compiles / "0001"
    folder.mkdir(parents=True)
    (folder / "module_0001.jit_f.before_optimizations.txt").write_text("HloModule jit_f")
    append_record(staging.xla_dump_records, {"compile": 1, "module": "jit_f", "key": key,
                                             "folder": str(folder), "cache": str(cache)})
    assert not wait_for(lambda: xla_dump_cache.lookup(cache, key), seconds=0.5)  # still compiling
    append_record(staging.xla_dump_records, {"compile": 1, "done": True})
    try:
        assert wait_for(lambda: xla_dump_cache.lookup(cache, key))  # before the program ends
    finally:
        close_records()
        prepared = watch.finish()[staging.root]
    assert prepared.compiles == [{"compile": 1, "module": "jit_f", "key": key,
                                  "folder": str(folder), "cache": str(cache), "done": True}]
    assert xla_dump_cache.load(xla_dump_cache.lookup(cache, key)) == {
        "module_0001.jit_f.before_optimizations.txt": b"HloModule jit_f"}


def test_a_compiled_kernel_is_analysed_and_stored_while_the_script_runs(tmp_path):
    from kernels import compile_aot

    from irscope import nvtools
    from irscope.collectors.staging import Staging
    from irscope.filing.watch import StagingWatch
    from irscope.errors import RunError
    from irscope.store import digest

    if not any(nvtools.find_tool(tool) for tool in nvtools.TOOLS):
        pytest.skip("no nvdisasm or cuobjdump")
    asm = compile_aot("add_kernel", arch=80)
    run = Run.create(tmp_path / "run")
    staging = Staging(run.path / "staging").create()
    watch = StagingWatch(staging, run.path)
    watch.start()
    folder = staging.triton / "0123abcd"
    folder.mkdir()
    for kind in ("ttir", "ttgir", "llir", "ptx"):
        (folder / f"add_kernel.{kind}").write_text(asm[kind])
    (folder / "add_kernel.cubin").write_bytes(asm["cubin"])
    (folder / "add_kernel.json").write_text(json.dumps(asm["metadata"], default=str))
    (folder / "_irscope.json").write_text("{}")  # the collector's notes: the kernel is whole

    def stored(data: bytes) -> bool:
        try:
            return run.read_blob(digest(data)) == data
        except RunError:
            return False

    # the kernel's bytes reach the run before the program ends, and so does its SASS
    arrived = wait_for(lambda: stored(asm["cubin"]) and stored(asm["ptx"].encode()))
    analysis = watch.finish()[staging.root].analyses[folder.name]
    try:
        assert arrived and stored(analysis.sass.encode())
    finally:
        run.close()
    assert "add_kernel" in analysis.resources


def test_a_late_progress_bar_appears_only_once_the_work_takes_its_delay(monkeypatch):
    from contextlib import contextmanager

    from irscope import console

    drawn = []

    @contextmanager
    def bar(description, total=None):
        shown = {"description": description, "total": total, "advances": []}
        drawn.append(shown)

        class Handle:
            def advance(self, n=1, description=None):
                shown["advances"].append(n)

            def total(self, total):
                shown["total"] = total

        yield Handle()

    monkeypatch.setattr(console, "_bar", bar)
    with console.progress("filing the run", delay=60) as late:
        late.total(3)
        late.advance(3)
    assert drawn == []  # done well within its delay: nothing drawn
    with console.progress("filing the run", delay=0.05) as late:
        late.total(3)
        late.advance(2)
        assert wait_for(lambda: drawn, seconds=5)
        late.advance(1)
    assert drawn == [{"description": "filing the run", "total": 3, "advances": [2, 1]}]
    with console.progress("ingesting", total=2) as now:  # no delay: drawn at once
        now.advance(2)
    assert drawn[-1] == {"description": "ingesting", "total": 2, "advances": [2]}
