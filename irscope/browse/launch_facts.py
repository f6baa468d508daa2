"""How a kernel is launched, as its graph's output code and the profiler record it: the
launch line, each argument with its shape, strides and dtype, the grid, and how often.

The output code names every buffer it passes with the shape, strides and dtype it allocated
it with (``empty_strided_cuda``), a graph input with those it checks (``assert_size_stride``),
a view with those it reinterprets it to; the kernel's ``triton_meta`` signature gives each
parameter's type. The grid is the profiler's where the run measured launches, else it is
worked out from the launch's element counts and the configuration's block sizes.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from irscope.analysis.grids import block_grid, block_sizes, element_counts, launch_grid, run_args
from irscope.browse.launches import output_code_kernels
from irscope.read.view import RunView
from irscope.store import Unit

OUTPUT_CODE = "inductor_output_code"
# "            buf4 = empty_strided_cuda((4, 64, 128), (8192, 128, 1), torch.float32)"
ALLOC_RE = re.compile(r"^\s*(\w+) = empty_strided_\w+\(\(([^)]*)\), \(([^)]*)\), torch\.(\w+)\)")
# "        assert_size_stride(primals_1, (4, 64), (64, 1))"
CHECKED_RE = re.compile(r"assert_size_stride\((\w+), \(([^)]*)\), \(([^)]*)\)")
# "        buf5 = reinterpret_tensor(buf4, (256, 128), (128, 1), 0); del buf4  # reuse"
VIEW_RE = re.compile(r"^\s*(\w+) = reinterpret_tensor\((\w+), \(([^)]*)\), \(([^)]*)\)")
# "triton_meta={'signature': {'in_ptr0': '*fp32', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}, "
SIGNATURE_RE = re.compile(r"'signature': (\{[^{}]*\})")
DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64",
          "int64": "i64", "int32": "i32", "int8": "i8", "uint8": "u8", "bool": "b8",
          "float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2"}


@dataclass(frozen=True)
class Buffer:
    """A tensor the output code passes: its shape, strides and dtype as it made it."""

    shape: str
    stride: str
    dtype: str | None = None

    def text(self) -> str:
        dtype = DTYPES.get(self.dtype or "", self.dtype or "")
        return f"{dtype}[{self.shape.rstrip(', ')}] stride ({self.stride.rstrip(', ')})"


def buffers(lines: list[str]) -> dict[str, Buffer]:
    """Every buffer the output code allocates, checks or reinterprets, by name."""
    found: dict[str, Buffer] = {}
    for line in lines:
        if m := ALLOC_RE.match(line):
            found[m[1]] = Buffer(m[2], m[3], m[4])
        elif m := CHECKED_RE.search(line):
            found.setdefault(m[1], Buffer(m[2], m[3]))
        elif m := VIEW_RE.match(line):
            base = found.get(m[2])
            found[m[1]] = Buffer(m[3], m[4], base.dtype if base else None)
    return found


def kernel_signature(lines: list[str], first: int, end: int) -> dict[str, str]:
    """The kernel's parameters and their types (``'*fp32'``, ``'i32'``, ``'constexpr'``)."""
    for line in lines[first:end]:
        if m := SIGNATURE_RE.search(line):
            try:
                found = ast.literal_eval(m[1])
            except (ValueError, SyntaxError):
                return {}
            return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}
    return {}


def launch_facts(view: RunView, unit: Unit, relations, units: Mapping[int, Unit],
                 roles: Mapping[int, str] = {}, time: Any = None) -> list[tuple[str, str]]:
    """A kernel's launch facts as card rows (see the module docstring): per output code that
    launches it, the line and its arguments; the grid; launches per call and per step.
    ``time``: the run's measured time (irscope.read.timing.read_time), where it has one."""
    rows: list[tuple[str, str]] = []
    grid_from_code: str | None = None
    for relation in relations:
        if relation.dst != unit.id or relation.src not in units:
            continue
        attrs = relation.attrs if isinstance(relation.attrs, Mapping) else {}
        code = next((s for s in view.stages(relation.src) if s.kind == OUTPUT_CODE
                     and s.name == attrs.get("output_code")), None)
        if code is None:
            continue
        lines = view.read_text(code).splitlines()
        kernels = output_code_kernels(lines)
        kernel = next((k for k in kernels.values() if k.path and unit.source_file
                       and k.path.rsplit("/", 1)[-1] == unit.source_file.rsplit("/", 1)[-1]),
                      None) or kernels.get(unit.name.split("-")[0])
        if kernel is None or not kernel.runs:
            continue
        role = roles.get(code.id) or attrs.get("role") or ""
        graph = units[relation.src].name
        where = f"the {role} of {graph}" if role else graph
        per_call = len(kernel.runs)
        rows.append(("launch", f"line {kernel.runs[0] + 1} of {where}, "
                               f"{per_call} per call" if per_call > 1 else
                               f"line {kernel.runs[0] + 1} of {where}"))
        signature = {k: v for k, v in kernel_signature(lines, kernel.first, kernel.end).items()
                     if v != "constexpr"}
        known = buffers(lines)
        args = run_args(lines[kernel.runs[0]], kernel.name)
        for param, arg in zip(signature or [f"arg{i}" for i in range(len(args))], args):
            buffer = known.get(arg)
            rows.append((f"  {param}", f"{arg} {buffer.text()}" if buffer else arg))
        grid_from_code = grid_from_code or worked_out_grid(
            dict(zip(signature, args)), unit, "".join(lines[kernel.first:kernel.end]))
    rows += measured_rows(time, unit, grid_from_code)
    return rows


def worked_out_grid(args: Mapping[str, str], unit: Unit, definition: str) -> str | None:
    """The grid from the launch's element counts over the configuration's block sizes
    (Inductor's Grid1D/2D/3D kernels), where both are known."""
    counts = element_counts(args) if block_grid(definition) else None
    constexprs = unit.attrs.get("constexprs") if isinstance(unit.attrs, Mapping) else None
    grid = launch_grid(counts, block_sizes(constexprs)) if counts else None
    return f"{grid} from the element counts" if grid else None


def measured_rows(time: Any, unit: Unit, grid: str | None) -> list[tuple[str, str]]:
    """The grid and block the profiler recorded, and the launches per profiled step."""
    timed = [k for k in time.kernels if k.unit_id == unit.id and k.kind == "kernel"] \
        if time is not None else []
    rows = []
    grids = sorted({(k.grid, k.block) for k in timed if k.grid})
    if grids:
        rows += [("grid", f"{tuple(g)} × block {tuple(b) if b else '?'} (measured)")
                 for g, b in grids[:3]]
    elif grid:
        rows.append(("grid", grid))
    steps = len([s for s in time.steps if s is not None]) if time is not None else 0
    launches = sum(k.launches for k in timed)
    if launches and steps:
        rows.append(("per step", f"{launches / steps:g} launches (measured over {steps} "
                                 f"steps)"))
    return rows
