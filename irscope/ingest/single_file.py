"""Loose artifact files (.ptx, .cubin, .ttir, .ttgir, .llir/.ll, .mlir, HLO, jaxpr...), by content.

Files are named by their stem, so ``k.ttir`` and ``k.ptx`` side by side become one unit
``k`` with two stages; files of one name in different folders (``sm80/k.ptx``, ``sm90/k.ptx``)
are told apart by the folders that differ (units ``sm80/k`` and ``sm90/k``, see
``unit_names``). Binary files must be cubins (CUDA ELF); other bytes are refused.
"""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path

from irscope.errors import InputError
from irscope.files import read_bytes
from irscope.store import Writer

from . import graphs, triton_cache

TEXT = "text"
SOURCE_KINDS = {".cpp": "cpp_kernel", ".cu": "cuda_source", ".cuh": "cuda_source"}  # by name
ELF_MAGIC = b"\x7fELF"
EM_CUDA = 190
# Framework a loose file belongs to, by its detected kind; the rest are plain "file" units.
FRAMEWORKS = {"ttir": "triton", "ttgir": "triton", "jaxpr": "jax", "stablehlo": "jax",
              "hlo_before_opt": "jax", "hlo_after_opt": "jax", "fx_graph": "torch",
              "inductor_output_code": "torch"}  # loose C++: a kernel only when output code says so


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


def unit_names(paths: list[Path]) -> dict[Path, str]:
    """The unit name of each loose file: its stem, or, where files of one stem and extension
    lie in several folders, the stem behind as many trailing folder names as tell them apart
    (for every file of that stem: ``sm80/k.ttir`` joins ``sm80/k.ptx``)."""
    folders: dict[str, set[Path]] = {}
    places: dict[tuple[str, str], set[Path]] = {}
    for path in paths:
        folders.setdefault(path.stem, set()).add(path.parent)
        places.setdefault((path.stem, path.suffix), set()).add(path.parent)
    clashing = {stem for (stem, _), where in places.items() if len(where) > 1}
    return {path: f"{_telling(path.parent, folders[path.stem])}/{path.stem}"
            if path.stem in clashing else path.stem for path in paths}


def _telling(folder: Path, folders: set[Path]) -> str:
    """The fewest trailing parts of ``folder`` that no other of ``folders`` ends with."""
    parts = folder.parts
    for n in range(1, len(parts) + 1):
        tail = parts[-n:]
        if not any(other.parts[-n:] == tail for other in folders if other != folder):
            return "/".join(tail)
    return str(folder)


def ingest_file(writer: Writer, path: Path, report, name: str | None = None) -> int:
    """File one loose artifact as (part of) the unit ``name`` (default: the file's stem);
    returns 1 when stored, 0 when skipped (with the reason)."""
    from irscope.parsers import registry

    try:
        data = read_bytes(path)
    except InputError as exc:
        report.skipped.append((str(path), str(exc).removeprefix(f"{path}: ")))
        return 0
    name = name or path.stem
    if data[:4] == ELF_MAGIC:
        problem = cubin_problem(data)
        if problem:
            report.skipped.append((str(path), problem))
            return 0
        unit = writer.add_unit(name, "file", attrs={"origin": str(path)})
        triton_cache.file_cubin(writer, unit, data, str(path))
        report.sources.append((str(path), "cubin"))
        return 1
    data = data.rstrip(b"\0")  # a C string's terminator, as nvrtc's PTX ends
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        report.skipped.append((str(path), "binary data that is neither text nor a cubin"))
        return 0
    if "\0" in text[:4096]:
        report.skipped.append((str(path), "binary data that is neither text nor a cubin"))
        return 0
    kind = SOURCE_KINDS.get(path.suffix) or registry.detect(text, path.name)
    if kind == TEXT and path.suffix == ".py":
        kind = "python_source"
    joined = _join_known_unit(writer, path, kind, text, data)
    if joined:
        report.sources.append((str(path), joined))
        return 1
    unit = writer.add_unit(name, FRAMEWORKS.get(kind, "file"), attrs={"origin": str(path)})
    if kind == graphs.OUTPUT_CODE:
        graphs.add_output_code(writer, unit, data, kind, str(path))
    else:
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


def _join_known_unit(writer: Writer, path: Path, kind: str, text: str, data: bytes) -> str | None:
    """File an artifact of a unit already in the run into that unit; what it joined, or None.

    Inductor's cache repeats what the trace holds: a graph's output code (the graph's unit
    has it), the module of each generated Triton kernel (the kernel units compiled from that
    file), and the C++ source of each C++ kernel (the kernel unit whose code it contains).
    """
    if kind == graphs.OUTPUT_CODE:
        if graphs.unit_holding_output_code(writer, data) is not None:
            return "output code of a graph already filed"
        return None
    if path.suffix == ".best_config":
        units = _autotuned_kernels(writer.run, text, path.parent.name)
        for unit in units:
            writer.add_stage(unit, "metadata", data, name="best_config", origin=str(path))
            writer.update_attrs(unit, {"autotune_best": True})
        return "autotuning result of a Triton kernel" if units else None
    if kind == "python_source":
        kernels = writer.run.units_from_file("triton", str(path)) or [
            u for u in writer.run.units("triton")
            if u.source_file and Path(u.source_file).name == path.name]
        for unit in kernels:
            writer.add_stage(unit.id, "python_source", data, origin=str(path))
        return "Triton kernel module" if kernels else None
    if kind == "cpp_kernel":
        unit = _cpp_kernel_in(writer.run, text)
        if unit is not None:
            writer.add_stage(unit, "cpp_kernel", data, name="cache source", origin=str(path))
            return "C++ kernel source"
    return None


def _autotuned_kernels(run, text: str, module_folder: str) -> list[int]:
    """The Triton units an Inductor ``.best_config`` names: its ``triton_cache_hash`` is the
    kernel's cache folder (the base32 form of the compile hash), and it lies beside the
    kernel's module (ranks that share a Triton cache each write their own module and
    autotune on their own)."""
    try:
        config = json.loads(text)
    except ValueError:
        return []
    folder = config.get("triton_cache_hash") if isinstance(config, dict) else None
    if not isinstance(folder, str):
        return []
    return [unit.id for unit in run.units("triton")
            if cache_folder_name(str(unit.attrs.get("hash", ""))) == folder
            and _beside(unit.source_file, module_folder)]


def _beside(source_file: str | None, folder: str) -> bool:
    """Whether a kernel compiled from ``source_file`` has its module in ``folder`` (by
    name: the module was written on the machine that ran it); yes when no file is known."""
    return source_file is None or Path(source_file).parent.name == folder


def settle_autotune_choice(writer: Writer, unit_id: int) -> None:
    """Keep the autotuning results of a kernel unit that lie beside its module now (a unit
    given another rank's module since), and mark it chosen by them alone."""
    unit = writer.run.unit_by_id(unit_id)
    kept = False
    for stage in writer.run.stages(unit_id):
        if stage.name.startswith("best_config"):
            if stage.origin and _beside(unit.source_file, Path(stage.origin).parent.name):
                kept = True
            else:
                writer.remove_stage(unit_id, stage.kind, stage.name)
    writer.update_attrs(unit_id, {"autotune_best": kept})


def place_waiting(writer: Writer, report) -> None:
    """File again the loose files that came before the unit they belong to (a kernel's
    module or autotuning result from Inductor's cache ingested before Triton's cache, another
    rank's module before that rank's copy of the kernel): each joins its unit now, and the
    unit it was kept in goes, as if the files had come in the usual order."""
    for unit in writer.run.units("file"):
        stages = writer.run.stages(unit.id)
        if len(stages) != 1 or not stages[0].origin:
            continue
        path = Path(stages[0].origin)
        if path.suffix not in (".py", ".best_config", ".cpp"):
            continue
        data = writer.run.read_blob(stages[0].blob)
        if _join_known_unit(writer, path, stages[0].kind, data.decode("utf-8", "replace"), data):
            writer.remove_unit(unit.id)


def cache_folder_name(compile_hash: str) -> str | None:
    """Triton's cache folder for a compile hash (hex): its base32 form, unpadded."""
    try:
        return base64.b32encode(bytes.fromhex(compile_hash)).decode("ascii").rstrip("=")
    except ValueError:
        return compile_hash or None


def _cpp_kernel_in(run, text: str) -> int | None:
    """The C++ kernel unit whose code ``text`` (a compiled source from Inductor's cache)
    contains, ignoring blank space at line ends."""
    body = _squeezed(text)
    for unit in run.units("cpp"):
        for stage in run.stages(unit.id):
            if stage.kind == "cpp_kernel" and stage.name == "cpp_kernel":
                code = _squeezed(run.read_text(stage))
                if code and code in body:
                    return unit.id
    return None


def _squeezed(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip().splitlines()
                     if not line.startswith("#include"))
