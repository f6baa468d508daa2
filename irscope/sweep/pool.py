"""Worker processes that compile a sweep's configurations, many at once, each in a private
Triton cache; a compiler that crashes fails its own configuration, not the sweep."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from typing import Any

from irscope.collectors import triton_aot
from irscope.errors import InputError, MissingDependency

# Imported once in the forkserver so each worker starts with them loaded (no CUDA is touched).
PRELOAD = ["triton", "triton.compiler", "triton.backends.nvidia.compiler", "irscope.store",
           "irscope.nvtools", "irscope.parsers.sass", "irscope.analysis.kernels",
           "irscope.ingest.triton_cache", "irscope.collectors.triton_aot"]


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
        futures = {self._executor.submit(compile_and_analyse, job): i for i, job in enumerate(jobs)}
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
                alone[pool.submit(compile_and_analyse, jobs[index])] = (index, pool, stderr_path)
            for future in as_completed(alone):
                index, pool, stderr_path = alone[future]
                pool.shutdown(wait=True)
                yield index, _outcome(future) or triton_aot.Outcome(
                    False, None, error=_crash_message(stderr_path))


def compile_and_analyse(job) -> Any:
    """Compile one configuration (``triton_aot.compile_job``), then disassemble and measure
    its cubin in the same worker, so that analyses run in parallel too."""
    outcome = triton_aot.compile_job(job)
    if not outcome.ok or not outcome.cubin:
        return outcome
    stages, attrs = derive_from_cubin(outcome.cubin, outcome.asm.get("ptx"), outcome.metadata,
                                      outcome.ptxas_log)
    return replace(outcome, cubin_stages=stages, cubin_attrs=attrs)


def derive_from_cubin(cubin: bytes, ptx: str | None, metadata: dict[str, Any], ptxas_log: str
                      ) -> tuple[tuple[tuple[str, str, bytes, str | None], ...], dict[str, Any]]:
    """The cubin and SASS stages and the resources attribute filing stores for a cubin,
    computed here in the worker so disassembly runs in parallel; the parent copies them.

    Spill figures come from this compile's own `ptxas -v` log; when Triton took the kernel
    from its cache (no log), ptxas is asked again about the PTX.
    """
    from irscope.analysis.kernels import parse_ptxas_log
    from irscope.ingest.triton_cache import analyse_cubin, launch_metadata, tools_found

    stages = (("cubin", "cubin", cubin, "triton.compile"),)
    if not cubin or not tools_found():
        return stages if cubin else (), {}
    analysis = analyse_cubin(cubin, ptx, launch_metadata(metadata),
                             ptxas=parse_ptxas_log(ptxas_log) or None)
    if analysis.sass is None:
        return stages, {}
    return (stages + (("sass", "sass", analysis.sass.encode("utf-8"), "triton.compile"),),
            {"resources": analysis.resources} if analysis.resources else {})


def _outcome(future):
    """The job's Outcome, None when its worker process died, an error Outcome for other faults."""
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
