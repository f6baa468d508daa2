"""A profiler's GPU activities as a run keeps them: compact columns, grouped into signatures.

A trace of 100,000 launches is kept as one JSON document of columns (one list per field, names
and launch contexts written once and referred to by number), which the blob store compresses:
the 2,070 GPU events of a 12-layer GPT-2 step fit in tens of kilobytes. Reading it back gives a
``LaunchTable``; ``signatures`` folds its launches into one row per distinct (kernel, launch
context, grid, block, resources), so that joining a trace to a run costs one look-up per
distinct launch, not one per launch.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from irscope.parsers._profile import CpuContext

FORMAT = "irscope.launches/1"
KINDS = ("kernel", "memcpy", "memset")
# CpuContext's fields, in order: what launched each GPU activity
CONTEXT_FIELDS = ("thread", "launcher", "stack", "python_stack", "graph_key", "launch_index",
                  "compile_id", "phase", "annotation", "step")
COLUMNS = ("kind", "name", "device", "stream", "start", "duration", "correlation", "grid",
           "block", "registers", "shared", "bytes", "hlo_module", "hlo_op", "program_id",
           "graph_node", "context")


def held_by(context: CpuContext) -> str | None:
    """The range directly inside the graph call that launched this: the Inductor kernel's own
    range, or the aten op of an extern call."""
    if context.graph_key is None:
        return None
    call = f"## Call CompiledFxGraph {context.graph_key} ##"
    if call in context.stack:
        index = context.stack.index(call)
        return context.stack[index - 1] if index > 0 else None
    return None


@dataclass(frozen=True)
class Signature:
    """Launches alike in every field but their times: one kernel, from one place, one shape.

    ``total_ns``/``min_ns``/``max_ns`` over its ``launches``; ``first_ns`` the earliest start.
    """

    kind: str
    name: str
    device: int
    grid: tuple[int, ...] | None
    block: tuple[int, ...] | None
    registers: int | None
    shared: int | None
    bytes: int | None
    hlo_module: str | None
    hlo_op: str | None
    program_id: int | None
    graph_node: int | None
    context: CpuContext | None
    launches: int = 0
    total_ns: int = 0
    min_ns: int = 0
    max_ns: int = 0
    first_ns: int = 0


@dataclass(frozen=True)
class LaunchTable:
    """One profiler trace's GPU activities in columns, with the trace's own facts."""

    profiler: str = ""
    file_format: str = ""
    devices: tuple[Mapping[str, Any], ...] = ()
    window_start_ns: int | None = None
    window_end_ns: int | None = None
    kernel_time_ns: int = 0
    details: Mapping[str, str] = field(default_factory=dict)
    names: tuple[str, ...] = ()
    dims: tuple[tuple[int, ...], ...] = ()
    contexts: tuple[CpuContext, ...] = ()
    columns: Mapping[str, Sequence[Any]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.columns.get("kind", ()))

    def device_name(self, device: int) -> str | None:
        for info in self.devices:
            if info.get("id") == device:
                return info.get("name") or None
        return self.devices[0].get("name") or None if len(self.devices) == 1 else None


def encode_trace(trace: Any) -> bytes:
    """A ``parsers._profile.ProfileTrace`` as the compact JSON document a run keeps."""
    names: dict[str, int] = {}
    dims: dict[tuple[int, ...], int] = {}
    contexts: dict[int, int] = {}  # id of an interned CpuContext -> its place
    context_rows: list[list] = []
    columns: dict[str, list] = {name: [] for name in COLUMNS}

    def number(table: dict, value) -> int:
        if value is None:
            return -1
        found = table.get(value)
        if found is None:
            found = table[value] = len(table)
        return found

    def context(cpu) -> int:
        if cpu is None:
            return -1
        found = contexts.get(id(cpu))
        if found is None:
            found = contexts[id(cpu)] = len(context_rows)
            context_rows.append([getattr(cpu, f) for f in CONTEXT_FIELDS])
        return found

    events = sorted((*trace.kernels, *trace.memory_ops), key=lambda e: e.start_ns)
    for event in events:
        put = columns
        put["kind"].append(KINDS.index(event.kind) if event.kind in KINDS else 0)
        put["name"].append(number(names, event.name))
        put["device"].append(event.device)
        put["stream"].append(event.stream)
        put["start"].append(event.start_ns)
        put["duration"].append(event.duration_ns)
        put["correlation"].append(event.correlation)
        put["grid"].append(number(dims, event.grid))
        put["block"].append(number(dims, event.block))
        put["registers"].append(event.registers)
        put["shared"].append(event.shared_memory)
        put["bytes"].append(event.bytes)
        put["hlo_module"].append(number(names, event.hlo_module))
        put["hlo_op"].append(number(names, event.hlo_op))
        put["program_id"].append(event.program_id)
        put["graph_node"].append(event.graph_node)
        put["context"].append(context(event.cpu))
    devices = [{"id": d.id, "name": d.name, "sm_count": d.sm_count,
                "compute_capability": d.compute_capability, "memory_bytes": d.memory_bytes}
               for d in trace.devices]
    doc = {"format": FORMAT, "profiler": trace.profiler, "file_format": trace.file_format,
           "devices": devices, "window": [trace.window_start_ns, trace.window_end_ns],
           "kernel_time_ns": trace.kernel_time_ns, "details": dict(trace.details),
           "names": list(names), "dims": [list(d) for d in dims],
           "contexts": context_rows, "columns": columns}
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def decode_table(data: bytes) -> LaunchTable:
    """The table ``encode_trace`` wrote; ValueError for a document of another shape (a damaged
    or crafted run), never a table that lies."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"not a launch table: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError("not a launch table (format "
                         f"{doc.get('format') if isinstance(doc, dict) else None!r})")
    names = _strings(doc.get("names"))
    dims = tuple(tuple(_ints(d)) for d in _list(doc.get("dims")))
    contexts = tuple(_context(row) for row in _list(doc.get("contexts")))
    raw = doc.get("columns")
    if not isinstance(raw, dict):
        raise ValueError("launch table without columns")
    columns = {name: _list(raw.get(name)) for name in COLUMNS}
    count = len(columns["kind"])
    if any(len(values) != count for values in columns.values()):
        raise ValueError("launch table columns of different lengths")
    _check_refs(columns, len(names), len(dims), len(contexts))
    window = _list(doc.get("window")) or [None, None]
    devices = tuple(d for d in _list(doc.get("devices")) if isinstance(d, dict))
    details = doc.get("details") if isinstance(doc.get("details"), dict) else {}
    return LaunchTable(str(doc.get("profiler") or ""), str(doc.get("file_format") or ""),
                       devices, _int_or_none(window[0]), _int_or_none(window[-1]),
                       _int_or_none(doc.get("kernel_time_ns")) or 0,
                       {str(k): str(v) for k, v in details.items()},
                       names, dims, contexts, columns)


def signatures(table: LaunchTable) -> list[Signature]:
    """The table's launches folded into one row per distinct launch, in order of first start."""
    c = table.columns
    names, dims, contexts = table.names, table.dims, table.contexts
    found: dict[tuple, list[int]] = {}
    keys = zip(c["kind"], c["name"], c["device"], c["grid"], c["block"], c["registers"],
               c["shared"], c["bytes"], c["hlo_module"], c["hlo_op"], c["program_id"],
               c["graph_node"], c["context"])
    for key, start, duration in zip(keys, c["start"], c["duration"]):
        row = found.get(key)
        if row is None:
            found[key] = [1, duration, duration, duration, start]
        else:
            row[0] += 1
            row[1] += duration
            if duration < row[2]:
                row[2] = duration
            if duration > row[3]:
                row[3] = duration
    rows = []
    for key, (count, total, low, high, first) in found.items():
        (kind, name, device, grid, block, registers, shared, size, module, op, program,
         node, context) = key
        rows.append(Signature(
            KINDS[kind] if 0 <= kind < len(KINDS) else KINDS[0], names[name], device,
            dims[grid] if grid >= 0 else None, dims[block] if block >= 0 else None,
            registers, shared, size, names[module] if module >= 0 else None,
            names[op] if op >= 0 else None, program, node,
            contexts[context] if context >= 0 else None, count, total, low, high, first))
    rows.sort(key=lambda s: s.first_ns)
    return rows


# -- checking what a run holds ----------------------------------------------------------------
def _list(value: Any) -> list:
    if not isinstance(value, list):
        raise ValueError("launch table field is not a list")
    return value


def _strings(value: Any) -> tuple[str, ...]:
    items = _list(value)
    if not all(isinstance(v, str) for v in items):
        raise ValueError("launch table names are not all text")
    return tuple(items)


def _ints(value: Any) -> list[int]:
    items = _list(value)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in items):
        raise ValueError("launch table dimensions are not all numbers")
    return items


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _context(row: Any) -> CpuContext:
    row = _list(row)
    if len(row) != len(CONTEXT_FIELDS):
        raise ValueError("launch context of another shape")
    thread, launcher, stack, python_stack, *rest = row
    return CpuContext(_int_or_none(thread) or 0, str(launcher or ""), _strings(stack),
                   _strings(python_stack), _text_or_none(rest[0]), _int_or_none(rest[1]),
                   _text_or_none(rest[2]), _text_or_none(rest[3]), _text_or_none(rest[4]),
                   _int_or_none(rest[5]))


NULLABLE_NUMBERS = ("correlation", "registers", "shared", "bytes", "program_id", "graph_node")


def _check_refs(columns: Mapping[str, list], names: int, dims: int, contexts: int) -> None:
    """Every reference in range and every number a number, so a reader can index blindly."""
    def numbers(values: Iterable, low: int, high: int, nullable: bool = False) -> bool:
        return all((v is None and nullable) or (isinstance(v, int) and not isinstance(v, bool)
                                               and low <= v < high) for v in values)

    big = 1 << 63
    checks = [numbers(columns["kind"], 0, len(KINDS)),
              numbers(columns["name"], 0, names), numbers(columns["hlo_module"], -1, names),
              numbers(columns["hlo_op"], -1, names), numbers(columns["grid"], -1, dims),
              numbers(columns["block"], -1, dims), numbers(columns["context"], -1, contexts),
              numbers(columns["device"], -big, big), numbers(columns["stream"], -big, big),
              numbers(columns["start"], -big, big), numbers(columns["duration"], 0, big)]
    checks += [numbers(columns[name], -big, big, nullable=True) for name in NULLABLE_NUMBERS]
    if not all(checks):
        raise ValueError("launch table holds a reference or number out of range")
