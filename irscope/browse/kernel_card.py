"""A kernel's card: its launch facts and resources as labelled rows, and the rows that
differ between two kernels."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from irscope.analysis.gpus import peaks_of
from irscope.analysis.timing import roofline
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


def launched_by(unit_id: int, relations: Iterable[Any], units: Mapping[int, Unit]) -> str:
    """The graphs that launch a kernel, each with the part of it that does ("the backward of
    [1/0] forward": a compile's backward, not its forward), from the "launches" relations."""
    roles: dict[str, set[str]] = {}
    for relation in relations:
        if relation.dst == unit_id and relation.src in units:
            role = relation.attrs.get("role") if isinstance(relation.attrs, Mapping) else None
            roles.setdefault(units[relation.src].name, set()).update([role] if role else [])
    return ", ".join(f"the {' and '.join(sorted(found))} of {name}" if found else name
                     for name, found in sorted(roles.items()))


def time_rows(unit_id: int, time: Any) -> list[tuple[str, str]]:
    """A unit's measured GPU time as card rows: total, launches and mean, share of the run's
    time, and for a kernel its place under the GPU's peaks. ``time``: the run's
    irscope.analysis.timing RunTime, or None when it measured none."""
    if time is None or unit_id not in time.units:
        return []
    own = time.units[unit_id]
    rows = [("GPU time", f"{own.total_ns / 1000:,.1f} µs in {own.launches:,} launches"),
            ("share", f"{own.total_ns / time.kernel_time_ns:.1%} of the profiled GPU time"
             if time.kernel_time_ns else "-")]
    rows += [(f"  {phase}", f"{ns / 1000:,.1f} µs") for phase, ns in sorted(own.phases.items())
             if len(own.phases) > 1]
    kernels = [k for k in time.kernels if k.unit_id == unit_id and k.kind == "kernel"
               and k.graph_id != unit_id]
    if kernels:  # a kernel's own unit (one row per line that launches it)
        mean = own.total_ns / own.launches if own.launches else 0.0
        low, high = min(k.min_ns for k in kernels), max(k.max_ns for k in kernels)
        rows.append(("mean", f"{mean / 1000:,.2f} µs (min {low / 1000:,.2f}, max "
                             f"{high / 1000:,.2f})"))
        roof = roofline(kernels[0].work, mean, peaks_of(kernels[0].device))
        rows.append(("roofline", "unknown: its bytes and FLOPs are not known" if roof is None
                     else roofline_text(roof)))
    return rows


def roofline_text(roof: Any) -> str:
    """"62% of peak, memory-bound (2.1 TB/s, 3.8 TFLOP/s on H100 SXM)"."""
    rates = [f"{roof.bytes_per_s / 1e12:.2f} TB/s" if roof.bytes_per_s is not None else "",
             f"{roof.flops_per_s / 1e12:.2f} TFLOP/s" if roof.flops_per_s is not None else ""]
    share = f"{roof.fraction:.0%} of peak" if roof.fraction is not None else "peak unknown"
    bound = f", {roof.bound}-bound" if roof.bound else ""
    return f"{share}{bound} ({', '.join(r for r in rates if r)} on {roof.gpu})"


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
