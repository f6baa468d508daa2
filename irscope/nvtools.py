"""NVIDIA binary tools (nvdisasm, cuobjdump) found on PATH or in the Triton wheel."""

from __future__ import annotations

import importlib.util
import json
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
    row = writer.db.execute("SELECT name, framework, attrs FROM units WHERE id=?",
                            (unit_id,)).fetchone()
    if row:
        attrs = json.loads(row[2])
        writer.add_unit(row[0], row[1], attrs={"resources": _resources(module, attrs)})


def _resources(module, attrs: dict) -> dict[str, dict]:
    """Per-kernel resources plus occupancy; the block size falls back to the unit's num_warps.

    Triton kernels take most of their shared memory dynamically at launch (metadata
    "shared"), which the cubin does not declare: it counts towards occupancy too.
    """
    from irscope.parsers.occupancy import occupancy

    metadata = attrs.get("metadata") if isinstance(attrs.get("metadata"), dict) else {}
    num_warps = attrs.get("num_warps") or metadata.get("num_warps")
    dynamic_shared = int(attrs.get("shared") or metadata.get("shared") or 0)
    resources = {}
    for kernel in module.kernels:
        entry = {**kernel.resources, "arch": module.arch}
        card = kernel.occupancy
        if dynamic_shared:
            entry["dynamic_shared_bytes"] = dynamic_shared
        if (card is None or dynamic_shared) and module.arch and "registers" in entry \
                and num_warps:
            entry["threads_per_block"] = int(num_warps) * 32
            card = occupancy(module.arch, entry["threads_per_block"], entry["registers"],
                             entry.get("shared_bytes", 0) + dynamic_shared)
        if card is not None:
            entry.update(occupancy=round(card.ratio, 4), occupancy_limiter=card.limiter)
        resources[kernel.name] = entry
    return resources
