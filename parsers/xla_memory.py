"""XLA buffer-assignment and memory-usage reports: allocations, their roles and total bytes."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping

from .base import Diagnostic, ParseResult, sorted_histogram

VERSION = 1

# allocation 2: size 8192, output shape is |f32[32,64]|, maybe-live-out:
ALLOCATION_RE = re.compile(r"^allocation (\d+): size (\d+)(.*?):?\s*$")
# " value: <15 ynn_fusion @0> (size=8192,offset=0): f32[32,64]{1,0}"
VALUE_RE = re.compile(r"^\s+value: <\d+ ([^ >]+)")
# Total bytes used: 98304 (96.0KiB)      Total bytes: 98868 (96.6KiB)
TOTAL_RE = re.compile(r"^Total bytes(?: used)?:\s*(\d+)")
# "Peak buffer usage: 1234 bytes" and the like, in dumps that carry a peak figure
PEAK_RE = re.compile(r"\bpeak\b[^:]*:\s*(\d+)", re.IGNORECASE)
# "    16.0KiB( 98%);    16.0KiB;            0;                5; f32[32,2], 2×f32[32,128]"
USAGE_ROW_RE = re.compile(r"^\s*[\d.]+\w*\(\s*\d+%\);\s*(\d+(?:\.\d+)?)(\w*);\s*(\d+);\s*(\d+);")
# the role after "size N": ", parameter 1, shape |...|"  ", output shape is |...|"  ", thread-local"
ROLE_RE = re.compile(r",\s*([a-z][a-z\- ]*?)(?= \d| shape|,|:|$)")
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "": 1}


@dataclass(frozen=True)
class Allocation:
    """One buffer allocation: index, bytes, role (parameter, output, temp...) and its values."""

    index: int
    size: int
    role: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class MemorySummary(ParseResult):
    """Allocations and byte totals from a buffer-assignment or memory-usage report."""

    total_bytes: int = 0
    peak_bytes: int | None = None
    allocations: tuple[Allocation, ...] = ()
    bytes_by_role: Mapping[str, int] = field(default_factory=dict)


def sniff(text: str) -> float:
    head = text[:4096].lstrip()
    if head.startswith(("BufferAssignment:", "allocation 0: size ")):
        return 0.95
    if "cumulative_size;" in head and "Total bytes" in head:
        return 0.9
    return 0.0


def detect_kind(text: str) -> str:
    """memory_usage for a memory-usage report, buffer_assignment otherwise."""
    head = text[:4096].lstrip()
    if "cumulative_size;" in head and not head.startswith(("BufferAssignment:", "allocation 0:")):
        return "memory_usage"
    return "buffer_assignment"


def _role(attributes: str) -> str:
    """`, parameter 1, shape |f32[64]| at ...` -> parameter; `, output shape is ...` -> output."""
    match = ROLE_RE.match(attributes)
    if not match:
        return "temp"
    role = match.group(1)
    return "parameter" if role.endswith("parameter") else role


def parse_summary(text: str) -> MemorySummary:
    """Parse either report; usable from the HLO parser when a dump has both."""
    diagnostics: list[Diagnostic] = []
    allocations: list[Allocation] = []
    current: tuple[int, int, str] | None = None
    values: list[str] = []
    usage_bytes = usage_rows = 0
    total = peak = None
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("allocation "):
            allocation = ALLOCATION_RE.match(line)
            if not allocation:
                diagnostics.append(Diagnostic(number, "unreadable allocation line"))
                continue
            if current:
                allocations.append(Allocation(*current, tuple(values)))
            current = (int(allocation.group(1)), int(allocation.group(2)),
                       _role(allocation.group(3)))
            values = []
        elif line.startswith(" value: <"):
            value = VALUE_RE.match(line)
            if value and current:
                values.append(value.group(1))
        elif "%);" in line:
            row = USAGE_ROW_RE.match(line)
            if row:
                usage_rows += 1
                usage_bytes += int(float(row.group(1)) * UNITS.get(row.group(2), 1))
        elif line.startswith("Total bytes") and total is None:
            match = TOTAL_RE.match(line)
            total = int(match.group(1)) if match else None
        elif peak is None and "eak" in line:
            match = PEAK_RE.search(line)
            peak = int(match.group(1)) if match else None
    if current:
        allocations.append(Allocation(*current, tuple(values)))
    by_role: Counter = Counter()
    for item in allocations:
        by_role[item.role] += item.size
    total_bytes = total if total is not None else sum(by_role.values()) or usage_bytes
    is_usage = not allocations and usage_rows > 0
    if not allocations and total is None and not usage_rows and text.strip():
        diagnostics.append(Diagnostic(0, "no allocation or byte total found"))
    totals = {"total_bytes": total_bytes, "allocations": len(allocations) or usage_rows,
              "values": sum(len(a.values) for a in allocations)}
    if peak is not None:
        totals["peak_bytes"] = peak
    return MemorySummary(
        kind="memory_usage" if is_usage else "buffer_assignment",
        histogram=sorted_histogram(Counter(a.role for a in allocations)), totals=totals,
        diagnostics=tuple(diagnostics), total_bytes=total_bytes,
        peak_bytes=peak, allocations=tuple(allocations),
        bytes_by_role=sorted_histogram(by_role))


parse = parse_summary
