"""What a run was made on: host, Python, framework and CUDA versions, GPU name."""

from __future__ import annotations

import datetime as _dt
import importlib.util
import os
import re
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
    """The installed version of ``package`` without importing it, or None.

    Found as importlib.metadata finds it, the first ``.dist-info`` or ``.egg-info`` folder of
    that name on sys.path, and read from its METADATA (or PKG-INFO) headers; that module
    (9 ms of an ingest's start-up to import) reads only what is installed otherwise.
    """
    wanted = _distribution_name(package)
    for entry in sys.path:
        try:
            children = os.listdir(entry or ".")
        except OSError:  # not a folder (a zip): importlib.metadata looks
            continue
        for child in children:
            low = child.lower()
            if low.endswith((".dist-info", ".egg-info")) and \
                    _distribution_name(low.rpartition(".")[0].partition("-")[0]) == wanted:
                return (_version_header(os.path.join(entry or ".", child))
                        or _metadata_version(package))
    return _metadata_version(package) if importlib.util.find_spec(package) else None


def _distribution_name(name: str) -> str:
    """A distribution's name as importlib.metadata compares names."""
    return re.sub(r"[-_.]+", "_", name).lower()


def _version_header(folder: str) -> str | None:
    """The Version header of a dist-info or egg-info folder's metadata, or None."""
    for name in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as fh:
                for line in fh:
                    if not line.strip():  # the headers end
                        return None
                    if line[:8].lower() == "version:":
                        return line[8:].strip()
        except (OSError, UnicodeDecodeError):
            continue
    return None


def _metadata_version(package: str) -> str | None:
    from importlib import metadata  # slow to import: a package installed another way

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
