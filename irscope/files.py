"""Reading a user's artifact file: its text, or one clear InputError saying what is wrong.

Only regular files are read: a FIFO would block forever, a device (``/dev/zero``) never end.
Files are opened without blocking, checked with ``fstat`` on the open descriptor (a link to a
device is caught too), and read up to a size limit, so no input can hang irscope or grow
its memory without bound.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from irscope.errors import InputError

# Larger files are refused; IRSCOPE_MAX_FILE_MB raises (or lowers) the limit.
DEFAULT_MAX_BYTES = 1 << 30
KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
         (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def max_bytes() -> int:
    """The largest file irscope reads: IRSCOPE_MAX_FILE_MB, else 1 GiB."""
    try:
        return max(1, int(os.environ["IRSCOPE_MAX_FILE_MB"])) << 20
    except (KeyError, ValueError):
        return DEFAULT_MAX_BYTES


def special_kind(mode: int) -> str | None:
    """What a non-regular file is (``a FIFO``...), or None for a regular file or folder."""
    return next((name for test, name in KINDS if test(mode)), None)


def open_regular(path: Path, limit: int | None = None) -> BinaryIO:
    """``path`` opened for reading, refused unless it is a regular file of at most ``limit``
    bytes (default ``max_bytes()``)."""
    limit = max_bytes() if limit is None else limit
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except PermissionError:
        raise InputError(f"{path}: permission denied") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise InputError(f"{path}: is a directory, not an artifact file")
        if not stat.S_ISREG(info.st_mode):
            kind = special_kind(info.st_mode) or "a special file"
            raise InputError(f"{path}: is {kind}, not a regular file (irscope reads only "
                             f"regular files)")
        if info.st_size > limit:
            raise InputError(f"{path}: too large ({info.st_size / 2**20:,.0f} MiB; irscope "
                             f"reads up to {limit >> 20:,} MiB, IRSCOPE_MAX_FILE_MB changes that)")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: Path, limit: int | None = None) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (one that grows past it while
    read is refused too)."""
    limit = max_bytes() if limit is None else limit
    with open_regular(path, limit) as fh:
        try:
            # as much as the file holds, not a buffer of the limit's size for every file
            size = os.fstat(fh.fileno()).st_size
            data = fh.read(size + 1)
            if len(data) > size:  # it grows while read: on to the limit
                data += fh.read(limit + 1 - len(data))
        except OSError as exc:
            raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise InputError(f"{path}: grew past {limit >> 20:,} MiB while read")
    return data


def read_artifact(path: Path, what: str = "a text artifact") -> str:
    """The file's text; a missing, folder, special, unreadable, oversized, empty, binary or
    non-UTF-8 file is an error."""
    data = read_bytes(path)
    if not data.strip():
        raise InputError(f"{path}: file is empty")
    if b"\x00" in data[:8192]:
        raise InputError(f"{path}: binary file, not {what}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None


def contained(path: Path, root: Path) -> bool:
    """Whether ``path`` stays inside ``root``: true of anything but a link, and of a link
    whose target (all links followed) lies under ``root``'s own real place."""
    if not os.path.islink(path):
        return True
    try:
        return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(root))
    except (OSError, ValueError):
        return False
