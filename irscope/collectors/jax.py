"""JAX collector: each jitted function's jaxpr, StableHLO, XLA dump, analyses, compile times.

Three light wraps of jax's own pipeline: ``pxla.lower_sharding_computation`` (sees the
closed jaxpr and returns the lowering, named like the XLA module, e.g. ``jit_mlp``),
``MeshComputation.compile`` (returns the executable whose analyses JAX offers) and
``compiler.compile_or_get_cached`` (where the compile options are final: each compile gets
an XLA dump folder of its own, or none when irscope's dump cache already holds its dump,
see ``irscope.collectors.xla_dump_cache``; on a GPU only when JAX then loads the executable
from its persistent cache, which ``get_executable_and_time`` tells). Phase timings come from ``jax.monitoring``.
On a GPU a dumped compile also asks for PTX and LLVM IR per emitter, through an option of that
compile alone, which ``cache_key.get`` is made to ignore as JAX ignores its other dump options:
a run under irscope reads and writes the same entries of JAX's compilation cache as the
script run alone. A compile whose dump irscope has not cached yet is compiled, not read from
JAX's cache (which skips XLA, and so its dump); its entry there is written again, the same.

A lowering of a function that lies inside the jax package (a primitive run outside any
jit, or ``jnp.sum`` called eagerly) is marked ``jax_internal`` with the user's line that
called it, so filing can set these eager ops apart from the user's own functions. Such an
eager op gets no XLA dump (most of a script's compiles are eager ops, and a dump costs each
compile its writing): its optimized HLO is read from the executable instead, a copy held in
memory anyway.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import os
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from irscope.collectors import xla_dump_cache
from irscope.collectors import jax_internals
from irscope.collectors.staging import Staging, append_record

# mlp at /home/me/seed_jax.py:10
SRC_INFO = re.compile(r" at (?P<file>.+):(?P<line>\d+)$")
# jit(mlp) -> jit_mlp, the XLA module name
MODULE_NAME_UNSAFE = re.compile(r"[^\w.-]")
# /jax/core/compile/backend_compile_duration
COMPILE_EVENT = re.compile(r"^/jax/core/compile/(?P<phase>\w+?)(?:_duration)?$")
# XLA's per-emitter dump (PTX, LLVM IR), asked for per compile on a GPU
EMITTER_DUMP = ("xla_dump_emitter_re", ".*")
GPU_PLATFORMS = ("cuda", "rocm", "gpu")
# how Python names the code of a frozen standard module: "<frozen runpy>"
FROZEN = "<frozen "

_counter = itertools.count(1)
_compiles = itertools.count(1)
_compiling = threading.local()  # .eager: whether this thread compiles one of JAX's eager ops


def install(staging: Staging, dumps: bool = True,
            dump_cache: Path | None = None) -> Callable[[], None]:
    """Wrap the already-imported jax so every jit lowering and compile is written to staging.

    ``dumps``: ask XLA for a dump of each compile (off when the user dumps with their own
    ``--xla_dump_to``); ``dump_cache``: where dumps are cached (None: no cache). Returns a
    function that takes the wraps off again.
    """
    cache_key = jax_internals.module("cache_key")
    compilation_cache = jax_internals.module("compilation_cache")
    compiler = jax_internals.module("compiler")
    pxla = jax_internals.module("interpreters.pxla")
    monitoring = jax_internals.module("monitoring")
    if (note := jax_internals.version_note()) is not None:
        staging.record_event("collector_error", {"collector": "jax", "error": note})
    try:
        _exclude_own_frames()
    except Exception as exc:  # the capture goes on; readers skip these frames themselves
        staging.record_event("collector_error", {"collector": "jax", "error": repr(exc)})

    lower = pxla.lower_sharding_computation
    internal = _package_folders()
    compile_method = pxla.MeshComputation.compile
    backend_compile = compiler.compile_or_get_cached
    key_of = cache_key.get
    read_entry = compilation_cache.get_executable_and_time

    @functools.wraps(lower)
    def lower_sharding_computation(closed_jaxpr, api_name, fun_name, *args, **kwargs):
        start = time.perf_counter()
        computation = lower(closed_jaxpr, api_name, fun_name, *args, **kwargs)
        try:
            _stage_lowering(staging, computation, closed_jaxpr, time.perf_counter() - start,
                            internal)
        except Exception as exc:
            staging.record_event("collector_error", {"collector": "jax", "error": repr(exc)})
        return computation

    @functools.wraps(compile_method)
    def compile(self, compiler_options=None, **kwargs):
        start = time.perf_counter()
        outer, _compiling.eager = getattr(_compiling, "eager", False), _is_eager(self)
        try:
            executable = compile_method(self, compiler_options, **kwargs)
        except Exception as exc:
            staging.record_event("compile_failure", {
                "framework": "jax", "unit": module_name(getattr(self, "_name", "jit_unknown")),
                "error": f"{type(exc).__name__}: {exc}"})
            raise
        finally:
            _compiling.eager = outer
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

    @functools.wraps(backend_compile)
    def compile_or_get_cached(backend, computation, devices, compile_options, *args, **kwargs):
        number, dumping = None, False
        if getattr(_compiling, "eager", False):  # filed from the executable: no dump
            return backend_compile(backend, computation, devices, compile_options,
                                   *args, **kwargs)
        try:
            number, dumping = _plan_dump(staging, dump_cache, backend, computation, devices,
                                         compile_options)
        except Exception as exc:  # the compile goes on, without a dump
            staging.record_event("collector_error", {"collector": "jax", "error": repr(exc)})
        _compiling.dumping = dumping
        try:
            executable = backend_compile(backend, computation, devices, compile_options,
                                         *args, **kwargs)
        finally:
            _compiling.dumping = False
            if pending := getattr(_compiling, "pending", None):  # JAX never read its cache
                _compiling.pending = None
                append_record(staging.xla_dump_records, pending[0])
        if number is not None:  # a dump of a compile that finished may be cached
            append_record(staging.xla_dump_records, {"compile": number, "done": True})
        return executable

    @functools.wraps(read_entry)
    def get_executable_and_time(*args, **kwargs):
        if getattr(_compiling, "dumping", False):
            return None, None  # XLA dumps only what it compiles
        found = read_entry(*args, **kwargs)
        if pending := getattr(_compiling, "pending", None):
            _compiling.pending = None
            record, folder, options, platform = pending
            if found[0] is None:  # XLA compiles after all: its own dump, not the cached one
                del record["cached"]
                _dump_into(record, folder, options, platform, dump_cache)
            append_record(staging.xla_dump_records, record)
        return found

    @functools.wraps(key_of)
    def get_cache_key(module, devices, compile_options, *args, **kwargs):
        return key_of(module, devices, without_emitter_dump(compile_options), *args, **kwargs)

    pxla.lower_sharding_computation = lower_sharding_computation
    pxla.MeshComputation.compile = compile
    if dumps:
        compiler.compile_or_get_cached = compile_or_get_cached
        cache_key.get = get_cache_key
        compilation_cache.get_executable_and_time = get_executable_and_time
    monitoring.register_event_duration_secs_listener(on_duration)

    def restore() -> None:
        pxla.lower_sharding_computation = lower
        pxla.MeshComputation.compile = compile_method
        compiler.compile_or_get_cached = backend_compile
        cache_key.get = key_of
        compilation_cache.get_executable_and_time = read_entry
        monitoring.unregister_event_duration_listener(on_duration)

    return restore


@functools.cache
def _exclude_own_frames() -> None:
    """Tell JAX that irscope's frames (its bootstrap runs the script, its wraps lower and
    compile) and frozen modules' (``<frozen runpy>``, which runs the script) are never the
    user's: the source locations JAX writes into StableHLO, and XLA into HLO stack frames,
    then name the user's frames alone. For the life of the process: JAX takes none back."""
    source_info = jax_internals.module("source_info_util")
    for prefix in (os.path.join(os.path.dirname(os.path.dirname(__file__)), ""), FROZEN):
        source_info.register_exclusion(prefix)


def _plan_dump(staging: Staging, cache: Path | None, backend, computation, devices,
               compile_options) -> tuple[int, bool]:
    """Point this compile's XLA dump at a folder of its own, or at nothing when the cache
    holds it already; record which, under the compile's number. Returns the number, and
    whether XLA must compile to dump."""
    ir = jax_internals.module("lib.mlir").ir

    number = next(_compiles)
    module = ir.StringAttr(computation.operation.attributes["sym_name"]).value
    try:
        key = dump_key(computation, devices, compile_options, backend)
    except Exception:
        key = None
    record: dict[str, Any] = {"compile": number, "module": module, "key": key}
    passes = bool(os.environ.get("IRSCOPE_PASSES"))  # inspect --passes: HLO after every pass
    cache = None if passes else cache  # a cached dump holds no pass files
    cached = xla_dump_cache.lookup(cache, key)
    folder, platform = staging.xla_compiles / f"{number:04d}", getattr(backend, "platform", "")
    if cached is not None and platform in GPU_PLATFORMS:
        # XLA's GPU autotuner may tile another compile of the module otherwise than the
        # cached dump shows: the dump stands only for an executable JAX loads from its
        # persistent cache, which its read says (get_executable_and_time)
        if jax_internals.module("compilation_cache").is_cache_used(backend):
            record["cached"] = str(cached)
            _compiling.pending = (record, folder, compile_options, platform)
            return number, False
        cached = None
    if cached is not None:
        record["cached"] = str(cached)
    else:
        if passes:
            compile_options.executable_build_options.debug_options.xla_dump_hlo_pass_re = ".*"
        _dump_into(record, folder, compile_options, platform, cache)
    append_record(staging.xla_dump_records, record)
    return number, "folder" in record


def _dump_into(record: dict[str, Any], folder: Path, compile_options, platform: str,
               cache: Path | None) -> None:
    """Ask XLA, through this compile's own options, for its dump in ``folder``."""
    debug = compile_options.executable_build_options.debug_options
    debug.xla_dump_to = str(folder)
    debug.xla_dump_hlo_as_text = True
    if platform in GPU_PLATFORMS:  # the CPU backend crashes on it
        compile_options.env_option_overrides = [*compile_options.env_option_overrides,
                                                EMITTER_DUMP]
    record["folder"] = str(folder)
    if cache is not None and record.get("key"):
        record["cache"] = str(cache)  # where filing keeps the dump once compiled


def dump_key(computation, devices, compile_options, backend) -> str:
    """The key of a compile's dump in irscope's cache: what determines the dump's text.

    JAX's compilation key with the module's source locations kept in (JAX's own key strips
    them, so a script moved by a line, or another script with the same function, would be
    given the first one's dump, its files and line numbers), and the ``--xla_dump`` flags of
    ``XLA_FLAGS`` that JAX leaves out of its key but which change what XLA writes
    (``--xla_dump_disable_metadata``, ``--xla_dump_hlo_as_long_text``)."""
    cache_key = jax_internals.module("cache_key")
    config = jax_internals.module("config")

    with config.compilation_cache_include_metadata_in_key(True):
        key = cache_key.get(computation, devices, compile_options, backend)
    flags = [flag for flag in os.environ.get("XLA_FLAGS", "").split()
             if flag.startswith("--xla_dump")]
    if not flags:
        return key
    digest = hashlib.sha256(" ".join(flags).encode()).hexdigest()[:16]
    return f"{key}-{digest}"


def without_emitter_dump(compile_options):
    """``compile_options`` as JAX's cache key should see them: without the emitter dump that
    ``_plan_dump`` asked for (a dump option, which does not change the executable)."""
    overrides = compile_options.env_option_overrides
    if EMITTER_DUMP not in overrides:
        return compile_options
    import copy

    options = copy.deepcopy(compile_options)
    options.env_option_overrides = [o for o in overrides if o != EMITTER_DUMP]
    return options


def module_name(jax_name: str) -> str:
    """The XLA module name JAX gives a lowering (as jax's mlir.sanitize_name): ``jit_mlp``."""
    return MODULE_NAME_UNSAFE.sub("_", jax_name).rstrip("_")


def _record_id(computation) -> int:
    """One number per lowering, shared by its lowering and compile records."""
    number = getattr(computation, "_irscope_id", None)
    if number is None:
        number = computation._irscope_id = next(_counter)
    return number


def _package_folders() -> tuple[str, ...]:
    """Folders whose code is JAX's own (jax, jaxlib) or irscope's collectors, each ending in
    a separator."""
    import jax

    folders = [os.path.dirname(jax.__file__), os.path.dirname(__file__)]
    jaxlib = sys.modules.get("jaxlib")
    if getattr(jaxlib, "__file__", None):
        folders.append(os.path.dirname(jaxlib.__file__))
    return tuple(os.path.join(os.path.realpath(f), "") for f in folders)


def _inside(path: str, folders: tuple[str, ...]) -> bool:
    return _real(path).startswith(folders)


@functools.lru_cache(maxsize=4096)
def _real(path: str) -> str:
    """The resolved path (cached: the same few files make every stack)."""
    return os.path.realpath(path)


def _caller_outside(folders: tuple[str, ...]) -> str | None:
    """``file:line`` of the innermost frame on the stack whose code is not in ``folders``."""
    frame = sys._getframe(1)
    while frame is not None:
        path = frame.f_code.co_filename
        if not path.startswith("<") and not _inside(path, folders):
            return f"{path}:{frame.f_lineno}"
        frame = frame.f_back
    return None


def _stage_lowering(staging: Staging, computation, closed_jaxpr, seconds: float,
                    internal: tuple[str, ...] = ()) -> None:
    mlir = jax_internals.module("interpreters.mlir")

    record: dict[str, Any] = {
        "record": "lowering", "id": _record_id(computation),
        "module": module_name(computation._name), "lowering_seconds": seconds,
        "jaxpr": _jaxpr_text(closed_jaxpr),
        "stablehlo": mlir.module_to_string(computation.stablehlo())}
    debug = getattr(closed_jaxpr.jaxpr, "_debug_info", None)
    match = SRC_INFO.search(getattr(debug, "func_src_info", "") or "")
    if match:
        record.update(source_file=match["file"], source_line=int(match["line"]))
        if internal and _inside(match["file"], internal):  # JAX made this jit, not the user
            record.update(jax_internal=True, called_from=_caller_outside(internal))
            computation._irscope_eager = True
    append_record(staging.jax_functions, record)


def _jaxpr_text(closed_jaxpr) -> str:
    """The jaxpr with each equation's source line as a trailing comment (the user's line it
    was traced from: the provenance of the equation), else as ``str`` prints it."""
    try:
        return closed_jaxpr.pretty_print(source_info=True, name_stack=False, use_color=False)
    except Exception:  # a JAX whose printer takes other options
        return str(closed_jaxpr)


def _is_eager(computation) -> bool:
    """Whether ``computation`` lowers one of JAX's eager ops (see ``_stage_lowering``)."""
    return getattr(computation, "_irscope_eager", False)


def _stage_executable(staging: Staging, computation, executable, seconds: float) -> None:
    record: dict[str, Any] = {"record": "compile", "id": _record_id(computation),
                              "module": module_name(computation._name),
                              "compile_seconds": seconds}
    if _is_eager(computation):  # no XLA dump: the optimized HLO the executable holds
        record["xla_dump"] = False
        try:
            record["hlo_after_opt"] = "\n\n".join(
                module.to_string() for module in executable.xla_extension_executable()
                .hlo_modules())
        except Exception as exc:  # not offered on every backend
            record["hlo_after_opt_error"] = f"{type(exc).__name__}: {exc}"
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
