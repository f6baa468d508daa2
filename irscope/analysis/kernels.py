"""One typed record per compiled GPU kernel, from the tool reports to every screen.

A kernel's resources come from its tools: `ptxas -v` (registers, spills, stack frame, static
shared memory), `cuobjdump -res-usage` and the SASS (registers, stack, local and constant
memory, STL/LDL bytes, threads per block), and the compiler's launch metadata (num_warps,
the dynamic shared memory asked for at launch). ``kernel_records`` joins them into a
``KernelRecord`` per kernel when a cubin is filed; the run keeps ``to_entry()``'s dict, and
``KernelRecord.from_entry`` reads it back — the one place that knows the names older runs
stored. Occupancy is computed in the record and nowhere else, from what the record holds, so
dynamic shared memory arriving after the cubin (launch metadata filed later) is counted.

Spills are ptxas's: local memory also holds arrays a kernel declares (sin/cos range reduction
keeps one), so the STL/LDL bytes in the SASS are local traffic, never spills.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from .occupancy import Occupancy, occupancy

# ptxas info    : Compiling entry function 'add_kernel' for 'sm_90a'
_ENTRY_RE = re.compile(r"Compiling entry function '([^']+)'")
# ptxas info    : Function properties for add_kernel
_PROPERTIES_RE = re.compile(r"Function properties for (\S+)")
#     1408 bytes stack frame, 3236 bytes spill stores, 2724 bytes spill loads
_FRAME_RE = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
# ptxas info    : Used 168 registers, used 1 barriers, 1024 bytes smem, 384 bytes cmem[0]
_USED_RE = re.compile(r"Used (\d+) registers")
_USED_FIELDS_RE = re.compile(r"(\d+) bytes (smem|cmem\[\d+\]|cumulative stack size)"
                             r"|used (\d+) barriers")


def parse_ptxas_log(text: str) -> dict[str, dict[str, int]]:
    """`ptxas -v` output -> {kernel: {registers, spill_store_bytes, spill_load_bytes,
    stack_frame_bytes, shared_bytes, const_bytes, barriers}}, entry functions only.

    A "Used" line belongs to the entry function being compiled; a stack-frame line to the
    function whose properties it follows (device functions' own frames are left out).
    """
    kernels: dict[str, dict[str, int]] = {}
    entry = described = None
    for line in text.splitlines():
        if (found := _ENTRY_RE.search(line)):
            entry = found.group(1)
            kernels.setdefault(entry, {})
        elif (found := _PROPERTIES_RE.search(line)):
            described = found.group(1)
        elif (found := _FRAME_RE.search(line)):
            if described is not None:
                frame, stores, loads = map(int, found.groups())
                kernels.setdefault(described, {}).update(
                    stack_frame_bytes=frame, spill_store_bytes=stores, spill_load_bytes=loads)
            described = None
        elif entry is not None and (found := _USED_RE.search(line)):
            figures = kernels[entry]
            figures["registers"] = int(found.group(1))
            for size, what, barriers in _USED_FIELDS_RE.findall(line):
                if barriers:
                    figures["barriers"] = int(barriers)
                elif what == "smem":
                    figures["shared_bytes"] = int(size)
                elif what.startswith("cmem"):
                    figures["const_bytes"] = figures.get("const_bytes", 0) + int(size)
    return {name: figures for name, figures in kernels.items() if "registers" in figures}


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value)


def arch_number(value: Any) -> int | None:
    """90 from 90, "90", "sm90", "sm_90a" or Triton's {"arch": 90} target."""
    if isinstance(value, Mapping):
        value = value.get("arch")
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        digits = "".join(ch for ch in value.split("sm")[-1] if ch.isdigit())
        return int(digits) if digits else None
    return None


@dataclass(frozen=True)
class KernelRecord:
    """One compiled GPU kernel's resources; None where no tool reported the figure."""

    name: str
    arch: int | None = None
    registers: int | None = None
    spill_store_bytes: int | None = None  # ptxas's; None when no PTX was assembled
    spill_load_bytes: int | None = None
    stack_frame_bytes: int | None = None
    local_bytes: int | None = None  # local memory per thread the cubin declares
    local_store_bytes: int | None = None  # STL/LDL bytes in the SASS: spills and local arrays
    local_load_bytes: int | None = None
    const_bytes: int | None = None
    barriers: int | None = None
    shared_static_bytes: int = 0  # declared in the cubin
    shared_dynamic_bytes: int = 0  # asked for at launch (Triton's metadata "shared")
    threads_per_block: int | None = None
    occupancy: float | None = None  # theoretical, on ``arch``: computed in ``with_occupancy``
    occupancy_limiter: str | None = None

    @property
    def shared_bytes(self) -> int:
        """Shared memory one block takes: static plus dynamic."""
        return self.shared_static_bytes + self.shared_dynamic_bytes

    @property
    def spill_bytes(self) -> int | None:
        if self.spill_store_bytes is None:
            return None
        return self.spill_store_bytes + (self.spill_load_bytes or 0)

    def occupancy_card(self) -> Occupancy | None:
        """Resident blocks and warps per SM and what limits them, when the arch, threads
        per block and registers are known."""
        if not (self.arch and self.threads_per_block and self.registers is not None):
            return None
        return occupancy(self.arch, self.threads_per_block, self.registers, self.shared_bytes)

    def with_occupancy(self) -> KernelRecord:
        """The record with its theoretical occupancy and what limits it."""
        card = self.occupancy_card()
        if card is None:
            return replace(self, occupancy=None, occupancy_limiter=None)
        return replace(self, occupancy=round(card.ratio, 4), occupancy_limiter=card.limiter)

    def to_entry(self) -> dict[str, Any]:
        """What a run keeps of the record (figures no tool gave are left out)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name != "name" and getattr(self, f.name) is not None}

    @classmethod
    def from_entry(cls, name: str, entry: Mapping[str, Any],
                   metadata: Mapping[str, Any] = {}) -> KernelRecord:
        """A record from a kept entry and its unit's launch metadata (num_warps, shared,
        target). Launch metadata wins for the dynamic shared memory and the threads per
        block, so a record filed before its metadata arrived reads the same as one filed
        after. Entries of older runs are read here: STL/LDL counts kept under ``spill_*``
        (before spills came from ptxas) stay local traffic, ``shared_bytes`` was the static
        part, ``stack_bytes`` the frame and ``dynamic_shared_bytes`` the dynamic part."""
        new_style = "shared_static_bytes" in entry
        static = _int(entry.get("shared_static_bytes" if new_style else "shared_bytes")) or 0
        dynamic = _int(metadata.get("shared"))
        if dynamic is None:
            dynamic = _int(entry.get("shared_dynamic_bytes", entry.get("dynamic_shared_bytes")))
        warps = _int(metadata.get("num_warps"))
        threads = _int(entry.get("threads_per_block")) or (warps * 32 if warps else None)
        local_store = entry.get("local_store_bytes", None if new_style else entry.get("spill_stores"))
        local_load = entry.get("local_load_bytes", None if new_style else entry.get("spill_loads"))
        return cls(
            name=name,
            arch=arch_number(entry.get("arch")) or arch_number(metadata.get("target"))
            or arch_number(metadata.get("arch")),
            registers=_int(entry.get("registers")),
            spill_store_bytes=_int(entry.get("spill_store_bytes")),
            spill_load_bytes=_int(entry.get("spill_load_bytes")),
            stack_frame_bytes=_int(entry.get("stack_frame_bytes", entry.get("stack_bytes"))),
            local_bytes=_int(entry.get("local_bytes")), local_store_bytes=_int(local_store),
            local_load_bytes=_int(local_load), const_bytes=_int(entry.get("const_bytes")),
            barriers=_int(entry.get("barriers")), shared_static_bytes=static,
            shared_dynamic_bytes=dynamic or 0, threads_per_block=threads,
        ).with_occupancy()


def from_ptxas(name: str, figures: Mapping[str, Any],
               metadata: Mapping[str, Any] = {}) -> KernelRecord:
    """A record from `ptxas -v`'s figures alone (``parse_ptxas_log``'s per-kernel dict), for
    a compile whose cubin was not disassembled. Sweeps of older runs kept one flat dict with
    ``static_shared_bytes``, ``stack_bytes``, ``spill_stores`` and ``spill_loads``: there
    ``spill_*`` were ptxas's spills, and are read as such."""
    entry = {"registers": figures.get("registers"),
             "spill_store_bytes": figures.get("spill_store_bytes", figures.get("spill_stores")),
             "spill_load_bytes": figures.get("spill_load_bytes", figures.get("spill_loads")),
             "stack_frame_bytes": figures.get("stack_frame_bytes", figures.get("stack_bytes")),
             "const_bytes": figures.get("const_bytes"), "barriers": figures.get("barriers"),
             "shared_static_bytes": figures.get("shared_bytes",
                                                figures.get("static_shared_bytes", 0))}
    return KernelRecord.from_entry(name, {k: v for k, v in entry.items() if v is not None},
                                   metadata)


def kernel_records(sass_module, res_usage: Mapping[str, Mapping[str, int]],
                   ptxas: Mapping[str, Mapping[str, int]],
                   metadata: Mapping[str, Any]) -> dict[str, KernelRecord]:
    """One record per kernel of ``sass_module`` (a parsed SassModule) from `cuobjdump
    -res-usage` (``res_usage``, parsed), ``parse_ptxas_log``'s figures and the compiler's
    launch ``metadata`` (num_warps, shared). The cubin's figures win over ptxas's where both
    give one; spills are ptxas's alone."""
    from irscope.parsers.sass import local_traffic

    records = {}
    for kernel in sass_module.kernels:
        cubin = {**kernel.resources, **res_usage.get(kernel.name, {})}
        assembled = ptxas.get(kernel.name, {})
        traffic = local_traffic(kernel.histogram)
        entry = {
            "arch": sass_module.arch,
            "registers": cubin.get("registers", assembled.get("registers")),
            "spill_store_bytes": assembled.get("spill_store_bytes"),
            "spill_load_bytes": assembled.get("spill_load_bytes"),
            "stack_frame_bytes": assembled.get("stack_frame_bytes", cubin.get("stack_bytes")),
            "local_bytes": cubin.get("local_bytes"), "const_bytes": cubin.get("const_bytes"),
            "barriers": assembled.get("barriers"),
            "local_store_bytes": traffic.get("local_store_bytes"),
            "local_load_bytes": traffic.get("local_load_bytes"),
            "shared_static_bytes": int(cubin.get("shared_bytes",
                                                 assembled.get("shared_bytes", 0))),
            "threads_per_block": kernel.resources.get("threads_per_block"),
        }
        records[kernel.name] = KernelRecord.from_entry(
            kernel.name, {k: v for k, v in entry.items() if v is not None}, metadata)
    return records


def kernel_entries(records: Mapping[str, KernelRecord]) -> dict[str, dict[str, Any]]:
    """The records as a run keeps them: {kernel: entry}."""
    return {name: record.to_entry() for name, record in records.items()}
