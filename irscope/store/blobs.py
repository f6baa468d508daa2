"""Blobs: content named by its SHA-256, kept zstandard-compressed, read back in bounded size from regular files only."""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from irscope.errors import RunError
from irscope.store.schema import BLOBS, BLOB_NAME, MAX_BLOB_BYTES, ZSTD_LEVEL

if TYPE_CHECKING:
    from irscope.store.run import Run


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class BlobRef:
    """A blob already in the store: its SHA-256 and size (stages can point at it directly)."""

    blob: str
    size: int


def zstandard_module():
    """The zstandard module, needed only for runs of schema 3 and later."""
    try:
        import zstandard
    except ImportError:
        raise RunError("compressed runs need the zstandard package "
                       "(pip install zstandard)") from None
    return zstandard


_COMPRESSORS = threading.local()  # a compressor serves one thread at a time


def compress(data: bytes) -> bytes:
    """One zstandard frame holding ``data`` (its size recorded in the frame header). Each
    thread reuses its compressor: making one costs as much as compressing a few KiB."""
    compressor = getattr(_COMPRESSORS, "compressor", None)
    if compressor is None:
        compressor = _COMPRESSORS.compressor = zstandard_module().ZstdCompressor(level=ZSTD_LEVEL)
    return compressor.compress(data)


def decompress(data: bytes) -> bytes:
    """The bytes of one zstandard frame, whether or not its header records their size."""
    return zstandard_module().ZstdDecompressor().decompressobj().decompress(data)


class BlobSink:
    """Streams bytes into the store, hashing as it goes, so large artifacts never sit in memory.

    Bytes are held in memory up to the run's inline limit and spill to a temporary file
    beyond it (compressed on the way in a compressed run), so a small artifact never costs
    a file.
    """

    def __init__(self, run: "Run"):
        self._run = run
        self._hash = hashlib.sha256()
        self._size = 0
        self._head = bytearray()
        self._fh = None  # the temporary file, or a zstandard writer into it
        self._tmp = ""

    def write(self, data: bytes) -> None:
        self._hash.update(data)
        self._size += len(data)
        if self._fh is not None:
            self._fh.write(data)
            return
        self._head += data
        if len(self._head) > self._run.inline_max:
            fd, self._tmp = tempfile.mkstemp(dir=self._run.path / BLOBS, prefix=".tmp-")
            self._fh = os.fdopen(fd, "wb")
            if self._run.compressed:
                writer = zstandard_module().ZstdCompressor(level=ZSTD_LEVEL)
                self._fh = writer.stream_writer(self._fh, closefd=True)
            self._fh.write(self._head)
            self._head = bytearray()

    def close(self) -> BlobRef:
        """Finish the blob and file it under its digest (dropping the copy if already stored)."""
        key = self._hash.hexdigest()
        if self._fh is None:
            self._run._store(key, bytes(self._head))
            return BlobRef(key, self._size)
        self._fh.close()
        target = self._run.blob_path(key)
        if target.exists():
            os.unlink(self._tmp)
        else:
            target.parent.mkdir(exist_ok=True)
            os.replace(self._tmp, target)
        return BlobRef(key, self._size)

    def discard(self) -> None:
        if self._fh is not None:
            self._fh.close()
        if self._tmp and os.path.exists(self._tmp):
            os.unlink(self._tmp)



class TooLarge(Exception):
    """A blob past MAX_BLOB_BYTES."""


def checked_blob_name(blob: Any, run_path: Path) -> str:
    """``blob`` when it is a digest; a name like ``../../x`` or ``/etc/passwd`` is damage."""
    if not isinstance(blob, str) or not BLOB_NAME.fullmatch(blob):
        shown = repr(blob)[:40]
        raise RunError(f"{run_path}: damaged index: a stage names blob {shown}, which is not "
                       f"a SHA-256 digest")
    return blob


def open_blob_file(run_path: Path, blob: str) -> int:
    """A descriptor of blobs/<ab>/<digest>, opened without following a link at any step and
    only when it is a regular file (a FIFO would block, a device never end) of at most
    MAX_BLOB_BYTES."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    opened: list[int] = []
    try:
        folder = os.open(os.path.join(run_path, BLOBS), flags | os.O_DIRECTORY)
        opened.append(folder)
        sub = os.open(blob[:2], flags | os.O_DIRECTORY, dir_fd=folder)
        opened.append(sub)
        fd = os.open(blob, flags | os.O_NONBLOCK, dir_fd=sub)
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_BLOB_BYTES:
            os.close(fd)
            if not stat.S_ISREG(info.st_mode):
                raise RunError(f"{run_path}: blob {blob[:12]} is not a regular file: refused")
            raise RunError(f"{run_path}: blob {blob[:12]} is damaged ({info.st_size:,} bytes, "
                           f"more than {MAX_BLOB_BYTES >> 20} MiB)")
        return fd
    except FileNotFoundError:
        raise RunError(f"{run_path}: blob {blob[:12]} is missing") from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise RunError(f"{run_path}: blob {blob[:12]} is reached through a symbolic link "
                           f"or is not a file: refused") from None
        raise RunError(f"{run_path}: blob {blob[:12]} cannot be read "
                       f"({exc.strerror or exc})") from None
    finally:
        for fd in reversed(opened):
            os.close(fd)


def read_blob_file(run_path: Path, blob: str) -> bytes:
    """The stored bytes of a blob's file (see ``open_blob_file``), up to MAX_BLOB_BYTES."""
    fd = open_blob_file(run_path, blob)
    try:
        chunks, size = [], 0
        while chunk := os.read(fd, min(1 << 20, MAX_BLOB_BYTES + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_BLOB_BYTES:
                raise RunError(f"{run_path}: blob {blob[:12]} is damaged (grew past "
                               f"{MAX_BLOB_BYTES >> 20} MiB while read)")
        return b"".join(chunks)
    except OSError as exc:
        raise RunError(f"{run_path}: blob {blob[:12]} cannot be read "
                       f"({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def bounded_decompress(data: bytes) -> bytes:
    """The bytes of one zstandard frame, never more than MAX_BLOB_BYTES of them, read a
    mebibyte at a time (a read sets aside all the bytes it is asked for)."""
    reader = zstandard_module().ZstdDecompressor().stream_reader(bytes(data), read_across_frames=False)
    chunks, size = [], 0
    while chunk := reader.read(min(1 << 20, MAX_BLOB_BYTES + 1 - size)):
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_BLOB_BYTES:
            raise TooLarge()
    return b"".join(chunks)


def unlink_quietly(path: str) -> int:
    try:
        os.unlink(path)
    except OSError:
        return 0
    return 1
