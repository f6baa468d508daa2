"""Turn a filled staging folder into a run: the compiled kernels and dumps, the trace, the extras.

The staged Triton kernels (compile hooks' and those Inductor loaded from a warm cache) and
the XLA dump of each compile are filed first, with what a ``StagingWatch`` prepared while the
program ran (cubin analyses, dump files, bytes already in the blob store); the rest (the
TORCH_TRACE logs, a whole-process XLA dump, the user's own dumps) goes through
``irscope.ingest``, which links graphs to the kernels they launch. What only the collectors
know (JAX jaxpr/StableHLO/analyses, a Triton kernel's Python source and cache state, compile
failures and timings) is written last into the same units, named as the ingest names them
(``jit_<fn>`` for JAX, the kernel name for Triton). In a multi-process run each rank's folder
is filed with its rank: its JAX units are that rank's (``jit_f (rank 1)``, attribute
``rank``), and a Triton kernel its compile hook saw carries the rank while no other rank
compiled it too (then it is shared, as Inductor's kernels are, with ``ranks``).
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import re
from pathlib import Path
from typing import Any

from irscope.analysis.ranks import ranked_name, split_rank
from irscope.collectors import xla_dump_cache
from irscope.collectors.inductor_cache import stage_cached_kernels
from irscope.collectors.staging import Staging
from irscope.collectors.triton import SIDECAR
from irscope.collectors.watch import Prepared, StagingWatch
from irscope.ingest import thunder_traces, triton_cache
from irscope.store import Run, Writer
from irscope.read.units import eager_op_attrs

EVENT_KINDS = ("compile_failure", "compile_time", "collector_error")
# .../site-packages/jax/_src/numpy/ufuncs.py: where the functions JAX jits for itself live
JAX_SOURCE = re.compile(r"[/\\]jax[/\\]_src[/\\]")


def dump_paths(staging: Staging, extra: list[Path]) -> list[Path]:
    """Staging folders that received something, plus files from the user's own dump folders."""
    paths = [p for p in (staging.torch_trace, staging.triton, staging.xla,
                         staging.root / thunder_traces.FOLDER)
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
        if report.pass_logs_left_out:
            notes.append(f"{report.pass_logs_left_out} XLA emitter MLIR pass logs not filed "
                         "(inspect --passes files them pass by pass)")
        if report.warnings:
            more = f" (+{len(report.warnings) - 1} more)" if len(report.warnings) > 1 else ""
            notes.append(f"ingest: {report.warnings[0]}{more}")
    except Exception as exc:  # keep the staging folder and everything filed below
        notes.append(f"dumps not ingested ({type(exc).__name__}: {exc}); "
                     f"kept in {staging.root}")
        complete = False
    with run.transaction() as writer:
        _file_jax(run, writer, prepared.functions, rank)
        _file_triton_sidecars(run, writer, staging, rank)
        for event in staging.read_events():
            kind = event.pop("kind", None)
            if kind in EVENT_KINDS:
                unit = event.get("unit") or event.get("name")
                framework = event.get("framework")
                unit_id = (_unit_id(run, framework, ranked_name(unit, rank))
                           if framework == "jax" and unit else None) or _unit_id(
                               run, framework, unit)
                if rank is not None:
                    event["rank"] = rank
                writer.add_event(kind, event, unit_id=unit_id)
                if kind == "collector_error":
                    notes.append(f"{event.get('collector')} collector: {event.get('error')}")
    return notes, complete


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
        files += [DumpFile(dump_name(renamed[name]), str(entry), f"{entry}/{name}",
                           functools.partial(read, name)) for name in names]
    return files


def _read_relative(folder: Path, name: str) -> bytes:
    return (folder / name).read_bytes()


def _file_jax(run: Run, writer: Writer, functions: list[dict[str, Any]],
              rank: int | None = None) -> None:
    seen: dict[tuple[str, bool], int] = {}
    origin = "irscope jax collector"
    dumped_units = {u.name for u in run.units("jax")}  # filed from XLA dumps just before
    for function in functions:
        module = function.get("module") or "jit_unknown"
        dumped = function.get("xla_dump", True)
        count = seen[module, dumped] = seen.get((module, dumped), 0) + 1
        if dumped:
            name = _jax_unit_name(run, module, count, rank)
        else:  # an eager op filed from its executable: named apart from any dumped unit
            name = ranked_name(module if count == 1 else f"{module} (compile {count})", rank)
            if name in dumped_units:
                name = ranked_name(f"{module} (eager op {count})", rank)
        attrs = {k: v for k, v in function.items() if k.endswith("_seconds")}
        if _made_by_jax(function):
            attrs.update(eager_op_attrs(function.get("called_from")))
        if rank is not None:
            attrs["rank"] = rank
        unit_id = writer.add_unit(name, "jax", function.get("source_file"),
                                  function.get("source_line"), attrs)
        for kind in ("jaxpr", "stablehlo", "hlo_after_opt"):
            if function.get(kind):
                writer.add_stage(unit_id, kind, function[kind], origin=origin)
        analyses = {k: function[k] for k in ("cost_analysis", "memory_analysis") if k in function}
        if analyses:
            text = json.dumps(analyses, indent=2, sort_keys=True)  # same analyses, same bytes
            writer.add_stage(unit_id, "cost_analysis", text, origin=origin)


def _made_by_jax(function: dict[str, Any]) -> bool:
    """Whether JAX jitted this function for itself, not the user: the collector saw its code
    inside the jax package (a primitive or jax.numpy function run eagerly)."""
    if "jax_internal" in function:
        return bool(function["jax_internal"])
    return bool(JAX_SOURCE.search(function.get("source_file") or ""))


def _jax_unit_name(run: Run, module: str, compile_number: int, rank: int | None = None) -> str:
    """The unit of the n-th compile of ``module`` (on ``rank``): the XLA dump's, in
    module-number order.

    The dump files a recompiled function (same module name) as ``name (module N)``; the
    n-th compile seen here is the n-th module of that name there.
    """
    if compile_number == 1:
        return ranked_name(module, rank)
    modules = sorted((u for u in run.units("jax") if u.attrs.get("rank") == rank
                      and split_rank(u.name)[0].startswith(f"{module} (module ")),
                     key=lambda u: _number(u.attrs.get("xla_module")))
    if compile_number - 2 < len(modules):
        return modules[compile_number - 2].name
    return ranked_name(f"{module} (compile {compile_number})", rank)


def _file_triton_sidecars(run: Run, writer: Writer, staging: Staging,
                          rank: int | None = None) -> None:
    for sidecar in sorted(staging.triton.glob(f"*/{SIDECAR}")):
        info = _read_json(sidecar)
        name = info.get("name")
        if not name:
            continue
        unit_id = _unit_id(run, "triton", name, info.get("hash"))
        if unit_id is None:
            unit_id = writer.add_unit(name, "triton")
        attrs = {"cache_hit": info.get("cache_hit"), "compile_time_us": info.get("compile_time_us"),
                 "constexprs": info.get("constexprs"), "signature": info.get("signature")}
        if rank is not None:
            attrs.update(_kernel_ranks(run.unit_by_id(unit_id).attrs, rank))
        writer.add_unit(_unit_name(run, unit_id) or name, "triton", info.get("source_file"),
                        info.get("source_line"), {k: v for k, v in attrs.items() if v is not None
                                                  or k == "rank"})
        if info.get("python_source"):
            writer.add_stage(unit_id, "python_source", info["python_source"],
                             origin=info.get("source_file"))
        event = {"framework": "triton", "name": name, "hash": info.get("hash")}
        writer.add_event("cache_hit" if info.get("cache_hit") else "cache_miss",
                         {**event, "rank": rank} if rank is not None else event, unit_id=unit_id)


def _kernel_ranks(attrs: dict[str, Any], rank: int) -> dict[str, Any]:
    """The rank attributes of a kernel ``rank`` compiled: ``rank`` while no other rank
    compiled it, None (a kernel of no one rank) once another did; ``ranks`` lists them all."""
    ranks = sorted({*attrs.get("ranks", ()), rank})
    return {"ranks": ranks, "rank": ranks[0] if len(ranks) == 1 else None}


def _unit_id(run: Run, framework: str | None, name: str | None, kernel_hash: str | None = None):
    """The id of the unit ingest made for (framework, name), trying ``name-<hash8>`` too."""
    if not framework or not name:
        return None
    candidates = [name]
    if kernel_hash:
        candidates.insert(0, f"{name}-{kernel_hash[:8]}")
    for candidate in candidates:
        unit = run.unit_named(framework, candidate)
        if unit is not None:
            return unit.id
    return None


def _unit_name(run: Run, unit_id: int) -> str | None:
    return run.unit_by_id(unit_id).name


def _number(value: Any) -> int:
    """An XLA module number as stored (int or text), for ordering; 0 when there is none."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
