"""How a multi-process collection starts and ends: the environment of each of ``--nproc``'s
ranks, the ``sitecustomize`` that collects inside a launcher's ranks (``irscope inspect --
torchrun ...``), and one status made of every rank's."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
from pathlib import Path

from irscope.collectors.staging import COMPILE_ERROR, FAILED_ENDINGS, OURS_PATHS, Staging

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


def script_run_by_this_python(target: list[str]) -> Path | None:
    """The Python script a launcher command runs with the very interpreter running irscope
    (whose grammar is then this one's), or None where that is not known: the first argument
    naming a ``.py`` file, run by an argument before it that is this interpreter
    (``python -m torch.distributed.run ... x.py``) or by ``target[0]``'s own ``#!``
    interpreter (``torchrun ... x.py``)."""
    script = next((i for i, arg in enumerate(target) if arg.endswith(".py")
                   and Path(arg).is_file()), None)
    if script is None:
        return None
    ours = os.path.realpath(sys.executable)
    runners = [*target[:script], _shebang(target[0])]
    found = (shutil.which(arg) or "" for arg in runners if arg)
    return Path(target[script]) if any(os.path.realpath(p) == ours for p in found if p) else None


def _shebang(command: str) -> str | None:
    """The interpreter a script's ``#!`` line names (``#!/venv/bin/python``), if any."""
    path = shutil.which(command)
    try:
        with open(path or command, "rb") as fh:
            line = fh.readline(512)
    except OSError:
        return None
    words = line[2:].decode(errors="replace").split() if line.startswith(b"#!") else []
    if words[:1] and os.path.basename(words[0]) == "env":  # #!/usr/bin/env python3
        words = words[1:]
    return words[0] if words else None


def merged_status(staging: Staging, status: dict) -> dict:
    """The program's status with what its ranks reported: the frameworks any rank imported,
    Python's report of a script that did not compile (each distinct one, the ranks keep it
    to themselves), and one outcome. That outcome is a compile error where every rank
    could not compile the script; else the first rank to fail (by when it ended, not by its
    number: the others often fail because it did) gives its ending, error and exit status,
    and ``failed_ranks`` lists every failed rank in that order."""
    merged = dict(status)
    ended: list[tuple[int, dict]] = []
    for rank, own in staging.ranks():
        try:
            reported = json.loads(own.status.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # killed before it could say
            reported = {}
        for key in ("frameworks", "missing"):
            merged[key] = sorted({*merged.get(key, []), *reported.get(key, [])})
        merged["versions"] = {**merged.get("versions", {}), **reported.get("versions", {})}
        ended.append((rank, reported))
    reports = [r["compile_error"] for _, r in ended if isinstance(r.get("compile_error"), str)]
    if reports:
        merged["compile_errors"] = list(dict.fromkeys(reports))
    failed = sorted((entry for entry in ended if _failed(entry[1])),
                    key=lambda entry: (_number(entry[1].get("script_ended")), entry[0]))
    if not failed:
        return merged
    first_rank, first = failed[0]
    if merged.get("ended", "exit") in ("exit", "exception"):  # no signal ended the program
        code = first.get("exit_status")
        merged["exit_status"] = code if isinstance(code, int) and code else \
            merged.get("exit_status") or 1
    if all(r.get("ended") == COMPILE_ERROR for _, r in ended):
        merged["ended"] = COMPILE_ERROR  # no line of the script ran on any rank
        return merged
    merged["failed_ranks"] = [rank for rank, _ in failed]
    if merged.get("ended", "exit") == "exit":
        merged["ended"] = "exception" if first.get("ended") == COMPILE_ERROR else \
            first.get("ended", "exit")
    merged["error"] = f"rank {first_rank}: {first['error']}" if first.get("error") else None
    return merged


def _failed(status: dict) -> bool:
    """Whether a rank's status says it failed: an exception, Ctrl-C, a script that did not
    compile, or a non-zero exit status."""
    return status.get("ended") in FAILED_ENDINGS or bool(
        isinstance(status.get("exit_status"), int) and status["exit_status"])


def _number(value) -> float:
    return float(value) if isinstance(value, (int, float)) else float("inf")
