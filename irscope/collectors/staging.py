"""The collection folder a run's compilers write into, and the environment that points them there.

Layout of ``<run>/staging/``: ``torch_trace/`` (TORCH_TRACE logs), ``triton/`` (one
folder per compiled kernel, like TRITON_KERNEL_DUMP: ``<name>.json`` metadata plus
``.ttir``/``.ttgir``/``.llir``/``.ptx``/``.cubin``/``.source`` and ``_irscope.json``
with the kernel's Python source), ``xla_compiles/NNNN/`` (the XLA dump of compile NNNN),
``xla/`` (a whole-process XLA dump, when compiles cannot be hooked one by one),
``jax/functions.jsonl`` (one line per jit lowering or compile: jaxpr, StableHLO, analyses),
``jax/xla_dumps.jsonl`` (one line per XLA compile: key, dump folder or cached dump),
``events.jsonl`` (failures, timings) and ``status.json`` (how the script ended, written by
the child). Each process of a multi-process run (``--nproc``, a launcher) has that whole
layout to itself under ``rank_<N>/``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import threading
import time
from collections import namedtuple
from pathlib import Path
from typing import Any

FRAMEWORKS = ("torch", "triton", "jax")
STAGING = "staging"
CONFIG = "config.json"
COMPILE_ERROR = "compile error"  # status.json "ended": the script's source did not compile
FAILED_ENDINGS = ("exception", "interrupted", COMPILE_ERROR)  # status.json "ended" of a failure
_appending: dict[Path, Any] = {}  # files append_record keeps open, flushed per line
_appending_lock = threading.Lock()

# --xla_dump_to=/tmp/dump  or  --xla_dump_to /tmp/dump
NVFUSER_DUMP_OURS = "IRSCOPE_NVFUSER_DUMP"  # set where inspect asked nvFuser for its dumps
# The variables a collection set for its program (comma-separated names), and the PYTHONPATH
# entries it added: a collection started inside that program (a script that runs `irscope
# inspect` itself) takes them for irscope's, not the user's, and sets its own.
OURS_VARIABLE, OURS_PATHS = "IRSCOPE_SET", "IRSCOPE_PYTHONPATH"
# What a script may point elsewhere itself; the child reports where they ended up.
SCRIPT_SETTINGS = ("TORCH_TRACE", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
XLA_DUMP_TO = re.compile(r"--xla_dump_to(?:=|\s+)(\S+)")
# Device nodes of GPUs Triton compiles for: NVIDIA's driver, AMD's ROCm, WSL's GPU.
GPU_DEVICE_NODES = ("/dev/nvidiactl", "/dev/kfd", "/dev/dxg")
# Where launchers put a process's rank: torchrun and --nproc, Open MPI, MPICH, Slurm.
RANK_VARIABLES = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")


class Staging(namedtuple("Staging", "root")):
    """Paths of one collection folder; every writer and reader goes through these names.

    A named tuple, not a dataclass: ``inspect`` imports this before starting the script,
    where every millisecond of import is overhead.
    """

    __slots__ = ()
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
    def jax_triton(self) -> Path:
        """jax_triton's kernel dumps (``JAX_TRITON_DUMP_DIR``): ``<hash>/<kernel>.ttir``, ...;
        jax_triton compiles with Triton's backend passes, out of sight of the compile hook."""
        return self.root / "jax_triton"

    @property
    def xla_compiles(self) -> Path:
        """One dump folder per XLA compile, named by its number: ``xla_compiles/0003/``."""
        return self.root / "xla_compiles"

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

    def for_rank(self, rank: int) -> "Staging":
        """The staging folder of one process of a multi-process run."""
        return Staging(self.root / f"rank_{rank}")

    def ranks(self) -> list[tuple[int, "Staging"]]:
        """The per-rank staging folders that processes created, by rank."""
        found = [(int(p.name[5:]), Staging(p)) for p in self.root.glob("rank_*")
                 if p.is_dir() and p.name[5:].isdigit()]
        return sorted(found)

    def create(self) -> "Staging":
        for folder in (self.torch_trace, self.triton, self.xla, self.jax):
            folder.mkdir(parents=True, exist_ok=True)
        return self

    @property
    def jax_functions(self) -> Path:
        return self.jax / "functions.jsonl"

    @property
    def xla_dump_records(self) -> Path:
        """One line per XLA compile: its number, module, cache key, and where its dump is."""
        return self.jax / "xla_dumps.jsonl"

    def record_event(self, kind: str, data: dict[str, Any]) -> None:
        """Append one event: a failure, a timing, a collector problem."""
        append_record(self.events, {"kind": kind, "time": time.time(), **data})

    def read_events(self) -> list[dict[str, Any]]:
        return read_records(self.events)

    def write_config(self, config: dict[str, Any]) -> Path:
        self.config.write_text(json.dumps(config, indent=2), encoding="utf-8")
        return self.config


def append_record(path: Path, record: dict[str, Any]) -> None:
    """Append one JSON line, flushed at once (a killed process keeps what it wrote)."""
    line = json.dumps(record, default=str) + "\n"
    with _appending_lock:
        handle = _appending.get(path)
        if handle is None or handle.closed:
            handle = _appending[path] = open(path, "a", encoding="utf-8")  # noqa: SIM115
        handle.write(line)
        handle.flush()


def close_records() -> None:
    """Close the files ``append_record`` keeps open (before their folder is filed)."""
    with _appending_lock:
        while _appending:
            _appending.popitem()[1].close()


def read_records(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of ``path``; a last line cut short by a kill is skipped."""
    if not path.is_file():
        return []
    records = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return records


def rank_from_env(environ) -> int | None:
    """This process's rank as its launcher set it, or None outside a multi-process launch."""
    for name in RANK_VARIABLES:
        value = environ.get(name, "")
        if value.isdigit():
            return int(value)
    return None


def collection_env(staging: Staging, only: tuple[str, ...], environ: dict[str, str],
                   provenance: bool = False) -> dict[str, str]:
    """Environment changes that make the compilers write into ``staging``.

    The user's own settings win: an existing TORCH_TRACE or ``--xla_dump_to`` is kept (and
    read back at the end, see ``user_dump_files``). XLA dumps are asked for per compile by
    the JAX collector (see ``irscope.collectors.jax``), not in XLA_FLAGS: JAX's compilation
    cache keys hold XLA_FLAGS, and the script's compiles keep the keys they have without
    irscope.
    """
    environ = user_environment(environ)
    env: dict[str, str] = {}
    if "torch" in only:
        trace = environ.get("TORCH_TRACE")
        if not trace:
            env["TORCH_TRACE"] = str(staging.torch_trace)
        elif not os.path.isabs(trace):  # the script may change directory before it compiles
            env["TORCH_TRACE"] = os.path.abspath(trace)
        if provenance and "INDUCTOR_PROVENANCE" not in environ:
            # Inductor's provenance records (the FX nodes and the whole stack trace behind each
            # kernel launch) in the trace (``inspect --provenance``); they change the code's
            # comments, never what it computes, but are part of Inductor's cache key (a graph
            # cached without them compiles once again), cost about 5% of a warm GPT-2 run's
            # wall time, and a cache hit logs them empty: asked for, not set by default.
            env["INDUCTOR_PROVENANCE"] = "1"
        # Inductor compiles in parallel as it would without irscope: a Triton kernel that a
        # compile worker made, out of this process's hooks, is filed from Triton's cache as
        # one loaded from a warm cache is (``irscope.filing.inductor_cache``).
    if "torch" in only and "NVFUSER_DUMP" not in environ:  # Thunder's nvFuser kernels
        env.update({"NVFUSER_DUMP": nvfuser_dumps(environ), NVFUSER_DUMP_OURS: "1"})
    if "jax" in only and not environ.get("JAX_TRITON_DUMP_DIR"):
        env["JAX_TRITON_DUMP_DIR"] = str(staging.jax_triton)
    flags = environ.get("XLA_FLAGS", "")
    dump_to = XLA_DUMP_TO.search(flags)
    if dump_to and not os.path.isabs(dump_to.group(1)):  # absolute, as for TORCH_TRACE
        flags = env["XLA_FLAGS"] = (flags[:dump_to.start(1)] + os.path.abspath(dump_to.group(1))
                                    + flags[dump_to.end(1):])
    env[OURS_VARIABLE] = ",".join(sorted(name for name in env if name in (
        "TORCH_TRACE", "JAX_TRITON_DUMP_DIR", "NVFUSER_DUMP", NVFUSER_DUMP_OURS)))
    return env


def user_environment(environ: dict[str, str]) -> dict[str, str]:
    """``environ`` as the user set it: without what an enclosing irscope collection set for
    its program (a script that itself runs `irscope inspect`), so an inner collection sets
    its own folders and reads back none of the outer one's."""
    ours = [name for name in environ.get(OURS_VARIABLE, "").split(",") if name]
    if not ours and OURS_PATHS not in environ:
        return dict(environ)
    user = {k: v for k, v in environ.items()
            if k not in (*ours, OURS_VARIABLE, OURS_PATHS, "IRSCOPE_CONFIG")}
    added = set(environ.get(OURS_PATHS, "").split(os.pathsep)) - {""}
    if "PYTHONPATH" in user and added:
        kept = [p for p in user["PYTHONPATH"].split(os.pathsep) if p not in added]
        if kept:
            user["PYTHONPATH"] = os.pathsep.join(kept)
        else:
            del user["PYTHONPATH"]
    return user


def nvfuser_dumps(environ: dict[str, str]) -> str:
    """What nvFuser is asked to write of each kernel: its CUDA and PTX, and its SASS where
    nvFuser finds the nvdisasm that disassembles it (on the PATH; it stops the program
    where it does not)."""
    import shutil

    found = shutil.which("nvdisasm", path=environ.get("PATH"))
    return "cuda_to_file,ptx" + (",sass_to_file" if found else "")


def owns_xla_dumps(environ: dict[str, str]) -> bool:
    """Whether irscope asks for XLA dumps itself: not when the user dumps (``--xla_dump_to``)."""
    return not XLA_DUMP_TO.search(environ.get("XLA_FLAGS", ""))


def xla_dump_flags(staging: Staging, environ: dict[str, str]) -> str:
    """XLA_FLAGS that dump every module into ``staging.xla``: the way in when the JAX
    collector cannot hook compiles one by one (a JAX version it does not know)."""
    flags = environ.get("XLA_FLAGS", "")
    extra = [f"--xla_dump_to={staging.xla}", "--xla_dump_hlo_as_text"]
    if _gpu_jax(environ) and "--xla_dump_emitter_re" not in flags:
        # PTX and LLVM IR per emitter; the CPU backend crashes on this flag.
        extra.append("--xla_dump_emitter_re=.*")
    return " ".join([flags, *extra]).strip()


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


def gpu_visible(environ: dict[str, str]) -> bool:
    """Whether the program may see a GPU that Triton compiles for (NVIDIA, AMD, or WSL's), as
    far as can be told without importing a framework: a device node, not hidden by
    CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES set empty."""
    hidden = all(environ.get(name) in ("", "-1") for name in ("CUDA_VISIBLE_DEVICES",
                                                             "HIP_VISIBLE_DEVICES"))
    return not hidden and any(os.path.exists(node) for node in GPU_DEVICE_NODES)


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
