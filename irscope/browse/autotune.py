"""The configurations autotuning compiled for one Triton kernel, and the one it chose.

Triton compiles a kernel once per configuration tried; irscope files each compile as a unit
of its own, all from one module: the first under the kernel's name, the others as
``name-<hash8>`` (``irscope.ingest.triton_cache``). Inductor's ``.best_config`` marks the
winner with ``attrs["autotune_best"]``; under ``inspect --profile`` the autotuners' records
give each compile the benchmark time it measured and mark the one it chose.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any
from dataclasses import dataclass

from irscope.browse.launches import base_name
from irscope.store import Unit

LAUNCH_KEYS = ("num_warps", "num_stages", "num_ctas")
DIGITS_RE = re.compile(r"(\d+)")  # "XBLOCK=128 warps=4" -> "XBLOCK=", "128", " warps=", ...


@dataclass(frozen=True)
class Candidate:
    """One compiled configuration: its unit, its constexprs and launch settings, whether
    autotuning chose it."""

    unit_id: int
    name: str
    config: str  # "XBLOCK=128 warps=4 stages=1"
    best: bool
    ms: float | None = None  # the autotuner's benchmark time, where it was recorded


def config_text(attrs: Mapping) -> str:
    """A compile's configuration, short enough for a side panel: its constexprs, then
    num_warps and num_stages (and num_ctas when not 1) as ``warps=4 stages=3``."""
    constexprs = attrs.get("constexprs")
    parts = [f"{k}={v}" for k, v in constexprs.items()] if isinstance(constexprs, Mapping) else []
    parts += [f"{key.removeprefix('num_')}={attrs[key]}" for key in LAUNCH_KEYS
              if attrs.get(key) is not None and not (key == "num_ctas" and attrs[key] == 1)]
    return " ".join(parts)


def autotune_candidates(unit: Unit, units: Iterable[Unit],
                        tuned: Mapping[int, Any] = {}) -> list[Candidate]:
    """Every compile of ``unit``'s kernel from its module, in configuration order; none for
    a kernel compiled once that autotuning did not mark. ``tuned``: the autotuners' records
    by unit id (``irscope.read.autotune.autotune_times``)."""
    if unit.framework != "triton":
        return []
    key = (base_name(unit.name), unit.source_file)
    same = [u for u in units if u.framework == "triton"
            and (base_name(u.name), u.source_file) == key]
    if len(same) < 2 and not unit.autotune_best:
        return []
    found = [Candidate(u.id, u.name, config_text(u.attrs),
                       u.autotune_best or (u.id in tuned and tuned[u.id].best),
                       tuned[u.id].ms if u.id in tuned else None) for u in same]
    return sorted(found, key=lambda c: (natural_key(c.config), c.name))


def natural_key(text: str) -> list:
    """Sort key reading runs of digits as numbers: "XBLOCK=8" before "XBLOCK=32"."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part)
            for part in DIGITS_RE.split(text) if part]


def candidate_text(candidate: Candidate, figures=None, instructions: int | None = None) -> str:
    """A configuration beside what it compiled to and what it measured: "XBLOCK=8 warps=2
    stages=1 · 27 reg · 0 B spill · 1,536 B smem · 412 ins · 0.0219 ms". ``figures``: its
    unit's irscope.analysis UnitFigures; ``instructions``: its SASS (or PTX) instruction count."""
    parts = [candidate.config]
    if getattr(figures, "registers", None):
        parts.append(f"{figures.registers} reg")
    if getattr(figures, "spill_bytes", None) is not None:
        parts.append(f"{figures.spill_bytes:,} B spill")
    if getattr(figures, "shared_bytes", None) is not None:
        parts.append(f"{figures.shared_bytes:,} B smem")
    if instructions:
        parts.append(f"{instructions:,} ins")
    if candidate.ms is not None:
        parts.append(f"{candidate.ms:.4g} ms")
    return " · ".join(parts)
