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

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from irscope.analysis.figures import unit_figures
from irscope.analysis.ranks import split_rank
from irscope.read.kept import kept_json
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
    by_module: dict[str, list[Unit]] = {}
    for unit in view.units("triton"):
        by_kernel.setdefault(compiles_key(unit)[0], []).append(unit)
        if unit.source_file:
            by_module.setdefault(Path(unit.source_file).name, []).append(unit)
    found: dict[int, Tuned] = {}
    for event in events:
        data = event.data
        module = data.get("module")
        same = [u for u in by_kernel.get(str(data.get("kernel")), ())
                if not module or not u.source_file or Path(u.source_file).name == module]
        if not same and isinstance(module, str):
            # Inductor's unique kernel names off: every kernel's function is `triton_`, and
            # the units carry the output code's names; the module (one kernel's) tells it
            same = by_module.get(module, [])
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


# "triton_poi_fused_add_0-8b2673e7" -> "triton_poi_fused_add_0": a second compile of one kernel
# (another configuration) is filed under its name with the hash of the compile
COMPILE_SUFFIX = re.compile(r"-[0-9a-f]{6,}$")


def compiles_key(unit: Unit) -> tuple[str, str | None, int | None]:
    """What the compiles of one kernel share: its name without the compile's hash, its
    module and its rank ("k-8b2673e7 (rank 1)" is a compile of rank 1's "k")."""
    name, rank = split_rank(unit.name)
    return COMPILE_SUFFIX.sub("", name), unit.source_file, rank


def chosen_configuration(run: RunView | Run, units: Sequence[Unit]) -> Unit:
    """The compile that stands for one kernel compiled in several configurations
    (``units``): the one its autotuner chose (Inductor's record, the autotuner's own under
    ``inspect --profile``, else the one the measured launches ran), else the one named like
    the kernel (the smallest hash)."""
    unchosen = unchosen_candidates(run) if len(units) > 1 else frozenset()
    kept = [u for u in units if u.id not in unchosen] or list(units)
    return next((u for u in kept if u.attrs.get("autotune_best")), None) or min(
        kept, key=lambda u: (COMPILE_SUFFIX.search(split_rank(u.name)[0]) is not None, u.name))


def unchosen_candidates(run: RunView | Run) -> frozenset[int]:
    """The Triton units that are configurations autotuning compiled and did not choose: the
    run's figures leave out (read.figures.autotune_lost: Inductor's best config, those that
    cannot launch) and, of a kernel compiled several times from one module, every compile
    but the one the autotuner's own record or the measured launches show it chose (their
    resources, else their grid: ``irscope.read.timing``; a launch that several alike compiles
    fit shows nothing). Kernels whose choice the run does not record keep every compile."""
    view = RunView.of(run)
    return view.derived("unchosen", lambda: frozenset(kept_json(
        view, "unchosen", lambda: sorted(_unchosen(view)),
        lambda ids: isinstance(ids, list) and all(type(i) is int for i in ids))))


def _unchosen(view: RunView) -> frozenset[int]:
    from irscope.read.figures import autotune_lost
    from irscope.read.timing import read_time

    groups: dict[tuple, list[Unit]] = {}
    for unit in view.units("triton"):
        groups.setdefault(compiles_key(unit), []).append(unit)
    tuned, time = autotune_times(view), read_time(view)
    # a launch joined to the first of several alike compiles shows no choice
    launched = {k.unit_id for k in time.kernels if k.unit_id is not None and k.candidates == 1
                } if time is not None else set()
    out: set[int] = set(autotune_lost(view))
    for units in groups.values():
        if len(units) < 2:
            continue
        chosen = {u.id for u in units if u.autotune_best or (u.id in tuned and tuned[u.id].best)}
        chosen = chosen or {u.id for u in units if u.id in launched}
        if chosen:
            out.update(u.id for u in units if u.id not in chosen)
    return frozenset(out)
