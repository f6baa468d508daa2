"""The collection folder a run's compilers write into, and the environment that points them there.

Layout of ``<run>/staging/``: ``torch_trace/`` (TORCH_TRACE logs), ``triton/`` (one
folder per compiled kernel, like TRITON_KERNEL_DUMP: ``<name>.json`` metadata plus
``.ttir``/``.ttgir``/``.llir``/``.ptx``/``.cubin``/``.source`` and ``_irscope.json``
with the kernel's Python source), ``xla/`` (XLA dump), ``jax/`` (one folder per jitted
function with its jaxpr, StableHLO and analyses), ``events.jsonl`` (failures, timings)
and ``status.json`` (the script's exit status, written by the child).
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FRAMEWORKS = ("torch", "triton", "jax")
STAGING = "staging"
CONFIG = "config.json"

# --xla_dump_to=/tmp/dump  or  --xla_dump_to /tmp/dump
XLA_DUMP_TO = re.compile(r"--xla_dump_to(?:=|\s+)(\S+)")


@dataclass(frozen=True)
class Staging:
    """Paths of one collection folder; every writer and reader goes through these names."""

    root: Path

    @property
    def torch_trace(self) -> Path:
        return self.root / "torch_trace"

    @property
    def triton(self) -> Path:
        return self.root / "triton"

    @property
    def xla(self) -> Path:
        return self.root / "xla"

    @property
    def jax(self) -> Path:
        return self.root / "jax"

    @property
    def events(self) -> Path:
        return self.root / "events.jsonl"

    @property
    def status(self) -> Path:
        return self.root / "status.json"

    @property
    def config(self) -> Path:
        return self.root / CONFIG

    def create(self) -> "Staging":
        for folder in (self.torch_trace, self.triton, self.xla, self.jax):
            folder.mkdir(parents=True, exist_ok=True)
        return self

    def record_event(self, kind: str, data: dict[str, Any]) -> None:
        """Append one event line; lines are small, so concurrent appends stay whole."""
        line = json.dumps({"kind": kind, "time": time.time(), **data}, default=str) + "\n"
        with open(self.events, "a", encoding="utf-8") as fh:
            fh.write(line)

    def read_events(self) -> list[dict[str, Any]]:
        if not self.events.is_file():
            return []
        events = []
        for line in self.events.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                events.append(json.loads(line))
            except ValueError:
                continue  # a line cut short by a killed process
        return events

    def write_config(self, config: dict[str, Any]) -> Path:
        self.config.write_text(json.dumps(config, indent=2), encoding="utf-8")
        return self.config


def collection_env(staging: Staging, only: tuple[str, ...],
                   environ: dict[str, str]) -> dict[str, str]:
    """Environment changes that make the compilers write into ``staging``.

    The user's own settings win: an existing TORCH_TRACE or ``--xla_dump_to`` is kept (and
    read back at the end, see ``user_dump_files``).
    """
    env: dict[str, str] = {}
    if "torch" in only:
        if not environ.get("TORCH_TRACE"):
            env["TORCH_TRACE"] = str(staging.torch_trace)
        # Inductor's parallel compile workers would bypass the Triton hooks of this process.
        env["TORCHINDUCTOR_COMPILE_THREADS"] = environ.get("TORCHINDUCTOR_COMPILE_THREADS", "1")
    if "jax" in only:
        flags = environ.get("XLA_FLAGS", "")
        if not XLA_DUMP_TO.search(flags):
            extra = [f"--xla_dump_to={staging.xla}", "--xla_dump_hlo_as_text"]
            if _gpu_jax(environ) and "--xla_dump_emitter_re" not in flags:
                # PTX and LLVM IR per emitter; the CPU backend crashes on this flag.
                extra.append("--xla_dump_emitter_re=.*")
            env["XLA_FLAGS"] = " ".join([flags, *extra]).strip()
    return env


def user_dump_files(environ: dict[str, str], since: float) -> list[Path]:
    """Files written since ``since`` into dump folders the user configured themselves.

    A user's TORCH_TRACE or ``--xla_dump_to`` folder is kept and read back at the end, but
    only what this collection wrote to it: earlier runs' logs stay out of the run.
    """
    folders = []
    if environ.get("TORCH_TRACE"):
        folders.append(Path(environ["TORCH_TRACE"]))
    match = XLA_DUMP_TO.search(environ.get("XLA_FLAGS", ""))
    if match:
        folders.append(Path(shlex.split(match.group(1))[0]))
    fresh = []
    for folder in folders:
        if folder.is_dir():
            fresh += sorted(p for p in folder.rglob("*")
                            if p.is_file() and p.stat().st_mtime >= since)
    return fresh


def _gpu_jax(environ: dict[str, str]) -> bool:
    """Whether JAX will run on a GPU here, decided without importing jax."""
    platforms = environ.get("JAX_PLATFORMS", "")
    if platforms and not any(p in platforms for p in ("cuda", "gpu", "rocm")):
        return False
    return any(importlib.util.find_spec(name) is not None
               for name in ("jax_cuda12_plugin", "jax_cuda13_plugin", "jax_rocm60_plugin"))


def staging_for(run_path: Path) -> Staging:
    return Staging(Path(run_path) / STAGING)


def frameworks_arg(text: str | None) -> tuple[str, ...]:
    """Parse ``--only torch,jax`` into a tuple of known framework names."""
    if not text:
        return FRAMEWORKS
    names = tuple(n.strip().lower() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in FRAMEWORKS]
    if unknown:
        from irscope.errors import UsageError

        raise UsageError(f"--only: unknown framework {unknown[0]!r} (choose from "
                         f"{', '.join(FRAMEWORKS)})")
    return names
