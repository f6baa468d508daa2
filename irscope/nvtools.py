"""NVIDIA binary tools (nvdisasm, cuobjdump, ptxas) run on bytes, their text kept in a cache.

Each function takes a cubin or PTX text and gives back what the tool printed, or the figures
read from it; nothing here touches a run. A tool's output is computed at most once per
content: it is kept under ``<irscope cache>/nvtools/`` by a key made of the input's SHA-256,
the arguments and the tool binary, so a later run (or another thread) reads it back.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
import threading
import zlib
from functools import lru_cache
from pathlib import Path

from irscope.environment import cache_dir

TOOLS = ("nvdisasm", "cuobjdump")
TIMEOUT_S = 60
PTXAS_TIMEOUT_S = 600  # ptxas compiles the whole kernel again: large ones take minutes
CACHE_FOLDER = "nvtools"
CACHE_LIMIT_BYTES = 256 << 20  # least recently used entries go once the cache holds more
_MAGIC = b"irscope-nvtools-1\n"
# ".target sm_90a" / ".target sm_80, texmode_independent" / ".target sm_100a, debug"
PTX_TARGET_RE = re.compile(r"^[ \t]*\.target[ \t]+(sm_\d+[a-z]?)\b", re.M)
# The compute capability in an architecture name: "sm_100a" -> "100"
CAPABILITY_RE = re.compile(r"sm_(\d+)")
_warned: set[str] = set()


@lru_cache(maxsize=None)
def find_tool(name: str) -> Path | None:
    """``name`` from $IRSCOPE_CUDA_BIN (when set, the only place looked), else PATH, else
    the Triton wheel's backends/nvidia/bin (found without importing triton)."""
    override = os.environ.get("IRSCOPE_CUDA_BIN")
    if override is not None:
        candidate = Path(override) / name
        return candidate if candidate.is_file() else None
    found = shutil.which(name)
    if found:
        return Path(found)
    try:
        spec = importlib.util.find_spec("triton")
    except (ImportError, ValueError):
        spec = None
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(location) / "backends" / "nvidia" / "bin" / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def warn_missing_once(feature: str) -> None:
    """Say once per process that no NVIDIA tool was found, so PTX-only analysis carries on."""
    if feature in _warned:
        return
    _warned.add(feature)
    from irscope.console import warn

    warn(f"no nvdisasm or cuobjdump found (PATH, Triton wheel, $IRSCOPE_CUDA_BIN): {feature}")


def default_workers() -> int:
    """How many tool processes to run at once: the cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def disassemble(cubin: bytes) -> str | None:
    """SASS text of a cubin (nvdisasm, else cuobjdump -sass), or None when neither works.

    nvdisasm annotates each instruction with the source line the cubin's line table gives
    it (`-gi`: `//## File "k.py", line 24`, with the lines it was inlined at), which the SASS
    parser reads as locations; a cubin compiled without line info gets no annotation, and
    the instructions themselves are the same either way. Its dataflow analysis is left out
    (`-ndf`): it only labels jumps through the branch stack of GPUs before Volta, and it
    costs a third of nvdisasm's time on a Hopper cubin, whose listing is the same without it.
    """
    for name, args in (("nvdisasm", ["-gi", "-ndf"]), ("cuobjdump", ["-sass"])):
        text = _cached_run(name, args, cubin, ".cubin")
        if text:
            return text
    return None


def resource_usage(cubin: bytes) -> dict[str, dict[str, int]]:
    """Per-kernel registers, stack, shared, local and constant bytes from `cuobjdump -res-usage`."""
    from irscope.parsers.sass import parse_res_usage

    text = _cached_run("cuobjdump", ["-res-usage"], cubin, ".cubin")
    return parse_res_usage(text) if text else {}


def ptx_target(ptx_text: str) -> str | None:
    """The architecture a PTX module targets, as ptxas names it: "sm_90a", "sm_80"."""
    found = PTX_TARGET_RE.search(ptx_text)
    return found.group(1) if found else None


def ptxas_log(ptx_text: str, arch: str | None = None) -> str | None:
    """What `ptxas -v --gpu-name ARCH` says about a PTX module (its info lines), or None
    when no ptxas assembles it. ``arch`` defaults to the module's ``.target``.

    sm_100 and newer go to Triton's ptxas-blackwell first, as Triton itself does; a ptxas
    that rejects the module (a PTX version newer than it knows) hands over to the next.
    """
    arch = arch or ptx_target(ptx_text)
    if not arch:
        return None
    capability = CAPABILITY_RE.match(arch)
    names = ("ptxas-blackwell", "ptxas") if capability and int(capability[1]) >= 100 else (
        "ptxas",)
    data = ptx_text.encode("utf-8")
    for name in names:
        text = _cached_run(name, ["-v", f"--gpu-name={arch}", "-o", os.devnull], data, ".ptx",
                           stream="stderr", timeout=PTXAS_TIMEOUT_S)
        if text:
            return text
    return None


def ptxas_usage(ptx_text: str, arch: str | None = None) -> dict[str, dict[str, int]]:
    """Per-kernel registers, spill stores and loads, stack frame and shared bytes as
    `ptxas -v` reports them (see irscope.analysis.kernels.parse_ptxas_log)."""
    from irscope.analysis.kernels import parse_ptxas_log

    text = ptxas_log(ptx_text, arch)
    return parse_ptxas_log(text) if text else {}


# -- running a tool ------------------------------------------------------------------------

def _run(tool: Path, args: list[str], data: bytes, suffix: str, stream: str = "stdout",
         timeout: int = TIMEOUT_S) -> str | None:
    """The tool's output on ``data`` (written to a scratch file), None when it fails."""
    with tempfile.TemporaryDirectory(prefix="irscope-nvtools-") as folder:
        path = Path(folder) / f"input{suffix}"
        path.write_bytes(data)
        try:
            done = subprocess.run([str(tool), *args, str(path)], capture_output=True,
                                  text=True, errors="replace", timeout=timeout)
        except (OSError, subprocess.TimeoutExpired):
            return None
    text = done.stdout if stream == "stdout" else done.stderr
    return text if done.returncode == 0 and text.strip() else None


def _cached_run(name: str, args: list[str], data: bytes, suffix: str, **options) -> str | None:
    """``_run`` of the tool called ``name``, read from the cache when this input, these
    arguments and this tool binary were seen before; failures are not kept."""
    tool = find_tool(name)
    if tool is None:
        return None
    cache = cache_folder()
    key = _key(tool, args, data) if cache else None
    if key:
        text = _cache_read(cache, key)
        if text is not None:
            return text
    text = _run(tool, args, data, suffix, **options)
    if key and text is not None:
        _cache_write(cache, key, text)
    return text


# -- the cache -----------------------------------------------------------------------------

def cache_folder(environ: dict[str, str] | None = None) -> Path | None:
    """Where tool outputs are kept, or None when irscope's cache is switched off."""
    base = cache_dir(environ)
    return base / CACHE_FOLDER if base else None


@lru_cache(maxsize=64)
def _tool_identity(tool: Path) -> str:
    """The binary's path, size and modification time: a new tool version is a new key."""
    try:
        stat = tool.stat()
    except OSError:
        return str(tool)
    return f"{tool.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"


def _key(tool: Path, args: list[str], data: bytes) -> str:
    head = "\0".join([_tool_identity(tool), *args]).encode("utf-8")
    return hashlib.sha256(head + b"\0" + hashlib.sha256(data).digest()).hexdigest()


def _entry(cache: Path, key: str) -> Path:
    return cache / key[:2] / key


def _cache_read(cache: Path, key: str) -> str | None:
    """The kept text, or None when there is none or it is damaged (it is then recomputed)."""
    path = _entry(cache, key)
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    if not raw.startswith(_MAGIC):
        return None
    try:
        text = zlib.decompress(raw[len(_MAGIC):]).decode("utf-8")
    except (zlib.error, UnicodeDecodeError):
        return None
    try:
        os.utime(path)  # recently used: pruned last
    except OSError:
        pass
    return text


_written = {"bytes": 0, "pruned": False}
_write_lock = threading.Lock()


def _cache_write(cache: Path, key: str, text: str) -> None:
    """Keep ``text`` under ``key``: written whole to a scratch name, then renamed into place."""
    path = _entry(cache, key)
    data = _MAGIC + zlib.compress(text.encode("utf-8"), 1)
    partial = path.with_name(f".{key}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial.write_bytes(data)
        os.replace(partial, path)
    except OSError:  # a read-only or full disk: the result is still returned, just not kept
        partial.unlink(missing_ok=True)
        return
    with _write_lock:
        _written["bytes"] += len(data)
        due = not _written["pruned"] or _written["bytes"] > CACHE_LIMIT_BYTES // 8
        if due:
            _written.update(bytes=0, pruned=True)
    if due:
        prune(cache)


def prune(cache: Path, limit: int = CACHE_LIMIT_BYTES) -> int:
    """Drop the least recently used entries while the cache holds more than ``limit``
    bytes; returns how many went. Runs at a process's first write and then every
    eighth of the limit written. Scratch files left by a killed writer go after an hour."""
    import time

    entries, stale = [], time.time() - 3600
    try:
        for folder in os.scandir(cache):
            if folder.is_dir():
                for entry in os.scandir(folder.path):
                    stat = entry.stat()
                    if not entry.name.startswith("."):
                        entries.append((stat.st_mtime, stat.st_size, entry.path))
                    elif stat.st_mtime < stale:
                        os.unlink(entry.path)
    except OSError:
        return 0
    total, dropped = sum(size for _, size, _ in entries), 0
    for _, size, path in sorted(entries):
        if total <= limit:
            break
        try:
            os.unlink(path)
        except OSError:
            continue
        total -= size
        dropped += 1
    return dropped
