"""XLA dumps taken one compile at a time, and kept in a cache under a key of what they say.

XLA writes its dump (HLO before and after optimization, buffer assignment, memory usage,
LLVM IR, PTX) while it compiles, at a cost of tens of milliseconds a module. The JAX
collector asks for a dump per compile, into a folder of its own, and files every dump here
under the module's JAX compilation-cache key, source locations included
(``irscope.collectors.jax.dump_key``: a dump names the lines it came from). A later run that
compiles the same module from the same lines again, or loads it from JAX's persistent compilation cache (which skips XLA, and so its
dump), is filed from this cache instead: a warm run costs no dump and still shows it all.
On a GPU XLA's autotuner may tile each compile of a module otherwise, so there a cached dump
stands only for an executable loaded from JAX's persistent cache (``collectors.jax``).

One zip file a module, ``<cache>/xla-dumps/<key>.zip``; the cache is ``$IRSCOPE_CACHE_DIR``
(empty: no cache), else ``$XDG_CACHE_HOME/irscope``, else ``~/.cache/irscope``. Nothing in
it is ever executed: entries are dump text and object files, filed as bytes.
"""

from __future__ import annotations

import os
import re
import string
import threading
from pathlib import Path

from irscope.environment import cache_dir  # noqa: F401  (where the folders below sit)

CACHE_LIMIT_BYTES = 512 << 20  # oldest entries go once the dumps take more than this
FOLDER = "xla-dumps"
# JAX's cache keys: "jit_mlp-0371e2bb3c40..." (module name, dash, hex digest)
KEY_RE = re.compile(r"^[\w.-]{1,400}$")
# The module number a dump file name starts with: "module_0012.jit_mlp.before_..." -> "0012"
MODULE_NUMBER = re.compile(r"^module_(\d+)\.")
# the bytes XLA keeps in a module's name
XLA_NAME_BYTES = frozenset((string.ascii_letters + string.digits + "_.-").encode())


def entry_path(cache: Path, key: str) -> Path | None:
    """The cache file of ``key`` (None for a key that cannot be a file name)."""
    return cache / FOLDER / f"{key}.zip" if KEY_RE.match(key) else None


def lookup(cache: Path | None, key: str | None) -> Path | None:
    """The cached dump of ``key``, when there is one."""
    path = entry_path(cache, key) if cache and key else None
    return path if path is not None and path.is_file() else None


def folder_files(folder: Path) -> list[str]:
    """The files of one compile's dump folder, as paths relative to it, sorted."""
    if not folder.is_dir():
        return []
    return [path.relative_to(folder).as_posix() for path in sorted(folder.rglob("*"))
            if path.is_file()]


def load(entry: Path) -> dict[str, bytes]:
    """The files of a cached dump by name; raises OSError or zipfile.BadZipFile when damaged."""
    import zipfile

    with zipfile.ZipFile(entry) as archive:
        return {info.filename: archive.read(info) for info in archive.infolist()
                if not info.is_dir() and _safe_name(info.filename)}


def read_folder(folder: Path) -> dict[str, bytes]:
    """The files of one compile's dump folder by relative path, in ``folder_files`` order."""
    return {name: (folder / name).read_bytes() for name in folder_files(folder)}


def store(cache: Path, key: str, folder: Path) -> Path | None:
    """Keep one compile's dump folder under ``key`` (written whole, then renamed into place)."""
    return store_files(cache, key, read_folder(folder))


def store_files(cache: Path, key: str, files: dict[str, bytes]) -> Path | None:
    """Keep one compile's dump, given as its files' bytes by relative path, under ``key``."""
    import zipfile

    target = entry_path(cache, key)
    if target is None or not files:
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
            for name, data in files.items():
                archive.writestr(name, data)
        os.replace(partial, target)
    finally:
        if partial.exists():
            partial.unlink()
    _prune(target.parent, keep=target)
    return target


def renumbered(names: list[str], numbers) -> dict[str, str]:
    """Each name with its module number replaced by one drawn from ``numbers`` (one per
    distinct module of the dump, in order): modules then number in compile order across a
    run, whatever process first wrote a cached dump."""
    mapping: dict[str, str] = {}
    for old in sorted({m[1] for name in names if (m := MODULE_NUMBER.match(name))}, key=int):
        mapping[old] = f"{next(numbers):04d}"
    return {name: MODULE_NUMBER.sub(lambda m: f"module_{mapping[m[1]]}.", name, count=1)
            for name in names}


def xla_module_name(name: str) -> str:
    """The name XLA gives a module JAX named ``name``: each byte of its UTF-8 that is not an
    ASCII letter, digit, ``_``, ``.`` or ``-`` made ``_`` (``jit_café`` -> ``jit_caf__``)."""
    return "".join(chr(byte) if byte in XLA_NAME_BYTES else "_" for byte in name.encode())


def named_as_jax(name: str, module: str) -> str:
    """A dump file's name with its module named as JAX named it (``module``), not as XLA
    did: the collector's records of that compile are filed under JAX's name."""
    xla = xla_module_name(module)
    head = match[0] if (match := MODULE_NUMBER.match(name)) else ""
    rest = name[len(head):]
    if xla == module or not rest.startswith(xla) or rest[len(xla):len(xla) + 1] not in "./":
        return name
    return f"{head}{module}{rest[len(xla):]}"


def _safe_name(name: str) -> bool:
    """A member name that stays inside the dump (no absolute path, no `..`)."""
    return not name.startswith("/") and ".." not in Path(name).parts


def _prune(folder: Path, keep: Path) -> None:
    """Drop the least recently written dumps while the folder holds more than the limit."""
    try:
        entries = [(entry.stat(), entry) for entry in folder.glob("*.zip")]
    except OSError:
        return
    total = sum(stat.st_size for stat, _ in entries)
    for stat, entry in sorted(entries, key=lambda item: item[0].st_mtime):
        if total <= CACHE_LIMIT_BYTES:
            break
        if entry != keep:
            entry.unlink(missing_ok=True)
            total -= stat.st_size
