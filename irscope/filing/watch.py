"""Filing work done while the script runs: dumps read and cached, cubins analysed, bytes stored.

``irscope inspect`` waits while the script runs; a StagingWatch uses that time. It follows
the staging folder (see ``irscope.collectors.staging``) and does, as each piece is complete,
the work filing would otherwise do after the script: an XLA compile's dump is read (from its
folder, or from irscope's dump cache) and a finished one is kept in that cache; a Triton
kernel's cubin is disassembled and its resources read (NVIDIA tools, a pool of threads);
and the bytes that filing will store go into the run's blob store ahead, compressed, so that
filing at the end writes index rows and finds its blobs there. Each JSON line is parsed
once, here, and handed to filing. ``finish()`` does what is left, in parallel, and returns
it all as ``Prepared``, one per staging folder (a multi-process run has one per rank).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from irscope import nvtools
from irscope.collectors import xla_dump_cache
from irscope.collectors.staging import Staging
from irscope.collectors.triton import SIDECAR
from irscope.ingest.xla_dump import MLIR_PASS_LOG

POLL_S = 0.1  # how often the staging folder is looked at while the script runs
LEAST_PRIORITY = 19  # the nice value of the threads that work while the program runs
# \t# kernel path: /tmp/torchinductor_me/ab/cabc123.py   (output code in a trace log)
TRACE_KERNEL_PATH = re.compile(r"^\t# kernel path: (\S+)$")
# \ttriton_poi_fused_exp_tanh_0 = async_compile.triton('triton_poi_fused_exp_tanh_0', '''
TRACE_KERNEL_DEF = re.compile(r"^\t\w+ = async_compile\.triton\(['\"](\w+)['\"]")  # its function


@dataclass
class Prepared:
    """What a watch read and computed, for filing.

    ``compiles``: the JAX collector's record of each XLA compile, in compile order;
    ``functions``: its lowering and compile records merged per lowering, in order;
    ``cached_dumps``: compile number -> the files of its dump from the cache, or the error
    that made the cached dump unreadable; ``analyses``: Triton kernel folder name (a staged
    kernel's, or a Triton cache entry's) -> its cubin's analysis (None where there is none);
    ``inductor_kernels``: (name, kernel path) of each Triton kernel the output code in the
    trace names, in order; ``stored``: digests of the blobs put into the run's blob store
    ahead (not yet named by any stage: an ingest's collection of orphans spares them).
    """

    compiles: list[dict[str, Any]] = field(default_factory=list)
    functions: list[dict[str, Any]] = field(default_factory=list)
    cached_dumps: dict[int, dict[str, bytes] | Exception] = field(default_factory=dict)
    analyses: dict[str, Any] = field(default_factory=dict)
    inductor_kernels: list[tuple[str, str]] = field(default_factory=list)
    stored: set[str] = field(default_factory=set)


class Tail:
    """The lines another process appends to a file, each taken once it is complete."""

    def __init__(self, path: Path):
        self.path = path
        self._offset = 0
        self._partial = b""

    def read(self, final: bool = False) -> list[bytes]:
        """The lines completed since the last call; ``final`` (the writer has ended) takes
        an unterminated last line too."""
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self._offset)
                data = fh.read()
        except OSError:
            return []
        self._offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = b"" if final else lines.pop()
        return lines


class JsonLines(Tail):
    """The records of a JSON-lines file another process appends to, read as they come."""

    def read(self, final: bool = False) -> list[dict[str, Any]]:
        """Records of the lines completed since the last call (a line that is no JSON
        object, as one cut short by a kill, is dropped)."""
        records = []
        for line in super().read(final):
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                records.append(record)
        return records


class StagingWatch:
    """Follows a staging folder and the per-rank folders processes create inside it;
    ``start()`` follows in the background, ``finish()`` ends it.

    ``run_path``: the run whose blob store receives bytes ahead (None: no bytes ahead, as
    when everything is done at the end anyway); ``environ``: the program's environment (where
    its compilers cache); ``started``: when the program started (None: every Inductor kernel
    is looked up at the end); ``workers``: threads for reading, caching and the NVIDIA tools
    (default: one per core).
    """

    def __init__(self, staging: Staging, run_path: Path | None = None,
                 environ: dict[str, str] | None = None, started: float | None = None,
                 workers: int | None = None):
        self.staging = staging
        self.environ = dict(os.environ if environ is None else environ)
        self.started = started  # older cache entries are a warm cache's: no compile hook sees them
        self._run_path = run_path
        self._workers = workers or nvtools.default_workers()
        self._pool = ThreadPoolExecutor(self._workers, thread_name_prefix="irscope-filing",
                                        initializer=yield_to_the_program)
        self._folders: dict[Path, _Folder] = {}
        self._work: list[_Job] = []
        self._ahead: deque[bytes] = deque()  # bytes for the blob store, put by the watch thread
        self._stored: set[str] = set()  # digests of what was put
        self._storing_ahead = run_path is not None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._follow, name="irscope-watch", daemon=True)
        self._thread.start()

    def finish(self, progress=None) -> dict[Path, Prepared]:
        """Stop following, do what is left on every core, and return the results by staging
        folder (the run's own and each rank's)."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
        self._storing_ahead = False  # filing stores whatever is still to come
        self._ahead.clear()
        # The program has ended: what is left runs at the usual priority, on every core.
        background, self._pool = self._pool, ThreadPoolExecutor(
            self._workers, thread_name_prefix="irscope-filing")
        for job in self._work:
            if job.future.cancel():
                job.future = self._pool.submit(job.function, *job.args)
        self._poll(final=True)
        kernels = [job for job in self._work if job.function is _analyse]
        if progress is not None and kernels:  # filing counts the rest (dumps' files, logs)
            progress.total(len(kernels))
        for job in self._work:  # in the order the work was found
            job.future.exception()  # waits; each job's own result says what went wrong
            if progress is not None and job.function is _analyse:
                progress.advance(1, description="kernels")
        background.shutdown()
        self._pool.shutdown()
        return {root: folder.prepared(self._stored) for root, folder in self._folders.items()}

    # -- following -------------------------------------------------------------------------
    def _follow(self) -> None:
        from irscope.store import Run

        yield_to_the_program()
        try:
            run = Run.open(self._run_path) if self._run_path is not None else None
        except Exception:  # noqa: BLE001  no bytes ahead; filing stores them all at the end
            run = None
        try:
            while not self._stop.wait(POLL_S):
                self._poll()
                if run is not None:
                    self._put_ahead(run)
        finally:
            if run is not None:
                run.close()

    def _poll(self, final: bool = False) -> None:
        """Take in what the program staged since the last look and start work on it."""
        for staging in [self.staging, *(rank for _, rank in self.staging.ranks())]:
            folder = self._folders.get(staging.root)
            if folder is None:
                folder = self._folders[staging.root] = _Folder(staging)
            folder.poll(self, final)

    def submit(self, function, *args) -> _Job:
        job = _Job(function, args, self._pool.submit(function, *args))
        self._work.append(job)
        return job

    def queue(self, data: bytes) -> None:
        """Bytes filing will store: put into the run's blob store ahead, while following."""
        if self._storing_ahead:
            self._ahead.append(data)

    def _put_ahead(self, run) -> None:
        """Store the queued bytes (compressed as the run keeps them) in one transaction."""
        if not self._ahead:
            return
        try:
            with run.transaction():
                while self._ahead:
                    self._stored.add(run.put_blob(self._ahead.popleft()))
        except Exception:  # noqa: BLE001  a busy run: filing stores what is left itself
            self._ahead.clear()


class _Folder:
    """One staging folder being followed: its records so far and the work started on them."""

    def __init__(self, staging: Staging):
        from irscope.filing.inductor_cache import CacheIndex

        self.staging = staging
        self._dump_records = JsonLines(staging.xla_dump_records)
        self._function_records = JsonLines(staging.jax_functions)
        self._compiles: dict[int, dict[str, Any]] = {}
        self._functions: dict[int, dict[str, Any]] = {}
        self._cached: dict[int, _Job] = {}
        self._kept: set[int] = set()
        self._kernels: dict[str, _Job] = {}
        self._traces: dict[Path, OutputCodeKernels] = {}
        self._inductor: dict[tuple[str, str], None] = {}  # (name, kernel path), in order
        # named kernels whose compiles may still come: a compile worker's, out of the hooks
        self._pending: dict[tuple[str, str], tuple[float, float]] = {}  # -> (when, interval)
        self._cache_index = CacheIndex()  # Triton's cache folders as listed
        self._entries: set[Path] = set()  # the cache entries started on (or a hook's)

    def prepared(self, stored: set[str]) -> Prepared:
        return Prepared(stored=stored,
            compiles=[self._compiles[n] for n in sorted(self._compiles)],
            functions=[self._functions[n] for n in sorted(self._functions)],
            cached_dumps={n: _outcome(f) for n, f in self._cached.items()},
            analyses={name: result for name, f in self._kernels.items()
                      if not isinstance(result := _outcome(f), Exception)},
            inductor_kernels=list(self._inductor))

    def poll(self, watch: StagingWatch, final: bool) -> None:
        for record in self._dump_records.read(final):
            if isinstance(record.get("compile"), int):
                self._compiles.setdefault(record["compile"], {}).update(record)
        for number, record in self._compiles.items():
            if record.get("cached") and number not in self._cached:
                self._cached[number] = watch.submit(_load_cached, watch, Path(record["cached"]))
            elif (record.get("done") and record.get("folder") and record.get("cache")
                  and record.get("key") and number not in self._kept):
                self._kept.add(number)
                watch.submit(_keep_dump, watch, record)
        for record in self._function_records.read(final):
            self._functions.setdefault(record.get("id", 0), {}).update(record)
            for kind in ("jaxpr", "stablehlo", "hlo_after_opt"):  # text filing stores
                if isinstance(record.get(kind), str) and record[kind]:
                    watch.queue(record[kind].encode("utf-8"))
        self._poll_kernels(watch)
        self._poll_inductor(watch, final)

    def _poll_kernels(self, watch: StagingWatch) -> None:
        """Start on each kernel a compile hook staged (its notes, written last, are there)."""
        try:
            names = sorted(os.listdir(self.staging.triton))
        except OSError:
            return
        for name in names:
            folder = self.staging.triton / name
            if name not in self._kernels and (folder / SIDECAR).is_file():
                self._kernels[name] = watch.submit(_analyse, watch, folder)

    def _poll_inductor(self, watch: StagingWatch, final: bool) -> None:
        """Start on the cached compiles of the Triton kernels the output code names that no
        compile hook stages: those of a warm cache, which Inductor loads without compiling,
        and those Inductor's compile workers make, out of the program's hooks, once Triton's
        cache holds them whole (the output code may name a kernel before its workers are
        done: it is looked for again, less often each time). Filing copies them in at the
        end, under the name a hook would have given them, which keys their analysis here."""
        try:
            logs = sorted(self.staging.torch_trace.iterdir())
        except OSError:
            logs = []
        for log in logs:
            reader = self._traces.setdefault(log, OutputCodeKernels(log))
            for name, path in reader.read(final):
                if (name, path) not in self._inductor:
                    self._inductor[(name, path)] = None
                    if watch.started is not None:  # (else no start to tell compiles by)
                        self._pending[(name, path)] = (0.0, POLL_S)
        now = time.monotonic()
        self._cache_index.rescan()  # entries written since the last poll are listed
        for key, (due, interval) in list(self._pending.items()):
            if final or due > now:
                continue  # (what is left at the end is filing's)
            # looked for again after an entry is found: autotuning's other configurations
            # may finish later, each an entry of its own
            self._start_cached(watch, *key)
            self._pending[key] = (now + interval, min(2.0, interval * 2))

    def _start_cached(self, watch: StagingWatch, name: str, path: str) -> None:
        """Start on each whole cache entry of ``name`` not started on before."""
        from irscope.filing.inductor_cache import find_entries, staged_name, written_since

        for entry in find_entries(name, path, watch.environ, self._cache_index,
                                  skip=self._entries):
            staged = staged_name(entry, name)
            if staged in self._kernels:  # a compile hook's
                self._entries.add(entry)
            elif (not written_since(entry, watch.started)
                  or (entry / f"__grp__{name}.json").is_file()):  # Triton writes it last
                self._kernels[staged] = watch.submit(_analyse, watch, entry)
                self._entries.add(entry)


class OutputCodeKernels:
    """The Triton kernels named in the Inductor output code of a trace log being written.

    The output code is a record's payload, each line behind a tab; a kernel is a ``# kernel
    path:`` comment, more comments, then its ``async_compile.triton(`` line, as
    ``inductor_cache.KERNEL_DEF`` reads it from a filed run.
    """

    def __init__(self, path: Path):
        self._lines = Tail(path)
        self._path: str | None = None  # the kernel path of the kernel being read

    def read(self, final: bool = False) -> list[tuple[str, str]]:
        """(name, kernel path) of the kernels in the lines written since the last call."""
        found = []
        for line in (raw.decode("utf-8", "replace") for raw in self._lines.read(final)):
            if (match := TRACE_KERNEL_PATH.match(line)) is not None:
                self._path = match[1]
            elif self._path is not None and line.startswith("\t#"):
                continue
            elif self._path is not None and (match := TRACE_KERNEL_DEF.match(line)):
                found.append((match[1], self._path))
                self._path = None
            else:
                self._path = None
        return found


# -- jobs on the pool ---------------------------------------------------------------------
def _load_cached(watch: StagingWatch, entry: Path) -> dict[str, bytes]:
    """The files of a cached dump, their bytes queued for the blob store."""
    files = _without_pass_logs(xla_dump_cache.load(entry))
    os.utime(entry)  # recently used: the last to be pruned
    for data in files.values():
        watch.queue(data)
    return files


def _without_pass_logs(files: dict[str, bytes]) -> dict[str, bytes]:
    """A dump's files but the emitters' MLIR pass logs: a cached dump serves runs that did
    not ask for passes (``inspect --passes`` compiles without the cache), which leave them out."""
    return {name: data for name, data in files.items() if not MLIR_PASS_LOG.search(name)}


def _keep_dump(watch: StagingWatch, record: dict[str, Any]) -> None:
    """Keep a finished compile's dump in the cache, and queue its files' bytes."""
    files = _without_pass_logs(xla_dump_cache.read_folder(Path(record["folder"])))
    try:
        xla_dump_cache.store_files(Path(record["cache"]), record["key"], files)
    except OSError:  # a full or read-only cache: the run itself is complete
        pass
    for data in files.values():
        watch.queue(data)


def _analyse(watch: StagingWatch, folder: Path):
    """The analysis of a staged kernel's cubin (None without one or without the tools), its
    files' bytes and its SASS queued for the blob store."""
    from irscope.ingest import triton_cache

    if not any(nvtools.find_tool(tool) for tool in nvtools.TOOLS):
        return None  # filing says so once, after the program
    _, analysis = next(triton_cache.analysed_entries([folder], workers=1))
    if analysis is not None and analysis.sass is not None:
        watch.queue(analysis.sass.encode("utf-8"))
    for path in _entry_files(folder):
        try:
            watch.queue(path.read_bytes())
        except OSError:
            continue
    return analysis


def _entry_files(folder: Path) -> list[Path]:
    """The files of a Triton kernel folder that filing stores as stages (its IR, cubin and
    Triton's own metadata; not the collector's notes or Triton's group index)."""
    from irscope.ingest.triton_cache import EXTENSIONS, IR_EXTENSIONS

    found = [p for p in folder.iterdir()
             if p.suffix in EXTENSIONS and p.is_file() and not p.is_symlink()]
    stem = next((p.stem for p in found if p.suffix in IR_EXTENSIONS), None)
    return [p for p in found if p.suffix != ".json" or p.stem == stem]


def yield_to_the_program() -> None:
    """Lower this thread's priority (and that of the tools it starts) to the least, so that
    work done while the program runs takes only the cores it leaves idle (Linux: a thread's
    nice value is its own; elsewhere nothing changes)."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), LEAST_PRIORITY)
    except (AttributeError, OSError):
        pass


@dataclass
class _Job:
    """Work on the pool: what it runs, and its future (moved to another pool at the end)."""

    function: Any
    args: tuple
    future: Future


def _outcome(job: _Job):
    """A finished job's result, or the exception it raised."""
    error = job.future.exception()
    return error if error is not None else job.future.result()
