"""Lightning Thunder's staged traces: one unit per jitted function, its traces as stages.

The Thunder collector writes each compile of a jitted function into a folder of its own:
``thunder.json`` (name, source, rank, the traces in order with their roles, the fusion
regions of the final forward and backward traces with the executor that runs each) and one
``NN.trace`` file per trace. Each jitted function is one unit (framework ``thunder``); a
second function of the same name is ``name (2)``, a later compile of the same function adds
its traces as ``compile N: ...``. A region run by the torch.compile executor is linked
(``launches``) to the Dynamo graphs its first call compiled, which link on to their kernels;
an nvFuser region's fusion definition is a stage of the unit, and each kernel its first call
compiled a unit of framework ``nvfuser`` (CUDA C++, PTX and SASS, as nvFuser dumped them) that
the region launches, named after the function, the region and nvFuser's kernel
(``Sequential nvFusion1 reduction_f0_c1_r0_g0``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from irscope.analysis.ranks import ranked_name
from irscope.store import Writer

FOLDER = "thunder"  # in a staging folder: thunder/<NNNN>/, one per compile
MANIFEST = "thunder.json"
NVFUSER_FOLDER = "nvfuser"  # thunder/nvfuser/<NNNN>/: the kernels of one nvFuser region
TRACE_KIND = "thunder_trace"
ORIGIN = "irscope thunder collector"
# __tmp_nvfuser_reduction_f0_c1_r0_g0.ptx -> reduction_f0_c1_r0_g0
NVFUSER_KERNEL = re.compile(r"^__tmp_nvfuser_(?P<kernel>\w+)\.(?P<ext>cu|ptx|sass)$")
NVFUSER_KINDS = {"cu": "cuda_source", "ptx": "ptx", "sass": "sass"}


def is_thunder_folder(files) -> bool:
    """Whether a folder holding ``files`` is one compile the Thunder collector staged."""
    return MANIFEST in files


def is_kernels_of_compiles(folder: Path, name: str, folders) -> bool:
    """Whether ``folder/name`` holds nvFuser regions' kernels beside staged compiles (filed
    with the regions that name them, not as loose files)."""
    return name == NVFUSER_FOLDER and any((folder / other / MANIFEST).is_file()
                                          for other in folders if other != name)


class ThunderUnits:
    """The units of the jitted functions filed in one ingest, by process and function."""

    def __init__(self):
        self.units: dict[tuple[Any, Any], int] = {}
        self.names: dict[tuple[Any, str], int] = {}

    def unit_for(self, writer: Writer, manifest: dict[str, Any]) -> int:
        key = (manifest.get("rank"), manifest.get("function"))
        if key not in self.units:
            name = str(manifest.get("name") or "thunder_function")
            nth = self.names[(key[0], name)] = self.names.get((key[0], name), 0) + 1
            unit_name = ranked_name(name + (f" ({nth})" if nth > 1 else ""), key[0])
            attrs: dict[str, Any] = {"thunder": manifest.get("thunder")}
            if key[0] is not None:
                attrs["rank"] = key[0]
            self.units[key] = writer.add_unit(unit_name, "thunder", manifest.get("source_file"),
                                              manifest.get("source_line"), attrs)
        return self.units[key]


def ingest_folder(writer: Writer, folder: Path, report, units: ThunderUnits) -> int:
    """File one staged compile; returns how many artifacts were filed."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        records = list(manifest["traces"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        report.skipped.append((str(folder / MANIFEST), f"not a Thunder manifest ({exc})"))
        return 0
    unit = units.unit_for(writer, manifest)
    nth = int(manifest.get("compile") or 1)
    prefix = f"compile {nth}: " if nth > 1 else ""
    filed = 0
    for record in records:
        path = folder / str(record.get("file", ""))
        if path.parent != folder or not path.is_file():
            report.skipped.append((str(path), "a trace the Thunder manifest names is missing"))
            continue
        writer.add_stage(unit, TRACE_KIND, path.read_text(encoding="utf-8", errors="replace"),
                         name=prefix + stage_name(record), origin=ORIGIN)
        filed += 1
    regions = [r for r in manifest.get("regions", ()) if isinstance(r, dict)]
    for region in regions:
        if isinstance(region.get("definition"), str):
            writer.add_stage(unit, "text", region["definition"],
                             name=f"{prefix}{region.get('name')} fusion definition", origin=ORIGIN)
            filed += 1
        kernels = region.get("nvfuser_kernels")
        if isinstance(kernels, str):
            where = (folder.parent / kernels).resolve()
            if where.is_relative_to(folder.parent.resolve()):  # never outside the staging
                filed += _file_nvfuser_kernels(writer, unit, where, prefix, region, nth)
        for graph in graphs_of(writer, region.get("dynamo_frames") or (), manifest.get("rank")):
            writer.add_relation(unit, "launches", graph,
                                {"region": region.get("name"), "executor": region.get("executor"),
                                 "role": region.get("role"), "compile": nth})
    found = writer.run.unit_by_id(unit).attrs
    writer.add_unit(writer.run.unit_by_id(unit).name, "thunder", attrs={
        "regions": [*found.get("regions", ()),
                    *({**{k: v for k, v in r.items()
                          if k not in ("definition", "nvfuser_kernels")},
                       "compile": nth} for r in regions)],
        "executors": {**found.get("executors", {}),
                      **{prefix + role: counts
                         for role, counts in (manifest.get("executors") or {}).items()}}})
    report.sources.append((str(folder), "thunder"))
    return filed


def _file_nvfuser_kernels(writer: Writer, unit: int, folder: Path, prefix: str,
                          region: dict[str, Any], nth: int) -> int:
    """File the kernels an nvFuser region compiled (``folder``: nvFuser's dump files of its
    first call), each a unit the region launches; returns how many files were filed."""
    if not folder.is_dir() or folder.is_symlink():
        return 0
    function = writer.run.unit_by_id(unit)
    kernels: dict[str, list[tuple[Path, str]]] = {}  # kernel: (file, stage kind)
    for path in sorted(folder.iterdir()):
        match = NVFUSER_KERNEL.match(path.name)
        if match and path.is_file() and not path.is_symlink():
            kernels.setdefault(match["kernel"], []).append((path, NVFUSER_KINDS[match["ext"]]))
    attrs = {"region": region.get("name")}
    if "rank" in function.attrs:
        attrs["rank"] = function.attrs["rank"]
    filed = 0
    for kernel, files in kernels.items():
        kernel_unit = writer.add_unit(f"{prefix}{function.name} {region.get('name')} {kernel}",
                                      "nvfuser", attrs=attrs)
        for path, kind in files:
            data = path.read_bytes().rstrip(b"\0")  # nvFuser's PTX ends in a C string's NUL
            writer.add_stage(kernel_unit, kind, data, name=kind, origin=path.name)
            filed += 1
        writer.add_relation(unit, "launches", kernel_unit,
                            {"region": region.get("name"), "executor": region.get("executor"),
                             "role": region.get("role"), "compile": nth})
    return filed


def stage_name(record: dict[str, Any]) -> str:
    """``forward execution`` and ``backward execution`` for the final traces, else the trace's
    place and the transform that made it (``04 Grad transform pass``)."""
    if record.get("final"):
        return f"{record.get('role', 'forward')} execution"
    number = str(record.get("file", "")).split(".")[0]
    return f"{number} {record.get('title') or 'trace'}"


def graphs_of(writer: Writer, frames, rank) -> list[int]:
    """The Dynamo graph units of ``frames`` (compile ids ``N/M``) compiled by ``rank``."""
    wanted = {str(f) for f in frames}
    if not wanted:
        return []
    return [u.id for u in writer.run.units("torch")
            if str(u.attrs.get("compile_id", "")).split("/")[0] in wanted
            and u.rank == rank]
