"""Triton cache folders and TRITON_KERNEL_DUMP folders: one hashed folder, one kernel unit.

An entry looks like ``<hash>/add_kernel.json`` (metadata: name, num_warps, target, ...)
beside ``add_kernel.ttir``, ``.ttgir``, ``.llir``, ``.ptx``, ``.cubin`` (and ``.source``).
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from irscope import nvtools
from irscope.analysis.ranks import ranked_name, split_rank
from irscope.errors import InputError
from irscope.files import read_bytes
from irscope.store import BlobRef, Writer, digest

# Stage kind of each file extension, in pipeline order.
EXTENSIONS = {".source": "python_source", ".ttir": "ttir", ".ttgir": "ttgir", ".llir": "llir",
              ".ptx": "ptx", ".cubin": "cubin", ".json": "metadata"}
IR_EXTENSIONS = {".ttir", ".ttgir", ".llir", ".ptx", ".cubin"}
# Triton's <name>.source holds the compile's input: Python source, or (for a kernel Triton
# compiled from its AST, Inductor's among them) the TTIR it built first:
#   #loc = loc("/tmp/torchinductor_u/ab/cabc.py":18:0)      module {      tt.func public @k(
SOURCE_IR_RE = re.compile(rb"^(?:#loc\d* = loc\(|module\b|\s*tt\.func\b)", re.M)
# #loc = loc("/tmp/torchinductor_u/ab/cabc.py":18:0)
LOC_FILE_RE = re.compile(r'loc\("([^"]+)":\d+')
ATTRS = ("num_warps", "num_stages", "num_ctas", "shared", "target", "hash", "arch")


def is_group_file(name: str) -> bool:
    """Triton's ``__grp__<name>.json`` index files, which only list an entry's files."""
    return name.startswith("__grp__")


def is_entry(folder: Path, files: list[str]) -> bool:
    """A folder holding Triton IR files (cache entry or kernel dump), by their extensions."""
    stems = {Path(f).stem for f in files if Path(f).suffix in IR_EXTENSIONS}
    return bool(stems) and any(Path(f).suffix in {".ttir", ".ttgir"} for f in files) \
        and len(stems) == 1


def ingest_entry(writer: Writer, folder: Path, report,
                 analysis: CubinAnalysis | None = None, rank: int | None = None) -> int:
    """File one entry as a triton unit; returns the number of artifacts stored.
    ``analysis``: its cubin's, when computed ahead (``analysed_entries``); ``rank``: the
    rank whose entry this is (a multi-process run's staging folder): its unit is that rank's
    alone, named as ``ranked_name`` names it."""
    found = sorted(p for p in folder.iterdir()  # a link is never part of an entry
                   if p.is_file() and not p.is_symlink() and p.suffix in EXTENSIONS)
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
            except (OSError, ValueError, RecursionError) as exc:
                report.warnings.append(f"{path}: unreadable kernel metadata ({exc})")
    if not isinstance(meta, dict):
        report.warnings.append(f"{folder}: kernel metadata is not a JSON object; kept as a stage")
        meta = {}
    contents: list[tuple[Path, bytes]] = []
    for path in files:
        try:
            contents.append((path, path.read_bytes()))
        except OSError as exc:
            report.skipped.append((str(path), f"unreadable ({exc.strerror or exc})"))
    name = str(meta.get("name") or stem)
    attrs = {k: meta[k] for k in ATTRS if k in meta}
    attrs["kernel"] = name
    if rank is not None:
        attrs["rank"] = rank
    unit = _same_compile(writer, contents, rank)
    held: set[str] = set()  # the stages a copy of this compile filed already
    if unit is None:
        attrs["hash"] = str(meta.get("hash") or folder.name)
        unit = _unit(writer, ranked_name(name, rank), attrs["hash"], attrs,
                     _kernel_file(contents))
    else:  # a kernel dump and the cache entry of one compile, or two copies of one entry
        # (their PTX and cubin differ only in the source path): one unit, every fact; the
        # compile's hash is its metadata's, whichever came first
        held = {stage.name for stage in writer.run.stages(unit)}
        writer.update_attrs(unit, attrs)
        _refresh_resources(writer, unit)
    stored = 0
    for path, data in contents:
        kind, name = EXTENSIONS[path.suffix], None
        if kind == "python_source" and SOURCE_IR_RE.search(data[:4096]):
            kind, name = "ttir", "ttir source"  # the IR the compile started from, not Python
        if (name or kind) in held:
            continue
        if kind == "cubin":
            file_cubin(writer, unit, data, str(path), analysis=analysis)
        else:
            writer.add_stage(unit, kind, data, name=name, origin=str(path))
        if name == "ttir source" and "ttir" in held:  # the compile's input before its TTIR,
            _file_again(writer, unit, "ttir")            # as an entry filed first lists them
        stored += 1
    report.sources.append((str(folder), "triton_cache"))
    return stored


def _same_compile(writer: Writer, contents: list[tuple[Path, bytes]],
                  rank: int | None = None) -> int | None:
    """The kernel unit (of ``rank``) already holding this compile's PTX (else TTGIR): a
    TRITON_KERNEL_DUMP folder and the cache entry of one compile are named differently but
    hold the same code."""
    for suffix, kind in ((".ptx", "ptx"), (".ttgir", "ttgir")):
        for path, data in contents:
            if path.suffix == suffix:
                held = [u for u in writer.run.units_holding(kind, digest(data), "triton")
                        if writer.run.unit_by_id(u).attrs.get("rank") == rank]
                if held:
                    return held[0]
    return None


def _kernel_file(contents: list[tuple[Path, bytes]]) -> str | None:
    """The Python file the kernel was compiled from, as its TTIR locations name it."""
    for path, data in contents:
        if path.suffix == ".ttir":
            found = LOC_FILE_RE.search(data[:1 << 20].decode("utf-8", "replace"))
            if found and not found.group(1).startswith("<"):
                return found.group(1)
    return None


def _unit(writer: Writer, name: str, entry_hash: str, attrs: dict,
          source_file: str | None = None) -> int:
    """The kernel's unit, named apart from every other compile of its name by its hash
    until ``name_compiles`` gives the names they keep."""
    if writer.run.unit_named("triton", name) is not None:
        base, rank = split_rank(name)
        name = ranked_name(f"{base}-{entry_hash[:8]}", rank)
    return writer.add_unit(name, "triton", source_file, attrs=attrs)


def name_compiles(writer: Writer, ranks: set[int] | None = None) -> None:
    """Name every Triton compile as it is named in a run of any filing order: several
    compiles of one kernel name on one rank (autotuning configurations) are told apart by
    their compile hash (the metadata's, else the folder's), the smallest keeping the plain
    name and the others ``name-<hash8>``, so a warm run, or a dump filed before its cache
    entry, names them as the cold run did. ``ranks``: only these ranks' compiles (and those
    of no rank) are named anew (None: every compile)."""
    groups: dict[tuple[str, int | None], list] = {}
    for unit in writer.run.units_of_ranks("triton", ranks):
        base, _ = split_rank(unit.name)
        rank = unit.attrs.get("rank")
        kernel = str(unit.attrs.get("kernel") or base)
        if base != kernel and not (base.startswith(f"{kernel}-") and len(base) == len(kernel) + 9):
            continue  # a name this module did not give (a sweep's configuration)
        groups.setdefault((kernel, rank if isinstance(rank, int) else None), []).append(unit)
    renames = []
    for (kernel, rank), units in groups.items():
        units.sort(key=lambda u: (str(u.attrs.get("hash", "")), u.id))
        for n, unit in enumerate(units):
            plain = kernel if n == 0 else f"{kernel}-{str(unit.attrs.get('hash', unit.id))[:8]}"
            wanted = ranked_name(plain, rank)
            if wanted != unit.name:
                renames.append((unit.id, wanted))
    for unit_id, _ in renames:  # out of each other's way first: names are unique
        writer.rename_unit(unit_id, f"({unit_id})")
    for unit_id, wanted in renames:
        writer.rename_unit(unit_id, wanted)


def file_cubin(writer: Writer, unit_id: int, cubin: bytes, origin: str | None = None,
               ptx: str | None = None, analysis: CubinAnalysis | None = None) -> None:
    """Store a unit's cubin with its SASS, and each kernel's resources in the unit's attrs.

    A cubin already analysed in the run reuses that analysis; otherwise ``analysis`` is
    used when given, else computed here from the cubin, ``ptx`` (default: the unit's PTX
    stage, for ptxas's spill figures) and the launch metadata in the unit's attrs.
    """
    key = digest(cubin)
    row = _analysed(writer, key)
    if row is not None:
        writer.add_stage(unit_id, "cubin", BlobRef(key, len(cubin)), origin=origin)
        writer.add_stage(unit_id, "sass", BlobRef(row[0], row[1]), origin=origin)
        _set_resources(writer, unit_id, row[2].get("resources"))
        _refresh_resources(writer, unit_id)
        return
    writer.add_stage(unit_id, "cubin", cubin, origin=origin)
    if not tools_found():
        return
    if analysis is None:
        analysis = analyse_cubin(cubin, ptx if ptx is not None else _ptx_stage(writer, unit_id),
                                 launch_metadata(_attrs(writer, unit_id)))
    if analysis.sass is None:
        return
    writer.add_stage(unit_id, "sass", analysis.sass, origin=origin)
    _set_resources(writer, unit_id, analysis.resources)
    writer.keep_histograms(analysis.histograms)


@dataclass(frozen=True)
class CubinAnalysis:
    """What the tools make of a cubin: its SASS text (None when it cannot be disassembled),
    each kernel's resources as a run keeps them (irscope.analysis.kernels), and the opcode
    histograms of its SASS and of the PTX it was analysed with, (stage kind, blob digest,
    histogram) each: counted where the analysis runs (while the program runs, for inspect),
    so that reading them back costs no count."""

    sass: str | None
    resources: dict[str, dict[str, Any]] = field(default_factory=dict)
    histograms: tuple[tuple[str, str, dict[str, int]], ...] = ()


def analyse_cubin(cubin: bytes, ptx: str | None = None, metadata: Mapping[str, Any] | None = None,
                  ptxas: Mapping[str, Mapping[str, int]] | None = None) -> CubinAnalysis:
    """Disassemble a cubin and gather its kernels' resources; each tool's output comes from
    irscope's cache when this content was seen before.

    ``ptxas``: `ptxas -v` figures already in hand (a compile's own log), else ptxas is
    asked about ``ptx``; with neither, the entries carry no spill figures.
    The three tools run at once (one cubin's analysis is what filing waits on when the
    program's last kernel came too late to be analysed while it ran).
    """
    from concurrent.futures import ThreadPoolExecutor

    from irscope.analysis.kernels import kernel_entries, kernel_records
    from irscope.parsers import registry, sass

    with ThreadPoolExecutor(2, thread_name_prefix="irscope-tools") as tools:
        usage = tools.submit(nvtools.resource_usage, cubin)
        logged = tools.submit(nvtools.ptxas_usage, ptx) if ptxas is None and ptx else None
        text = nvtools.disassemble(cubin)
        if text is None:
            return CubinAnalysis(None)
        parsed = sass.parse(text)
        if ptxas is None:
            ptxas = logged.result() if logged is not None else {}
        records = kernel_records(parsed, usage.result(), ptxas, metadata or {})
    histograms = [("sass", digest(text.encode("utf-8")), dict(parsed.histogram))]
    if ptx:
        histograms.append(("ptx", digest(ptx.encode("utf-8")),
                           dict(registry.histogram("ptx", ptx))))
    return CubinAnalysis(text, kernel_entries(records), tuple(histograms))


def analysed_entries(folders: Iterable[Path], workers: int | None = None
                     ) -> Iterator[tuple[Path, CubinAnalysis | None]]:
    """Each entry folder, in order, with its cubin's analysis computed ahead on ``workers``
    threads (default: one per core; the tools are subprocesses, so threads run in parallel).

    None where the entry has no readable cubin, no tool is found, or an earlier entry holds
    the same cubin (filing reuses that one's). With one worker, each is computed in turn.
    """
    workers = workers or nvtools.default_workers()
    seen: set[str] = set()

    def job(folder: Path):
        cubin, ptx, metadata = _entry_inputs(folder)
        if cubin is None or not tools_found() or digest(cubin) in seen:
            return None
        seen.add(digest(cubin))
        return lambda: analyse_cubin(cubin, ptx, metadata)

    if workers == 1:
        for folder in folders:
            work = job(folder)
            yield folder, work() if work else None
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(workers, thread_name_prefix="irscope-nvtools") as pool:
        ahead: deque = deque()  # at most two per worker: the analyses held stay few
        remaining = iter(folders)
        while True:
            while len(ahead) < 2 * workers and (folder := next(remaining, None)) is not None:
                work = job(folder)
                ahead.append((folder, pool.submit(work) if work else None))
            if not ahead:
                return
            folder, future = ahead.popleft()
            yield folder, future.result() if future else None


def tools_found() -> bool:
    """Whether a tool that reads cubins is found; says so once when none is."""
    if any(nvtools.find_tool(t) for t in nvtools.TOOLS):
        return True
    nvtools.warn_missing_once("cubins are kept, SASS and resource usage are skipped")
    return False


def launch_metadata(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """A unit's num_warps and dynamic shared bytes ("shared"), from its attrs or the Triton
    metadata they keep."""
    metadata = dict(attrs.get("metadata") if isinstance(attrs.get("metadata"), dict) else {})
    metadata.update({k: attrs[k] for k in ("num_warps", "shared") if attrs.get(k) is not None})
    return {k: v for k, v in metadata.items()  # a count of another type is damage: left out
            if k not in ("num_warps", "shared") or type(v) is int}


def _entry_inputs(folder: Path) -> tuple[bytes | None, str | None, dict[str, Any]]:
    """An entry's cubin, its PTX text and metadata (<kernel>.ptx, .json), as far as readable."""
    cubins = sorted(p for p in folder.glob("*.cubin") if not p.is_symlink())
    if not cubins:
        return None, None, {}
    stem = cubins[0].with_suffix("")
    try:  # regular files only: a FIFO or device in a dump must not stall the analysis
        cubin = read_bytes(cubins[0])
    except InputError:
        return None, None, {}
    try:
        ptx = read_bytes(stem.with_suffix(".ptx")).decode("utf-8", errors="replace")
    except InputError:
        ptx = None
    try:
        metadata = json.loads(read_bytes(stem.with_suffix(".json")).decode("utf-8"))
    except (InputError, ValueError, RecursionError):
        metadata = {}
    return cubin, ptx, launch_metadata(metadata if isinstance(metadata, dict) else {})


def _analysed(writer: Writer, cubin_blob: str) -> tuple[str, int, dict] | None:
    """(SASS blob, its size, attrs) of a unit that already holds this cubin with its SASS."""
    for unit_id in writer.run.units_holding("cubin", cubin_blob):
        sass = next((s for s in writer.run.stages(unit_id) if s.kind == "sass"), None)
        if sass is not None:
            return sass.blob, sass.size, writer.run.unit_by_id(unit_id).attrs
    return None


def _attrs(writer: Writer, unit_id: int) -> dict[str, Any]:
    return writer.run.unit_by_id(unit_id).attrs


def _ptx_stage(writer: Writer, unit_id: int) -> str | None:
    ptx = next((s for s in writer.run.stages(unit_id) if s.kind == "ptx"), None)
    return writer.run.read_text(ptx) if ptx else None


def _file_again(writer: Writer, unit_id: int, name: str) -> None:
    """File a unit's stage ``name`` again, so that it follows the stages filed since."""
    stage = next(s for s in writer.run.stages(unit_id) if s.name == name)
    writer.remove_stage(unit_id, stage.kind, name)
    writer.add_stage(unit_id, stage.kind, BlobRef(stage.blob, stage.size), name=name,
                     origin=stage.origin)


def _refresh_resources(writer: Writer, unit_id: int) -> None:
    """Read the unit's kept kernel records again with the launch metadata it holds now, so
    that metadata filed after the cubin (a kernel dump's cubin, then the cache entry's
    JSON) gives the figures filing them the other way round gives."""
    from irscope.analysis.kernels import KernelRecord

    attrs = _attrs(writer, unit_id)
    resources = attrs.get("resources")
    if not isinstance(resources, dict):
        return
    metadata = {**launch_metadata(attrs),
                **{k: attrs[k] for k in ("target", "arch") if k in attrs}}
    _set_resources(writer, unit_id, {
        name: KernelRecord.from_entry(name, entry, metadata).to_entry()
        for name, entry in resources.items() if isinstance(entry, dict)})


def _set_resources(writer: Writer, unit_id: int, resources: dict | None) -> None:
    if resources:
        writer.update_attrs(unit_id, {"resources": resources})
