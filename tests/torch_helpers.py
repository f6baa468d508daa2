"""Real torch.compile and jax.jit artifacts for tests, made once per session in subprocesses."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1] / "samples" / "scripts"

# V1122 13:00:00.000000 123 torch/_logging/structured.py:28] {"inductor_output_code": {...}, ...}
ENVELOPE_RE = re.compile(r"^[VIWE]\d{4} [\d:.]+ +\d+ [^\]]*\] (\{.*\})\s*$")

TORCH_PROGRAM = """
import sys
sys.path.insert(0, {scripts!r})
import torch, seed_torch
torch.manual_seed(0)
d, h = 64, 128
x, w1, w2 = torch.randn(32, d), torch.randn(d, h), torch.randn(h, d)
gamma, beta, gating = torch.ones(d), torch.zeros(d), torch.randn(d, h)
torch.compile(seed_torch.mlp)(x, w1, w2)
torch.compile(seed_torch.activation_chain)(x)
torch.compile(seed_torch.complex_activation)(x)
torch.compile(seed_torch.post_norm_block)(x, w1, w2, gamma, beta)
torch.compile(seed_torch.mlp_dead_gate)(x, w1, w2, gating)
"""

JAX_PROGRAM = """
import os, sys
os.environ["XLA_FLAGS"] = "--xla_dump_to=" + {dump!r}
sys.path.insert(0, {scripts!r})
import jax, jax.numpy as jnp, seed_jax
x, w1, w2 = jnp.ones((32, 64)), jnp.ones((64, 128)), jnp.ones((128, 64))
gamma = jnp.ones(64)
for name, args in [("mlp", (x, w1, w2)), ("activation_chain", (x,)),
                   ("complex_activation", (x,)), ("post_norm_block", (x, w1, w2, gamma, gamma)),
                   ("mlp_dead_gate", (x, w1, w2, w1))]:
    fn = getattr(seed_jax, name)
    jax.jit(fn)(*args).block_until_ready()
    with open(os.path.join({dump!r}, name + ".jaxpr"), "w") as out:
        out.write(str(jax.make_jaxpr(fn)(*args)))
"""


def read_trace_payloads(folder: Path) -> list[tuple[str, dict, str]]:
    """(record kind, envelope, payload text) for every record of TORCH_TRACE logs in ``folder``."""
    records = []
    for log in sorted(folder.glob("*.log")):
        lines = log.read_text(errors="replace").splitlines()
        for index, line in enumerate(lines):
            match = ENVELOPE_RE.match(line)
            if not match:
                continue
            envelope = json.loads(match.group(1))
            payload = []
            for following in lines[index + 1:]:
                if not following.startswith("\t"):
                    break
                payload.append(following[1:])
            kind = next(iter(envelope))
            records.append((kind, envelope, "\n".join(payload) + "\n" if payload else ""))
    return records


def compile_torch_seeds(folder: Path) -> dict[str, list[str]]:
    """torch.compile every seed example on CPU; payloads grouped by record kind."""
    trace = folder / "trace"
    env = {**os.environ, "TORCH_TRACE": str(trace),
           "TORCHINDUCTOR_CACHE_DIR": str(folder / "inductor_cache")}
    subprocess.run([sys.executable, "-c", TORCH_PROGRAM.format(scripts=str(SCRIPTS))], env=env,
                   check=True, capture_output=True, timeout=900)
    grouped: dict[str, list[str]] = {}
    for kind, _, payload in read_trace_payloads(trace):
        grouped.setdefault(kind, []).append(payload)
    return grouped


def jit_jax_seeds(folder: Path) -> Path:
    """jax.jit every seed example on CPU with an XLA dump in ``folder`` (plus NAME.jaxpr files)."""
    folder.mkdir(parents=True, exist_ok=True)
    program = JAX_PROGRAM.format(dump=str(folder), scripts=str(SCRIPTS))
    subprocess.run([sys.executable, "-c", program], check=True, capture_output=True, timeout=600)
    return folder


def dump_file(folder: Path, module: str, suffix: str) -> str:
    """Text of the dump file of XLA module ``module`` (e.g. jit_mlp) ending in ``suffix``."""
    matches = sorted(folder.glob(f"module_*.{module}.{suffix}"))
    assert matches, f"no {module}.{suffix} in {folder}"
    return matches[-1].read_text()
