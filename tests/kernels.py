"""Ahead-of-time Triton compiles for tests: real ttir/ttgir/llir/ptx/cubin without a GPU."""

from __future__ import annotations

import importlib.util
import sys
from functools import lru_cache
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1] / "samples" / "scripts"


def kernels_module():
    """samples/scripts/triton_kernels.py, imported once."""
    name = "irscope_test_triton_kernels"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, SCRIPTS / "triton_kernels.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@lru_cache(maxsize=None)
def compile_aot(kernel: str, arch: int = 90, num_warps: int = 4, num_stages: int = 3,
                constexprs: tuple = ()) -> dict:
    """Compile a sample kernel for sm_<arch>; returns {'ttir', 'ttgir', 'llir', 'ptx', 'cubin', 'metadata'}."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    module = kernels_module()
    signature, defaults = module.SIGNATURES[kernel]
    consts = {**defaults, **dict(constexprs)}
    sig = {**signature, **{k: "constexpr" for k in consts}}
    src = ASTSource(fn=getattr(module, kernel), signature=sig, constexprs=consts)
    compiled = triton.compile(src, target=GPUTarget("cuda", arch, 32),
                              options={"num_warps": num_warps, "num_stages": num_stages})
    asm = {k: v for k, v in compiled.asm.items() if k in ("ttir", "ttgir", "llir", "ptx", "cubin")}
    asm["metadata"] = compiled.metadata._asdict()
    asm["name"] = compiled.name
    return asm
