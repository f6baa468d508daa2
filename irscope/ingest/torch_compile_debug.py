"""TORCH_COMPILE_DEBUG folders and Inductor cache ``.debug`` folders: one graph, one unit.

    torch_compile_debug/run_*/torchinductor/model__0_inference_0.0/
        fx_graph_readable.py  fx_graph_transformed.py  ir_pre_fusion.txt  output_code.py ...
"""

from __future__ import annotations

from pathlib import Path

from irscope.store import Writer

from . import graphs

# File name -> stage kind; files not listed are kept as text stages named by file.
FILES = {"fx_graph_readable.py": "fx_graph", "fx_graph_transformed.py": "fx_graph",
         "fx_graph_runnable.py": "python_source", "output_code.py": "inductor_output_code",
         "ir_pre_fusion.txt": "text", "ir_post_fusion.txt": "text"}
MARKERS = {"output_code.py", "fx_graph_readable.py"}


def is_debug_folder(files: list[str]) -> bool:
    return bool(MARKERS & set(files))


def ingest_folder(writer: Writer, folder: Path, report) -> int:
    """File the folder's graphs, IR listings and output code into its graph's unit.

    A folder whose output code a unit already holds (the trace's, or the same graph's other
    debug copy) adds its files to that unit; otherwise the folder becomes a unit of its own,
    which joins the graph's unit when the graph is filed later
    (``graphs.join_repeated_graphs``). Either way each file is named after the output code's
    role (``forward.fx_graph_readable``), so the graph holds the same stages in any order.
    """
    files = []
    for path in sorted(p for p in folder.iterdir() if p.is_file()):
        if path.name.startswith(".") or path.suffix == ".lock":
            continue
        try:
            files.append((path, path.read_bytes()))
        except OSError as exc:
            report.skipped.append((str(path), f"unreadable ({exc.strerror or exc})"))
    code = next((data for path, data in files if path.name == "output_code.py"), None)
    unit = graphs.unit_holding_output_code(writer, code) if code is not None else None
    prefix = f"{_role(folder.name, code)}." if code is not None else ""
    if unit is None:
        unit = writer.add_unit(folder.name, "torch", attrs={"origin": str(folder)})
    stored = 0
    for path, data in files:
        kind = FILES.get(path.name) or ("metadata" if path.suffix == ".json" else "text")
        if kind == graphs.OUTPUT_CODE:
            graphs.add_output_code(writer, unit, data, prefix + path.stem, str(path))
        else:
            writer.add_stage(unit, kind, data, name=prefix + path.stem, origin=str(path))
        stored += 1
    report.sources.append((str(folder), "torch_compile_debug"))
    return stored


def _role(folder_name: str, code: bytes) -> str:
    """forward / backward / inference, from the folder name or the output code's AOT ID."""
    for role in ("forward", "backward", "inference"):
        if f"_{role}_" in folder_name:
            return role
    head = code[:4096].decode("utf-8", "replace")
    for role in ("forward", "backward", "inference"):
        if f"_{role}'" in head:
            return role
    return folder_name
