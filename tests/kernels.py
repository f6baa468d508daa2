"""Ahead-of-time Triton compiles for tests: real ttir/ttgir/llir/ptx/cubin without a GPU."""

from __future__ import annotations

import importlib.util
import os
import sys
from functools import lru_cache
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1] / "samples" / "scripts"


# A fixed place for the kernels file when IR must not depend on where the checkout lives
# (pictures of the screen): compiled IR embeds the file's path, in PTX even as DWARF bytes.
PORTABLE_DIR = Path("/tmp/irscope-portable-kernels")


def kernels_module(portable: bool = False):
    """samples/scripts/triton_kernels.py, imported once (from PORTABLE_DIR when portable)."""
    name = "irscope_test_triton_kernels" + ("_portable" if portable else "")
    if name not in sys.modules:
        source = SCRIPTS / "triton_kernels.py"
        if portable:
            PORTABLE_DIR.mkdir(exist_ok=True)
            copy = PORTABLE_DIR / source.name
            if not copy.exists() or copy.read_bytes() != source.read_bytes():
                copy.write_bytes(source.read_bytes())
            source = copy
        spec = importlib.util.spec_from_file_location(name, source)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@lru_cache(maxsize=None)
def compile_aot(kernel: str, arch: int = 90, num_warps: int = 4, num_stages: int = 3,
                constexprs: tuple = (), portable: bool = False) -> dict:
    """Compile a sample kernel for sm_<arch>; returns {'ttir', 'ttgir', 'llir', 'ptx', 'cubin', 'metadata'}."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    module = kernels_module(portable)
    signature, defaults = module.SIGNATURES[kernel]
    consts = {**defaults, **dict(constexprs)}
    sig = {**signature, **{k: "constexpr" for k in consts}}
    src = ASTSource(fn=getattr(module, kernel), signature=sig, constexprs=consts)
    # Triton's cache key ignores the file path: portable compiles keep a cache of their own,
    # or they could be handed IR that names the checkout
    cache = os.environ.get("TRITON_CACHE_DIR")
    if portable:
        os.environ["TRITON_CACHE_DIR"] = str(PORTABLE_DIR / "triton-cache")
    try:
        compiled = triton.compile(src, target=GPUTarget("cuda", arch, 32),
                                  options={"num_warps": num_warps, "num_stages": num_stages})
    finally:
        if cache is None:
            os.environ.pop("TRITON_CACHE_DIR", None)
        else:
            os.environ["TRITON_CACHE_DIR"] = cache
    asm = {k: v for k, v in compiled.asm.items() if k in ("ttir", "ttgir", "llir", "ptx", "cubin")}
    asm["metadata"] = compiled.metadata._asdict()
    asm["name"] = compiled.name
    return asm
