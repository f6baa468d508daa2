"""Helpers for the inspect and capture tests: small real scripts and independent counts."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from conftest import ROOT, run_cli

SCRIPTS = ROOT / "samples" / "scripts"
TRITON_KERNELS = ("add_kernel", "softmax_kernel", "layernorm_gelu_kernel", "matmul_kernel")

# cpp_fused_gelu_0 = async_compile.cpp_pybinding(['float*', ...
KERNEL_DEFINITION = re.compile(r"^(\w+) = async_compile\.(?:cpp_pybinding|cpp|triton)\(", re.M)
# a trailing -<hash8> that tells two compiles of one kernel name apart
HASH_SUFFIX = re.compile(r"-[0-9a-f]{8}$")

TRITON_AOT = f'''
import sys
sys.path.insert(0, {str(SCRIPTS)!r})
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
import triton_kernels as k


@triton.jit
def broken_kernel(x_ptr):
    offs = tl.arange(0, 3)  # not a power of two: Triton refuses it
    tl.store(x_ptr + offs, 1.0)


target = GPUTarget("cuda", 80, 32)
for name in {TRITON_KERNELS!r}:
    signature, constexprs = k.SIGNATURES[name]
    src = ASTSource(fn=getattr(k, name), constexprs=constexprs,
                    signature={{**signature, **{{c: "constexpr" for c in constexprs}}}})
    print(name, triton.compile(src, target=target, options={{"num_warps": 4}}).name)
try:
    triton.compile(ASTSource(fn=broken_kernel, signature={{"x_ptr": "*fp32"}}), target=target)
except Exception as exc:
    print("broken_kernel failed:", type(exc).__name__)
'''


def jax_script(*functions: str, tail: str = "") -> str:
    """A script that jits one tiny function per name, then runs ``tail``."""
    lines = ["import jax", "import jax.numpy as jnp", ""]
    for name in functions:
        lines += [f"def {name}(x):", "    return jnp.tanh(x) * 2.0", "",
                  f"jax.jit({name})(jnp.ones((4, 4))).block_until_ready()"]
    return "\n".join(lines + ["print('compiled', flush=True)", tail, ""])


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def inspect(script: Path, *args: str, run: Path, env: dict | None = None, options=()):
    """``irscope inspect [options] -o RUN script args`` in a subprocess, NO_COLOR."""
    return run_cli("inspect", *options, "-o", str(run), str(script), *args, cwd=script.parent,
                   env=env)


def inspect_popen(script: Path, run: Path | None, cwd: Path, env: dict | None = None):
    """Start an inspect in its own process group (so a test can send it Ctrl-C)."""
    import os

    output = ["-o", str(run)] if run else []
    return subprocess.Popen([sys.executable, "-m", "irscope", "inspect", *output, str(script)],
                            cwd=cwd, env={**os.environ, "NO_COLOR": "1", **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def def_line(path: Path, name: str) -> int:
    """1-based line of ``def name`` in a source file (the independent answer to source_line)."""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if re.match(rf"\s*def {name}\(", line):
            return number
    raise AssertionError(f"no def {name} in {path}")


def kernel_names(output_code: str) -> set[str]:
    return set(KERNEL_DEFINITION.findall(output_code))


def base_name(unit_name: str) -> str:
    return HASH_SUFFIX.sub("", unit_name)
