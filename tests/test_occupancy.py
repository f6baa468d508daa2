"""Theoretical occupancy against cases worked by hand with the CUDA occupancy calculator rules."""

from __future__ import annotations

import pytest

from irscope.analysis.occupancy import LIMITS, limits_for, occupancy


@pytest.mark.parametrize("arch, threads, regs, smem, blocks, warps, limiter", [
    # 4 warps; 32 regs -> 1024/warp, 16 warps per sub-partition -> 64 warps = 16 blocks = warps cap
    (80, 128, 32, 0, 16, 64, "warps"),
    # 255 regs -> 8192/warp, 2 warps per sub-partition -> 8 warps -> 2 blocks of 4 warps
    (90, 128, 255, 17408, 2, 8, "registers"),
    # 8 warps, 64 regs -> 4 blocks by registers; (48 KiB + 1 KiB) -> 2 blocks in 100 KiB
    (86, 256, 64, 48 * 1024, 2, 16, "shared_memory"),
    # 32 threads: 1 warp per block; the 32-block cap binds before 64 warps
    (80, 32, 16, 0, 32, 32, "blocks"),
    # sm_75: 32 warps per SM; 1024 threads = 32 warps -> 1 block
    (75, 1024, 32, 0, 1, 32, "warps"),
    # sm_70, no reserved shared: 96 KiB / 40 KiB (rounded to 256) -> 2 blocks
    (70, 256, 32, 40 * 1024, 2, 16, "shared_memory"),
    # 72 regs -> 2304/warp, 16384 // 2304 = 7 warps per sub-partition -> 28 warps -> 3 blocks of 8
    (90, 256, 72, 0, 3, 24, "registers"),
])
def test_hand_worked_cases(arch, threads, regs, smem, blocks, warps, limiter):
    card = occupancy(arch, threads, regs, smem)
    assert (card.active_blocks, card.active_warps, card.limiter) == (blocks, warps, limiter)
    assert card.ratio == warps / LIMITS[arch].max_warps


def test_unlaunchable_configurations():
    assert occupancy(80, 2048, 32, 0).limiter == "unlaunchable"
    assert occupancy(80, 128, 32, 200 * 1024).active_blocks == 0


def test_every_listed_architecture_and_newer_ones():
    for arch in (70, 75, 80, 86, 89, 90, 100, 120):
        assert 0 < occupancy(arch, 128, 32, 0).ratio <= 1
    assert limits_for(121) is LIMITS[120] and limits_for(103) is LIMITS[100]
