"""Ahead-of-time Triton compiles of one kernel configuration for any GPU target, no GPU needed.

Functions here run inside worker processes (see irscope.sweep): they import the user's
kernel file, compile one configuration with ``triton.compile`` for a ``GPUTarget``, and
return plain picklable data — every IR stage, the metadata, ptxas's own resource report —
or a structured error carrying the compiler's message and the kernel's source line.
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import io
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from irscope.analysis.kernels import parse_ptxas_log

STAGES = ("ttir", "ttgir", "llir", "ptx")

#     def matmul_kernel(a_ptr, b_ptr, ...
DEF_LINE = re.compile(r"^\s*def\s")
# ptxas-blackwell fatal   : Value 'sm_101a' is not defined for option 'gpu-name'
PTXAS_MESSAGE = re.compile(r"^ptxas\S*\s+(?:fatal|error)\s*:.*$", re.MULTILINE)


@dataclass(frozen=True)
class Job:
    """One configuration to compile: the kernel, its full signature, constexprs and target."""

    path: str
    kernel: str
    signature: dict[str, str]
    constexprs: dict[str, Any]
    capability: int
    options: dict[str, int]
    passes: bool = False  # dump the IR before every MLIR pass into a file (Outcome.pass_dump)


@dataclass(frozen=True)
class Outcome:
    """What compiling one Job produced: the stages and metadata, or the compiler's error."""

    ok: bool
    seconds: float | None
    asm: dict[str, str] = field(default_factory=dict)
    cubin: bytes = b""
    metadata: dict[str, Any] = field(default_factory=dict)
    ptxas: dict[str, dict[str, int]] = field(default_factory=dict)  # parse_ptxas_log's
    ptxas_log: str = ""
    error: str = ""
    error_file: str | None = None
    error_line: int | None = None
    error_source: str | None = None
    cubin_stages: tuple[tuple[str, str, bytes, str | None], ...] = ()  # sweep.pool's
    cubin_attrs: dict[str, Any] = field(default_factory=dict)
    pass_dump: str | None = None  # a file the caller files pass by pass, then removes


@dataclass(frozen=True)
class KernelInfo:
    """A kernel's parameters as the command needs them, read in a child process."""

    name: str
    params: tuple[str, ...]
    constexpr_params: tuple[str, ...]
    defaults: dict[str, Any]
    source_file: str
    source_line: int
    source: str


class KernelLookupError(Exception):
    """The file or kernel named on the command line cannot be used (a one-line message)."""


class ExampleNeedsTorch(KernelLookupError):
    """An example-arguments file was given but torch is not installed."""


# torch dtype name -> Triton pointer element type
TORCH_DTYPES = {
    "float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp64",
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8", "bool": "i1",
    "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5",
}


def load_module(path: str):
    """Import the user's kernel file once per process (its folder joins sys.path for siblings)."""
    resolved = str(Path(path).resolve())
    name = "_irscope_kernels_" + re.sub(r"\W", "_", resolved)
    if name in sys.modules:
        return sys.modules[name]
    if not os.path.isfile(resolved):
        raise KernelLookupError(f"{path}: no such file")
    folder = os.path.dirname(resolved)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(name, resolved)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise KernelLookupError(f"{path}: importing it failed: {type(exc).__name__}: {exc}") from None
    return module


def find_kernel(path: str, name: str):
    """The ``@triton.jit`` function ``name`` in the file; a clear error for anything else."""
    from triton.runtime.jit import JITFunction

    module = load_module(path)
    obj = getattr(module, name, None)
    kernels = sorted(k for k, v in vars(module).items() if isinstance(v, JITFunction))
    if obj is None:
        have = ", ".join(kernels) or "none"
        raise KernelLookupError(f"{path}: no kernel named {name!r} (@triton.jit kernels: {have})")
    if not isinstance(obj, JITFunction):
        hint = f" (@triton.jit kernels: {', '.join(kernels)})" if kernels else ""
        raise KernelLookupError(f"{path}::{name} is a {type(obj).__name__}, not a @triton.jit "
                                f"kernel{hint}")
    return obj


def describe(path: str, name: str) -> KernelInfo:
    """Parameters, constexpr parameters, defaults and source location of a kernel."""
    fn = find_kernel(path, name)
    params = tuple(p.name for p in fn.params)
    constexprs = tuple(p.name for p in fn.params if p.is_constexpr)
    defaults = {p.name: p.default for p in fn.params
                if p.has_default and isinstance(p.default, (int, float, bool, str))}
    return KernelInfo(name, params, constexprs, defaults, *def_location(fn),
                      fn.src)


def infer_signature(path: str, kernel: str, example: str) -> tuple[dict[str, str], dict[str, Any]]:
    """Types (and constexprs) from an example file defining ``args = (...)`` and ``kwargs``.

    Positional ``args`` follow the kernel's parameters in order, ``kwargs`` name them, as at a
    call site ``kernel[grid](*args, **kwargs)``. Tensors become pointers to their dtype, ints
    i32 (i64 when they do not fit), floats fp32, bools i1; values for constexpr parameters
    become constexprs. As a launch would, 16-byte aligned tensors and ints divisible by 16
    are marked ``:16``.
    """
    try:
        import torch
    except ImportError:
        raise ExampleNeedsTorch("--example needs torch, which is not installed") from None
    info = describe(path, kernel)
    namespace: dict[str, Any] = {"torch": torch, "__file__": str(Path(example).resolve())}
    try:
        code = compile(Path(example).read_text(encoding="utf-8"), example, "exec")
        exec(code, namespace)  # the user's own example file, named on the command line
    except OSError as exc:
        raise KernelLookupError(f"{example}: {exc.strerror or exc}") from None
    except Exception as exc:
        raise KernelLookupError(f"{example}: {type(exc).__name__}: {exc}") from None
    args, kwargs = tuple(namespace.get("args", ())), dict(namespace.get("kwargs", {}))
    if len(args) > len(info.params):
        raise KernelLookupError(f"{example}: {len(args)} args for {len(info.params)} parameters")
    unknown = sorted(set(kwargs) - set(info.params))
    if unknown:
        raise KernelLookupError(f"{example}: {kernel} has no parameter {unknown[0]!r}")
    signature, constexprs = {}, {}
    for name, value in {**dict(zip(info.params, args)), **kwargs}.items():
        if name in info.constexpr_params:
            constexprs[name] = value
        else:
            signature[name] = _triton_type(value, torch, f"{example}: {name}")
    return signature, constexprs


def _triton_type(value: Any, torch, where: str) -> str:
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).removeprefix("torch.")
        if dtype not in TORCH_DTYPES:
            raise KernelLookupError(f"{where}: no Triton type for tensors of {value.dtype}")
        return "*" + TORCH_DTYPES[dtype] + (":16" if value.data_ptr() % 16 == 0 else "")
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        kind = "i32" if -2**31 <= value < 2**31 else "i64"
        return kind + (":16" if value % 16 == 0 else "")
    if isinstance(value, float):
        return "fp32"
    raise KernelLookupError(f"{where}: cannot infer a Triton type for {type(value).__name__}")


def compile_job(job: Job) -> Outcome:
    """Compile one configuration; never raises for compiler errors (they become the Outcome)."""
    import triton
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    start = time.perf_counter()
    fn = find_kernel(job.path, job.kernel)
    signature = {k: v.removesuffix(":16") for k, v in job.signature.items()}
    # ":16" marks what a launch specializes as divisible by 16 (aligned pointers, such ints)
    attrs = {(fn.arg_names.index(k),): [["tt.divisibility", 16]]
             for k, v in job.signature.items() if v.endswith(":16")}
    source = ASTSource(fn=fn, signature={**signature, **{k: "constexpr" for k in job.constexprs}},
                       constexprs=dict(job.constexprs), attrs=attrs)
    captured = io.StringIO()  # ptxas's -v report, and the PTX dump Triton prints on failure
    knobs.nvidia.dump_ptxas_log = True
    dump = _new_dump_file() if job.passes else None
    try:
        with contextlib.redirect_stdout(captured), _passes_into(dump):
            kernel = triton.compile(source, target=GPUTarget("cuda", job.capability, 32),
                                    options=dict(job.options))
    except Exception as exc:
        return replace(_failure(exc, fn, time.perf_counter() - start), pass_dump=dump)
    log = captured.getvalue().strip()
    seconds = time.perf_counter() - start
    cubin = kernel.asm.get("cubin", b"")
    metadata = _plain(kernel.metadata._asdict())
    return Outcome(
        ok=True, seconds=seconds, asm={k: kernel.asm[k] for k in STAGES if k in kernel.asm},
        cubin=cubin, metadata=metadata, ptxas=parse_ptxas_log(log),
        ptxas_log=log, pass_dump=dump)


def _new_dump_file() -> str:
    handle, path = tempfile.mkstemp(prefix="irscope-passes-", suffix=".mlir-passes.log")
    os.close(handle)
    return path


@contextlib.contextmanager
def _passes_into(path: str | None):
    """Triton's MLIR pass dump (``MLIR_ENABLE_DUMP``: the module before every pass) and pass
    timings (``MLIR_ENABLE_TIMING``) into ``path`` for one compile: both print to stderr,
    unbuffered, so stderr (file descriptor 2) is that file meanwhile, and the cache is
    bypassed (a cached kernel runs no pass)."""
    if path is None:
        yield
        return
    from triton import knobs

    saved_env = {k: os.environ.get(k)
                 for k in ("MLIR_ENABLE_DUMP", "MLIR_DUMP_PATH", "MLIR_ENABLE_TIMING")}
    always = knobs.compilation.always_compile
    os.environ["MLIR_ENABLE_DUMP"] = "1"
    os.environ["MLIR_ENABLE_TIMING"] = "1"  # each pipeline's pass times, into the same file
    os.environ.pop("MLIR_DUMP_PATH", None)  # a path would buffer every compile in one file
    knobs.compilation.always_compile = True
    sys.stderr.flush()
    saved_fd = os.dup(2)
    target = os.open(path, os.O_WRONLY | os.O_TRUNC)
    os.dup2(target, 2)
    try:
        yield
    finally:
        os.dup2(saved_fd, 2)
        os.close(saved_fd)
        os.close(target)
        knobs.compilation.always_compile = always
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _failure(exc: Exception, fn, seconds: float) -> Outcome:
    """The compiler's message and, for front-end errors, the kernel source line it points at."""
    from triton.compiler.errors import CompilationError

    if isinstance(exc, CompilationError):
        message = (exc.error_message or exc.message).strip()
        where = _jit_function_with_source(fn, exc.src)
        lineno = getattr(exc.node, "lineno", None)
        if where is not None and lineno:
            file_name, def_line = def_location(where)
            line = def_line + lineno - 1
            text = exc.src.splitlines()[lineno - 1].strip() if exc.src else None
            return Outcome(False, seconds, error=message, error_file=file_name,
                           error_line=line, error_source=text)
        return Outcome(False, seconds, error=message)
    text = str(exc)
    ptxas = PTXAS_MESSAGE.findall(text)
    message = "; ".join(m.strip() for m in ptxas) if ptxas else (
        f"{type(exc).__name__}: {text.strip().splitlines()[0] if text.strip() else ''}")
    file_name, def_line = def_location(fn)
    return Outcome(False, seconds, error=message, error_file=file_name, error_line=def_line)


def def_location(fn) -> tuple[str, int]:
    """File and line of a jitted function's ``def`` (after its decorators), on any Triton 3.x."""
    code = fn.fn.__code__
    if hasattr(fn, "def_file_line_number"):
        return code.co_filename, fn.def_file_line_number
    lines, first = inspect.getsourcelines(fn.fn)
    offset = next((i for i, line in enumerate(lines) if DEF_LINE.match(line)), 0)
    return code.co_filename, first + offset


def _jit_function_with_source(kernel, src: str | None):
    """The jitted function (the kernel or one it calls) whose source is ``src``."""
    from triton.runtime.jit import JITFunction

    if src is None or kernel.src == src:
        return kernel
    for value in list(vars(sys.modules.get(kernel.fn.__module__, object())).values()):
        if isinstance(value, JITFunction) and value.src == src:
            return value
    return None


def _plain(value: Any) -> Any:
    """Metadata as JSON types (GPUTarget and other objects become strings or lists)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    if hasattr(value, "_asdict"):
        return _plain(value._asdict())
    return str(value)
