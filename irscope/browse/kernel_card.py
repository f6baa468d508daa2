"""A kernel's card: its launch facts and resources as labelled rows, and the rows that
differ between two kernels."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from irscope.store import Unit


def kernel_card(unit: Unit, figures: Any = None) -> list[tuple[str, str]]:
    """A Triton kernel's launch facts and resources as (label, value) rows: signature,
    constexprs, num_warps, num_stages, shared memory, registers, spills, occupancy with its
    limiter, target arch, autotune winner. ``figures``: its irscope.analysis UnitFigures."""
    attrs = unit.attrs or {}
    rows: list[tuple[str, str]] = []
    signature = attrs.get("signature")
    if isinstance(signature, Mapping):
        rows.append(("signature", ", ".join(f"{k}: {v}" for k, v in signature.items()
                                            if v != "constexpr")))
    constexprs = attrs.get("constexprs")
    if isinstance(constexprs, Mapping) and constexprs:
        rows.append(("constexprs", ", ".join(f"{k}={v}" for k, v in constexprs.items())))
    for key in ("num_warps", "num_stages", "num_ctas"):
        if attrs.get(key) is not None:
            rows.append((key.replace("_", " "), str(attrs[key])))
    kernel = figures.kernels[0] if figures is not None and figures.kernels else None
    if kernel is not None:
        rows.append(("shared static", f"{kernel.shared_static_bytes:,} B"))
        rows.append(("shared dynamic", f"{kernel.shared_dynamic_bytes:,} B"))
        if kernel.registers is not None:
            rows.append(("registers", str(kernel.registers)))
        if kernel.spill_bytes is not None:
            rows.append(("spills", f"{kernel.spill_store_bytes or 0} B st / "
                                   f"{kernel.spill_load_bytes or 0} B ld"))
        if kernel.occupancy is not None:
            limiter = f" ({kernel.occupancy_limiter})" if kernel.occupancy_limiter else ""
            rows.append(("occupancy", f"{kernel.occupancy:.0%}{limiter}"))
    elif attrs.get("shared") is not None:
        rows.append(("shared dynamic", f"{int(attrs['shared']):,} B"))
    arch = attrs.get("arch") or (attrs.get("target") or {}).get("arch")
    if arch:
        rows.append(("target", str(arch)))
    best = attrs.get("autotune_best")
    if best:
        rows.append(("autotune best", best if isinstance(best, str) else json.dumps(best)))
    candidates = attrs.get("autotune_candidates")
    if isinstance(candidates, list) and candidates:
        rows.append(("candidates", str(len(candidates))))
    return rows


def figure_deltas(left: Mapping[str, str], right: Mapping[str, str]) -> tuple[str, ...]:
    """The kernel-card rows (see ``kernel_card``) that differ: "registers 29 → 26 (-3)"."""
    out = []
    for label in ("registers", "spills", "shared static", "shared dynamic", "occupancy",
                  "num warps", "num stages", "constexprs"):
        a, b = left.get(label), right.get(label)
        if a is None or b is None or a == b:
            continue
        delta = ""
        if a.split()[0].replace(",", "").isdigit() and b.split()[0].replace(",", "").isdigit():
            change = int(b.split()[0].replace(",", "")) - int(a.split()[0].replace(",", ""))
            delta = f" ({change:+d})"
        out.append(f"{label} {a} → {b}{delta}")
    return tuple(out)
