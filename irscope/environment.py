"""What a run was made on: host, Python, framework and CUDA versions, GPU name."""

from __future__ import annotations

import datetime as _dt
import os
import sys

FRAMEWORKS = ("torch", "jax", "jaxlib", "triton")


def installed_version(package: str) -> str | None:
    """The installed version of ``package`` without importing it, or None."""
    from importlib import metadata  # slow to import: only where versions are asked for

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def gpu_name() -> str | None:
    """The first GPU's name from nvidia-smi, or None where there is no NVIDIA GPU."""
    import shutil
    import subprocess

    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    try:
        out = subprocess.run([smi, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    line = out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else ""
    return line.split(",")[0].strip() or None


def now() -> str:
    return _dt.datetime.now().astimezone().isoformat(timespec="seconds")


def describe(command: list[str] | None = None) -> dict:
    """run.json fields that describe this process's machine and software."""
    import platform

    versions = {name: installed_version(name) for name in FRAMEWORKS}
    return {
        "command": command if command is not None else sys.argv,
        "cwd": os.getcwd(),
        "host": platform.node(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": {k: v for k, v in versions.items() if v},
        "cuda": os.environ.get("CUDA_VERSION") or _torch_cuda_version(),
        "gpu": gpu_name(),
    }


def _torch_cuda_version() -> str | None:
    torch = sys.modules.get("torch")  # only when already imported: never import it here
    return getattr(getattr(torch, "version", None), "cuda", None) if torch else None
