"""What a run was made on: host, Python, framework and CUDA versions, GPU name."""

from __future__ import annotations

import datetime as _dt
import os
import sys
from pathlib import Path

FRAMEWORKS = ("torch", "jax", "jaxlib", "triton")
CACHE_ENV = "IRSCOPE_CACHE_DIR"


def cache_dir(environ: dict[str, str] | None = None) -> Path | None:
    """irscope's cache (XLA dumps, tool outputs): ``$IRSCOPE_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/irscope``, else ``~/.cache/irscope``; None when switched off
    (IRSCOPE_CACHE_DIR="")."""
    environ = os.environ if environ is None else environ
    if CACHE_ENV in environ:
        return Path(environ[CACHE_ENV]).expanduser() if environ[CACHE_ENV] else None
    base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "irscope"


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


def describe(command: list[str] | None = None, versions: bool = True) -> dict:
    """run.json fields that describe this process's machine and software.

    ``versions``: look the frameworks' versions up among the installed packages (a scan of
    site-packages); ``inspect`` leaves that to its child, which knows what it imported.
    """
    uname = os.uname()
    described = {
        "command": command if command is not None else sys.argv,
        "cwd": os.getcwd(),
        "host": uname.nodename,
        "platform": f"{uname.sysname}-{uname.release}-{uname.machine}",
        "python": ".".join(map(str, sys.version_info[:3])),
        "cuda": os.environ.get("CUDA_VERSION") or _torch_cuda_version(),
        "gpu": gpu_name(),
    }
    if versions:
        found = {name: imported_versions().get(name) or installed_version(name)
                 for name in FRAMEWORKS}
        described["versions"] = {k: v for k, v in found.items() if v}
    return described


def imported_versions() -> dict[str, str]:
    """Versions of the frameworks this process has imported (nothing is imported here)."""
    found = {}
    for name in FRAMEWORKS:
        version = getattr(sys.modules.get(name), "__version__", None)
        if isinstance(version, str):
            found[name] = version
    return found


def _torch_cuda_version() -> str | None:
    torch = sys.modules.get("torch")  # only when already imported: never import it here
    return getattr(getattr(torch, "version", None), "cuda", None) if torch else None
