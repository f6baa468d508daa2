"""Hardware limits a launch of a compiled configuration would hit (problems) and costly choices
(warnings), from its resources and the GPU's limits (``occupancy.limits_for``)."""

from __future__ import annotations

from .kernels import KernelRecord
from .occupancy import limits_for


def check_limits(capability: int, num_warps: int, record: KernelRecord
                 ) -> tuple[list[str], list[str]]:
    """Hardware limits a launch would hit (problems) and costly choices (warnings).

    Triton raises OutOfResources for shared memory only when a kernel is launched; the
    message here mirrors its wording so a sweep reads the same as a failed launch.
    """
    problems, warnings = [], []
    limits = limits_for(capability)
    shared = record.shared_bytes
    if shared > limits.max_shared_per_block:
        problems.append(f"out of resource: shared memory, Required: {shared}, "
                        f"Hardware limit: {limits.max_shared_per_block}")
    threads = num_warps * 32
    if threads > limits.max_threads_per_block:
        problems.append(f"out of resource: threads, Required: {threads}, "
                        f"Hardware limit: {limits.max_threads_per_block}")
    registers = record.registers
    if registers:
        unit = limits.register_unit  # registers are granted per warp in chunks of this many
        per_warp = -(-registers * 32 // unit) * unit
        if per_warp * num_warps > limits.registers:
            problems.append(f"out of resource: registers, Required: {per_warp * num_warps} "
                            f"({registers} per thread x {threads} threads), Hardware limit: "
                            f"{limits.registers}")
    stores, loads = record.spill_store_bytes or 0, record.spill_load_bytes or 0
    if stores or loads:
        warnings.append(f"register spills: {stores} bytes stored, {loads} bytes loaded")
    return problems, warnings
