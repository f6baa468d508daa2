"""Reading a user's artifact file: its text, or one clear InputError saying what is wrong."""

from __future__ import annotations

from pathlib import Path

from irscope.errors import InputError


def read_artifact(path: Path, what: str = "a text artifact") -> str:
    """The file's text; a missing, folder, unreadable, empty, binary or non-UTF-8 file is an error."""
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if path.is_dir():
        raise InputError(f"{path}: is a directory, not an artifact file")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    if not data.strip():
        raise InputError(f"{path}: file is empty")
    if b"\x00" in data[:8192]:
        raise InputError(f"{path}: binary file, not {what}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None
