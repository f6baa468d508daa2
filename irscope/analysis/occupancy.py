"""Theoretical occupancy per architecture, by the CUDA occupancy calculator's rules."""

from __future__ import annotations

from dataclasses import dataclass

VERSION = 2
LIMITER_JOIN = "+"  # registers+shared_memory: both cap the blocks alike


@dataclass(frozen=True)
class SmLimits:
    """What one streaming multiprocessor of a compute capability offers."""

    max_warps: int
    max_blocks: int
    registers: int = 65536
    max_registers_per_thread: int = 255
    register_unit: int = 256  # registers are allocated per warp in units of this many
    sub_partitions: int = 4
    shared_bytes: int = 98304  # largest carve-out per SM
    max_shared_per_block: int = 98304
    shared_unit: int = 256
    reserved_shared_per_block: int = 0
    max_threads_per_block: int = 1024


LIMITS: dict[int, SmLimits] = {
    50: SmLimits(64, 32, shared_bytes=65536, max_shared_per_block=49152),
    52: SmLimits(64, 32, shared_bytes=98304, max_shared_per_block=49152),
    53: SmLimits(64, 32, shared_bytes=65536, max_shared_per_block=49152),
    60: SmLimits(64, 32, shared_bytes=65536, max_shared_per_block=49152),
    61: SmLimits(64, 32, shared_bytes=98304, max_shared_per_block=49152),
    62: SmLimits(64, 32, shared_bytes=65536, max_shared_per_block=49152),
    70: SmLimits(64, 32, shared_bytes=98304, max_shared_per_block=98304),
    75: SmLimits(32, 16, shared_bytes=65536, max_shared_per_block=65536),
    80: SmLimits(64, 32, shared_bytes=167936, max_shared_per_block=166912, shared_unit=128,
                 reserved_shared_per_block=1024),
    86: SmLimits(48, 16, shared_bytes=102400, max_shared_per_block=101376, shared_unit=128,
                 reserved_shared_per_block=1024),
    87: SmLimits(48, 16, shared_bytes=167936, max_shared_per_block=166912, shared_unit=128,
                 reserved_shared_per_block=1024),
    89: SmLimits(48, 24, shared_bytes=102400, max_shared_per_block=101376, shared_unit=128,
                 reserved_shared_per_block=1024),
    90: SmLimits(64, 32, shared_bytes=233472, max_shared_per_block=232448, shared_unit=128,
                 reserved_shared_per_block=1024),
    100: SmLimits(64, 32, shared_bytes=233472, max_shared_per_block=232448, shared_unit=128,
                  reserved_shared_per_block=1024),
    120: SmLimits(48, 32, shared_bytes=102400, max_shared_per_block=101376, shared_unit=128,
                  reserved_shared_per_block=1024),
}


@dataclass(frozen=True)
class Occupancy:
    """Resident blocks and warps per SM, the ratio to the SM's maximum, and what caps it."""

    arch: int
    active_blocks: int
    active_warps: int
    max_warps: int
    ratio: float
    limiter: str  # "registers", "shared_memory", "warps", "blocks", "unlaunchable", or
    # "registers+shared_memory" when both allow the same number of blocks and nothing less
    blocks_by: dict[str, int]

    @property
    def limiters(self) -> tuple[str, ...]:
        """Each resource that caps the blocks per SM (two when registers and shared memory
        cap them equally)."""
        return tuple(self.limiter.split(LIMITER_JOIN))


def limits_for(arch: int) -> SmLimits:
    """Limits of ``arch`` (e.g. 90 for sm_90a); unknown ones take the closest older entry."""
    known = [a for a in sorted(LIMITS) if a <= arch]
    return LIMITS[known[-1] if known else min(LIMITS)]


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def occupancy(arch: int, threads_per_block: int, registers_per_thread: int,
              shared_bytes_per_block: int = 0) -> Occupancy:
    """Theoretical occupancy of a kernel on one SM of compute capability ``arch``.

    Registers are allocated per warp in units of 256 and split over four SM sub-partitions;
    shared memory per block includes the 1 KiB the driver reserves on sm_80 and newer and is
    rounded to the allocation unit. On a tie the hardware's own caps (warps, blocks) are
    named, since a register or shared-memory cut would not raise occupancy then; registers
    and shared memory that cap the blocks alike are both named (``registers+shared_memory``),
    since cutting one alone would not raise it either.
    """
    lim = limits_for(arch)
    warps_per_block = max(1, -(-threads_per_block // 32))
    by = {"warps": lim.max_warps // warps_per_block, "blocks": lim.max_blocks}
    if registers_per_thread > 0:
        regs_per_warp = _round_up(registers_per_thread * 32, lim.register_unit)
        warps_per_partition = lim.registers // lim.sub_partitions // regs_per_warp
        by["registers"] = warps_per_partition * lim.sub_partitions // warps_per_block
    else:
        by["registers"] = by["blocks"]
    shared = _round_up(shared_bytes_per_block + lim.reserved_shared_per_block, lim.shared_unit)
    by["shared_memory"] = lim.shared_bytes // shared if shared else by["blocks"]
    unlaunchable = (threads_per_block > lim.max_threads_per_block
                    or registers_per_thread > lim.max_registers_per_thread
                    or shared_bytes_per_block > lim.max_shared_per_block)
    order = ("warps", "blocks", "registers", "shared_memory")
    limiter = min(order, key=lambda k: (by[k], order.index(k)))
    blocks = 0 if unlaunchable else by[limiter]
    if limiter == "registers" and by["shared_memory"] == by["registers"]:
        limiter = LIMITER_JOIN.join(("registers", "shared_memory"))
    warps = blocks * warps_per_block
    return Occupancy(arch=arch, active_blocks=blocks, active_warps=warps,
                     max_warps=lim.max_warps, ratio=warps / lim.max_warps,
                     limiter="unlaunchable" if unlaunchable else limiter, blocks_by=by)
