"""Where runs are: the default folder, every run under a root, and a run named on the command line."""

from __future__ import annotations

import datetime as _dt
import re
from pathlib import Path

from irscope.errors import RunError
from irscope.store.records import listed
from irscope.store.schema import DEFAULT_ROOT, INDEX


def default_run_dir(name: str = "run", root: Path | None = None) -> Path:
    """A fresh directory name ``<root>/<timestamp>-<name>`` (root: ./.irscope/runs)."""
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "run"
    base = (root or DEFAULT_ROOT) / f"{stamp}-{safe}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path



def find_runs(root: Path | None = None) -> list[Path]:
    """Run directories under ``root`` (default ./.irscope/runs), oldest first; a folder that
    cannot be looked into is listed when it may be a run (``runs`` shows why it cannot)."""
    root = root or DEFAULT_ROOT
    try:
        if not root.is_dir():
            return []
        entries = list(root.iterdir())
    except PermissionError:
        raise RunError(f"{root}: permission denied: cannot list the runs") from None
    return sorted(p for p in entries if _is_run(p))


def _modified(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _is_run(path: Path) -> bool:
    try:
        return (path / INDEX).is_file()
    except PermissionError:
        return path.is_dir()


def locate_run(spec: str, root: Path | None = None) -> Path:
    """The run a user means by ``spec``: a path, "latest", or a run name/prefix under root."""
    path = Path(spec)
    try:
        if (path / INDEX).is_file():
            return path
    except PermissionError:
        raise RunError(f"{path}: permission denied: the run cannot be read") from None
    runs = find_runs(root)
    if spec == "latest":
        if not runs:
            raise RunError(f"no runs under {root or DEFAULT_ROOT}")
        return max(runs, key=lambda p: (_modified(p / INDEX), p.name))
    by_name = [p for p in runs if p.name == spec or p.name.endswith(f"-{spec}")]
    if by_name:
        return by_name[-1]  # folders start with a timestamp: the newest run of that name
    named = [p for p in runs if p.name.startswith(spec)]
    named = named or [p for p in runs if "-" in p.name and spec in p.name]
    if len(named) == 1:
        return named[0]
    if len(named) > 1:
        raise RunError(f"{spec!r} matches {len(named)} runs "
                       f"({listed([p.name for p in named], 4)}): be more precise")
    if path.exists():
        raise RunError(f"{path}: not an irscope run (no {INDEX})")
    raise RunError(f"{spec}: no such run (nor a run named so under {root or DEFAULT_ROOT})")
