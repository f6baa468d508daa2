"""Compressed files and tarballs given to ingest, opened into a temporary folder to be filed.

A gzip, zstandard or xz file holding one dump file is decompressed beside nothing else; a
tarball (plain or compressed) has its folders and regular files extracted, streaming, so
that classification sees inside it as into any folder. What is filed from there names the
archive, never the temporary folder (``Expansions.shown``; ``ShownWriter`` writes through).

A tarball is hostile until shown otherwise: a member named outside it (``../x``, ``/etc/x``),
a link (symbolic or hard, which could lead anywhere), a device or a FIFO is not extracted but
listed as skipped; nothing is ever written outside the temporary folder, and no member keeps
its permissions. An archive is read up to ``max_expanded_bytes()`` and ``MAX_MEMBERS``
members, a decompressed single file up to the largest file irscope reads, a tar header up to
``MAX_HEADER_BYTES``: a decompression bomb stops there, with a line saying so.
"""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from irscope.errors import InputError
from irscope.files import Blocks, max_bytes, max_expanded_bytes
from irscope.store import Writer

MAX_MEMBERS = 1_000_000  # members of one tarball
MAX_HEADER_BYTES = 64 << 20  # one read of a tar header (a long name, PAX records)
MAX_DEPTH = 3  # archives inside archives opened, at most
SUFFIXES = (".gz", ".tgz", ".zst", ".tzst", ".xz", ".txz")  # taken off a decompressed name
COPY = 1 << 20  # bytes copied at a time


def is_tar(head: bytes) -> bool:
    """Whether ``head`` (a decompressed start of a file) is a tar header with a valid
    checksum."""
    try:
        tarfile.TarInfo.frombuf(head[:tarfile.BLOCKSIZE], "utf-8", "surrogateescape")
    except tarfile.HeaderError:
        return False
    return True


class Expansions:
    """The temporary folder archives are opened into, and how each place in it is shown."""

    def __init__(self) -> None:
        self._root: Path | None = None
        self._count = 0
        self._shown: list[tuple[str, str]] = []  # (temporary path, what it stands for)
        self.named: dict[Path, Path] = {}  # a file opened here -> the path it is named by
        self.depth: dict[Path, int] = {}  # a file opened here -> archives it lies inside

    def shown(self, text: str) -> str:
        """``text`` (a path, an origin, a message) with temporary paths told as the archives
        and files they stand for."""
        for temporary, shown in self._shown:
            if temporary in text:
                text = text.replace(temporary, shown)
        return text

    def depth_of(self, path: Path) -> int:
        return next((d for place, d in self.depth.items() if path == place
                     or place in path.parents), 0)

    def tarball(self, path: Path, report) -> Path:
        """Extract the tarball ``path`` (see the module); the folder it went into."""
        folder = self._place(path) / _stem(path.name)
        folder.mkdir()
        self._note(folder, path, path)
        try:
            _extract(path, folder, report)
        except InputError as exc:
            report.warnings.append(f"{exc}; the members before it are filed")
        return folder

    def file(self, path: Path, report) -> Path | None:
        """Decompress the single file ``path`` beside nothing else; the file it went into, or
        None when it could not be."""
        name = _stem(path.name) if path.suffix in SUFFIXES else path.name
        target = self._place(path) / (path.parent.name or "_") / name
        target.parent.mkdir()
        limit = max_bytes()
        try:
            with open(target, "xb") as out:
                for block in Blocks(path, limit):
                    out.write(block)
        except InputError as exc:
            target.unlink(missing_ok=True)
            report.skipped.append((str(path), str(exc).removeprefix(f"{path}: ").replace(
                "IRSCOPE_MAX_EXPANDED_MB", "IRSCOPE_MAX_FILE_MB")))
            return None
        self._note(target, path, path.with_name(name))
        return target

    def close(self) -> None:
        """Remove the temporary folder and everything opened into it."""
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

    def _place(self, path: Path) -> Path:
        """A fresh folder to open ``path`` into."""
        if self._root is None:
            self._root = Path(tempfile.mkdtemp(prefix="irscope-ingest-"))
        self._count += 1
        place = self._root / str(self._count)
        place.mkdir()
        return place

    def _note(self, opened: Path, source: Path, named: Path) -> None:
        """``opened`` holds what ``source`` holds; files in it are named as under ``named``."""
        shown_source = self.shown(str(source))
        self._shown.insert(0, (str(opened), shown_source))  # the newest, deepest, first
        self.named[opened] = Path(self.shown(str(named)))
        self.depth[opened] = self.depth_of(source) + 1


class ShownWriter:
    """Writes through ``writer``, with each origin (a stage's, a unit's ``origin``) told as
    ``expansions`` shows it: a run names the archive a file came from, not a temporary
    folder."""

    def __init__(self, writer: Writer, expansions: Expansions):
        self._writer, self._expansions = writer, expansions

    def __getattr__(self, name: str):
        return getattr(self._writer, name)

    @property
    def keep_all(self) -> bool:
        return self._writer.keep_all

    @keep_all.setter
    def keep_all(self, value: bool) -> None:
        self._writer.keep_all = value

    def add_unit(self, name: str, framework: str, source_file: str | None = None,
                 source_line: int | None = None, attrs: dict[str, Any] | None = None) -> int:
        if attrs and isinstance(attrs.get("origin"), str):
            attrs = {**attrs, "origin": self._expansions.shown(attrs["origin"])}
        return self._writer.add_unit(name, framework, source_file, source_line, attrs)

    def add_stage(self, unit_id: int, kind: str, data, name: str | None = None,
                  origin: str | None = None) -> int:
        return self._writer.add_stage(unit_id, kind, data, name, self._shown(origin))

    def add_stages(self, unit_id: int, stages) -> None:
        self._writer.add_stages(unit_id, [(kind, ref, name, self._shown(origin))
                                          for kind, ref, name, origin in stages])

    def _shown(self, origin: str | None) -> str | None:
        return None if origin is None else self._expansions.shown(origin)


def named_files(paths: list[Path], expansions: Expansions) -> dict[Path, Path]:
    """Each path, or the path it is named by when it was opened from an archive."""
    named = {}
    for path in paths:
        for opened, name in expansions.named.items():
            if path == opened:
                named[path] = name
                break
            if opened in path.parents:
                named[path] = name / path.relative_to(opened)
                break
        else:
            named[path] = path
    return named


def _stem(name: str) -> str:
    """``name`` without its archive and compression suffixes: ``dumps`` for
    ``dumps.tar.gz``, ``trace.log`` for ``trace.log.gz``."""
    for suffix in (".tar.gz", ".tar.zst", ".tar.xz", ".tar", *SUFFIXES):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[:-len(suffix)]
    return name


def _extract(path: Path, folder: Path, report) -> None:
    """Stream the members of ``path`` into ``folder``: folders and regular files (and a hard
    link to a file extracted before it, as a copy); everything else listed as skipped."""
    budget, members, expanded = max_expanded_bytes(), 0, 0
    extracted: set[PurePosixPath] = set()
    stream = _Stream(Blocks(path))
    try:
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                stream.bound(None)  # this member's data, read or passed over
                members += 1
                if members > MAX_MEMBERS:
                    raise InputError(f"{path}: holds more than {MAX_MEMBERS:,} members; read "
                                     f"no further")
                expanded += member.size
                if expanded > budget:
                    raise InputError(_too_large(path, budget))
                read = _member(tar, member, folder, extracted, report, f"{path}/{member.name}")
                stream.bound(MAX_HEADER_BYTES + (0 if read else member.size))
    except tarfile.TarError as exc:
        raise InputError(f"{path}: damaged tar data ({exc})") from None
    if members == 0:
        report.skipped.append((str(path), "an empty archive"))


def _member(tar: tarfile.TarFile, member: tarfile.TarInfo, folder: Path,
            extracted: set[PurePosixPath], report, where: str) -> bool:
    """Extract one member, or list it as skipped; whether its data was read."""
    name = _inside(member.name)
    if name is None:
        report.skipped.append((where, "a member named outside the archive, not extracted"))
        return False
    target = folder.joinpath(*name.parts)
    link = _inside(member.linkname) if member.islnk() else None
    try:
        if member.isdir():
            target.mkdir(parents=True, exist_ok=True)
        elif member.isfile():
            _write(tar.extractfile(member), target)
            extracted.add(name)
            return True
        elif link is not None and link in extracted:  # the same bytes as a file before it
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(folder.joinpath(*link.parts), "rb") as source:
                _write(source, target)
            extracted.add(name)
        elif member.issym() or member.islnk():
            report.skipped.append((where, "a link in an archive, not followed"))
        else:
            report.skipped.append((where, "not a regular file or folder"))
    except OSError as exc:  # a member whose place another member holds, a name too long
        report.skipped.append((where, f"cannot be extracted ({exc.strerror or exc})"))
    return member.isfile()


def _inside(name: str) -> PurePosixPath | None:
    """A member's name as a relative path that stays inside the archive, or None."""
    parts = [p for p in PurePosixPath(name.replace("\\", "/")).parts if p not in ("", ".")]
    if not parts or name.startswith(("/", "\\")) or ".." in parts or "\0" in name:
        return None
    return PurePosixPath(*parts)


def _write(source, target: Path) -> None:
    """Copy ``source`` into the new file ``target``, never through a link, private to the
    user."""
    target.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    with os.fdopen(os.open(target, flags, 0o600), "wb") as out:
        while block := source.read(COPY):
            out.write(block)


def _too_large(path: Path, budget: int) -> str:
    return (f"{path}: expands past {budget >> 20:,} MiB once extracted; read no further "
            f"(IRSCOPE_MAX_EXPANDED_MB raises the limit)")


class _Stream:
    """A readable file over ``Blocks``: what ``tarfile`` reads a stream through. Between two
    members only so much may be read (``bound``): a header that claims more (a crafted
    long name or PAX record, which ``tarfile`` would hold whole) stops the archive."""

    def __init__(self, blocks: Blocks):
        self._blocks: Iterator[bytes] = iter(blocks)
        self._block, self._at = b"", 0
        self._path = blocks.path
        self._limit: int | None = MAX_HEADER_BYTES
        self._read = 0

    def bound(self, limit: int | None) -> None:
        """Allow ``limit`` more bytes to be read from here (None: any number)."""
        self._limit, self._read = limit, 0

    def read(self, size: int) -> bytes:
        parts = []
        while size > 0:
            if self._at == len(self._block):
                self._block, self._at = next(self._blocks, b""), 0
                if not self._block:
                    break
            part = self._block[self._at:self._at + size]
            self._at += len(part)
            size -= len(part)
            parts.append(part)
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        self._read += len(data)
        if self._limit is not None and self._read > self._limit:
            raise InputError(f"{self._path}: a tar header of more than "
                             f"{MAX_HEADER_BYTES >> 20} MiB; read no further")
        return data
