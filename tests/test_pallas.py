"""Kernels called from jitted JAX functions: a Pallas kernel in interpret mode on the CPU is a
unit with its body's jaxpr and Pallas's Triton IR, linked from the jit that calls it."""

from __future__ import annotations

import importlib.util

import pytest
from inspect_helpers import def_line, inspect, write

from irscope.store import Run

pytest.importorskip("jax")

PALLAS_SCRIPT = '''
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def scale_add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...] * 2.0


def call(x, y):
    block = pl.BlockSpec((8,), lambda i: (i,))
    return pl.pallas_call(scale_add_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          grid=(x.size // 8,), in_specs=[block, block], out_specs=block,
                          interpret=True)(x, y)


@jax.jit
def scaled_sum(x, y):
    return jnp.sum(jax.lax.fori_loop(0, 2, lambda i, acc: call(acc, y), x))


x = jnp.arange(32, dtype=jnp.float32)
print("sum", float(scaled_sum(x, x)))
'''


@pytest.fixture(scope="module")
def pallas_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pallas")
    script = write(folder, "pallas_kernel.py", PALLAS_SCRIPT)
    result = inspect(script, run=folder / "run", options=("--only", "jax"))
    assert result.returncode == 0, result.stderr[-3000:]
    with Run.open(folder / "run") as run:
        yield run, script, result


def test_pallas_kernel_is_a_unit_with_its_ir(pallas_run):
    run, script, result = pallas_run
    assert "sum 2480.0" in result.stdout  # x + 2x, then + 2x again: 5 * sum(range(32))
    unit = run.unit_named("pallas", "scale_add_kernel")
    assert unit is not None, [u.name for u in run.units()]
    assert (unit.source_file, unit.source_line) == (str(script),
                                                    def_line(script, "scale_add_kernel"))
    assert unit.attrs["grid"] == [4] and unit.attrs["interpret"] is True
    stages = {s.kind: s for s in run.stages(unit.id)}
    assert set(stages) == {"jaxpr", "ttir"}
    jaxpr = run.read_text(stages["jaxpr"])
    assert "mul" in jaxpr and "add" in jaxpr
    ttir = run.read_text(stages["ttir"])
    assert "tt.func public @scale_add_kernel" in ttir
    # two reads, then the swap that writes o_ref reads it too
    assert ttir.count("= tt.load") == 3 and ttir.count("tt.store ") == 1


def test_pallas_kernel_is_linked_from_its_jit(pallas_run):
    run, _, _ = pallas_run
    caller = run.unit_named("jax", "jit_scaled_sum")
    kernel = run.unit_named("pallas", "scale_add_kernel")
    assert kernel.attrs["called_by"] == "jit_scaled_sum"
    assert any(r.src == caller.id and r.dst == kernel.id for r in run.relations("launches"))


def test_pallas_ttir_parses(pallas_run):
    run, _, _ = pallas_run
    kernel = run.unit_named("pallas", "scale_add_kernel")
    ttir = next(s for s in run.stages(kernel.id) if s.kind == "ttir")
    parsed = run.parsed(ttir)
    assert not parsed.diagnostics, parsed.diagnostics
    text = run.read_text(ttir)
    assert parsed.histogram.get("tt.load") == text.count("= tt.load") == 3


@pytest.mark.gpu
@pytest.mark.skipif(importlib.util.find_spec("jax_triton") is None, reason="no jax_triton")
def test_jax_triton_kernel_joins_its_triton_unit(tmp_path):
    """On a GPU with CUDA JAX: triton_call's kernel is the Triton collector's unit, with
    Triton's stages, linked from the jit that calls it."""
    script = write(tmp_path, "jt.py", '''
import jax, jax.numpy as jnp
import jax_triton as jt
import triton, triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, o_ptr, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(o_ptr + i, tl.load(x_ptr + i) + tl.load(y_ptr + i))


@jax.jit
def add(x, y):
    return jt.triton_call(x, y, kernel=add_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          grid=(x.size // 8,), BLOCK=8)


print(add(jnp.ones(16), jnp.ones(16)))
''')
    result = inspect(script, run=tmp_path / "run")
    assert result.returncode == 0, result.stderr[-3000:]
    with Run.open(tmp_path / "run") as run:
        kernel = next(u for u in run.units("triton") if u.name.startswith("add_kernel"))
        assert {"ttir", "ttgir", "ptx"} <= {s.kind for s in run.stages(kernel.id)}
        caller = run.unit_named("jax", "jit_add")
        assert any(r.src == caller.id and r.dst == kernel.id
                   for r in run.relations("launches"))


def test_kernels_of_one_name_with_other_bodies_are_apart(tmp_path):
    """The same kernel function on two block sizes lowers to two bodies: two units."""
    script = write(tmp_path, "two.py", PALLAS_SCRIPT.replace(
        "pl.BlockSpec((8,)", "pl.BlockSpec((x.size // 4,)").replace(
        "grid=(x.size // 8,)", "grid=(4,)").replace(
        'print("sum", float(scaled_sum(x, x)))',
        'print("sum", float(scaled_sum(x, x)), float(scaled_sum(x[:16], x[:16])))'))
    result = inspect(script, run=tmp_path / "run", options=("--only", "jax"))
    assert result.returncode == 0, result.stderr[-3000:]
    with Run.open(tmp_path / "run") as run:
        units = {u.name: u for u in run.units("pallas")}
        ttir = {name: next(run.read_text(s) for s in run.stages(u.id) if s.kind == "ttir")
                for name, u in units.items()}
    assert sorted(units) == ["scale_add_kernel", "scale_add_kernel (2)"]
    assert "tensor<8xf32>" in ttir["scale_add_kernel"]
    assert "tensor<4xf32>" in ttir["scale_add_kernel (2)"]


def test_jax_triton_call_links_the_triton_units_of_its_kernel(tmp_path):
    """Filing a staged triton_call (as on a GPU): the jit launches Triton's own units of that
    kernel, every compile of it, and no copy is made."""
    import json

    from irscope.collectors.pallas import KERNELS, file_kernels
    from irscope.collectors.staging import Staging

    staging = Staging(tmp_path / "staging").create()
    (staging.jax / KERNELS).write_text(json.dumps(
        {"module": "jit_add", "kind": "triton", "name": "add_kernel", "grid": [2]}) + "\n")
    run = Run.create(tmp_path / "run")
    with run.transaction() as writer:
        caller = writer.add_unit("jit_add", "jax")
        kernels = {writer.add_unit(n, "triton") for n in ("add_kernel-1a2b3c4d",
                                                          "add_kernel-5e6f7a8b")}
        writer.add_unit("add_kernel_v2", "triton")
    assert file_kernels(run, staging) == 2
    assert {r.dst for r in run.relations("launches") if r.src == caller} == kernels
    assert len(run.units("triton")) == 3
    run.close()


def test_jax_triton_dumps_file_the_kernels_stages(tmp_path):
    """jax_triton compiles with Triton's backend passes, which no compile hook sees; inspect
    points its JAX_TRITON_DUMP_DIR into staging, and filing makes each dumped kernel a Triton
    unit (the code generator's TTIR as the compile's input, then TTGIR, LLVM IR, PTX) that
    the jit calling it launches."""
    import json

    from conftest import ROOT

    from irscope.filing.folder import file_staging
    from irscope.collectors.pallas import KERNELS, file_kernels
    from irscope.collectors.staging import Staging, collection_env

    staging = Staging(tmp_path / "staging").create()
    assert collection_env(staging, ("jax",), {})["JAX_TRITON_DUMP_DIR"] == str(
        staging.jax_triton)
    assert "JAX_TRITON_DUMP_DIR" not in collection_env(staging, ("jax",),
                                                       {"JAX_TRITON_DUMP_DIR": "/mine"})
    with Run.open(ROOT / "samples" / "gpu" / "triton_kernels", read_only=True) as sample:
        unit = sample.unit("add_kernel")
        texts = {s.kind: sample.read_text(s) for s in sample.stages(unit.id)
                 if s.kind in ("ttir", "ttgir", "llir", "ptx") and s.name == s.kind}
    folder = staging.jax_triton / "8123456789"  # as jax_triton writes it
    folder.mkdir(parents=True)
    (folder / "config").write_text("(<JITFunction add_kernel>, (('x_ptr', '*fp32'),))\n")
    for kind, text in texts.items():
        (folder / f"add_kernel.{kind}").write_text(text)
    (folder / "add_kernel.compile_info").write_text("add_kernel: shared_mem_bytes: 0\n")
    (staging.jax / KERNELS).write_text(json.dumps(
        {"module": "jit_add", "kind": "triton", "name": "add_kernel", "grid": [4]}) + "\n")
    run = Run.create(tmp_path / "run")
    with run.transaction() as writer:
        caller = writer.add_unit("jit_add", "jax")
    assert file_staging(run, staging)[1]
    assert file_kernels(run, staging) == 1
    [kernel] = run.units("triton")
    stages = {s.name: run.read_text(s) for s in run.stages(kernel.id)}
    assert list(stages) == ["ttir source", "ttgir", "llir", "ptx"]
    assert stages["ttir source"] == texts["ttir"] and stages["ptx"] == texts["ptx"]
    assert {r.dst for r in run.relations("launches") if r.src == caller} == {kernel.id}
    run.close()
