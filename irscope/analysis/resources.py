"""A kernel's resources (registers, spills, stack, shared memory, occupancy) from tool reports.

Pure functions over text and parsed data: ``parse_ptxas_log`` reads `ptxas -v`, and
``kernel_resources`` joins a parsed SASS module, `cuobjdump -res-usage` figures, ptxas's
figures and the compiler's launch metadata into one entry per kernel. Spills are ptxas's:
local memory also holds arrays a kernel declares (sin/cos range reduction keeps one), so the
STL/LDL bytes in the SASS are reported as local traffic, never as spills.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from irscope.parsers.sass import local_traffic

from .occupancy import occupancy

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


def kernel_resources(sass_module, res_usage: Mapping[str, Mapping[str, int]],
                     ptxas: Mapping[str, Mapping[str, int]],
                     metadata: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """One entry per kernel of ``sass_module`` (a parsed SassModule): arch, registers,
    spill_store_bytes and spill_load_bytes (ptxas's, absent without a PTX),
    stack_frame_bytes, local_bytes, local_store_bytes and local_load_bytes (STL/LDL bytes
    in the SASS), shared_static_bytes (the cubin's), shared_dynamic_bytes (Triton metadata
    "shared", asked for at launch), shared_bytes (both: what a block takes),
    threads_per_block, occupancy and occupancy_limiter.

    ``res_usage`` is `cuobjdump -res-usage` parsed, ``ptxas`` is ``parse_ptxas_log``'s,
    ``metadata`` the compiler's (num_warps, shared). Figures no source gives are left out.
    """
    dynamic_shared = int(metadata.get("shared") or 0)
    num_warps = metadata.get("num_warps")
    entries = {}
    for kernel in sass_module.kernels:
        cubin = {**kernel.resources, **res_usage.get(kernel.name, {})}
        assembled = ptxas.get(kernel.name, {})
        entry: dict[str, Any] = {"arch": sass_module.arch}
        registers = cubin.get("registers", assembled.get("registers"))
        if registers is not None:
            entry["registers"] = registers
        if "spill_store_bytes" in assembled:
            entry["spill_store_bytes"] = assembled["spill_store_bytes"]
            entry["spill_load_bytes"] = assembled["spill_load_bytes"]
        frame = assembled.get("stack_frame_bytes", cubin.get("stack_bytes"))
        if frame is not None:
            entry["stack_frame_bytes"] = frame
        for key in ("local_bytes", "const_bytes"):
            if key in cubin:
                entry[key] = cubin[key]
        entry.update(local_traffic(kernel.histogram))  # local_store_bytes, local_load_bytes
        static_shared = int(cubin.get("shared_bytes", assembled.get("shared_bytes", 0)))
        entry.update(shared_static_bytes=static_shared, shared_dynamic_bytes=dynamic_shared,
                     shared_bytes=static_shared + dynamic_shared)
        threads = kernel.resources.get("threads_per_block") or (
            int(num_warps) * 32 if num_warps else None)
        if threads:
            entry["threads_per_block"] = threads
        if sass_module.arch and threads and registers is not None:
            card = occupancy(sass_module.arch, threads, registers, entry["shared_bytes"])
            entry.update(occupancy=round(card.ratio, 4), occupancy_limiter=card.limiter)
        entry.update(_read_today(entry))
        entries[kernel.name] = entry
    return entries


def _read_today(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The same figures under the names older readers of resources use."""
    legacy = {"dynamic_shared_bytes": entry["shared_dynamic_bytes"]}
    if "spill_store_bytes" in entry:
        legacy.update(spill_stores=entry["spill_store_bytes"],
                      spill_loads=entry["spill_load_bytes"])
    return legacy
