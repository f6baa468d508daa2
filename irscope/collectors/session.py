"""One collection from start to finish: a fresh run and its staging folder, then filing."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from irscope import environment
from irscope.collectors.filing import file_staging
from irscope.collectors.staging import Staging, collection_env, staging_for, user_dump_files
from irscope.errors import RunError
from irscope.store import Run, default_run_dir


class Session:
    """A run being collected: create it, hand out the staging environment, file it at the end."""

    def __init__(self, output: str | os.PathLike | None, name: str, only: tuple[str, ...],
                 meta: dict[str, Any]):
        path = Path(output) if output else _claim_run_dir(name)
        if output and path.exists() and any(path.iterdir()):
            raise RunError(f"{path}: already exists; pick another -o or remove it")
        self.only = only
        self.started = time.time()
        self.user_env = dict(os.environ)
        self.run = Run.create(path, {"name": name, "kind": "capture", "started": environment.now(),
                                     "frameworks_selected": list(only), **meta})
        self.staging: Staging = staging_for(path).create()
        self._cleanup: threading.Thread | None = None

    @property
    def path(self) -> Path:
        return self.run.path

    def env(self) -> dict[str, str]:
        """Variables to add to the environment of whatever compiles (child or this process)."""
        return collection_env(self.staging, self.only, self.user_env)

    def finish(self, status: dict[str, Any], keep_staging: bool = False,
               progress=None) -> list[str]:
        """File the staging folder into the run and record how the program ended."""
        filing_started = time.time()
        notes, complete = file_staging(self.run, self.staging,
                                       user_dump_files(self.user_env, self.started - 1), progress,
                                       {**self.user_env, **self.env()})
        code = int(status.get("exit_status", 0) or 0)
        self.run.update_meta({
            "exit_status": code,
            "ended": status.get("ended", "exit"),
            "partial": code != 0,
            "error": status.get("error"),
            "frameworks": status.get("frameworks", []),
            "missing_frameworks": status.get("missing", []),
            "duration_s": round(time.time() - self.started, 3),
            "filing_s": round(time.time() - filing_started, 3),
            "finished": environment.now(),
            "notes": notes,
        })
        if complete and not keep_staging:
            self._cleanup = threading.Thread(target=shutil.rmtree, args=(self.staging.root, True))
            self._cleanup.start()  # slow on some file systems: overlap it with the summary
        return notes

    def close(self) -> None:
        """Wait for the staging folder to be gone and close the run."""
        if self._cleanup is not None:
            self._cleanup.join()
        self.run.close()


def _claim_run_dir(name: str) -> Path:
    """A new run directory, created atomically so two collections started together never share."""
    while True:
        path = default_run_dir(name)
        try:
            path.mkdir(parents=True)
        except FileExistsError:
            continue
        return path
