"""Triton cache folders and TRITON_KERNEL_DUMP folders: one hashed folder, one kernel unit.

An entry looks like ``<hash>/add_kernel.json`` (metadata: name, num_warps, target, ...)
beside ``add_kernel.ttir``, ``.ttgir``, ``.llir``, ``.ptx``, ``.cubin`` (and ``.source``).
"""

from __future__ import annotations

import json
from pathlib import Path

from irscope import nvtools
from irscope.store import BlobRef, Writer, digest

# Stage kind of each file extension, in pipeline order.
EXTENSIONS = {".source": "python_source", ".ttir": "ttir", ".ttgir": "ttgir", ".llir": "llir",
              ".ptx": "ptx", ".cubin": "cubin", ".json": "metadata"}
IR_EXTENSIONS = {".ttir", ".ttgir", ".llir", ".ptx", ".cubin"}
ATTRS = ("num_warps", "num_stages", "num_ctas", "shared", "target", "hash", "arch")


def is_group_file(name: str) -> bool:
    """Triton's ``__grp__<name>.json`` index files, which only list an entry's files."""
    return name.startswith("__grp__")


def is_entry(folder: Path, files: list[str]) -> bool:
    """A folder holding Triton IR files (cache entry or kernel dump), by their extensions."""
    stems = {Path(f).stem for f in files if Path(f).suffix in IR_EXTENSIONS}
    return bool(stems) and any(Path(f).suffix in {".ttir", ".ttgir"} for f in files) \
        and len(stems) == 1


def ingest_entry(writer: Writer, folder: Path, report) -> int:
    """File one entry as a triton unit; returns the number of artifacts stored."""
    found = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in EXTENSIONS)
    stem = next(p.stem for p in found if p.suffix in IR_EXTENSIONS)
    # Triton's metadata is <kernel>.json; other JSON beside it (group indexes, a collector's
    # notes) is not the kernel's and must not stand in for it.
    files = sorted((p for p in found if p.suffix != ".json" or p.stem == stem),
                   key=lambda p: list(EXTENSIONS).index(p.suffix))
    meta = {}
    for path in files:
        if path.suffix == ".json":
            try:
                meta = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                report.warnings.append(f"{path}: unreadable kernel metadata ({exc})")
    name = str(meta.get("name") or stem)
    entry_hash = str(meta.get("hash") or folder.name)
    attrs = {k: meta[k] for k in ATTRS if k in meta}
    attrs["hash"] = entry_hash
    unit = _unit(writer, name, entry_hash, attrs)
    stored = 0
    for path in files:
        kind = EXTENSIONS[path.suffix]
        try:
            data = path.read_bytes()
        except OSError as exc:
            report.skipped.append((str(path), f"unreadable ({exc.strerror or exc})"))
            continue
        if kind == "cubin":
            file_cubin(writer, unit, data, str(path))
        else:
            writer.add_stage(unit, kind, data, origin=str(path))
        stored += 1
    report.sources.append((str(folder), "triton_cache"))
    return stored


def _unit(writer: Writer, name: str, entry_hash: str, attrs: dict) -> int:
    """The kernel's unit; a different compile of a name already in the run gets name-<hash8>."""
    row = writer.db.execute("SELECT attrs FROM units WHERE framework='triton' AND name=?",
                            (name,)).fetchone()
    if row and json.loads(row[0]).get("hash") not in (None, entry_hash):
        name = f"{name}-{entry_hash[:8]}"
    return writer.add_unit(name, "triton", attrs=attrs)


def file_cubin(writer: Writer, unit_id: int, cubin: bytes, origin: str) -> None:
    """Store a cubin with its SASS; a cubin already analysed in the run reuses that analysis."""
    key = digest(cubin)
    row = writer.db.execute(
        "SELECT sass.blob, sass.size, units.attrs FROM stages AS bin "
        "JOIN stages AS sass ON sass.unit_id = bin.unit_id AND sass.kind = 'sass' "
        "JOIN units ON units.id = bin.unit_id WHERE bin.kind = 'cubin' AND bin.blob = ? LIMIT 1",
        (key,)).fetchone()
    if row is None:
        nvtools.add_cubin(writer, unit_id, cubin, origin=origin)
        return
    writer.add_stage(unit_id, "cubin", BlobRef(key, len(cubin)), origin=origin)
    writer.add_stage(unit_id, "sass", BlobRef(row[0], row[1]), origin=origin)
    resources = json.loads(row[2]).get("resources")
    if resources:
        name, framework = writer.db.execute("SELECT name, framework FROM units WHERE id=?",
                                            (unit_id,)).fetchone()
        writer.add_unit(name, framework, attrs={"resources": resources})
