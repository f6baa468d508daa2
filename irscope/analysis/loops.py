"""A PTX kernel's hot loop among the loops its parser found, and what one iteration of it
moves and computes per thread (global bytes, tensor-core and FMA instructions)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from irscope.parsers import ptx_ops

if TYPE_CHECKING:
    from irscope.parsers.ptx import PtxLoop, PtxModule


def main_loop(parsed: PtxModule | None) -> PtxLoop | None:
    """The innermost, then largest, loop the PTX parser found: the kernel's hot loop."""
    if parsed is None:
        return None
    loops = [loop for kernel in parsed.kernels for loop in kernel.loops]
    if not loops:
        return None
    return max(loops, key=lambda loop: (loop.depth, sum(loop.histogram.values())))


def loop_estimates(loop: PtxLoop) -> dict[str, int]:
    """Per-thread global bytes and tensor-core ops of one iteration of a parsed PTX loop."""
    return ptx_ops.estimates(loop.histogram)
