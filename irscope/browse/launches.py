"""The kernels an Inductor output code defines and launches, the lines that do it, and
which of the run's units each kernel is."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from irscope.store import Unit

# "# kernel path: /tmp/torchinductor_u/co/ccote6phhmgvcpx7d5uuyiyw6hddfnnhyf57p6fl5ni4nqfa4uem.py"
KERNEL_PATH_RE = re.compile(r"^\s*#\s*kernel path:\s*(\S+)")
# "triton_poi_fused_gelu_0 = async_compile.triton('triton_poi_fused_gelu_0', '''"
KERNEL_DEF_RE = re.compile(r"^(\w+)\s*=\s*async_compile\.\w+\(\s*['\"](\w+)['\"]")
# "            triton_poi_fused_gelu_0.run(buf1, 4096, stream=stream0)"
KERNEL_RUN_RE = re.compile(r"\b(\w+)\.run\(")


@dataclass(frozen=True)
class OutputKernel:
    """A kernel an output code defines: its module path, where its source sits (0-based
    lines, end exclusive) and the lines that launch it."""

    name: str
    path: str | None
    first: int
    end: int
    runs: tuple[int, ...] = ()


def output_code_kernels(lines: Sequence[str]) -> dict[str, OutputKernel]:
    """The kernels of an Inductor output code by variable name, as its text lays them out."""
    found: dict[str, dict[str, Any]] = {}
    path = None
    current = None
    for number, line in enumerate(lines):
        if m := KERNEL_PATH_RE.match(line):
            path = m.group(1)
        elif m := KERNEL_DEF_RE.match(line):
            current = found[m.group(1)] = {"path": path, "first": number, "end": number + 1,
                                           "runs": []}
            path = None
        elif current is not None and line.startswith("'''"):  # "''', device_str=..."
            current["end"] = number + 1
            current = None
        if ".run(" in line:
            for m in KERNEL_RUN_RE.finditer(line):
                if m.group(1) in found:
                    found[m.group(1)]["runs"].append(number)
    return {name: OutputKernel(name, k["path"], k["first"], k["end"], tuple(k["runs"]))
            for name, k in found.items()}


def kernel_at(kernels: Mapping[str, OutputKernel], lines: Sequence[str],
              line: int) -> OutputKernel | None:
    """The kernel the cursor line of an output code is about: the one it launches or names,
    else the one whose source the line sits in."""
    text = lines[line] if 0 <= line < len(lines) else ""
    for m in KERNEL_RUN_RE.finditer(text):
        if m.group(1) in kernels:
            return kernels[m.group(1)]
    for word in re.findall(r"\w+", text):
        if word in kernels:
            return kernels[word]
    return next((k for k in kernels.values() if k.first <= line < k.end), None)


def base_name(unit_name: str) -> str:
    """A kernel unit's name without the hash suffix of a second compile: "x_0-94bbd7fb" -> "x_0"."""
    head, _, tail = unit_name.rpartition("-")
    return head if head and re.fullmatch(r"[0-9a-f]{6,}", tail) else unit_name


def launched_unit(kernel: OutputKernel, candidates: Sequence[Unit]) -> Unit | None:
    """The unit among ``candidates`` (those the graph launches, first) that is ``kernel``:
    same module file, else same name."""
    if kernel.path:
        for unit in candidates:
            if unit.source_file and os.path.basename(unit.source_file) == os.path.basename(
                    kernel.path) and base_name(unit.name) == kernel.name:
                return unit
        for unit in candidates:
            if unit.source_file and os.path.basename(unit.source_file) == os.path.basename(
                    kernel.path):
                return unit
    return next((u for u in candidates if base_name(u.name) == kernel.name), None)


def launch_line(kernels: Mapping[str, OutputKernel], unit: Unit) -> int | None:
    """The output-code line launching ``unit`` (else defining it), 0-based."""
    for kernel in kernels.values():
        same_file = (kernel.path and unit.source_file and os.path.basename(kernel.path)
                     == os.path.basename(unit.source_file))
        if same_file or (not kernel.path and kernel.name == base_name(unit.name)):
            return kernel.runs[0] if kernel.runs else kernel.first
    return None
