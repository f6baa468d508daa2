"""XLA buffer-assignment and memory-usage reports: allocations, their roles and total bytes."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping

from .base import Diagnostic, ParseResult, sorted_histogram

VERSION = 2
# the totals a result may hold (docs/figures.md: a stage's figures are named after them)
TOTALS = ("total_bytes", "allocations", "values", "peak_bytes")

# allocation 2: size 8192, output shape is |f32[32,64]|, maybe-live-out:
# allocation 0: size 32768, page 0, parameter 1, shape |f32[64,128]| at ShapeIndex {}:
ALLOCATION_RE = re.compile(r"^allocation (\d+): size (\d+)(.*?):?\s*$")
# " value: <15 ynn_fusion @0> (size=8192,offset=0): f32[32,64]{1,0}"
VALUE_RE = re.compile(r"^\s+value: <\d+ ([^ >]+)")
# Total bytes used: 98304 (96.0KiB)      Total bytes: 98868 (96.6KiB)
TOTAL_RE = re.compile(r"^Total bytes(?: used)?:\s*(\d+)")
# "Peak buffer usage: 1234 bytes" and the like, in dumps that carry a peak figure
PEAK_RE = re.compile(r"\bpeak\b[^:]*:\s*(\d+)", re.IGNORECASE)
# "    16.0KiB( 98%);    16.0KiB;            0;                5; f32[32,2], 2×f32[32,128]"
USAGE_ROW_RE = re.compile(r"^\s*[\d.]+\w*\(\s*\d+%\);\s*(\d+(?:\.\d+)?)(\w*);\s*(\d+);\s*(\d+);")
# A shape or shape index in an allocation line, which may hold commas: "|f32[64,128]|",
# "|(f32[2], s32[])|", "{0,1}"
SHAPE_RE = re.compile(r"\|[^|]*\||\{[^}]*\}")
# An attribute after "size N", shapes blanked, read as its words and number: "parameter 1",
# "entry computation parameter 0", "output shape is _", "maybe-live-out", "page 0", "color 1"
ATTRIBUTE_RE = re.compile(r"([a-z][a-z\-]*(?: [a-z][a-z\-]*)*)(?: (\d+))?")
# The roles an allocation line can name, the one that names the allocation first
ROLES = ("parameter", "output", "constant", "thread-local", "preallocated-temp", "maybe-live-out")
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "": 1}


@dataclass(frozen=True)
class Allocation:
    """One buffer allocation: index, bytes, role (parameter, output, temp...) and its values.

    ``role`` is the first of ROLES the line names ("temp" for none); ``roles`` all it names,
    in ROLES order (a parameter aliased to the output is also maybe-live-out); ``parameter``
    the entry parameter's number.
    """

    index: int
    size: int
    role: str
    values: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    parameter: int | None = None


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


def _roles(attributes: str) -> tuple[tuple[str, ...], int | None]:
    """The roles in an allocation line's attributes and its parameter number.

    `, page 0, parameter 1, shape |f32[64]| at ShapeIndex {}` -> (("parameter",), 1);
    `, output shape is |f32[8]|, maybe-live-out` -> (("output", "maybe-live-out"), None).
    Attributes that are no role (page, color, an unknown word) are passed over.
    """
    found: set[str] = set()
    parameter = None
    for attribute in SHAPE_RE.sub("_", attributes).split(","):
        match = ATTRIBUTE_RE.match(attribute.strip())
        if not match:
            continue
        words, number = match.groups()
        if words.endswith("parameter"):  # "parameter 1", "entry computation parameter 1"
            found.add("parameter")
            parameter = int(number) if number is not None else parameter
        elif words.startswith("output"):
            found.add("output")
        elif words in ROLES:
            found.add(words)
    return tuple(role for role in ROLES if role in found), parameter


def parse_summary(text: str) -> MemorySummary:
    """Parse either report; usable from the HLO parser when a dump has both."""
    diagnostics: list[Diagnostic] = []
    allocations: list[Allocation] = []
    current: tuple | None = None
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
                allocations.append(_allocation(current, values))
            roles, parameter = _roles(allocation.group(3))
            current = (int(allocation.group(1)), int(allocation.group(2)),
                       roles[0] if roles else "temp", roles, parameter)
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
        allocations.append(_allocation(current, values))
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


def _allocation(current: tuple, values: list[str]) -> Allocation:
    index, size, role, roles, parameter = current
    return Allocation(index, size, role, tuple(values), roles, parameter)


parse = parse_summary
