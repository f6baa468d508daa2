"""One writer per run: the lock an `inspect` or `ingest` holds on its run folder while it
writes, so a second one is refused at once with a clear message rather than mixing two
programs' compiles into one run. The lock is the kernel's (``flock`` on ``writer.lock``):
a writer that dies, however it dies, lets go of it."""

from __future__ import annotations

import json
import os
from pathlib import Path

from irscope.errors import RunError
from irscope.store.schema import LOCK_FILE


class WriterLock:
    """Held from ``acquire`` until ``release`` (or the process ends)."""

    def __init__(self, folder: Path):
        self.folder = folder
        self._fd: int | None = None

    def acquire(self) -> WriterLock:
        """Take the lock, or raise RunError naming who holds it."""
        import fcntl

        if self.folder.exists() and not self.folder.is_dir():
            raise RunError(f"{self.folder}: exists and is not a folder (a run is a folder: "
                           "choose another -o)")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):  # a file where a parent folder goes
            raise RunError(f"{self.folder}: cannot make the run's folder: a file is in the "
                           "way of its path (choose another -o)") from None
        path = self.folder / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise RunError(f"{self.folder}: another irscope is writing this run{holder}; "
                           "wait for it to end, or choose another run (-o)") from None
        except OSError:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid()}).encode())
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor lets go of the lock
            self._fd = None
            (self.folder / LOCK_FILE).unlink(missing_ok=True)

    def __enter__(self) -> WriterLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _holder(fd: int) -> str:
    """" (pid N)" from the lock file, as far as it can be read."""
    try:
        pid = json.loads(os.pread(fd, 256, 0).decode()).get("pid")
    except (OSError, ValueError, AttributeError):
        return ""
    return f" (pid {pid})" if isinstance(pid, int) else ""
