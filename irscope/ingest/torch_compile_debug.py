"""TORCH_COMPILE_DEBUG folders and Inductor cache ``.debug`` folders: one graph, one unit.

    torch_compile_debug/run_*/torchinductor/model__0_inference_0.0/
        fx_graph_readable.py  fx_graph_transformed.py  ir_pre_fusion.txt  output_code.py ...
"""

from __future__ import annotations

from pathlib import Path

from irscope.store import Writer

# File name -> stage kind; files not listed are kept as text stages named by file.
FILES = {"fx_graph_readable.py": "fx_graph", "fx_graph_transformed.py": "fx_graph",
         "fx_graph_runnable.py": "python_source", "output_code.py": "inductor_output_code",
         "ir_pre_fusion.txt": "text", "ir_post_fusion.txt": "text"}
MARKERS = {"output_code.py", "fx_graph_readable.py"}


def is_debug_folder(files: list[str]) -> bool:
    return bool(MARKERS & set(files))


def ingest_folder(writer: Writer, folder: Path, report) -> int:
    """File the folder's graphs, IR listings and output code as one torch unit."""
    unit = writer.add_unit(folder.name, "torch", attrs={"origin": str(folder)})
    stored = 0
    for path in sorted(p for p in folder.iterdir() if p.is_file()):
        if path.name.startswith(".") or path.suffix == ".lock":
            continue
        try:
            data = path.read_bytes()
        except OSError as exc:
            report.skipped.append((str(path), f"unreadable ({exc.strerror or exc})"))
            continue
        kind = FILES.get(path.name) or ("metadata" if path.suffix == ".json" else "text")
        writer.add_stage(unit, kind, data, name=path.stem, origin=str(path))
        stored += 1
    report.sources.append((str(folder), "torch_compile_debug"))
    return stored
