"""Inductor's launch grid for one compile of a kernel: ceil(element count / block size) on each
axis, from the counts a ``<kernel>.run(...)`` line of the output code passes and the block
sizes the compile was made with; a profiled launch's grid then says which compile ran."""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Mapping
from typing import Any

# each grid axis, the parameter passing its element count, the constexpr of its block size
AXES = (("x", "xnumel", "XBLOCK"), ("y", "ynumel", "YBLOCK"), ("z", "znumel", "ZBLOCK"))
# the grids Inductor launches one program per block of each axis with
BLOCK_GRIDS = ("Grid1D", "Grid2D", "Grid3D")
# "    inductor_meta={'grid_type': 'Grid1D', ..."
GRID_TYPE_RE = re.compile(r"'grid_type': '(\w+)'")
# "def triton_poi_fused_add_0(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):"
KERNEL_DEF_RE = re.compile(r"^def \w+\(([^)]*)\)", re.M)


def block_grid(source: str) -> bool:
    """Whether a kernel's source (its definition in the output code) says Inductor launches
    it on one program per block of each axis (``'grid_type': 'Grid1D'``, 2D, 3D)."""
    found = GRID_TYPE_RE.search(source)
    return found is not None and found.group(1) in BLOCK_GRIDS


def run_args(line: str, name: str) -> list[str]:
    """The positional arguments of ``name.run(...)`` on ``line``, as written."""
    start = line.find(f"{name}.run(")
    if start < 0:
        return []
    try:
        call = ast.parse(line[start:].strip()).body[0].value
    except (SyntaxError, IndexError, AttributeError, ValueError, RecursionError):
        return []
    return [ast.unparse(arg) for arg in getattr(call, "args", ())]


def passed_arguments(source: str, line: str, name: str) -> dict[str, str]:
    """Parameter -> the argument ``name.run(...)`` on ``line`` passes it, by the kernel's
    ``def`` in ``source`` (its constexprs are not passed)."""
    header = KERNEL_DEF_RE.search(source)
    if header is None:
        return {}
    params = [p.split(":")[0].strip() for p in header.group(1).split(",")
              if p.strip() and "constexpr" not in p]
    return dict(zip(params, run_args(line, name)))


def element_counts(passed: Mapping[str, str]) -> dict[str, int] | None:
    """Grid axis -> the element count a launch passes for it (``xnumel``...); None when one
    is not a number written out (a size the code computes)."""
    counts = {}
    for axis, numel, _ in AXES:
        if numel in passed:
            if not passed[numel].isdigit():
                return None
            counts[axis] = int(passed[numel])
    return counts


def block_sizes(constexprs: Any, strides: Mapping[str, int] = {}) -> dict[str, int]:
    """Grid axis -> the block size of a compile: its constexprs' (``XBLOCK``...), else what
    its PTX shows each program moves on (``parsers.ptx.program_strides``)."""
    found = dict(strides)
    if isinstance(constexprs, Mapping):
        for axis, _, block in AXES:
            size = constexprs.get(block)
            if isinstance(size, int) and not isinstance(size, bool) and size > 0:
                found[axis] = size
    return found


def launch_grid(counts: Mapping[str, int], blocks: Mapping[str, int]
                ) -> tuple[int, int, int] | None:
    """The programs launched on each axis: ceil(count / block), 1 on an axis the kernel takes
    no count for; None where a counted axis's block is unknown."""
    grid = []
    for axis, _, _ in AXES:
        if axis not in counts:
            grid.append(1)
        elif blocks.get(axis, 0) <= 0:
            return None
        else:
            grid.append(math.ceil(counts[axis] / blocks[axis]))
    return grid[0], grid[1], grid[2]
