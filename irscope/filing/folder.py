"""Turn a filled staging folder into a run: the compiled kernels and dumps, the trace, the extras.

The staged Triton kernels (compile hooks' and those Inductor loaded from a warm cache) and
the XLA dump of each compile are filed first, with what a ``StagingWatch`` prepared while the
program ran (cubin analyses, dump files, bytes already in the blob store); the rest (the
TORCH_TRACE logs, a whole-process XLA dump, the user's own dumps) goes through
``irscope.ingest``, which links graphs to the kernels they launch. What only the collectors
know (JAX jaxpr/StableHLO/analyses, a Triton kernel's Python source and cache state, compile
failures and timings) is filed last into the same units by ``irscope.ingest.collected``. In a multi-process run each rank's folder
is filed with its rank: its JAX units are that rank's (``jit_f (rank 1)``, attribute
``rank``), and a Triton kernel its compile hook saw carries the rank while no other rank
compiled it too (then it is shared, as Inductor's kernels are, with ``ranks``).
"""

from __future__ import annotations

import functools
import itertools
import json
import os
from pathlib import Path
from typing import Any

from irscope.collectors import xla_dump_cache
from irscope.collectors.profile import FOLDER as PROFILE_FOLDER
from irscope.filing.inductor_cache import stage_cached_kernels
from irscope.collectors.staging import Staging
from irscope.collectors.triton import SIDECAR
from irscope.errors import disk_full
from irscope.filing.watch import Prepared, StagingWatch
from irscope.ingest import profile, thunder_traces, triton_cache
from irscope.ingest.collected import ingest_collected
from irscope.store import Run



def dump_paths(staging: Staging, extra: list[Path]) -> list[Path]:
    """Staging folders that received something, plus files from the user's own dump folders."""
    paths = [p for p in (staging.torch_trace, staging.triton, staging.xla,
                         staging.root / thunder_traces.FOLDER, staging.root / PROFILE_FOLDER)
             if p.is_dir() and any(p.iterdir())]
    return paths + [p for p in extra if p.exists() and p not in paths]


def file_staging(run: Run, staging: Staging, extra: list[Path] = (),
                 progress=None, environ: dict[str, str] | None = None,
                 prepared: Prepared | None = None,
                 rank: int | None = None, passes: bool = False) -> tuple[list[str], bool]:
    """File everything staged into ``run``: (notes on what went wrong, whether all was read).

    ``extra``: files from the user's own dump folders; ``prepared``: what a StagingWatch
    did while the program ran (without it, that work is done here first, in parallel);
    ``rank``: the rank whose folder ``staging`` is, in a multi-process run; ``passes``: file
    XLA's emitter pass logs pass by pass (``inspect --passes``), else leave them out.
    """
    progress = progress if isinstance(progress, Passes) else Passes(progress)
    if prepared is None:
        prepared = StagingWatch(staging).finish(progress).get(staging.root, Prepared())
    notes: list[str] = []
    complete = True
    environ = dict(environ or os.environ)
    dumps = _compile_dumps(prepared.compiles, prepared.cached_dumps, notes)
    try:
        from irscope.ingest import IngestReport, ingest

        if prepared.inductor_kernels:  # those no compile hook saw: from Inductor's warm cache
            stage_cached_kernels(run, staging, environ, prepared.inductor_kernels)
        _source_ttir(staging)
        kernels, paths = _triton_kernels(staging), []
        for path in dump_paths(staging, list(extra)):
            if path == staging.triton:  # anything but kernel folders: the ingest's to tell
                paths += [p for p in sorted(path.iterdir()) if p not in kernels]
            else:
                paths.append(path)
        own = [p for p in paths if p in extra]  # the user's dump folders: of no one rank
        paths = [*kernels, *(p for p in paths if p not in own)]
        report = IngestReport()
        if paths or dumps:  # one ingest: the blobs it stores all come after its collection
            report = ingest(run, paths, progress=progress, dumps=dumps,
                            analyses=prepared.analyses, keep=prepared.stored, rank=rank,
                            passes=passes)
        if own:
            report.warnings += ingest(run, own, progress=progress, keep=prepared.stored).warnings
        if extra:  # the user's own trace: its output code is read from the run
            cached = stage_cached_kernels(run, staging, environ)
            if cached:
                ingest(run, cached, progress=progress)
        notes += _window_notes(staging.root / PROFILE_FOLDER / profile.WINDOW_FILE)
        if report.pass_logs_left_out:
            notes.append(f"{report.pass_logs_left_out} XLA emitter MLIR pass logs not filed "
                         "(inspect --passes files them pass by pass)")
        if report.warnings:
            more = f" (+{len(report.warnings) - 1} more)" if len(report.warnings) > 1 else ""
            notes.append(f"ingest: {report.warnings[0]}{more}")
    except Exception as exc:  # keep the staging folder and everything filed below
        if disk_full(exc):  # not a damaged dump: the run cannot be written, said as an error
            raise
        notes.append(f"dumps not ingested ({type(exc).__name__}: {exc}); "
                     f"kept in {staging.root}")
        complete = False
    notes += ingest_collected(run, prepared.functions, _sidecars(staging),
                              staging.read_events(), rank)
    return notes, complete


def _window_notes(path: Path) -> list[str]:
    """What ``--profile`` could not measure: no window at all, or fewer steps than asked."""
    window = profile.read_window(path) if path.is_file() else None
    if not window:
        return []
    if window.get("reason"):
        return [f"--profile: nothing timed: {window['reason']}"]
    done, asked = window.get("steps_profiled", 0), window.get("steps", 0)
    if isinstance(done, int) and isinstance(asked, int) and done < asked:
        return [f"--profile: {done} of {asked} steps measured (the script ended first)"]
    return []


class Passes:
    """A progress handle over several passes, each announcing its own total: the bar's total
    is what earlier passes did plus what the current one announces."""

    def __init__(self, progress):
        self._progress = progress
        self._done = 0

    def total(self, total: int) -> None:
        if self._progress is not None:
            self._progress.total(self._done + total)

    def advance(self, n: int = 1, description: str | None = None) -> None:
        self._done += n
        if self._progress is not None:
            self._progress.advance(n, description=description)


def _sidecars(staging: Staging) -> list[dict[str, Any]]:
    """What the Triton collector noted of each kernel it saw (its SIDECAR file), in order."""
    found = []
    for sidecar in sorted(staging.triton.glob(f"*/{SIDECAR}")):
        try:
            info = json.loads(sidecar.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            continue
        if isinstance(info, dict):
            found.append(info)
    return found


def _triton_kernels(staging: Staging) -> list[Path]:
    """The staged Triton kernel folders (compile hooks' and warm-cache copies alike, then
    jax_triton's dumps), in the order an ingest of the folder takes them."""
    found = []
    for root in (staging.triton, staging.jax_triton):
        if root.is_dir():
            found += [folder for folder in sorted(root.iterdir())
                      if folder.is_dir() and not folder.is_symlink() and triton_cache.is_entry(
                          folder, [n for n in os.listdir(folder)
                                   if not os.path.islink(folder / n)])]
    return found


def _source_ttir(staging: Staging) -> None:
    """jax_triton dumps the TTIR its code generator made, before Triton's TTIR passes: the
    compile's input, which a Triton cache entry keeps as ``<kernel>.source``."""
    for ttir in staging.jax_triton.glob("*/*.ttir"):
        source = ttir.with_suffix(".source")
        if not source.exists() and not ttir.is_symlink():
            ttir.rename(source)


def _compile_dumps(compiles: list[dict[str, Any]], cached: dict[int, Any],
                   notes: list[str]) -> list:
    """The dump files of every compile, from its own folder or from the dump cache (as read
    while the script ran), with module numbers counted over the run in compile order."""
    from irscope.ingest.xla_dump import DumpFile, dump_name

    files = []
    numbers = itertools.count(1)
    for record in compiles:
        if record.get("cached"):
            entry = Path(record["cached"])
            members = cached.get(record["compile"])
            if not isinstance(members, dict):  # a damaged cache entry: dropped, noted
                entry.unlink(missing_ok=True)  # the next run dumps this module afresh
                error = members if members is not None else "not read"
                notes.append(f"cached XLA dump of {record.get('module')} unreadable "
                             f"({type(error).__name__}: {error}); removed from the cache")
                continue
            names, read = list(members), members.__getitem__
        elif record.get("folder"):
            entry = Path(record["folder"])
            try:
                names = xla_dump_cache.folder_files(entry)
            except OSError as exc:  # unreadable: noted; the folder stays in staging
                notes.append(f"XLA dump of {record.get('module')} unreadable ({exc})")
                continue
            read = functools.partial(_read_relative, entry)
        else:
            continue
        renamed = xla_dump_cache.renumbered(names, numbers)
        module = record.get("module") or ""
        files += [DumpFile(dump_name(xla_dump_cache.named_as_jax(renamed[name], module)),
                           str(entry), f"{entry}/{name}",
                           functools.partial(read, name)) for name in names]
    return files


def _read_relative(folder: Path, name: str) -> bytes:
    return (folder / name).read_bytes()
