"""Real dumps for the ingest tests: TORCH_TRACE + TORCH_LOGS of the seeds, a Triton cache folder."""

from __future__ import annotations

import json
import re
from pathlib import Path

from kernels import compile_aot
from torch_helpers import SCRIPTS, torch_dumps  # noqa: F401  (test_ingest imports them here)

# V1122 13:23:01.254000 8439 torch/_dynamo/convert_frame.py:303] {"dynamo_start": {...
ENVELOPE_KIND = re.compile(r'^[VIWEF]\d{4} [\d:.]+ +\d+ [^\]]*\] \{"(\w+)"', re.M)


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
