"""Where a graph's compile time went, from the records PyTorch keeps of it: Dynamo's tracing,
AOTAutograd, Inductor, its code generation and the Triton compiles inside it, autotuning, and
the caches it hit or missed (with why).

PyTorch's compilation metrics nest their cumulative times: the frame's (Dynamo's) holds the
backend's (AOTAutograd), which holds Inductor's, which holds its code generation, which
holds the Triton compiles. Each phase here is its own part (the time of its level less the
level inside it), so the parts add up to the frame's time and draw as one timeline.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from irscope.read.view import RunView
from irscope.store import Run, Unit

# (phase, its cumulative time, the cumulative time of the level inside it) in microseconds
LEVELS = (("Dynamo", "dynamo_cumulative_compile_time_us", "aot_autograd_cumulative_compile_time_us"),
          ("AOTAutograd", "aot_autograd_cumulative_compile_time_us",
           "inductor_cumulative_compile_time_us"),
          ("Inductor", "inductor_cumulative_compile_time_us",
           "inductor_code_gen_cumulative_compile_time_us"),
          ("code generation", "inductor_code_gen_cumulative_compile_time_us",
           "triton_compile_time_us"),
          ("Triton compile", "triton_compile_time_us", None))
# passes and steps inside those phases, worth naming on their own
INSIDE = (("joint graph passes", "joint_graph_pass_time_us"),
          ("pre-grad passes", "pre_grad_pass_time_us"),
          ("post-grad passes", "post_grad_pass_time_us"),
          ("autotuning", "compile_time_autotune_time_us"), ("GC", "gc_time_us"))
METRICS = "compilation_metrics"


@dataclass(frozen=True)
class CompileTime:
    """One compile's time: the frame's total, its phases (adding up to it), named steps
    inside them, and the caches it hit or missed."""

    unit_id: int
    unit: str
    total_s: float
    phases: tuple[tuple[str, float], ...] = ()
    inside: tuple[tuple[str, float], ...] = ()
    caches: tuple[str, ...] = ()  # "fx_graph miss (full_miss)", "aotautograd hit"

    def row(self) -> dict:
        """The compile as one row of plain values (a report's table, JSON)."""
        return {"unit": self.unit, "total_s": round(self.total_s, 3),
                **{f"{name}_s": round(seconds, 3) for name, seconds in self.phases},
                **{f"{name}_s": round(seconds, 3) for name, seconds in self.inside},
                "caches": ", ".join(self.caches)}


def _seconds(data: Mapping, key: str | None) -> float | None:
    value = data.get(key) if key else None
    return value / 1e6 if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None


def compile_time(unit: Unit, data: Mapping, caches: list[Mapping] = ()) -> CompileTime | None:
    """A compile's time from its metrics (``data``: a compile_time event or the compilation
    metrics record) and its cache events; None without a frame time."""
    total = _seconds(data, "dynamo_cumulative_compile_time_us")
    if total is None:
        frame = data.get("entire_frame_compile_time_s")
        total = float(frame) if isinstance(frame, (int, float)) else None
    if total is None:
        return None
    phases = []
    for name, level, inner in LEVELS:
        outer = total if name == "Dynamo" else _seconds(data, level)
        if outer is None:
            break
        inside = _seconds(data, inner) if inner else None
        phases.append((name, max(outer - (inside or 0.0), 0.0)))
        if inside is None:
            break
    steps = tuple((name, s) for name, key in INSIDE if (s := _seconds(data, key)))
    found = []
    for event in caches:
        state = event.get("cache_state") or ("hit" if "hit" in str(event.get("artifact"))
                                             else "miss")
        why = event.get("cache_status_detailed") or event.get("reason")
        found.append(f"{event.get('cache', '?')} {state}" + (f" ({why})" if why else ""))
    return CompileTime(unit.id, unit.name, total, tuple(phases), steps, tuple(found))


def run_compile_times(run: RunView | Run) -> list[CompileTime]:
    """Every compile of the run with its times (from its events), slowest first."""
    view = RunView.of(run)
    caches: dict[int | None, list[Mapping]] = {}
    for event in view.events():
        if event.kind in ("cache_miss", "cache_hit") and isinstance(event.data, Mapping):
            caches.setdefault(event.unit_id, []).append(event.data)
    found = []
    units = {u.id: u for u in view.units()}
    for event in view.events("compile_time"):
        unit = units.get(event.unit_id) if event.unit_id is not None else None
        if unit is not None and isinstance(event.data, Mapping):
            made = compile_time(unit, event.data, caches.get(unit.id, []))
            if made is not None:
                found.append(made)
    return sorted(found, key=lambda c: -c.total_s)


def slowest_kernels(run: RunView | Run, unit: Unit, count: int = 5
                    ) -> tuple[tuple[str, float], ...]:
    """The unit's Triton compiles that took longest (its compilation metrics record them)."""
    view = RunView.of(run)
    stage = next((s for s in view.stages(unit.id) if s.name == METRICS), None)
    if stage is None:
        return ()
    try:
        doc = json.loads(view.read_text(stage))
    except (ValueError, RecursionError):
        return ()
    metrics = doc.get(METRICS, doc) if isinstance(doc, Mapping) else {}
    times = metrics.get("triton_kernel_compile_times_us") if isinstance(metrics, Mapping) else None
    if isinstance(times, str):  # the record keeps the list as its JSON text
        try:
            times = json.loads(times)
        except (ValueError, RecursionError):
            times = None
    rows = [(str(name), us / 1e6) for name, us in times or ()
            if isinstance(us, (int, float))] if isinstance(times, list) else []
    return tuple(sorted(rows, key=lambda r: -r[1])[:count])
