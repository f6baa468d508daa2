"""One collection from start to finish: a fresh run and its staging folder, then filing."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from irscope import environment
from irscope.collectors.staging import (Staging, collection_env, staging_for, user_dump_files,
                                        user_environment)
from irscope.errors import RunError
from irscope.store.lock import WriterLock
from irscope.store.schema import INDEX, LOCK_FILE

if TYPE_CHECKING:
    from irscope.filing.watch import StagingWatch
    from irscope.store import Run


class Session:
    """A run being collected: create it, hand out the staging environment, file it at the end."""

    def __init__(self, output: str | os.PathLike | None, name: str, only: tuple[str, ...],
                 meta: dict[str, Any], replace: bool = False, provenance: bool = False):
        path = Path(output) if output else _claim_run_dir(name)
        self._made_folder = not output or not path.exists()  # discard() removes it then
        # One writer per run: a second collection into the same folder is refused at once.
        self._lock = WriterLock(path).acquire()
        try:
            held = [p for p in path.iterdir() if p.name != LOCK_FILE]
            if held and replace:
                _clear_run(path, held)
            elif held:
                raise RunError(f"{path}: already exists; pick another -o or remove it")
        except BaseException:
            self._lock.release()
            raise
        self.only = only
        self.provenance = provenance  # ask Inductor for its provenance records
        self.started = time.time()
        self.user_env = user_environment(dict(os.environ))  # not an enclosing collection's
        self._path = path
        # partial until filed: a run whose filing was killed or failed says so
        self._meta = {"name": name, "kind": "capture", "started": environment.now(),
                      "frameworks_selected": list(only), "partial": True, **meta}
        self._run: Run | None = None
        # Absolute: the script may change directory (Hydra does) before it compiles.
        self.staging: Staging = staging_for(path.absolute()).create()
        self._cleanup: threading.Thread | None = None
        self._watch: StagingWatch | None = None

    def open_run(self, meta: dict[str, Any] | None = None) -> Run:
        """Create the run's index, adding ``meta`` to run.json.

        Separate from construction so that ``inspect`` can start the script first and
        describe the machine while it runs; ``run`` opens it with no more meta if needed.
        """
        if self._run is None:
            from irscope.store import Run  # SQLite and friends: not before the script starts

            self._run = Run.create(self._path, {**self._meta, **(meta or {})})
        elif meta:
            self._run.update_meta(meta)
        return self._run

    @property
    def run(self) -> Run:
        return self.open_run()

    @property
    def path(self) -> Path:
        return self._path

    def watch(self) -> None:
        """Start filing work on what is staged while the program still runs (the run is
        opened first: that work stores bytes in it ahead)."""
        from irscope.filing.watch import StagingWatch  # once the program runs

        if self._watch is None:
            self._watch = StagingWatch(self.staging, self.run.path,
                                       {**self.user_env, **self.env()}, self.started)
            self._watch.start()

    def env(self) -> dict[str, str]:
        """Variables to add to the environment of whatever compiles (child or this process)."""
        return collection_env(self.staging, self.only, self.user_env, self.provenance)

    def finish(self, status: dict[str, Any], keep_staging: bool = False,
               progress=None, passes: bool = False) -> list[str]:
        """File the staging folder into the run and record how the program ended
        (``passes``: with the XLA emitter pass logs, pass by pass)."""
        from irscope.filing.folder import Passes, file_staging  # not on the script's path
        from irscope.collectors.pallas import file_kernels

        filing_started = time.time()
        progress = Passes(progress)
        prepared = self._watch.finish(progress) if self._watch is not None else {}
        watched = time.time()
        ranks = self.staging.ranks()  # a multi-process run: each rank's folder in rank order
        notes, complete = [], True
        # Where the script pointed TORCH_TRACE or a cache itself: followed there.
        moved = {k: v for k, v in (status.get("script_env") or {}).items()
                 if isinstance(k, str) and isinstance(v, str)}
        if "TORCH_TRACE" in moved:  # (PyTorch sets its cache folder itself: no note for it)
            notes.append(f"the script set TORCH_TRACE={moved['TORCH_TRACE']}: read from there")
        extra = user_dump_files({**self.user_env, **moved}, self.started - 1)
        for rank, staging in [*ranks, (None, self.staging)]:  # then what no rank staged
            filed, whole = file_staging(self.run, staging, extra, progress,
                                        {**self.user_env, **self.env(), **moved},
                                        prepared.get(staging.root), rank, passes)
            file_kernels(self.run, staging, rank)  # Pallas and jax_triton kernels of jits
            notes += [f"rank {rank}: {note}" if rank is not None else note for note in filed]
            complete, extra = complete and whole, []
        ended = time.time()
        code = int(status.get("exit_status", 0) or 0)
        self.run.update_meta({
            "exit_status": code,
            "ended": status.get("ended", "exit"),
            "partial": code != 0,
            "error": status.get("error"),
            "frameworks": status.get("frameworks", []),
            "versions": {**self.run.meta.get("versions", {}), **status.get("versions", {})},
            "missing_frameworks": status.get("missing", []),
            "duration_s": round(ended - self.started, 3),
            "filing_s": round(ended - filing_started, 3),
            "phases_s": phases(self.started, status, filing_started, ended),
            # filing's own parts: the watch's work left at the script's end, then the staged
            # folders filed (ingest)
            "filing_phases_s": {"watch": round(watched - filing_started, 3),
                                "ingest": round(ended - watched, 3)},
            "finished": environment.now(),
            "notes": notes,
            **({"ranks": [rank for rank, _ in ranks]} if ranks else {}),
            **({"failed_ranks": status["failed_ranks"]} if status.get("failed_ranks") else {}),
        })
        if complete and not keep_staging:
            import shutil

            self._cleanup = threading.Thread(target=shutil.rmtree, args=(self.staging.root, True))
            self._cleanup.start()  # slow on some file systems: overlap it with the summary
        return notes

    def discard(self) -> None:
        """Leave no run behind (the program never started: its script did not compile), so
        that ``latest`` stays the run before: the folder goes if this collection made it,
        else what the collection put in it."""
        import shutil

        if self._watch is not None:
            self._watch.finish()
        if self._run is not None:
            self._run.close()
            self._run = None
        if self._made_folder:
            shutil.rmtree(self._path, ignore_errors=True)
        else:
            _clear_run(self._path, [p for p in self._path.iterdir() if p.name != LOCK_FILE],
                       check=False)
        self._lock.release()
        if not self._made_folder:
            (self._path / LOCK_FILE).unlink(missing_ok=True)

    def close(self) -> None:
        """Wait for the staging folder to be gone and close the run."""
        if self._cleanup is not None:
            self._cleanup.join()
        if self._run is not None:
            self._run.close()
        self._lock.release()


def phases(started: float, status: dict[str, Any], filing_started: float,
           ended: float) -> dict[str, float]:
    """Where a collection's time went, in seconds: irscope's start until it started the
    script's process (``start``), that process's interpreter and irscope's hooks until the
    script began (``child_start``), the script (``script``), the process's exit after the
    script (``child_exit``: atexit handlers, interpreter teardown), waiting for the watch
    and filing (``filing``). Phases the child did not report (a launcher's ranks, a script
    killed by a signal) are left out."""
    marks = [("start", started, status.get("spawned")),
             ("child_start", status.get("spawned"), status.get("script_started")),
             ("script", status.get("script_started"), status.get("script_ended")),
             ("child_exit", status.get("script_ended"), status.get("exited")),
             ("filing", filing_started, ended)]
    return {name: round(end - begin, 3) for name, begin, end in marks
            if isinstance(begin, (int, float)) and isinstance(end, (int, float)) and end >= begin}


def _clear_run(path: Path, held: list[Path], check: bool = True) -> None:
    """Empty the run folder ``path`` for ``--replace`` (its lock is ours): only a run is
    replaced, never a folder of something else (``check``)."""
    import shutil

    if check and not (path / INDEX).is_file():
        raise RunError(f"{path}: not an irscope run; --replace only replaces runs")
    for entry in held:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def _claim_run_dir(name: str) -> Path:
    """A new run directory, created atomically so two collections started together never share."""
    from irscope.store import default_run_dir

    while True:
        path = default_run_dir(name)
        try:
            path.mkdir(parents=True)
        except FileExistsError:
            continue
        return path
