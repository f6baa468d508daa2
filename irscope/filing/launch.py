"""How a multi-process collection starts and ends: the environment of each of ``--nproc``'s
ranks, the ``sitecustomize`` that collects inside a launcher's ranks (``irscope inspect --
torchrun ...``), and one status made of every rank's."""

from __future__ import annotations

import json
import os
import shutil
import socket
from pathlib import Path

from irscope.collectors.staging import OURS_PATHS, Staging

SHIM = "launch"  # staging folder holding the sitecustomize a launcher's processes import
SITECUSTOMIZE = '''"""irscope: collect in every ranked Python process of the launched program."""
import sys

try:
    import irscope.collectors.bootstrap as _irscope_bootstrap
except ImportError:  # another interpreter: irscope from where the launching irscope lives
    sys.path.append({home!r})
    try:
        import irscope.collectors.bootstrap as _irscope_bootstrap
    except ImportError:
        _irscope_bootstrap = None
if _irscope_bootstrap is not None:
    _irscope_bootstrap.install_in_rank()
'''


def is_launcher(target: list[str]) -> bool:
    """Whether ``target`` is a program to run (``torchrun ...``, ``/usr/bin/python x.py``)
    rather than a Python script: a command on PATH, or an executable file not named ``.py``."""
    if not target:
        return False
    path = Path(target[0])
    if path.is_file():
        return path.suffix != ".py" and os.access(path, os.X_OK)
    return shutil.which(target[0]) is not None


def free_port() -> int:
    """A TCP port free on this host now, for the ranks' rendezvous (MASTER_PORT)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rank_envs(nproc: int) -> list[dict[str, str]]:
    """What torchrun's standalone mode gives each of ``nproc`` local ranks."""
    port = str(free_port())
    return [{"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(nproc),
             "LOCAL_WORLD_SIZE": str(nproc), "GROUP_RANK": "0", "MASTER_ADDR": "127.0.0.1",
             "MASTER_PORT": port} for rank in range(nproc)]


def launcher_env(staging: Staging, config: Path, environ: dict[str, str]) -> dict[str, str]:
    """Variables that make every Python process of a launched program collect into its
    rank's staging folder: PYTHONPATH leads to irscope's sitecustomize, which reads ``config``."""
    from irscope.collectors.bootstrap import CONFIG_VARIABLE

    shim = staging.root / SHIM
    shim.mkdir(exist_ok=True)
    home = str(Path(__file__).resolve().parents[2])  # the folder holding irscope
    (shim / "sitecustomize.py").write_text(SITECUSTOMIZE.format(home=home), encoding="utf-8")
    existing = environ.get("PYTHONPATH")
    return {CONFIG_VARIABLE: str(config), OURS_PATHS: str(shim),
            "PYTHONPATH": os.pathsep.join(p for p in (str(shim), existing) if p)}


def merged_status(staging: Staging, status: dict) -> dict:
    """The program's status with what its ranks reported: the frameworks any rank imported,
    and the first failing rank's error."""
    merged = dict(status)
    for rank, own in staging.ranks():
        try:
            reported = json.loads(own.status.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # killed before it could say
            continue
        for key in ("frameworks", "missing"):
            merged[key] = sorted({*merged.get(key, []), *reported.get(key, [])})
        merged["versions"] = {**merged.get("versions", {}), **reported.get("versions", {})}
        if reported.get("error") and not merged.get("error"):
            merged["error"] = f"rank {rank}: {reported['error']}"
    return merged
