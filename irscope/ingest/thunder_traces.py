"""Lightning Thunder's staged traces: one unit per jitted function, its traces as stages.

The Thunder collector writes each compile of a jitted function into a folder of its own:
``thunder.json`` (name, source, rank, the traces in order with their roles, the fusion
regions of the final forward and backward traces with the executor that runs each) and one
``NN.trace`` file per trace. Each jitted function is one unit (framework ``thunder``); a
second function of the same name is ``name (2)``, a later compile of the same function adds
its traces as ``compile N: ...``. A region run by the torch.compile executor is linked
(``launches``) to the Dynamo graphs its first call compiled, which link on to their kernels;
an nvFuser region's fusion definition and the CUDA it generated are stages of the unit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from irscope.analysis.ranks import ranked_name
from irscope.store import Writer

FOLDER = "thunder"  # in a staging folder: thunder/<NNNN>/, one per compile
MANIFEST = "thunder.json"
TRACE_KIND = "thunder_trace"
ORIGIN = "irscope thunder collector"


def is_thunder_folder(files) -> bool:
    """Whether a folder holding ``files`` is one compile the Thunder collector staged."""
    return MANIFEST in files


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
        for key, kind, what in (("definition", "text", "fusion definition"),
                                ("cuda", "cpp_kernel", "CUDA")):
            if isinstance(region.get(key), str):
                writer.add_stage(unit, kind, region[key], name=f"{prefix}{region.get('name')} "
                                 f"{what}", origin=ORIGIN)
                filed += 1
        for graph in graphs_of(writer, region.get("dynamo_frames") or (), manifest.get("rank")):
            writer.add_relation(unit, "launches", graph,
                                {"region": region.get("name"), "executor": region.get("executor"),
                                 "role": region.get("role"), "compile": nth})
    found = writer.run.unit_by_id(unit).attrs
    writer.add_unit(writer.run.unit_by_id(unit).name, "thunder", attrs={
        "regions": [*found.get("regions", ()),
                    *({**{k: v for k, v in r.items() if k not in ("definition", "cuda")},
                       "compile": nth} for r in regions)],
        "executors": {**found.get("executors", {}),
                      **{prefix + role: counts
                         for role, counts in (manifest.get("executors") or {}).items()}}})
    report.sources.append((str(folder), "thunder"))
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
            and u.attrs.get("rank") == rank]
