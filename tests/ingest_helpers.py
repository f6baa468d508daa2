"""Real dumps for the ingest tests: TORCH_TRACE + TORCH_LOGS of the seeds, a Triton cache folder."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from kernels import compile_aot
from torch_helpers import SCRIPTS, _cached

GRAPH_BREAK_PROGRAM = """
import torch

def f(x):
    y = x.sin()
    print("graph break here")
    return y.cos() + 1

torch.compile(f)(torch.randn(8))
"""
SEED_COMMAND = f"{SCRIPTS / 'seed_torch.py'} --device cpu --recompile"
# V1122 13:23:01.254000 8439 torch/_dynamo/convert_frame.py:303] {"dynamo_start": {...
ENVELOPE_KIND = re.compile(r'^[VIWEF]\d{4} [\d:.]+ +\d+ [^\]]*\] \{"(\w+)"', re.M)


def torch_dumps() -> Path:
    """Folder with trace/ (seeds, with a recompilation), trace_gb/ (a graph break), logs.txt."""
    with _cached(SEED_COMMAND + GRAPH_BREAK_PROGRAM, "torch") as (folder, fresh):
        if fresh:
            folder.mkdir(exist_ok=True)
            env = {**os.environ, "TORCH_TRACE": str(folder / "trace"),
                   "TORCH_LOGS": "output_code,graph_code,guards,recompiles",
                   "TORCHINDUCTOR_CACHE_DIR": str(folder / "inductor_cache")}
            with open(folder / "logs.txt", "w") as log:
                subprocess.run([sys.executable, *SEED_COMMAND.split()], env=env, check=True,
                               stdout=log, stderr=subprocess.STDOUT, timeout=900)
            env = {**env, "TORCH_TRACE": str(folder / "trace_gb")}
            env.pop("TORCH_LOGS")
            subprocess.run([sys.executable, "-c", GRAPH_BREAK_PROGRAM], env=env, check=True,
                           capture_output=True, timeout=600)
    return folder


def record_kinds(log: Path) -> list[str]:
    """Record kinds of a TORCH_TRACE log, counted independently of irscope (a regex)."""
    return ENVELOPE_KIND.findall(log.read_text(errors="replace"))


def write_triton_entry(root: Path, kernel: str, num_warps: int = 4, **options) -> Path:
    """A Triton cache entry (<hash>/<name>.{ttir,ttgir,llir,ptx,cubin,json}) from a real compile."""
    asm = compile_aot(kernel, num_warps=num_warps, **options)
    meta = dict(asm["metadata"])
    folder = root / meta["hash"]
    folder.mkdir(parents=True, exist_ok=True)
    name = asm["name"]
    for ext in ("ttir", "ttgir", "llir", "ptx"):
        (folder / f"{name}.{ext}").write_text(asm[ext])
    (folder / f"{name}.cubin").write_bytes(asm["cubin"])
    (folder / f"{name}.json").write_text(json.dumps(meta, default=str))
    (folder / f"__grp__{name}.json").write_text(json.dumps({"child_paths": {}}))
    return folder
