"""Triton collector: copies every compiled kernel's files into staging, cold compile or cache hit.

Triton's compilation listener fires on both paths with the kernel's cache files
(``metadata_group``: file name -> path), so a warm cache is read, never bypassed. A wrapper
around ``triton.compile`` records kernels that fail to compile. A kernel Inductor generated
is recorded with its whole module as its source, as ``inductor_cache`` records one that a
warm run loads from Inductor's cache without compiling.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any, Callable

from irscope.collectors.staging import Staging

SIDECAR = "_irscope.json"


def install(staging: Staging) -> Callable[[], None]:
    """Hook the already-imported triton so its compiles land in ``staging.triton``.

    Returns a function that puts the previous listener and compile function back.
    """
    import triton
    import triton.compiler
    from triton import knobs

    previous = knobs.compilation.listener
    original = triton.compiler.compile
    top_level = triton.compile

    def listener(*, src, metadata, metadata_group, times, cache_hit):
        try:
            _stage_kernel(staging, src, metadata, metadata_group, times, cache_hit)
        except Exception as exc:  # never break the user's compile over a copy
            staging.record_event("collector_error", {"collector": "triton", "error": repr(exc)})
        if previous is not None:
            previous(src=src, metadata=metadata, metadata_group=metadata_group, times=times,
                     cache_hit=cache_hit)

    @functools.wraps(original)
    def compile(src, *args, **kwargs):
        try:
            return original(src, *args, **kwargs)
        except Exception as exc:
            staging.record_event("compile_failure", {
                "framework": "triton", "name": getattr(src, "name", str(src)[:200]),
                "error": f"{type(exc).__name__}: {exc}", **_source_of(src)})
            raise

    knobs.compilation.listener = listener
    triton.compiler.compile = triton.compile = compile

    def restore() -> None:
        knobs.compilation.listener = previous
        triton.compiler.compile = original
        triton.compile = top_level

    return restore


def _stage_kernel(staging: Staging, src, metadata: dict[str, Any], group: dict[str, str],
                  times, cache_hit: bool) -> None:
    kernel_hash = str(metadata.get("hash") or "")[:32] or f"nohash-{id(src)}"
    folder = staging.triton / kernel_hash
    if (folder / SIDECAR).exists():
        return  # the same kernel compiled again in this process
    folder.mkdir(parents=True, exist_ok=True)
    for file_name, path in group.items():
        _link_or_copy(Path(path), folder / file_name)
    sidecar = {
        "name": getattr(src, "name", None) or metadata.get("name"),
        "hash": metadata.get("hash"),
        "cache_hit": bool(cache_hit),
        "compile_time_us": getattr(times, "total", None) if times is not None else None,
        **_source_of(src),
    }
    tmp = folder / (SIDECAR + ".tmp")
    tmp.write_text(json.dumps(sidecar, indent=2, default=str), encoding="utf-8")
    os.replace(tmp, folder / SIDECAR)


def _source_of(src) -> dict[str, Any]:
    """The Python source, file and line of an ASTSource's kernel; empty for IR sources."""
    fn = getattr(src, "fn", None)
    py = getattr(fn, "fn", None)
    code = getattr(py, "__code__", None)
    if code is None:
        return {}
    line = getattr(fn, "def_file_line_number", None) or code.co_firstlineno  # the `def`, not `@jit`
    info: dict[str, Any] = {"source_file": code.co_filename, "source_line": line}
    text = getattr(fn, "src", None)
    if isinstance(text, str):
        info["python_source"] = text
    if _made_by_inductor(code.co_filename):  # as a warm run finds it in Inductor's cache
        try:
            info.update(kernel_module(code.co_filename, getattr(src, "name", "")))
        except OSError:
            pass
    signature = getattr(src, "signature", None)
    if isinstance(signature, dict):
        info["signature"] = {str(k): str(v) for k, v in signature.items()}
    constants = getattr(src, "constants", None)
    if isinstance(constants, dict):
        names = getattr(fn, "arg_names", [])
        info["constexprs"] = {_arg_name(k, names): _plain(v) for k, v in constants.items()}
    return info


def kernel_module(path: str, name: str) -> dict[str, Any]:
    """Where a kernel Inductor generated is, and its source: the whole module (imports, launch
    heuristics, the kernel) and the line of the kernel's ``def``. The same for a compile seen
    here and for a kernel found in Inductor's cache, so a warm run holds what a cold one did.
    """
    text = Path(path).read_text(encoding="utf-8")
    found = re.search(rf"^def {re.escape(name)}\(", text, re.MULTILINE)
    line = text.count("\n", 0, found.start()) + 1 if found else 1
    return {"source_file": path, "source_line": line, "python_source": text}


def _made_by_inductor(path: str) -> bool:
    """Whether a kernel's file is one of Inductor's generated modules (in its cache folder)."""
    utils = sys.modules.get("torch._inductor.runtime.cache_dir_utils")
    try:
        root = os.path.realpath(utils.cache_dir()) if utils is not None else None
    except Exception:  # noqa: BLE001  a torch that keeps its cache elsewhere
        return False
    return root is not None and os.path.realpath(path).startswith(os.path.join(root, ""))


def _arg_name(key, names) -> str:
    if isinstance(key, tuple) and len(key) == 1 and isinstance(key[0], int) and key[0] < len(names):
        return names[key[0]]
    return str(key)


def _plain(value):
    return value if isinstance(value, (int, float, str, bool)) or value is None else str(value)


def _link_or_copy(source: Path, target: Path) -> None:
    if target.exists():
        return
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)
