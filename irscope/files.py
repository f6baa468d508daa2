"""Reading a user's artifact file: its text, or one clear InputError saying what is wrong.

Only regular files are read: a FIFO would block forever, a device (``/dev/zero``) never end.
Files are opened without blocking, checked with ``fstat`` on the open descriptor (a link to a
device is caught too), and read up to a size limit, so no input can hang irscope or grow
its memory without bound. Files compressed with gzip, zstandard or xz (told by their first
bytes) are read as a stream of blocks (``Blocks``), decompressed on a thread of their own,
up to ``max_expanded_bytes()`` of them.
"""

from __future__ import annotations

import itertools
import lzma
import os
import queue
import stat
import sys
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from irscope.errors import InputError

# Larger files are refused; IRSCOPE_MAX_FILE_MB raises (or lowers) the limit.
DEFAULT_MAX_BYTES = 1 << 30
# A compressed file or archive expanding past this is read no further (a decompression bomb);
# IRSCOPE_MAX_EXPANDED_MB raises (or lowers) the limit.
DEFAULT_MAX_EXPANDED = 4 << 30
KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
         (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
# The first bytes of each compressed format read, and its name.
COMPRESSIONS = ((b"\x1f\x8b", "gzip"), (b"\x28\xb5\x2f\xfd", "zstd"), (b"\xfd7zXZ\x00", "xz"))
BLOCK = 1 << 20  # bytes per block of a stream
READ_AHEAD = 4  # blocks a decompressing thread may run ahead of its reader
COMPRESSED_READ = 256 << 10  # compressed bytes read at a time


def mib_from_env(name: str, default: int) -> int:
    """A size in bytes given in MiB by the environment variable ``name``, else ``default``."""
    try:
        return max(1, int(os.environ[name])) << 20
    except (KeyError, ValueError):
        return default


def max_bytes() -> int:
    """The largest file irscope reads: IRSCOPE_MAX_FILE_MB, else 1 GiB."""
    return mib_from_env("IRSCOPE_MAX_FILE_MB", DEFAULT_MAX_BYTES)


def max_expanded_bytes() -> int:
    """The most bytes one compressed file or archive is read to: IRSCOPE_MAX_EXPANDED_MB,
    else 4 GiB."""
    return mib_from_env("IRSCOPE_MAX_EXPANDED_MB", DEFAULT_MAX_EXPANDED)


def compression(head: bytes) -> str | None:
    """``gzip``, ``zstd`` or ``xz`` when ``head`` (a file's first bytes) starts such a stream."""
    return next((name for magic, name in COMPRESSIONS if head.startswith(magic)), None)


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


class Blocks:
    """The bytes of a regular file in blocks of at most ``BLOCK``, decompressed when the file
    is gzip, zstandard or xz: on a thread of its own (the decompressors let other threads
    run), a few blocks ahead, so decompression goes on beside the reader's own work. No more
    than ``limit`` bytes (default ``max_expanded_bytes()``) of a compressed file are read.

    Iterating raises InputError, naming the file, for a damaged or overlong stream after the
    blocks before the damage; ``consumed`` is how many bytes of the file were read so far.
    """

    def __init__(self, path: Path, limit: int | None = None, ahead: bool = True):
        self.path = path
        self.limit = max_expanded_bytes() if limit is None else limit
        self.ahead = ahead  # decompress on a thread of its own
        self.consumed = 0
        self.compression: str | None = None

    def __iter__(self) -> Iterator[bytes]:
        with open_regular(self.path, sys.maxsize) as fh:
            head = fh.read(BLOCK)
            self.compression = compression(head)
            if self.compression is None:  # a plain file: read as it is, on this thread
                while head:
                    self.consumed += len(head)
                    yield head
                    head = fh.read(BLOCK)
                return
            expanded = self._expanded(_Counted(fh, head, self))
            yield from _ahead(expanded) if self.ahead else expanded

    def _expanded(self, raw: "_Counted") -> Iterator[bytes]:
        size = 0
        try:
            for block in _DECOMPRESSORS[self.compression](raw):
                size += len(block)
                if size > self.limit:
                    raise InputError(f"{self.path}: expands past {self.limit >> 20:,} MiB once "
                                     f"decompressed; read no further (IRSCOPE_MAX_EXPANDED_MB "
                                     f"raises the limit)")
                yield block
        except (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError,
                inflater().error) as exc:
            raise InputError(f"{self.path}: damaged {self.compression} data after "
                             f"{size:,} bytes ({exc})") from None


def not_a_script(path: Path) -> str | None:
    """Why Python could not run ``path`` as a script, or None when it may: a binary file
    (a NUL byte in its first block) that is neither a zip archive (a ``.pyz``) nor compiled
    bytecode (a ``.pyc``: two bytes of magic number, then CR LF)."""
    import zipfile

    try:
        with open(path, "rb") as fh:
            head = fh.read(8192)
    except OSError as exc:
        return exc.strerror or str(exc)
    if b"\x00" not in head or head[2:4] == b"\r\n" or zipfile.is_zipfile(path):
        return None
    return "not a Python script (binary)"


def read_head(path: Path, size: int) -> bytes:
    """Up to ``size`` first bytes of a file, decompressed when it is compressed."""
    head = b""
    for block in Blocks(path, ahead=False):
        head += block
        if len(head) >= size:
            break
    return head[:size]


class _Counted:
    """A file read from ``head`` (bytes already read) on, counting into ``owner.consumed``."""

    def __init__(self, fh: BinaryIO, head: bytes, owner: Blocks):
        self._fh, self._head, self._owner = fh, head, owner
        owner.consumed = len(head)

    def read(self, size: int = -1) -> bytes:
        if self._head:
            data, self._head = self._head, b""
            return data
        data = self._fh.read(size)
        self._owner.consumed += len(data)
        return data


def inflater():
    """zlib, or ISA-L's zlib where python-isal is installed: the same streams, inflated twice
    as fast (a gzipped log then reads at nearly the speed of a plain one on a single core)."""
    try:
        from isal import isal_zlib
    except ImportError:
        return zlib
    return isal_zlib


def _gunzip(raw: _Counted) -> Iterator[bytes]:
    """The blocks of one or more gzip members, the zero padding between them passed over."""
    inflate = inflater()
    data, member, ended = b"", None, False
    while True:
        if not data and not ended:
            data = raw.read(COMPRESSED_READ)
            ended = not data
        if member is None:
            data = data.lstrip(b"\0")
            if not data:
                if ended:
                    return
                continue
            member = inflate.decompressobj(16 + zlib.MAX_WBITS)  # checks each member's CRC
        out = member.decompress(data, BLOCK)
        data = member.unconsumed_tail
        if member.eof:
            data, member = member.unused_data, None
        if out:
            yield out
        elif ended and member is not None and not data:
            raise EOFError("the file ends inside a gzip member")


def _unxz(raw: _Counted) -> Iterator[bytes]:
    with lzma.LZMAFile(raw) as stream:  # every stream of the file, in turn
        while block := stream.read(BLOCK):
            yield block


def _unzstd(raw: _Counted) -> Iterator[bytes]:
    import zstandard

    reader = zstandard.ZstdDecompressor().stream_reader(raw, read_size=COMPRESSED_READ,
                                                        read_across_frames=True)
    try:
        while block := reader.read(BLOCK):
            yield block
    except zstandard.ZstdError as exc:
        raise ValueError(str(exc)) from None


_DECOMPRESSORS = {"gzip": _gunzip, "xz": _unxz, "zstd": _unzstd}
_END = object()


def _ahead(blocks: Iterator[bytes]) -> Iterator[bytes]:
    """``blocks`` made on a thread of its own, at most READ_AHEAD ahead of the reader; what
    the thread raises is raised here, after the blocks before it."""
    ready: queue.Queue = queue.Queue(READ_AHEAD)
    stop = threading.Event()

    def hand_on(item) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def work() -> None:
        try:
            for block in blocks:
                if not hand_on(block):
                    return
            hand_on(_END)
        except BaseException as exc:  # handed to the reader, raised there
            hand_on(exc)

    thread = threading.Thread(target=work, name="irscope-decompress", daemon=True)
    thread.start()
    try:
        while (item := ready.get()) is not _END:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        thread.join()


_TEMPORARY_NAMES = itertools.count()


def write_whole(path: Path, text: str | bytes) -> None:
    """``text`` (or bytes, as they are) written to ``path`` whole or not at all: into a new
    file beside it, synced, then renamed over it (a full disk leaves ``path`` as it was and
    no partial file)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}-{next(_TEMPORARY_NAMES)}.tmp")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            with (os.fdopen(fd, "wb") if isinstance(text, bytes)
                  else os.fdopen(fd, "w", encoding="utf-8")) as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(temporary, path)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise InputError(f"{path}: cannot write ({exc.strerror or exc}); nothing was "
                         f"written") from None
