"""Loose artifact files (.ptx, .cubin, .ttir, .ttgir, .llir/.ll, .mlir, HLO, jaxpr...), by content.

Files are named by their stem, so ``k.ttir`` and ``k.ptx`` side by side become one unit
``k`` with two stages. Binary files must be cubins (CUDA ELF); other bytes are refused.
"""

from __future__ import annotations

import struct
from pathlib import Path

from irscope.store import Writer

from . import triton_cache

ELF_MAGIC = b"\x7fELF"
EM_CUDA = 190
# Framework a loose file belongs to, by its detected kind; the rest are plain "file" units.
FRAMEWORKS = {"ttir": "triton", "ttgir": "triton", "jaxpr": "jax", "stablehlo": "jax",
              "hlo_before_opt": "jax", "hlo_after_opt": "jax", "fx_graph": "torch",
              "inductor_output_code": "torch", "cpp_kernel": "cpp"}


def cubin_problem(data: bytes) -> str | None:
    """Why ``data`` is not a usable cubin, or None when it is one."""
    if len(data) < 64 or data[:4] != ELF_MAGIC:
        return "not an ELF file"
    little = data[5] == 1
    is64 = data[4] == 2
    fmt = "<" if little else ">"
    machine = struct.unpack_from(fmt + "H", data, 18)[0]
    if machine != EM_CUDA:
        return "an ELF binary that is not a CUDA cubin"
    if is64:
        shoff, = struct.unpack_from(fmt + "Q", data, 40)
        shentsize, shnum = struct.unpack_from(fmt + "HH", data, 58)
    else:
        shoff, = struct.unpack_from(fmt + "I", data, 32)
        shentsize, shnum = struct.unpack_from(fmt + "HH", data, 46)
    if shoff + shentsize * shnum > len(data):
        return "truncated cubin (section table runs past the end of the file)"
    return None


def ingest_file(writer: Writer, path: Path, report) -> int:
    """File one loose artifact; returns 1 when stored, 0 when skipped (with the reason)."""
    from irscope.parsers import registry

    try:
        data = path.read_bytes()
    except OSError as exc:
        report.skipped.append((str(path), f"unreadable ({exc.strerror or exc})"))
        return 0
    if data[:4] == ELF_MAGIC:
        problem = cubin_problem(data)
        if problem:
            report.skipped.append((str(path), problem))
            return 0
        unit = writer.add_unit(path.stem, "file", attrs={"origin": str(path)})
        triton_cache.file_cubin(writer, unit, data, str(path))
        report.sources.append((str(path), "cubin"))
        return 1
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        report.skipped.append((str(path), "binary data that is neither text nor a cubin"))
        return 0
    if "\0" in text[:4096]:
        report.skipped.append((str(path), "binary data that is neither text nor a cubin"))
        return 0
    kind = "cpp_kernel" if path.suffix == ".cpp" else registry.detect(text, path.name)
    unit = writer.add_unit(path.stem, FRAMEWORKS.get(kind, "file"), attrs={"origin": str(path)})
    writer.add_stage(unit, kind, data, name=kind, origin=str(path))
    problems = [d for d in registry.parse(kind, text).diagnostics
                if getattr(d, "severity", "") == "error"] if kind != "text" else []
    if problems:
        first = problems[0]
        where = f"line {first.line}: " if first.line else ""
        report.warnings.append(f"{path}: {where}{first.message}"
                               + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
    report.sources.append((str(path), kind))
    return 1
