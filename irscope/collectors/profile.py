"""``inspect --profile``: the framework's own profiler over a window of the script's steps.

A step begins at each call of a compiled function made from outside any other (a function or
module compiled by ``torch.compile``, a function ``jax.jit`` made), or at each ``with
irscope.profile():`` block when the script marks its steps itself (then only those count). The
window skips the first ``skip`` steps (1 by default: the compile) and profiles the next
``steps``: torch.profiler (CPU ops and CUDA activity) for PyTorch, jax.profiler for JAX,
started when the first profiled step begins and stopped when the step after the last begins
(or the last marked block ends, or the script ends first), with the GPU drained at both ends
so that no launch from outside the window is measured. Each step is a ``ProfilerStep#N``
range. The trace, ``window.json`` (what was asked and what was profiled) and, while the
window is installed, the benchmark time of each configuration the autotuners tried
(``autotune.jsonl``) land in ``<staging>/profile/``.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any, Callable

from irscope.collectors import imports
from irscope.collectors.staging import Staging, append_record

FOLDER = "profile"
WINDOW_MARK = "irscope_profile_window"  # irscope.ingest.profile reads these two marks
AUTOTUNE_MARK = "irscope_autotune"
STEP_RANGE = "ProfilerStep#"
GPU_BACKENDS = ("gpu", "cuda", "rocm")

_active: Window | None = None


def region():
    """``with irscope.profile():``: the block is one step of the profile window (a no-op
    outside ``irscope inspect --profile``)."""
    return _active.marked() if _active is not None else contextlib.nullcontext()


class Window:
    """The steps seen so far and the profiler running over the window's."""

    def __init__(self, staging: Staging, skip: int | None, steps: int):
        self.folder = staging.root / FOLDER
        self.skip_asked, self.steps = skip, max(1, steps)
        self.seen = 0  # steps begun
        self.marked_steps = False  # the script marks its own steps
        self.state = "waiting"  # then "recording", then "done"
        self.framework: str | None = None
        self.reason: str | None = None
        self.profiled = 0
        self.profiler: Any = None
        self.step_range: Any = None
        self.last_result: Any = None  # a JAX call's result, kept to wait on at a window's edge
        self.local = threading.local()
        self.lock = threading.RLock()

    @property
    def skip(self) -> int:
        if self.skip_asked is not None:
            return self.skip_asked
        return 0 if self.marked_steps else 1

    # -- steps --------------------------------------------------------------------------
    def begin(self, framework: str, marked: bool = False) -> None:
        """A step begins (a top-level compiled call, or a marked block)."""
        with self.lock:
            if marked and not self.marked_steps:
                if self.state == "recording" or self.profiled:
                    self._discard()
                self.marked_steps, self.seen, self.state = True, 0, "waiting"
            if marked != self.marked_steps or self.state == "done":
                return
            self.seen += 1
            if self.state == "waiting" and self.seen == self.skip + 1:
                self._start(framework)
            elif self.state == "recording":
                if self.seen > self.skip + self.steps:
                    self.stop()
                else:
                    self._next_step()

    def keeps_result(self) -> bool:
        """Whether the call beginning now is the last before the window opens or closes."""
        return self.state != "done" and self.seen in (self.skip, self.skip + self.steps)

    def marked(self):
        @contextlib.contextmanager
        def block():
            self.begin(self._framework_here(), marked=True)
            try:
                yield
            finally:
                with self.lock:
                    if self.state == "recording" and self.seen >= self.skip + self.steps:
                        self.stop()
        return block()

    def wrap(self, fn: Callable, framework: str) -> Callable:
        """``fn`` (a compiled function) counting its calls from outside any other as steps."""
        local = self.local

        @functools.wraps(fn)
        def counted(*args, **kwargs):
            if getattr(local, "depth", 0):
                return fn(*args, **kwargs)
            self.begin(framework)
            keep = framework == "jax" and self.keeps_result()
            local.depth = 1
            try:
                result = fn(*args, **kwargs)
            finally:
                local.depth = 0
            if keep:
                self.last_result = result
            return result
        return counted

    # -- the profiler ----------------------------------------------------------------------
    def _framework_here(self) -> str:
        return "torch" if "torch" in sys.modules else "jax"

    def _start(self, framework: str) -> None:
        reason = _no_gpu(framework)
        if reason is not None:
            self.state, self.reason, self.framework = "done", reason, framework
            self._write()
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        self.framework = framework
        self._drain()
        if framework == "torch":
            from torch.profiler import ProfilerActivity, profile

            self.profiler = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
            self.profiler.start()
        else:
            import jax

            jax.profiler.start_trace(str(self.folder))
        self.state = "recording"
        self._next_step()

    def _next_step(self) -> None:
        self._close_step()
        self.profiled += 1
        name = f"{STEP_RANGE}{self.profiled}"
        if self.framework == "torch":
            from torch.profiler import record_function

            self.step_range = record_function(name)
        else:
            import jax

            self.step_range = jax.profiler.TraceAnnotation(name)
        self.step_range.__enter__()

    def _close_step(self) -> None:
        if self.step_range is not None:
            self.step_range.__exit__(None, None, None)
            self.step_range = None

    def _drain(self) -> None:
        """Wait for the GPU work already launched, so a window's edge cuts no launch."""
        if self.framework == "torch":
            import torch

            torch.cuda.synchronize()
        elif self.last_result is not None:
            import jax

            jax.block_until_ready(self.last_result)
        self.last_result = None

    def stop(self) -> None:
        """End the window: the trace is written into the staging folder."""
        with self.lock:
            if self.state != "recording":
                return
            self.state = "done"
            self._close_step()
            self._drain()
            if self.framework == "torch":
                self.profiler.stop()
                self.profiler.export_chrome_trace(str(self.folder / "trace.json"))
            else:
                import jax

                jax.profiler.stop_trace()
            self.profiler = None
            self._write()

    def _discard(self) -> None:
        """Drop a window that compiled calls began, once the script marks its own steps."""
        if self.state == "recording":
            self._close_step()
            if self.framework == "torch":
                self.profiler.stop()
            else:
                import jax

                jax.profiler.stop_trace()
        import shutil

        shutil.rmtree(self.folder / "plugins", ignore_errors=True)
        for name in ("trace.json", "window.json"):
            (self.folder / name).unlink(missing_ok=True)
        self.profiler, self.state, self.profiled, self.reason = None, "waiting", 0, None

    def finish(self) -> None:
        """At the script's end: stop a window still open, or say why none was profiled."""
        with self.lock:
            if self.state == "recording":
                try:
                    self.stop()
                except Exception as exc:  # noqa: BLE001  the script's own result stands
                    self.state, self.reason = "done", (f"the profiler failed to stop "
                                                       f"({type(exc).__name__}: {exc})")
                    self._write()
            elif self.state == "waiting":
                self.state = "done"
                self.reason = (f"the script began {self.seen} step(s); --profile-skip "
                               f"{self.skip} left none to profile")
                self._write()

    def _write(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        record = {"framework": self.framework, "skip": self.skip, "steps": self.steps,
                  "steps_profiled": self.profiled, "steps_seen": self.seen,
                  "marked": self.marked_steps, "reason": self.reason}
        (self.folder / "window.json").write_text(json.dumps({WINDOW_MARK: record}),
                                                 encoding="utf-8")


def _no_gpu(framework: str) -> str | None:
    """Why ``framework`` has nothing to time here, or None when it runs on a GPU."""
    try:
        if framework == "torch":
            import torch

            return None if torch.cuda.is_available() else "PyTorch sees no GPU"
        import jax

        backend = jax.default_backend()
        return None if backend in GPU_BACKENDS else f"JAX runs on {backend}, not a GPU"
    except Exception as exc:  # noqa: BLE001  a framework that cannot say: nothing timed
        return f"{framework} could not say whether it has a GPU ({type(exc).__name__})"


# -- hooks ---------------------------------------------------------------------------------
def install(staging: Staging, skip: int | None, steps: int) -> Callable[[], None]:
    """Count the script's steps and profile the window's; returns what ends it."""
    global _active
    window = _active = Window(staging, skip, steps)
    autotune = staging.root / FOLDER / "autotune.jsonl"
    finder = imports.when_imported({
        "torch._dynamo.eval_frame": lambda module: _hook_torch_compile(module, window),
        "jax": lambda module: _hook_jit(module, window),
        "torch._inductor.runtime.triton_heuristics":
            lambda module: _hook_inductor_autotuner(module, autotune),
        "triton.runtime.autotuner": lambda module: _hook_triton_autotuner(module, autotune),
    })
    atexit.register(window.finish)

    def remove() -> None:
        global _active
        imports.remove(finder)
        window.finish()
        _active = None
    return remove


def _guarded(hook):
    """A hook that leaves the framework alone where it does not know its version."""
    @functools.wraps(hook)
    def run(module, target):
        try:
            hook(module, target)
        except Exception as exc:  # noqa: BLE001
            sys.stderr.write(f"irscope: --profile could not hook {module.__name__} "
                             f"({type(exc).__name__}: {exc})\n")
    return run


@_guarded
def _hook_torch_compile(eval_frame, window: Window) -> None:
    """Every function ``torch.compile`` makes (a compiled module's forward too) counts its
    top-level calls as steps."""
    context = eval_frame.OptimizeContext
    original = context.__call__

    def __call__(self, fn):
        result = original(self, fn)
        if isinstance(result, type) or not callable(result) or hasattr(result, "parameters"):
            return result  # a compiled module: its forward, compiled next, is counted
        return window.wrap(result, "torch")
    context.__call__ = __call__


@_guarded
def _hook_jit(jax_module, window: Window) -> None:
    """``jax.jit`` gives functions counting their top-level calls as steps."""
    original = jax_module.jit

    @functools.wraps(original)
    def jit(fun=None, *args, **kwargs):
        if fun is None or not callable(fun):  # jax.jit(static_argnums=...) as a decorator
            return lambda f: jit(f, *(() if fun is None else (fun,)), *args, **kwargs)
        return _CountedJit(original(fun, *args, **kwargs), window)
    jax_module.jit = jit


class _CountedJit:
    """A jitted function that counts its top-level calls; everything else is the function's."""

    def __init__(self, jitted, window: Window):
        self.__dict__["_jitted"] = jitted
        self.__dict__["_call"] = window.wrap(jitted, "jax")

    def __call__(self, *args, **kwargs):
        return self._call(*args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self.__dict__["_jitted"], name)

    def __get__(self, instance, owner=None):
        return self if instance is None else functools.partial(self._call, instance)


@_guarded
def _hook_inductor_autotuner(heuristics, path: Path) -> None:
    """Record the time Inductor's autotuner measured for each configuration of a kernel."""
    autotuner = heuristics.CachingAutotuner
    original = autotuner.benchmark_all_configs

    def benchmark_all_configs(self, *args, **kwargs):
        timings = original(self, *args, **kwargs)
        try:
            name = getattr(self.fn, "__name__", None) or self.inductor_meta.get("kernel_name")
            _record(path, name, getattr(self, "filename", None),
                    [(launcher.config, ms, launcher) for launcher, ms in timings.items()])
        except Exception:  # noqa: BLE001  a record missed, never the program's kernel
            pass
        return timings
    autotuner.benchmark_all_configs = benchmark_all_configs


@_guarded
def _hook_triton_autotuner(autotuner_module, path: Path) -> None:
    """Record the time ``triton.autotune`` measured for each configuration it tried."""
    autotuner = autotuner_module.Autotuner
    original = autotuner.run

    def run(self, *args, **kwargs):
        before = len(getattr(self, "cache", {}) or {})
        result = original(self, *args, **kwargs)
        timings = getattr(self, "configs_timings", None)
        if timings and len(getattr(self, "cache", {}) or {}) > before:
            try:
                fn = getattr(self, "base_fn", None) or getattr(self.fn, "fn", None)
                code = getattr(fn, "__code__", None)
                _record(path, getattr(fn, "__name__", None), code and code.co_filename,
                        [(config, ms, None) for config, ms in timings.items()],
                        getattr(self, "best_config", None))
            except Exception:  # noqa: BLE001
                pass
        return result
    autotuner.run = run


def _record(path: Path, kernel: str | None, module: str | None, timed: list,
            chosen=None) -> None:
    """One kernel's configurations with their benchmark time (ms), the one the autotuner
    chose marked best (``chosen``, else the first fastest, as Inductor picks)."""
    if not kernel or not timed:
        return
    configs = []
    for config, ms, launcher in timed:
        ms = ms[0] if isinstance(ms, (list, tuple)) and ms else ms
        row = {"kwargs": {k: v for k, v in dict(getattr(config, "kwargs", {}) or {}).items()
                          if isinstance(v, (int, float, str, bool))},
               "num_warps": getattr(config, "num_warps", None),
               "num_stages": getattr(config, "num_stages", None),
               "ms": float(ms) if isinstance(ms, (int, float)) else None}
        for key in ("n_regs", "n_spills", "shared"):
            value = getattr(launcher, key, None) if launcher is not None else None
            if isinstance(value, int):
                row[key] = value
        configs.append(row)
    timed_ms = [c["ms"] for c in configs if c["ms"] is not None]
    best = next((i for i, (config, _, _) in enumerate(timed) if config is chosen), None)
    if best is None and timed_ms:
        best = next(i for i, c in enumerate(configs) if c["ms"] == min(timed_ms))
    for index, row in enumerate(configs):
        row["best"] = index == best
    os.makedirs(path.parent, exist_ok=True)
    append_record(path, {AUTOTUNE_MARK: {"kernel": kernel, "module": module,
                                         "configs": configs}})
