"""JAX collector: each jitted function's jaxpr, StableHLO, cost and memory analysis, compile times.

Two light wraps of jax's own pipeline: ``pxla.lower_sharding_computation`` (sees the
closed jaxpr and returns the lowering, named like the XLA module, e.g. ``jit_mlp``) and
``MeshComputation.compile`` (returns the executable whose analyses JAX offers). Phase
timings come from ``jax.monitoring``. Optimized HLO, buffer assignment and LLVM IR are
left to the XLA dump.
"""

from __future__ import annotations

import functools
import itertools
import re
import time
from typing import Any, Callable

from irscope.collectors.staging import Staging, append_record

# mlp at /home/me/seed_jax.py:10
SRC_INFO = re.compile(r" at (?P<file>.+):(?P<line>\d+)$")
# jit(mlp) -> jit_mlp, the XLA module name
MODULE_NAME_UNSAFE = re.compile(r"[^\w.-]")
# /jax/core/compile/backend_compile_duration
COMPILE_EVENT = re.compile(r"^/jax/core/compile/(?P<phase>\w+?)(?:_duration)?$")

_counter = itertools.count(1)


def install(staging: Staging, dump_options: dict[str, Any] | None = None) -> Callable[[], None]:
    """Wrap the already-imported jax so every jit lowering and compile is written to staging.

    ``dump_options`` (e.g. ``{"xla_dump_to": ...}``) are passed to each compile as XLA
    options: the way to get an XLA dump in a process whose XLA already read its flags.
    Returns a function that takes the wraps off again.
    """
    from jax._src import monitoring
    from jax._src.interpreters import pxla

    lower = pxla.lower_sharding_computation
    compile_method = pxla.MeshComputation.compile

    @functools.wraps(lower)
    def lower_sharding_computation(closed_jaxpr, api_name, fun_name, *args, **kwargs):
        start = time.perf_counter()
        computation = lower(closed_jaxpr, api_name, fun_name, *args, **kwargs)
        try:
            _stage_lowering(staging, computation, closed_jaxpr, time.perf_counter() - start)
        except Exception as exc:
            staging.record_event("collector_error", {"collector": "jax", "error": repr(exc)})
        return computation

    @functools.wraps(compile_method)
    def compile(self, compiler_options=None, **kwargs):
        if dump_options:
            compiler_options = {**dump_options, **(compiler_options or {})}
        start = time.perf_counter()
        try:
            executable = compile_method(self, compiler_options, **kwargs)
        except Exception as exc:
            staging.record_event("compile_failure", {
                "framework": "jax", "unit": module_name(getattr(self, "_name", "jit_unknown")),
                "error": f"{type(exc).__name__}: {exc}"})
            raise
        try:
            _stage_executable(staging, self, executable, time.perf_counter() - start)
        except Exception as exc:
            staging.record_event("collector_error", {"collector": "jax", "error": repr(exc)})
        return executable

    def on_duration(event: str, seconds: float, **kwargs) -> None:
        match = COMPILE_EVENT.match(event)
        name = kwargs.get("fun_name")
        if match and name:
            name = str(name)
            unit = module_name(name) if "(" in name else f"jit_{module_name(name)}"
            staging.record_event("compile_time", {"framework": "jax", "unit": unit,
                                                  "phase": match["phase"], "seconds": seconds})

    pxla.lower_sharding_computation = lower_sharding_computation
    pxla.MeshComputation.compile = compile
    monitoring.register_event_duration_secs_listener(on_duration)

    def restore() -> None:
        pxla.lower_sharding_computation = lower
        pxla.MeshComputation.compile = compile_method
        monitoring.unregister_event_duration_listener(on_duration)

    return restore


def module_name(jax_name: str) -> str:
    """The XLA module name JAX gives a lowering (as jax's mlir.sanitize_name): ``jit_mlp``."""
    return MODULE_NAME_UNSAFE.sub("_", jax_name).rstrip("_")


def _record_id(computation) -> int:
    """One number per lowering, shared by its lowering and compile records."""
    number = getattr(computation, "_irscope_id", None)
    if number is None:
        number = computation._irscope_id = next(_counter)
    return number


def _stage_lowering(staging: Staging, computation, closed_jaxpr, seconds: float) -> None:
    from jax._src.interpreters import mlir

    record: dict[str, Any] = {
        "record": "lowering", "id": _record_id(computation),
        "module": module_name(computation._name), "lowering_seconds": seconds,
        "jaxpr": str(closed_jaxpr), "stablehlo": mlir.module_to_string(computation.stablehlo())}
    debug = getattr(closed_jaxpr.jaxpr, "_debug_info", None)
    match = SRC_INFO.search(getattr(debug, "func_src_info", "") or "")
    if match:
        record.update(source_file=match["file"], source_line=int(match["line"]))
    append_record(staging.jax_functions, record)


def _stage_executable(staging: Staging, computation, executable, seconds: float) -> None:
    record: dict[str, Any] = {"record": "compile", "id": _record_id(computation),
                              "module": module_name(computation._name),
                              "compile_seconds": seconds}
    for key in ("cost_analysis", "memory_analysis"):
        try:
            record[key] = _jsonable(getattr(executable, key)())
        except Exception as exc:  # not offered on every backend
            record[key + "_error"] = f"{type(exc).__name__}: {exc}"
    append_record(staging.jax_functions, record)


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    fields = {k: getattr(value, k) for k in dir(value) if not k.startswith("_")}
    return {k: _jsonable(v) for k, v in fields.items() if not callable(v)}
