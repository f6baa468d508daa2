"""The autotuners' benchmark time of each compiled configuration, read from a run's records.

``irscope inspect --profile`` records, for every kernel an autotuner tuned (Inductor's
``CachingAutotuner``, ``triton.autotune``), each configuration it benchmarked with the time it
measured and the one it chose (``autotune`` events). Each configuration is matched here to
the Triton unit compiled for it: by its constexprs where the unit records them (a kernel the
compile hook saw), else by the registers and dynamic shared memory the autotuner's launcher
reported (Inductor's kernels filed from its cache); warps and stages alike either way. A
configuration that matches several units (alike in all they record) is left unmatched.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from irscope.analysis.figures import unit_figures
from irscope.read.view import RunView
from irscope.store import Run, Unit


@dataclass(frozen=True)
class Tuned:
    """One compiled configuration as its autotuner measured it."""

    ms: float | None
    best: bool
    registers: int | None = None  # as the launcher reported them
    spills: int | None = None


def autotune_times(run: RunView | Run) -> dict[int, Tuned]:
    """Triton unit id -> the benchmark time of its configuration, for every configuration
    that matches one unit."""
    view = RunView.of(run)
    return view.derived("autotune", lambda: _times(view))


def _times(view: RunView) -> dict[int, Tuned]:
    events = view.events("autotune")
    if not events:
        return {}
    by_kernel: dict[str, list[Unit]] = {}
    for unit in view.units("triton"):
        by_kernel.setdefault(unit.name.split("-")[0], []).append(unit)
    found: dict[int, Tuned] = {}
    for event in events:
        data = event.data
        module = data.get("module")
        same = [u for u in by_kernel.get(str(data.get("kernel")), ())
                if not module or not u.source_file or Path(u.source_file).name == module]
        for config in data.get("configs") or ():
            if not isinstance(config, Mapping):
                continue
            compiled = [u for u in same if _same_config(u, config)]
            if len(compiled) == 1:
                ms = config.get("ms")
                found[compiled[0].id] = Tuned(
                    float(ms) if isinstance(ms, (int, float)) and not isinstance(ms, bool)
                    else None, bool(config.get("best")), _int(config.get("n_regs")),
                    _int(config.get("n_spills")))
    return found


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _same_config(unit: Unit, config: Mapping[str, Any]) -> bool:
    """Whether ``unit`` was compiled for ``config``."""
    attrs = unit.attrs
    if any(config.get(key) is not None and attrs.get(key) != config.get(key)
           for key in ("num_warps", "num_stages")):
        return False
    constexprs = attrs.get("constexprs")
    kwargs = config.get("kwargs") if isinstance(config.get("kwargs"), Mapping) else {}
    if isinstance(constexprs, Mapping) and constexprs:
        return all(constexprs.get(k) == v for k, v in kwargs.items())
    records = unit_figures(unit, ()).kernels
    if len(records) != 1 or _int(config.get("n_regs")) is None:
        return False
    return (records[0].registers == config["n_regs"]
            and config.get("shared", attrs.get("shared")) == attrs.get("shared"))
