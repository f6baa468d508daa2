"""NVIDIA binary tools (nvdisasm, cuobjdump) found on PATH or in the Triton wheel."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

from irscope.store import Writer

TOOLS = ("nvdisasm", "cuobjdump")
TIMEOUT_S = 60
_warned: set[str] = set()


@lru_cache(maxsize=None)
def find_tool(name: str) -> Path | None:
    """``name`` from $IRSCOPE_CUDA_BIN, then PATH, then triton/backends/nvidia/bin (no import)."""
    override = os.environ.get("IRSCOPE_CUDA_BIN")
    if override and (Path(override) / name).is_file():
        return Path(override) / name
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


def _run(tool: Path, args: list[str], cubin: bytes) -> str | None:
    with tempfile.TemporaryDirectory(prefix="irscope-cubin-") as folder:
        path = Path(folder) / "kernel.cubin"
        path.write_bytes(cubin)
        try:
            done = subprocess.run([str(tool), *args, str(path)], capture_output=True, text=True,
                                  timeout=TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired):
            return None
    return done.stdout if done.returncode == 0 and done.stdout.strip() else None


def disassemble(cubin: bytes) -> str | None:
    """SASS text of a cubin (nvdisasm, else cuobjdump -sass), or None when neither works."""
    nvdisasm = find_tool("nvdisasm")
    if nvdisasm:
        text = _run(nvdisasm, [], cubin)
        if text:
            return text
    cuobjdump = find_tool("cuobjdump")
    return _run(cuobjdump, ["-sass"], cubin) if cuobjdump else None


def resource_usage(cubin: bytes) -> dict[str, dict[str, int]]:
    """Per-kernel registers, stack, shared, local and constant bytes from `cuobjdump -res-usage`."""
    from irscope.parsers.sass import parse_res_usage

    cuobjdump = find_tool("cuobjdump")
    text = _run(cuobjdump, ["-res-usage"], cubin) if cuobjdump else None
    return parse_res_usage(text) if text else {}


def analyze(cubin: bytes):
    """The cubin's SASS text and its parsed SassModule with resources, or (None, None)."""
    from irscope.parsers import sass

    text = disassemble(cubin)
    if text is None:
        return None, None
    return text, sass.with_resources(sass.parse(text), resource_usage(cubin))


def add_cubin(writer: Writer, unit_id: int, cubin: bytes, origin: str | None = None) -> None:
    """Store a unit's cubin and what can be derived from it (SASS text, resource usage).

    The SASS goes in as a `sass` stage; each kernel's registers, spills, stack, shared and
    constant bytes go into the unit's attrs under "resources", in the same transaction.
    """
    writer.add_stage(unit_id, "cubin", cubin, origin=origin)
    if not any(find_tool(t) for t in TOOLS):
        warn_missing_once("cubins are kept, SASS and resource usage are skipped")
        return
    text, module = analyze(cubin)
    if text is None:
        return
    writer.add_stage(unit_id, "sass", text, origin=origin)
    resources = {k.name: dict(k.resources) for k in module.kernels}
    if module.arch:
        resources = {name: {**r, "arch": module.arch} for name, r in resources.items()}
    row = writer.db.execute("SELECT name, framework FROM units WHERE id=?", (unit_id,)).fetchone()
    if row:
        writer.add_unit(row[0], row[1], attrs={"resources": resources})
