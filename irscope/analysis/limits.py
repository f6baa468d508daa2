"""Hardware limits a launch of a compiled configuration would hit (problems) and costly choices
(warnings), from its resources and the GPU's limits (``occupancy.limits_for``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .occupancy import limits_for


def check_limits(capability: int, num_warps: int, metadata: Mapping[str, Any],
                 resources: Mapping[str, int]) -> tuple[list[str], list[str]]:
    """Hardware limits a launch would hit (problems) and costly choices (warnings).

    Triton raises OutOfResources for shared memory only when a kernel is launched; the
    message here mirrors its wording so a sweep reads the same as a failed launch.
    """
    problems, warnings = [], []
    limits = limits_for(capability)
    shared = int(metadata.get("shared") or 0) + int(resources.get("static_shared_bytes") or 0)
    if shared > limits.max_shared_per_block:
        problems.append(f"out of resource: shared memory, Required: {shared}, "
                        f"Hardware limit: {limits.max_shared_per_block}")
    threads = num_warps * 32
    if threads > limits.max_threads_per_block:
        problems.append(f"out of resource: threads, Required: {threads}, "
                        f"Hardware limit: {limits.max_threads_per_block}")
    registers = resources.get("registers")
    if registers:
        unit = limits.register_unit  # registers are granted per warp in chunks of this many
        per_warp = -(-registers * 32 // unit) * unit
        if per_warp * num_warps > limits.registers:
            problems.append(f"out of resource: registers, Required: {per_warp * num_warps} "
                            f"({registers} per thread x {threads} threads), Hardware limit: "
                            f"{limits.registers}")
    stores, loads = resources.get("spill_stores") or 0, resources.get("spill_loads") or 0
    if stores or loads:
        warnings.append(f"register spills: {stores} bytes stored, {loads} bytes loaded")
    return problems, warnings
