"""Filing existing dumps into a run: one module per kind of dump source, one transaction.

``ingest(run, paths)`` walks every path, recognises each source by content (TORCH_TRACE
logs, TORCH_LOGS text, Triton cache entries, XLA dump modules, single IR files), files
them as units and stages, then links graphs to the kernels they launch. Everything is
written in one transaction: an ingest that fails or is interrupted leaves the run as it was
(the blob files a killed ingest left are collected by the next one, before it stores any;
blobs a caller stored ahead, not yet named by a stage, are named to it and spared).

Nothing collected is dropped: loose files of one name in different folders become units
named after the folders that tell them apart, and a stage never replaces one of the same
name holding other bytes (the newcomer is filed beside it, see ``Writer.keep_all``). Inside
a folder, a link that leads out of it is not followed: a dump from elsewhere cannot pull
the user's other files into a run.

Files compressed with gzip, zstandard or xz, and tarballs, are read as they are: a
compressed TORCH_TRACE log is streamed, any other compressed file and every tarball is
opened into a temporary folder (``archives``) and classified as the files it holds, named
after the archive (``dumps.tar.gz/w/trace.log``) wherever a run or a message names them.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from irscope.errors import InputError
from irscope.files import compression, contained, read_head
from irscope.store import BLOBS, INDEX, RUN_JSON, Run

from . import (archives, graphs, linking, profile, single_file, thunder_traces,
               torch_compile_debug, torch_logs, torch_trace, triton_cache, xla_dump)
from .ranked import RankWriter

HEAD_BYTES = 64 << 10
SKIP_DIRS = {"__pycache__", ".git", ".irscope"}
# Inductor cache folders of pickled entries: never loaded (nothing stored is ever executed).
PICKLE_DIRS = {"fxgraph", "aotautograd"}
# Build products met in cache folders, not compiler artifacts: passed over quietly.
IGNORED_SUFFIXES = {".so", ".lock", ".pyc", ".o", ".a"}


@dataclass
class IngestReport:
    """What an ingest filed, what it skipped and why, and what it warned about."""

    sources: list[tuple[str, str]] = field(default_factory=list)  # (path, source kind)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    warnings: list[str] = field(default_factory=list)
    artifacts: int = 0
    units_before: int = 0
    units_after: int = 0
    stages_before: int = 0
    stages_after: int = 0
    pass_logs_left_out: int = 0  # XLA emitter MLIR pass logs not asked for (``passes``)

    @property
    def ingested(self) -> bool:
        return self.artifacts > 0


@dataclass
class _Plan:
    """The work found under the given paths, before anything is written."""

    traces: list[Path] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)
    triton_entries: list[Path] = field(default_factory=list)
    debug_folders: list[Path] = field(default_factory=list)
    xla_files: list[Path] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    thunder_folders: list[Path] = field(default_factory=list)
    opened: archives.Expansions = field(default_factory=archives.Expansions)
    profiles: dict[str, list[Path]] = field(default_factory=dict)  # profile.kind_of -> files

    @property
    def count(self) -> int:
        return (len(self.traces) + len(self.logs) + len(self.triton_entries)
                + len(self.debug_folders) + len(self.xla_files) + len(self.files)
                + len(self.thunder_folders) + sum(map(len, self.profiles.values())))


def ingest(run: Run, paths, progress=None, dumps=(), workers: int | None = None,
           analyses: dict[str, Any] | None = None, keep: Iterable[str] = (),
           rank: int | None = None, passes: bool = False) -> IngestReport:
    """File ``paths`` into ``run``; ``progress`` (console.progress handle) is advanced per item.

    ``dumps``: XLA dump files already found (``xla_dump.DumpFile``, e.g. a run's per-compile
    dumps and cached ones), filed with any found under ``paths``. ``workers``: how many
    NVIDIA tool processes analyse cubins at once (default: one per core). ``analyses``: the
    cubin analyses a caller already made, by Triton cache entry folder name (None: nothing to
    analyse), so only the other entries are analysed here. ``keep``: digests of blobs the
    caller stored in the run ahead of this ingest (a StagingWatch does while the program
    runs), which the collection of a killed ingest's blobs must spare. ``rank``: the rank
    whose XLA dumps and Triton kernels these are (a multi-process run's staging folder):
    their units are that rank's.
    ``passes``: file XLA's emitter MLIR pass logs pass by pass (else they are left out,
    counted in ``pass_logs_left_out``).
    """
    report = IngestReport()
    report.units_before, report.stages_before = run.counts()
    plan = _Plan()
    try:
        for path in map(Path, paths):
            _classify(path, plan, report)
        _file(run, plan, report, progress, dumps, workers, analyses, keep, rank, passes)
    finally:
        plan.opened.close()
        _show_sources(report, plan.opened)
    report.units_after, report.stages_after = run.counts()
    return report


def _file(run: Run, plan: _Plan, report: IngestReport, progress, dumps, workers, analyses,
          keep, rank, passes) -> None:
    """The ordered pass: file what the plan found, in one transaction. A Triton entry whose
    analysis the caller made was counted by the caller's progress (a StagingWatch counts each
    kernel it analyses): it is shown here, not counted again."""
    counted_before = {e.name for e in plan.triton_entries if e.name in (analyses or {})}
    if progress is not None:
        progress.total(plan.count + len(dumps) - len(counted_before))

    def step(label: str, counted: bool = True) -> None:
        if progress is not None:
            progress.advance(1 if counted else 0, description=label[-40:])

    shown = plan.opened.shown
    # Graphs first (the trace names them), then what repeats them joins their units; C++
    # sources from Inductor's cache join the kernels that linking files from output code.
    later = [p for p in plan.files if p.suffix == ".cpp"]
    named = archives.named_files(plan.files + plan.xla_files, plan.opened)
    names = single_file.unit_names([named[path] for path in plan.files])
    with run.transaction(bulk=True) as writer:
        writer.keep_all = True
        writer.collect_orphans(keep)
        if plan.opened.named:  # what came out of an archive is filed under the archive's name
            writer = archives.ShownWriter(writer, plan.opened)
        for log in plan.traces:
            report.artifacts += torch_trace.ingest_trace(run, writer, log, report.warnings.append,
                                                         _share_reporter(progress, log.name),
                                                         shown(str(log)))
            report.sources.append((str(log), "torch_trace"))
            step(log.name)
        for log in plan.logs:
            report.artifacts += torch_logs.ingest_log(writer, log, report)
            step(log.name)
        for entry, analysis in _analysed(plan.triton_entries, analyses or {}, workers):
            report.artifacts += triton_cache.ingest_entry(writer, entry, report, analysis, rank)
            step(_kernel_label(entry), counted=entry.name not in counted_before)
        for folder in plan.debug_folders:
            report.artifacts += torch_compile_debug.ingest_folder(writer, folder, report)
            step(folder.name)
        dump_files = [_dump_file(path, named[path], shown) for path in plan.xla_files]
        dump_files += dumps
        report.artifacts += xla_dump.ingest_dump(
            writer if rank is None else RankWriter(writer, rank), dump_files, report, passes)
        for _ in dump_files:
            step("xla dump")
        for path in plan.files:
            if path.suffix != ".cpp":
                report.artifacts += single_file.ingest_file(writer, path, report,
                                                            names[named[path]])
                step(path.name)
        thunder_units = thunder_traces.ThunderUnits()  # after the traces: regions link graphs
        for folder in plan.thunder_folders:
            report.artifacts += thunder_traces.ingest_folder(writer, folder, report, thunder_units)
            step(folder.name)
        ranks = _touched_ranks(writer)  # the passes below read these ranks' units alone
        graphs.join_repeated_graphs(writer, ranks)  # sources of one graph met in any order
        single_file.place_waiting(writer, report)
        linking.link(run, writer, report, ranks)
        single_file.place_waiting(writer, report)  # modules of the ranks' kernels
        triton_cache.name_compiles(writer, ranks)
        report.artifacts += _file_profiles(writer, plan.profiles, report, rank, step)
        for path in later:
            report.artifacts += single_file.ingest_file(writer, path, report, names[named[path]])
            step(path.name)


def _dump_file(path: Path, named: Path, shown) -> xla_dump.DumpFile:
    """A file of an XLA dump, read at ``path``, its dump folder that of the path it is named
    by (``named``: where it lies in its archive) and its origin as the run names it."""
    return dataclasses.replace(xla_dump.DumpFile.of(path), origin=shown(str(path)),
                               folder=xla_dump.DumpFile.of(named).folder)


def _show_sources(report: IngestReport, opened: archives.Expansions) -> None:
    """Name what came out of an archive after the archive in every line of the report."""
    report.sources = [(opened.shown(p), kind) for p, kind in report.sources]
    report.skipped = [(opened.shown(p), opened.shown(why)) for p, why in report.skipped]
    report.warnings = [opened.shown(w) for w in report.warnings]


def _touched_ranks(writer) -> set[int] | None:
    """The ranks an ingest filed or changed units of, whose units the passes after filing
    (joining graphs, linking, naming compiles) read, so that filing one rank of many reads
    that rank's units; None (every rank) when one of them is of no rank (a single
    process's, a kernel of a cache the ranks share)."""
    ranks = set()
    for unit_id in writer.touched:
        rank = writer.run.unit_by_id(unit_id).attrs.get("rank")
        if not isinstance(rank, int):
            return None
        ranks.add(rank)
    return ranks


def _kernel_label(entry: Path) -> str:
    """What the progress bar calls a Triton entry: its kernel's name (its PTX or TTIR file's
    stem), else the folder's (a hash)."""
    try:
        found = next((p.stem for p in entry.iterdir() if p.suffix in (".ptx", ".ttir")), None)
    except OSError:
        found = None
    return found or entry.name


def _analysed(entries: list[Path], analyses: dict[str, Any], workers: int | None):
    """Each Triton cache entry with its cubin's analysis: the given one, else made here (on
    ``workers`` threads, ahead of filing), in entry order."""
    made = triton_cache.analysed_entries([e for e in entries if e.name not in analyses], workers)
    for entry in entries:
        yield (entry, analyses[entry.name]) if entry.name in analyses else next(made)


def _file_profiles(writer, found: dict[str, list[Path]], report: IngestReport,
                   rank: int | None, step) -> int:
    """Profiler traces (each with the window file of its folder), then the autotuners'
    benchmark times, once the Triton units they name are filed."""
    windows = {path.parent: path for path in found.get("window", ())}
    filed = 0
    for path in profile.one_format_each(found.get("trace", ())):
        window = next((windows[p] for p in (path.parent, *path.parents) if p in windows), None)
        filed += profile.ingest_trace(writer, path, report, rank,
                                      {"window": window} if window else None)
        report.sources.append((str(path), "profile_trace"))
        step(path.name)
    for path in found.get("autotune", ()):
        filed += profile.ingest_autotune(writer, path, report)
        step(path.name)
    for path in found.get("window", ()):
        step(path.name)
    return filed


def _share_reporter(progress, name: str):
    """A callback showing how much of one large file is read, or None without a bar."""
    if progress is None:
        return None
    return lambda fraction: progress.advance(0, description=f"{name[-32:]} {fraction:4.0%}")




def _classify(path: Path, plan: _Plan, report: IngestReport) -> None:
    """Sort one path (a file or a folder, walked) into the plan, or record why it is skipped."""
    try:
        _classify_path(path, plan, report)
    except OSError as exc:  # a folder that cannot be looked into, a path too long
        report.skipped.append((str(path), f"unreadable ({exc.strerror or exc})"))


def _classify_path(path: Path, plan: _Plan, report: IngestReport) -> None:
    if not path.exists() and not path.is_symlink():
        report.skipped.append((str(path), "no such file or folder"))
        return
    if path.is_dir():
        _classify_dir(path, plan, report)
        return
    if not path.is_file():
        report.skipped.append((str(path), "not a regular file"))
        return
    try:
        with open(path, "rb") as fh:
            head = fh.read(HEAD_BYTES)
    except OSError as exc:
        report.skipped.append((str(path), f"unreadable ({exc.strerror or exc})"))
        return
    if not head:
        report.skipped.append((str(path), "empty file"))
    elif (found := profile.kind_of(path, head)) is not None:  # gzipped: read as a stream
        plan.profiles.setdefault(found, []).append(path)
    elif compression(head) or archives.is_tar(head):
        _classify_packed(path, plan, report)
    elif xla_dump.is_xla_file(path):
        plan.xla_files.append(path)
    elif torch_trace.is_torch_trace(head):
        plan.traces.append(path)
    elif torch_logs.is_torch_log(head, path.name):
        plan.logs.append(path)
    else:
        plan.files.append(path)


def _classify_packed(path: Path, plan: _Plan, report: IngestReport) -> None:
    """A compressed file or a tarball: a compressed TORCH_TRACE log is streamed where it is,
    anything else is opened into the plan's temporary folder and classified there."""
    if plan.opened.depth_of(path) >= archives.MAX_DEPTH:
        report.skipped.append((str(path), f"an archive inside {archives.MAX_DEPTH} others, not "
                                          f"opened"))
        return
    try:
        head = read_head(path, HEAD_BYTES)
    except InputError as exc:
        report.skipped.append((str(path), str(exc).removeprefix(f"{path}: ")))
        return
    if archives.is_tar(head):
        _classify_dir(plan.opened.tarball(path, report), plan, report)
    elif torch_trace.is_torch_trace(head):
        plan.traces.append(path)
    elif not head:
        report.skipped.append((str(path), "empty once decompressed"))
    else:
        opened = plan.opened.file(path, report)
        if opened is not None:
            _classify_path(opened, plan, report)


def _classify_dir(folder: Path, plan: _Plan, report: IngestReport) -> None:
    found_before = plan.count + len(report.skipped)
    for root, dirs, files in os.walk(folder, onerror=lambda exc: report.skipped.append(
            (str(exc.filename), f"unreadable folder ({exc.strerror})"))):
        here = Path(root)
        if INDEX in files and (BLOBS in dirs or RUN_JSON in files):  # an irscope run
            dirs[:] = []
            continue
        for name in sorted(PICKLE_DIRS & set(dirs)):
            report.skipped.append((str(here / name), "pickled cache entries, never loaded"))
        for name in dirs:
            if not contained(here / name, folder):
                report.skipped.append((str(here / name), f"a link out of {folder}, not "
                                                          f"followed"))
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS | PICKLE_DIRS
                         and not d.startswith(".")
                         and not thunder_traces.is_kernels_of_compiles(here, d, dirs))
        links = {name for name in files if os.path.islink(here / name)}
        if triton_cache.is_entry(here, [name for name in files if name not in links]):
            plan.triton_entries.append(here)
            report.skipped += [(str(here / name), "a link in a Triton cache entry, not followed")
                               for name in sorted(links)]
            continue
        if torch_compile_debug.is_debug_folder(files):
            plan.debug_folders.append(here)
            continue
        if thunder_traces.is_thunder_folder(files):
            plan.thunder_folders.append(here)
            dirs[:] = []
            continue
        companions = xla_dump.companion_files(files)
        for name in sorted(files):
            if (name.startswith(".") or triton_cache.is_group_file(name)
                    or os.path.splitext(name)[1] in IGNORED_SUFFIXES):
                continue
            if not contained(here / name, folder):
                report.skipped.append((str(here / name), f"a link out of {folder}, not "
                                                         f"followed"))
                continue
            if name in companions:
                plan.xla_files.append(here / name)
                continue
            _classify(here / name, plan, report)
    if plan.count + len(report.skipped) == found_before:
        report.skipped.append((str(folder), "empty folder (no files to ingest)"))
