"""Lightning Thunder collector: every ``thunder.jit`` function's traces, fusion regions and executors.

``install`` wraps ``thunder.jit`` to remember each jitted function's compile statistics, and
Thunder's execution transform and autograd split to keep the trace after each of their steps
(operator executor assignment, each fusion executor's pass, the split into forward and
backward), which Thunder itself does not keep. A region that the torch.compile executor made
records the Dynamo frames its first call compiled, so filing can link it to the graphs and
kernels of those frames. An nvFuser region's first call compiles its kernels, whose CUDA, PTX
and SASS nvFuser writes into the working directory (``NVFUSER_DUMP``, which inspect sets): the
files it wrote are moved, as the region's, into ``thunder/nvfuser/<NNNN>/`` (each region's
kernels apart: nvFuser names them alike). At exit every compile of every jitted function is
written to ``thunder/<NNNN>/`` in staging: one ``.trace`` file per trace and ``thunder.json``
(see ``irscope.ingest.thunder_traces``, which files it).
"""

from __future__ import annotations

import atexit
import functools
import inspect
import json
import os
import re
import sys
import threading
from pathlib import Path
from typing import Any, Callable

from irscope.collectors.staging import NVFUSER_DUMP_OURS, Staging, rank_from_env

# as irscope.ingest.thunder_traces reads them
FOLDER, MANIFEST, NVFUSER_FOLDER = "thunder", "thunder.json", "nvfuser"

# "# Constructed by Grad transform pass (took 25 milliseconds)" -> "Grad transform pass"
PROVENANCE = re.compile(r"^#?\s*Constructed by (.*?)(?: \(took [\d.]+ \w+\))?\s*$")
SKIPPED_TRACES = ("prologue", "epilogue", "to_be_compiled")  # not the user's computation
# __tmp_nvfuser_reduction_f0_c1_r0_g0.cu: what NVFUSER_DUMP=cuda_to_file,ptx,sass_to_file writes
NVFUSER_DUMP_FILE = re.compile(r"^__tmp_nvfuser_\w+\.(?:cu|ptx|sass)$")


class _Jitted:
    """One jitted function: its name and source, its compile statistics, and per compile (the
    list Thunder keeps its computation traces in) the execution steps seen."""

    def __init__(self, name: str, source: tuple[str | None, int | None], stats):
        self.name, self.source, self.stats = name, source, stats
        self.compiles: list[tuple[Any, Any]] = []  # (computation traces, backward traces)
        # id(traces) -> (how many traces the compile had then, role, title, trace)
        self.steps: dict[int, list[tuple[int, str, str, Any]]] = {}


class ThunderCollector:
    """The hooks of one process and what they saw; ``write()`` stages it all."""

    def __init__(self, staging: Staging):
        self.staging = staging
        self.jitted: list[_Jitted] = []
        self.by_stats: dict[int, _Jitted] = {}
        self.lock = threading.Lock()
        self.written = False

    def remember(self, fn, jitted, caller) -> None:
        """Keep a jitted function: a module is found where it was jitted (``caller``, a
        frame), a function where it is defined."""
        import thunder

        stats = thunder.compile_stats(jitted)
        if stats is None:
            return
        if hasattr(fn, "parameters"):  # an nn.Module
            name, source = type(fn).__name__, (caller.f_code.co_filename, caller.f_lineno)
        else:
            name, source = getattr(fn, "__name__", "fn"), _source(fn)
        entry = _Jitted(name, source, stats)
        with self.lock:
            self.jitted.append(entry)
            self.by_stats[id(stats)] = entry

    def current(self) -> tuple[_Jitted | None, Any]:
        """The jitted function being compiled now, and the list of its compile's traces."""
        from thunder.core.compile_data import _compile_data

        _, stats = _compile_data.get()
        entry = self.by_stats.get(id(stats)) if stats is not None else None
        if entry is None:
            return None, None
        traces = stats.last_traces
        if not any(traces is seen for seen, _ in entry.compiles):
            entry.compiles.append((traces, stats.last_backward_traces))
        return entry, traces

    def step(self, title: str, trace, role: str = "forward") -> None:
        """Keep ``trace``, the result of one step of the compile under way that Thunder does
        not keep itself (the execution transform's, the autograd split's)."""
        name = _trace_name(trace)
        if name.startswith(SKIPPED_TRACES):
            return
        entry, traces = self.current()
        if entry is not None:
            entry.steps.setdefault(id(traces), []).append((len(traces), role, title, trace))

    def write(self) -> None:
        """Stage every compile of every jitted function (once, at exit)."""
        if self.written:
            return
        self.written = True
        root = self.staging.root / FOLDER
        number = 0
        for function, entry in enumerate(self.jitted):
            for nth, (traces, backward) in enumerate(entry.compiles or _last(entry.stats), 1):
                try:
                    manifest = {**_compile_manifest(entry, nth, traces, backward),
                                "function": function}
                    folder = root / f"{number:04d}"
                    folder.mkdir(parents=True, exist_ok=True)
                    for record in manifest["traces"]:
                        text = record.pop("text")
                        (folder / record["file"]).write_text(text, encoding="utf-8")
                    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1, default=str),
                                                   encoding="utf-8")
                    number += 1
                except Exception as exc:  # noqa: BLE001  one odd trace must not lose the rest
                    self.staging.record_event("collector_error", {
                        "collector": "thunder", "error": f"{type(exc).__name__}: {exc}"})


def install(staging: Staging) -> Callable[[], None]:
    """Hook ``thunder.jit`` and the execution transform; stage what they saw at exit."""
    import thunder
    from thunder.executors import passes
    from thunder.executors import torch_compile
    from thunder.transforms import autodiff

    collector = ThunderCollector(staging)
    jit, execution, make_compiled = (thunder.jit, passes.transform_for_execution,
                                     torch_compile.make_compiled)
    split = autodiff.split_into_forward_and_backward

    @functools.wraps(jit)
    def thunder_jit(fn, /, *args, **kwargs):
        jitted = jit(fn, *args, **kwargs)
        try:
            collector.remember(fn, jitted, sys._getframe(1))
        except Exception as exc:  # noqa: BLE001  a Thunder version irscope does not know
            staging.record_event("collector_error", {"collector": "thunder", "error": repr(exc)})
        return jitted

    inside = threading.local()  # a torch.compile region's own transform runs inside another

    @functools.wraps(execution)
    def transform_for_execution(trace, executors_list):
        if getattr(inside, "depth", 0):
            return execution(trace, executors_list)
        inside.depth = 1
        try:
            return _recorded_execution(collector, execution, trace, executors_list)
        finally:
            inside.depth = 0

    @functools.wraps(make_compiled)
    def compiled_region(*args, **kwargs):
        return _frames_recorded(make_compiled(*args, **kwargs))

    @functools.wraps(split)
    def split_into_forward_and_backward(trace, *args, **kwargs):
        forward, backward = split(trace, *args, **kwargs)
        collector.step("autograd split", forward)
        collector.step("autograd split", backward, "backward")
        return forward, backward

    thunder.jit = thunder_jit
    passes.transform_for_execution = transform_for_execution
    torch_compile.make_compiled = compiled_region
    autodiff.split_into_forward_and_backward = split_into_forward_and_backward
    unhook_nvfuser = _hook_nvfuser_regions(staging)
    atexit.register(collector.write)

    def restore() -> None:
        collector.write()
        thunder.jit = jit
        passes.transform_for_execution = execution
        torch_compile.make_compiled = make_compiled
        autodiff.split_into_forward_and_backward = split
        unhook_nvfuser()

    return restore


def _recorded_execution(collector: ThunderCollector, execution, trace, executors_list):
    """Thunder's execution transform, keeping the trace after each step: the operator executors'
    claim, each fusion executor's pass, the last claim by the executors that always run."""
    from thunder.executors import passes
    from thunder.extend import FusionExecutor

    claim = passes._transform_for_operator_executor_execution
    fusers = [ex for ex in executors_list if isinstance(ex, FusionExecutor)]

    def claimed(trc, executors):
        result = claim(trc, executors)
        collector.step("operator executors" if executors is executors_list
                       else "always executors", result)
        return result

    def fusion_pass(ex, original):
        def run(trc):
            result = original(trc)
            collector.step(f"{ex.name} fusion pass", result)
            return result
        return run

    passes._transform_for_operator_executor_execution = claimed
    for ex in fusers:
        ex.fusion_pass = fusion_pass(ex, ex.fusion_pass)
    try:
        return execution(trace, executors_list)
    finally:
        passes._transform_for_operator_executor_execution = claim
        for ex in fusers:
            ex.__dict__.pop("fusion_pass", None)


def _frames_recorded(region: Callable) -> Callable:
    """The torch.compile region's callable, noting which Dynamo frames its first call compiled
    (Dynamo numbers each new frame: the ``N`` of compile id ``N/0``)."""
    from torch._dynamo import convert_frame

    @functools.wraps(region)
    def run(*args):
        if run.irscope_frames is not None:
            return region(*args)
        first = convert_frame.FRAME_COUNTER
        try:
            return region(*args)
        finally:
            run.irscope_frames = list(range(first, convert_frame.FRAME_COUNTER))

    run.irscope_frames = None
    return run


def _hook_nvfuser_regions(staging: Staging) -> Callable[[], None]:
    """Wrap nvFuser regions so that the kernel files each one's first call makes are kept as
    that region's (nothing to do where Thunder's nvFuser executor does not import)."""
    try:
        from thunder.executors.nvfuserex_impl import FusionDefinitionWrapper
    except Exception:  # noqa: BLE001  no nvFuser here, or a Thunder irscope does not know
        return lambda: None
    call = FusionDefinitionWrapper.__call__
    lock = threading.Lock()

    @functools.wraps(call)
    def region_call(self, *args, **kwargs):
        if id(self) in _NVFUSER_KERNELS:
            return call(self, *args, **kwargs)
        cwd = Path.cwd()
        before = _dump_files(cwd)
        try:
            return call(self, *args, **kwargs)
        finally:
            try:
                with lock:
                    folder = (staging.root / FOLDER / NVFUSER_FOLDER
                              / f"{len(_NVFUSER_KERNELS):04d}")
                    # (the region itself is kept too: its id stays its own)
                    _NVFUSER_KERNELS[id(self)] = (self, _keep_new_dumps(cwd, before, folder))
            except Exception as exc:  # noqa: BLE001  the program goes on without them
                staging.record_event("collector_error", {"collector": "thunder",
                                                         "error": repr(exc)})

    FusionDefinitionWrapper.__call__ = region_call

    def restore() -> None:
        FusionDefinitionWrapper.__call__ = call

    return restore


# id of an nvFuser region's wrapper (slotted: it takes no attribute of ours): the wrapper,
# and the folder of the kernels its first call compiled, relative to thunder/ in staging
_NVFUSER_KERNELS: dict[int, tuple[Any, str]] = {}


def _dump_files(folder: Path) -> dict[str, float]:
    try:
        return {e.name: e.stat().st_mtime for e in os.scandir(folder)
                if NVFUSER_DUMP_FILE.match(e.name)}
    except OSError:
        return {}


def _keep_new_dumps(cwd: Path, before: dict[str, float], folder: Path) -> str:
    """Move the dump files nvFuser wrote since ``before`` into ``folder`` (copy them where the
    user asked for the dumps); returns the folder, relative to the Thunder staging folder."""
    import shutil

    new = [name for name, mtime in _dump_files(cwd).items() if before.get(name) != mtime]
    keep = shutil.move if os.environ.get(NVFUSER_DUMP_OURS) else shutil.copy2
    if new:
        folder.mkdir(parents=True, exist_ok=True)
        for name in new:
            try:
                keep(cwd / name, folder / name)
            except OSError:
                pass
    return f"{NVFUSER_FOLDER}/{folder.name}"


def _compile_manifest(entry: _Jitted, nth: int, traces, backward) -> dict[str, Any]:
    """The manifest of one compile of a jitted function, each trace's text under ``text``."""
    records: list[dict[str, Any]] = []

    def add(role: str, title: str, trace) -> None:
        text = str(trace)
        if records and (records[-1]["role"], records[-1]["text"]) == (role, text):
            return  # a pass that changed nothing, or a trace Thunder lists again after a check
        records.append({"file": f"{len(records):02d}.trace", "role": role, "title": title,
                        "text": text})

    steps = [s for s in entry.steps.get(id(traces), ()) if s[1] == "forward"]
    for index, trace in enumerate(traces or ()):
        while steps and steps[0][0] <= index:  # the steps Thunder keeps no trace of, in place
            add(*steps.pop(0)[1:])
        add("forward", "initial" if index == 0 else _title(trace), trace)
    for step in [*steps, *(s for s in entry.steps.get(id(traces), ()) if s[1] == "backward")]:
        add(*step[1:])
    for trace in backward or ():
        add("backward", _title(trace), trace)
    final = {role: next((r for r in reversed(records) if r["role"] == role), None)
             for role in ("forward", "backward")}
    for role, record in final.items():
        if record is not None:
            record["final"] = True
    regions, executors = [], {}
    for role, trace in (("forward", traces[-1] if traces else None),
                        ("backward", backward[-1] if backward else None)):
        if trace is not None:
            found, counts = _regions(trace, role)
            regions += found
            executors[role] = counts
    import thunder

    return {"format": 1, "thunder": thunder.__version__, "name": entry.name, "compile": nth,
            "source_file": entry.source[0], "source_line": entry.source[1],
            "rank": rank_from_env(os.environ), "traces": records, "regions": regions,
            "executors": executors}


def _regions(trace, role: str) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The fusion regions of an execution trace (name, executor, ops, Dynamo frames, nvFuser's
    definition) and how many top-level operations each executor runs."""
    regions, counts = [], {}
    for bsym in trace.bound_symbols:
        executor = getattr(bsym.sym, "executor", None)
        name = getattr(executor, "name", None) or "python"
        counts[name] = counts.get(name, 0) + 1
        if not getattr(bsym.sym, "is_fusion", False):
            continue
        region: dict[str, Any] = {"name": bsym.sym.name, "executor": name, "role": role,
                                  "ops": len(bsym.subsymbols)}
        call = (getattr(bsym, "_call_ctx", None) or {}).get(bsym.sym.name)
        if getattr(call, "irscope_frames", None) is not None:
            region["dynamo_frames"] = call.irscope_frames
        definition = getattr(call, "last_used", None)  # nvFuser's FusionDefinition
        if definition is not None:
            region["definition"] = repr(definition)
        if id(call) in _NVFUSER_KERNELS:
            region["nvfuser_kernels"] = _NVFUSER_KERNELS[id(call)][1]
        regions.append(region)
    return regions, counts


def _last(stats) -> list[tuple[Any, Any]]:
    """The last compile Thunder kept, for a function jitted before the hooks were installed."""
    traces = getattr(stats, "last_traces", None)
    return [(traces, getattr(stats, "last_backward_traces", None))] if traces else []


def _trace_name(trace) -> str:
    try:
        return trace.siginfo().name
    except Exception:  # noqa: BLE001  a trace with no signature
        return ""


def _title(trace) -> str:
    provenance = str(getattr(trace, "_provenance", None) or "")
    match = PROVENANCE.match(provenance.strip())
    return match.group(1) if match else (provenance.strip() or "trace")


def _source(fn) -> tuple[str | None, int | None]:
    try:
        return (str(Path(inspect.getsourcefile(fn) or "").absolute()) or None,
                inspect.getsourcelines(fn)[1])
    except (TypeError, OSError):
        return None, None
