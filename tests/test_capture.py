"""`with irscope.capture() as run:` in this process: JAX and Triton compiles, then hooks off."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from inspect_helpers import SCRIPTS, def_line

import irscope

jax = pytest.importorskip("jax")
triton = pytest.importorskip("triton")


def _compile_add_kernel(arch: int):
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sys.path.insert(0, str(SCRIPTS))
    try:
        import triton_kernels as k
    finally:
        sys.path.remove(str(SCRIPTS))
    signature, constexprs = k.SIGNATURES["add_kernel"]
    src = ASTSource(fn=k.add_kernel, signature={**signature, "BLOCK": "constexpr"},
                    constexprs=constexprs)
    return triton.compile(src, target=GPUTarget("cuda", arch, 32))


def scaled_tanh(x):
    return jax.numpy.tanh(x) * 3.0


def test_capture_files_jax_and_triton_compiles_and_takes_its_hooks_off(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    from jax._src.interpreters import pxla
    from triton import knobs

    jax.jit(lambda x: x + 1)(jax.numpy.ones(3))  # XLA has read its flags before the block
    lower_before, listener_before = pxla.lower_sharding_computation, knobs.compilation.listener
    x = jax.numpy.ones((8, 8))  # made outside: jnp.ones is itself a jitted computation
    with irscope.capture(tmp_path / "run", name="notebook") as run:
        jax.jit(scaled_tanh)(x).block_until_ready()
        _compile_add_kernel(arch=80)
        assert "collecting" in repr(run)
    assert pxla.lower_sharding_computation is lower_before
    assert knobs.compilation.listener is listener_before
    jax.jit(lambda x: x - 1)(jax.numpy.ones(3))  # after the block: not collected

    unit = run.unit("jit_scaled_tanh")
    kinds = {s.kind for s in run.stages(unit.id)}
    assert {"jaxpr", "stablehlo", "hlo_before_opt", "hlo_after_opt", "cost_analysis"} <= kinds
    assert unit.source_line == def_line(Path(__file__), "scaled_tanh")
    kernel = run.unit("add_kernel")
    assert {"ttir", "ttgir", "llir", "ptx", "cubin", "python_source"} <= {
        s.kind for s in run.stages(kernel.id)}
    assert [u.name for u in run.units("jax")] == ["jit_scaled_tanh"]
    assert not (run.path / "staging").exists()

    text = repr(run)
    assert text.startswith("irscope notebook")
    assert "jax    1 function" in text and "triton 1 kernel" in text
    html = run._repr_html_()
    assert html.startswith("<div") and "notebook" in html and "1 kernel" in html


def test_an_exception_in_the_block_propagates_and_the_run_is_partial(tmp_path):
    with pytest.raises(ZeroDivisionError):
        with irscope.capture(tmp_path / "run", only="jax") as run:
            jax.jit(scaled_tanh)(jax.numpy.ones((2, 2)))
            1 / 0
    assert run.meta["partial"] is True and run.meta["error"].startswith("ZeroDivisionError")
    assert "partial run: ZeroDivisionError" in repr(run)
