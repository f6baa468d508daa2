"""Configuration sweeps for `irscope compile`: parsing, GPU targets, limits and parallel compiles.

A sweep is the cartesian product of ``--sweep NAME=V1,V2`` axes over constexprs, compile
options (num_warps, num_stages, ...) and GPU architectures. Each configuration compiles in
a worker process (irscope.collectors.triton_aot), many at once; hardware limits that Triton
only checks at launch time (shared memory, the register file) are checked here instead.
"""

from __future__ import annotations

import itertools
import math
import multiprocessing
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from irscope.errors import InputError, MissingDependency, UsageError

OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")
DEFAULT_OPTIONS = {"num_warps": 4, "num_stages": 3}
DEFAULT_ARCH = "sm_90a"

# *fp16   i32   *kfp32 (const pointer)   fp8e4nv   constexpr   tensordesc<fp16[64, 64]>
# and, as in Triton's own AOT tool, ":16" for a pointer or integer divisible by 16: *fp16:16
TRITON_TYPE = re.compile(r"^(\*k?|k)?(i1|u1|[iu](8|16|32|64)|fp(8e4nv|8e5|8e4b15|8e4b8|8e5b16|16|32|64)"
                         r"|bf16)(:16)?$|^constexpr$|^tensordesc<.+>$|^nvTmaDesc$")
# x_ptr=*fp16, n: i32      (a comma that starts the next NAME= entry splits)
SIGNATURE_SPLIT = re.compile(r",\s*(?=[A-Za-z_]\w*\s*[=:])")
# x_ptr=*fp16   n: i32
SIGNATURE_ENTRY = re.compile(r"^\s*([A-Za-z_]\w*)\s*[=:]\s*(\S.*?)\s*$")
# sm_90a  sm80  90  compute_89  sm_100f
ARCH = re.compile(r"^(?:sm_?|compute_)?(\d{2,3})[af]?$", re.IGNORECASE)
ARCH_FAMILIES = {"ampere": 80, "ada": 89, "hopper": 90, "blackwell": 100}

# Largest shared memory one block may use (opt-in), per compute capability, in bytes.
SHARED_LIMITS = {50: 49152, 52: 49152, 53: 49152, 60: 49152, 61: 49152, 62: 49152, 70: 98304,
                 72: 98304, 75: 65536, 80: 166912, 86: 101376, 87: 166912, 89: 101376,
                 90: 232448, 100: 232448, 103: 232448, 110: 232448, 120: 101376, 121: 101376}
# Imported once in the forkserver so each worker starts with them loaded (no CUDA is touched).
PRELOAD = ["triton", "triton.compiler", "triton.backends.nvidia.compiler", "irscope.store",
           "irscope.nvtools", "irscope.parsers.sass", "irscope.analysis.resources",
           "irscope.ingest.triton_cache", "irscope.collectors.triton_aot"]
REGISTERS_PER_BLOCK = 65536
REGISTER_ALLOCATION_UNIT = 256  # registers are granted per warp in chunks of this many
MAX_THREADS_PER_BLOCK = 1024


def arch_name(capability: int) -> str:
    """The name ptxas targets for a capability, as Triton emits it (sm_80, sm_90a, sm_100a)."""
    return f"sm_{capability}{'a' if capability >= 90 else ''}"


def parse_arch(text: str) -> int:
    """The compute capability meant by sm_90a, sm80, 89, compute_80 or a family name."""
    text = text.strip()
    if text.lower() in ARCH_FAMILIES:
        return ARCH_FAMILIES[text.lower()]
    match = ARCH.match(text)
    if not match:
        raise UsageError(f"--arch: {text!r} is not a GPU architecture (like sm_80, sm_90a, sm_100a)")
    return int(match.group(1))


def parse_value(text: str) -> Any:
    """A constexpr value: int, float, bool, else the text itself."""
    text = text.strip()
    if text in ("True", "False", "true", "false"):
        return text.lower() == "true"
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return text


def parse_signature(text: str) -> dict[str, str]:
    """``x_ptr=*fp16,n=i32`` (or ``x_ptr: *fp16, n: i32``) as {name: Triton type}."""
    signature: dict[str, str] = {}
    for entry in SIGNATURE_SPLIT.split(text.strip()) if text.strip() else []:
        match = SIGNATURE_ENTRY.match(entry)
        if not match or not TRITON_TYPE.match(match.group(2)):
            raise UsageError(f"--signature: {entry.strip()!r} is not NAME=TYPE with a Triton type "
                             "(like x_ptr=*fp16, n=i32, eps=fp32)")
        name, kind = match.groups()
        if name in signature:
            raise UsageError(f"--signature: {name} is given twice")
        signature[name] = kind
    return signature


def parse_assignment(text: str, flag: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip().isidentifier() or not value.strip():
        raise UsageError(f"{flag}: {text!r} is not NAME=VALUE")
    return name.strip(), value.strip()


@dataclass(frozen=True)
class Config:
    """One point of a sweep: target, the constexprs the user set, and compile options."""

    capability: int
    constexprs: tuple[tuple[str, Any], ...]
    options: tuple[tuple[str, int], ...]

    @property
    def arch(self) -> str:
        return arch_name(self.capability)

    def settings(self) -> dict[str, Any]:
        """Constexprs then options, as one flat mapping (the unit's ``config`` attribute)."""
        return {**dict(self.constexprs), **dict(self.options)}

    def ordered(self, params: Sequence[str]) -> "Config":
        """The same configuration with constexprs in the kernel's parameter order."""
        rank = {name: i for i, name in enumerate(params)}
        return Config(self.capability, tuple(sorted(self.constexprs, key=lambda kv: rank.get(
            kv[0], len(rank)))), self.options)

    def unit_name(self, kernel: str) -> str:
        """``matmul_kernel[sm_90a,BLOCK_M=128,num_warps=4,num_stages=3]``."""
        parts = [self.arch] + [f"{k}={v}" for k, v in self.settings().items()]
        return f"{kernel}[{','.join(parts)}]"


def expand(constexprs: Sequence[str], sweeps: Sequence[str], archs: Sequence[str],
           options: dict[str, int | None]) -> list[Config]:
    """Every configuration of the cartesian product of ``--sweep`` axes, in a stable order."""
    fixed = dict(parse_assignment(c, "--constexpr") for c in constexprs)
    axes: dict[str, list[Any]] = {}
    for text in sweeps:
        name, values = parse_assignment(text, "--sweep")
        if name in axes:
            raise UsageError(f"--sweep: {name} is swept twice")
        items = [v.strip() for v in values.split(",") if v.strip()]
        axes[name] = [parse_arch(v) for v in items] if name == "arch" else items
    if "arch" not in axes:
        caps = [parse_arch(a) for text in archs or [DEFAULT_ARCH] for a in text.split(",") if a]
        axes = {"arch": list(dict.fromkeys(caps)), **axes}
    chosen = {**DEFAULT_OPTIONS, **{k: v for k, v in options.items() if v is not None}}
    configs = []
    for point in itertools.product(*axes.values()):
        values = dict(zip(axes, point))
        capability = values.pop("arch")
        settings = {**fixed, **values}
        opts = dict(chosen)
        for name in OPTIONS:
            if name in settings:
                opts[name] = _option(name, settings.pop(name))
        configs.append(Config(capability, tuple((k, parse_value(str(v)))
                                                for k, v in settings.items()),
                              tuple(opts.items())))
    return configs


def _option(name: str, value: Any) -> int:
    try:
        number = int(value)
    except ValueError:
        raise UsageError(f"{name}: {value!r} is not a whole number") from None
    if number < 1 or (name == "num_warps" and number & (number - 1)):
        raise UsageError(f"{name}: {number} is not allowed (num_warps must be a power of two)")
    return number


def check_limits(capability: int, num_warps: int, metadata: dict[str, Any],
                 resources: dict[str, int]) -> tuple[list[str], list[str]]:
    """Hardware limits a launch would hit (problems) and costly choices (warnings).

    Triton raises OutOfResources for shared memory only when a kernel is launched; the
    message here mirrors its wording so a sweep reads the same as a failed launch.
    """
    problems, warnings = [], []
    shared = int(metadata.get("shared") or 0) + int(resources.get("static_shared_bytes") or 0)
    limit = SHARED_LIMITS.get(capability)
    if limit is not None and shared > limit:
        problems.append(f"out of resource: shared memory, Required: {shared}, "
                        f"Hardware limit: {limit}")
    threads = num_warps * 32
    if threads > MAX_THREADS_PER_BLOCK:
        problems.append(f"out of resource: threads, Required: {threads}, "
                        f"Hardware limit: {MAX_THREADS_PER_BLOCK}")
    registers = resources.get("registers")
    if registers:
        per_warp = math.ceil(registers * 32 / REGISTER_ALLOCATION_UNIT) * REGISTER_ALLOCATION_UNIT
        if per_warp * num_warps > REGISTERS_PER_BLOCK:
            problems.append(f"out of resource: registers, Required: {per_warp * num_warps} "
                            f"({registers} per thread x {threads} threads), Hardware limit: "
                            f"{REGISTERS_PER_BLOCK}")
    stores, loads = resources.get("spill_stores") or 0, resources.get("spill_loads") or 0
    if stores or loads:
        warnings.append(f"register spills: {stores} bytes stored, {loads} bytes loaded")
    return problems, warnings


class CompilePool:
    """Worker processes that compile configurations, each with a private Triton cache.

    Workers start from a forkserver (Triton is not fork-safe once it has compiled) and
    each gets its own empty TRITON_CACHE_DIR, so every figure comes from a real compile,
    never from the user's cache. Their stderr goes to a file: a compiler that aborts
    (an LLVM fatal error) fails its own configuration with that message, not the sweep.
    """

    def __init__(self, workers: int | None = None):
        self.workers = max(1, workers or os.cpu_count() or 1)
        self._root = tempfile.mkdtemp(prefix="irscope-compile-")
        self._context = multiprocessing.get_context("forkserver")
        self._context.set_forkserver_preload(PRELOAD)
        self._executor = self._pool(self.workers, os.path.join(self._root, "pool.err"))

    def _pool(self, workers: int, stderr_path: str) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(workers, mp_context=self._context, initializer=_init_worker,
                                   initargs=(self._root, stderr_path))

    def __enter__(self) -> "CompilePool":
        return self

    def __exit__(self, *exc) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
        shutil.rmtree(self._root, ignore_errors=True)

    def call(self, fn, *args):
        """Run ``fn(*args)`` in a worker: the user's files are imported there, not here."""
        from irscope.collectors import triton_aot

        try:
            return self._executor.submit(fn, *args).result()
        except triton_aot.ExampleNeedsTorch:
            raise MissingDependency("torch", "--example (signature inference)", "torch") from None
        except triton_aot.KernelLookupError as exc:
            raise InputError(str(exc)) from None
        except ModuleNotFoundError as exc:
            if exc.name == "triton":
                raise MissingDependency("triton", "irscope compile", "triton") from None
            raise

    def compile(self, jobs: Sequence) -> Iterator[tuple[int, Any]]:
        """(index, Outcome) for every job as it finishes.

        A worker that dies breaks the whole pool, failing every unfinished job with it; those
        are compiled again, each in a one-worker pool of its own, so only the culprit fails.
        """
        from irscope.collectors import triton_aot

        futures = {self._executor.submit(triton_aot.compile_job, job): i for i, job in enumerate(jobs)}
        suspects = []
        for future in as_completed(futures):
            outcome = _outcome(future)
            if outcome is None:
                suspects.append(futures[future])
            else:
                yield futures[future], outcome
        if suspects:
            self._executor.shutdown(wait=True)
            self._executor = self._pool(self.workers, os.path.join(self._root, "pool.err"))
        for start in range(0, len(suspects), self.workers):
            alone = {}
            for index in suspects[start:start + self.workers]:
                stderr_path = os.path.join(self._root, f"job-{index}.err")
                pool = self._pool(1, stderr_path)
                alone[pool.submit(triton_aot.compile_job, jobs[index])] = (index, pool, stderr_path)
            for future in as_completed(alone):
                index, pool, stderr_path = alone[future]
                pool.shutdown(wait=True)
                yield index, _outcome(future) or triton_aot.Outcome(
                    False, None, error=_crash_message(stderr_path))


def _outcome(future):
    """The job's Outcome, None when its worker process died, an error Outcome for other faults."""
    from irscope.collectors import triton_aot

    try:
        return future.result()
    except BrokenProcessPool:
        return None
    except Exception as exc:
        return triton_aot.Outcome(False, None, error=f"{type(exc).__name__}: {exc}")


def _crash_message(stderr_path: str) -> str:
    """What a compiler said before it died, e.g. 'LLVM ERROR: Cannot select: intrinsic ...'."""
    try:
        with open(stderr_path, encoding="utf-8", errors="replace") as fh:
            lines = [line.strip() for line in fh if line.strip()]
    except OSError:
        lines = []
    said = next((l for l in reversed(lines) if "ERROR" in l or "error" in l), lines[-1] if lines else "")
    return f"the compiler crashed: {said}" if said else "the compiler crashed"


def _init_worker(root: str, stderr_path: str) -> None:
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(dir=root)
    fd = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 2)
    os.close(fd)


def jobs_for(path: str, info, signature: dict[str, str], configs: Sequence[Config],
             example_constexprs: dict[str, Any] | None = None) -> list:
    """A Job per configuration, with every parameter typed or given a constexpr value."""
    from irscope.collectors.triton_aot import Job

    params = set(info.params)
    unknown = sorted(set(signature) - params)
    if unknown:
        raise UsageError(f"--signature: {info.name} has no parameter {unknown[0]!r} "
                         f"(parameters: {', '.join(info.params)})")
    jobs = []
    for config in configs:
        constexprs = {**info.defaults, **(example_constexprs or {}), **dict(config.constexprs)}
        constexprs = {k: v for k, v in constexprs.items()
                      if k in info.constexpr_params or k in dict(config.constexprs)}
        for name in constexprs:
            if name not in params:
                raise UsageError(f"{info.name} has no parameter {name!r} to set "
                                 f"(parameters: {', '.join(info.params)})")
        missing = [p for p in info.constexpr_params if p not in constexprs]
        if missing:
            raise UsageError(f"constexpr {missing[0]} has no value: give --constexpr {missing[0]}=N "
                             f"or --sweep {missing[0]}=N1,N2")
        untyped = [p for p in info.params if p not in constexprs and p not in signature]
        if untyped:
            raise UsageError(f"--signature: no type for {', '.join(untyped)} (e.g. "
                             f"--signature '{untyped[0]}=*fp16')")
        typed = {p: signature[p] for p in info.params if p not in constexprs}
        jobs.append(Job(path, info.name, typed, constexprs, config.capability,
                        dict(config.options)))
    return jobs
