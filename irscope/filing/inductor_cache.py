"""Inductor's Triton kernels no compile hook saw: found again in the Triton cache, read-only.

On a warm Inductor cache (FX graph cache hit) PyTorch loads compiled kernels without calling
``triton.compile``, and on a GPU its compile workers compile them in processes of their own:
either way no compile hook sees them. An entry written while the program ran was compiled
then (a cache miss), one older than the program was loaded (a cache hit). The output code
still names each kernel and its source file (``# kernel path: .../cxyz.py``), and Triton's
cache keeps the kernel's stages in a folder whose TTIR points at that file. Those folders are
copied into staging, leaving the user's caches as they were.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import time
from collections.abc import Container
from pathlib import Path

from irscope.collectors.staging import Staging
from irscope.collectors.triton import SIDECAR, kernel_module
from irscope.store import Run

# # kernel path: /tmp/torchinductor_root/ab/cabc123.py
# # Topologically Sorted Source Nodes: [tanh, exp], Original ATen: [aten.tanh, aten.exp]
# triton_poi_fused_exp_tanh_0 = async_compile.triton('triton_poi_fused_exp_tanh_0', '''
# The name taken is the kernel function's, which Triton's cache names its files by: the
# kernel's own, or "triton_" where Inductor's names are not unique (unique_kernel_names off).
KERNEL_DEF = re.compile(r"^# kernel path: (\S+)\n(?:#[^\n]*\n)*?\w+ = async_compile\.triton\("
                        r"['\"](\w+)['\"]", re.MULTILINE)


def inductor_triton_kernels(run: Run) -> list[tuple[str, str]]:
    """(kernel function name, kernel source path) of every Triton kernel in the run's output
    code.

    A name alone is no identity: Inductor gives the same name to different kernels of
    different graphs and dtypes, each with a module file of its own.
    """
    kernels: dict[tuple[str, str], None] = {}
    for unit in run.units("torch"):
        for stage in run.stages(unit.id):
            if stage.kind == "inductor_output_code":
                for path, name in KERNEL_DEF.findall(run.read_text(stage)):
                    kernels[(name, path)] = None
    return list(kernels)


def cache_dirs(kernel_path: str, environ: dict[str, str]) -> list[Path]:
    """Where Triton may have cached a kernel Inductor compiled: Inductor's own, then Triton's."""
    dirs = [*Path(kernel_path).parents[1].glob("triton/*")]
    if environ.get("TRITON_CACHE_DIR"):
        dirs.append(Path(environ["TRITON_CACHE_DIR"]))
    home = environ.get("TRITON_HOME") or os.path.expanduser("~")
    dirs.append(Path(home) / ".triton" / "cache")
    return [d for d in dict.fromkeys(dirs) if d.is_dir()]


SETTLED_NS = 1_000_000_000  # an entry folder changed longer ago than this is listed for good


class CacheIndex:
    """The kernels each entry of Triton's cache folders holds, each folder listed once: a
    cache of thousands of entries (a user's, kept across every program they compiled) is
    read once per filing, not once per kernel looked for. ``rescan()`` has the next lookup
    list again what changed since (the program may still be adding entries): an entry
    holding Triton's group file (written last) or whose folder's modification time is
    unchanged is not listed again (one changed in the last second is: a file system's clock
    may not tick between two writes)."""

    def __init__(self) -> None:
        self._seen: dict[Path, dict[str, int | None]] = {}  # cache folder -> entry -> mtime
        self._holding: dict[tuple[Path, str], set[Path]] = {}  # (folder, kernel) -> entries
        self._fresh: set[Path] = set()  # folders listed since the last rescan

    def rescan(self) -> None:
        self._fresh.clear()

    def entries(self, folder: Path, name: str) -> list[Path]:
        """The entries of cache ``folder`` holding the metadata of a kernel named ``name``."""
        if folder not in self._fresh:
            self._list(folder)
            self._fresh.add(folder)
        return sorted(self._holding.get((folder, name), ()))

    def _list(self, folder: Path) -> None:
        seen = self._seen.setdefault(folder, {})
        try:
            children = list(os.scandir(folder))
        except OSError:
            return
        settled = time.time_ns() - SETTLED_NS  # changed before this: its stamp can be trusted
        for child in children:
            if child.name in seen and seen[child.name] is None:
                continue  # whole when listed
            try:
                if not child.is_dir(follow_symlinks=False):
                    continue
                stamp = child.stat(follow_symlinks=False).st_mtime_ns
                if seen.get(child.name) == stamp:
                    continue
                files = os.listdir(child.path)
            except OSError:
                continue
            whole = any(file.startswith("__grp__") for file in files)
            seen[child.name] = None if whole else stamp if stamp < settled else -1
            for file in files:
                if file.endswith(".json") and not file.startswith("__grp__"):
                    self._holding.setdefault((folder, file[:-5]), set()).add(Path(child.path))


def find_entries(name: str, kernel_path: str, environ: dict[str, str],
                 index: CacheIndex | None = None,
                 skip: Container[Path] = frozenset()) -> list[Path]:
    """Triton cache folders holding ``name`` compiled from ``kernel_path`` (one per config);
    ``index``: the cache folders as listed before (default: listed now); ``skip``: entries
    not to read again (found before)."""
    index = index or CacheIndex()
    matches = []
    for folder in cache_dirs(kernel_path, environ):
        for entry in index.entries(folder, name):
            if entry in skip:
                continue
            for ir in (entry / f"{name}.ttir", entry / f"{name}.source"):
                try:
                    if ir.is_file() and kernel_path in ir.read_text(errors="replace"):
                        matches.append(entry)
                        break
                except OSError:
                    continue
    return sorted(matches)


def stage_cached_kernels(run: Run, staging: Staging, environ: dict[str, str],
                         kernels: list[tuple[str, str]] | None = None) -> list[Path]:
    """Copy the cache entries of Inductor kernels no compile hook saw; returns the new folders.

    Every cached compile of a kernel is taken, not only those compiled this time: on a warm
    run Inductor compiles just the configuration its autotuning picked before, and the run
    must hold what a cold run holds (each candidate a unit). ``kernels``: (name, kernel path)
    pairs already read from the output code (default: the run's output code's).
    """
    known = {_cache_folder(_sidecar(p).get("hash")) for p in staging.triton.glob(f"*/{SIDECAR}")}
    known |= {_cache_folder(u.kernel_hash) for u in run.units("triton")}
    started = _collection_start(staging)
    added = []
    index = CacheIndex()
    for name, kernel_path in inductor_triton_kernels(run) if kernels is None else kernels:
        for entry in find_entries(name, kernel_path, environ, index):
            if entry.name in known:
                continue
            known.add(entry.name)
            compile_hash = _sidecar(entry / f"{name}.json").get("hash")
            target = staging.triton / staged_name(entry, name)
            shutil.copytree(entry, target, dirs_exist_ok=True)
            sidecar = {"name": name, "cache_hit": not written_since(entry, started),
                       "source_file": kernel_path, "source_line": 1, "hash": compile_hash}
            try:  # its source as the compile hook records an Inductor kernel's
                sidecar.update(kernel_module(kernel_path, name))
            except OSError:
                pass  # the Inductor cache was cleaned since: the Triton stages still tell it
            (target / SIDECAR).write_text(json.dumps(sidecar, indent=2), encoding="utf-8")
            added.append(target)
    return added


def _collection_start(staging: Staging) -> float | None:
    """When the collection began: its configuration's time (a rank's folder: its parent's)."""
    for config in (staging.config, staging.root.parent / staging.config.name):
        try:
            return config.stat().st_mtime
        except OSError:
            continue
    return None


def written_since(entry: Path, started: float | None) -> bool:
    """Whether a cache entry was written after ``started``: compiled during the program (by
    Inductor's compile workers, out of the compile hook's sight), not found in the cache."""
    if started is None:
        return False
    try:
        return max(p.stat().st_mtime for p in entry.iterdir()) >= started
    except (OSError, ValueError):
        return False


def staged_name(entry: Path, name: str) -> str:
    """The staging folder of the cache entry of kernel ``name``: named as the compile hook
    names its folders, so that filing meets the compiles of a warm run in the order of a
    cold one, and names them alike."""
    compile_hash = _sidecar(entry / f"{name}.json").get("hash")
    return str(compile_hash)[:32] if compile_hash else entry.name


def _sidecar(path: Path) -> dict:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _cache_folder(compile_hash) -> str | None:
    """Triton's cache folder name for a compile hash (hex): its base32 form, unpadded."""
    try:
        return base64.b32encode(bytes.fromhex(str(compile_hash))).decode("ascii").rstrip("=")
    except ValueError:
        return None
