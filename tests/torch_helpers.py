"""Real torch.compile and jax.jit artifacts for tests, made in subprocesses and shared by tests."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1] / "samples" / "scripts"

# V1122 13:00:00.000000 123 torch/_logging/structured.py:28] {"inductor_output_code": {...}, ...}
ENVELOPE_RE = re.compile(r"^[VIWE]\d{4} [\d:.]+ +\d+ [^\]]*\] (\{.*\})\s*$")

GRAPH_BREAK_PROGRAM = """
import torch

def f(x):
    y = x.sin()
    print("graph break here")
    return y.cos() + 1

torch.compile(f)(torch.randn(8))
"""
SEED_COMMAND = f"{SCRIPTS / 'seed_torch.py'} --device cpu --recompile"

JAX_PROGRAM = """
import json, os, sys
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


def control_flow(carry, xs):
    def body(c, x):
        return c + jnp.sin(x), c * 2
    carry, ys = jax.lax.scan(body, carry, xs)
    z = jax.lax.cond(carry.sum() > 0, lambda v: v + 1, lambda v: v - 1, carry)
    w = jax.lax.while_loop(lambda v: v.sum() < 100, lambda v: v * 2, z)
    return jax.nn.gelu(w), ys


def walk(jaxpr, counts):
    for eqn in jaxpr.eqns:
        counts[eqn.primitive.name] = counts.get(eqn.primitive.name, 0) + 1
        for value in eqn.params.values():
            for item in value if isinstance(value, (tuple, list)) else (value,):
                inner = getattr(item, "jaxpr", item)
                if hasattr(inner, "eqns"):
                    walk(inner, counts)
    return counts


closed = jax.make_jaxpr(control_flow)(jnp.ones(4), jnp.ones((3, 4)))
with open(os.path.join({dump!r}, "control_flow.jaxpr"), "w") as out:
    out.write(str(closed))
with open(os.path.join({dump!r}, "control_flow.counts.json"), "w") as out:
    json.dump(walk(closed.jaxpr, {{}}), out)
"""

LARGE_JAX_PROGRAM = """
import os
os.environ["XLA_FLAGS"] = "--xla_dump_to=" + {dump!r}
import jax, jax.numpy as jnp


def block(x, w):
    h = jax.nn.gelu(x @ w)
    return jax.lax.cond(h.sum() > 0, lambda v: v * 2, lambda v: v - 1, h)


def deep_model(x, ws):
    for i in range(ws.shape[0]):
        x = block(x, ws[i]) + x
        x = (x - x.mean(-1, keepdims=True)) / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5)
    return x


x, ws = jnp.ones((8, 64)), jnp.ones(({layers}, 64, 64))
jax.jit(deep_model)(x, ws).block_until_ready()
with open(os.path.join({dump!r}, "deep_model.jaxpr"), "w") as out:
    out.write(str(jax.make_jaxpr(deep_model)(x, ws)))
"""


def read_trace_payloads(where: Path) -> list[tuple[str, dict, str]]:
    """(record kind, envelope, payload) for every record of a TORCH_TRACE log or folder of logs."""
    records = []
    for log in sorted(where.glob("*.log")) if where.is_dir() else [where]:
        lines = log.read_text(errors="replace").splitlines()
        for index, line in enumerate(lines):
            match = ENVELOPE_RE.match(line)
            if not match:
                continue
            try:
                envelope = json.loads(match.group(1))
            except ValueError:  # a corrupted record: skip it, as tlparse does
                continue
            payload = []
            for following in lines[index + 1:]:
                if not following.startswith("\t"):
                    break
                payload.append(following[1:])
            kind = next(iter(envelope))
            records.append((kind, envelope, "\n".join(payload) + "\n" if payload else ""))
    return records


@contextmanager
def _cached(program: str, package: str):
    """A per-user folder keyed by the program and package version, filled once under a lock.

    Yields (folder, fresh): compiles are slow on small machines, so test modules and reruns
    share one real compile of the same program by the same compiler version.
    """
    scripts = "".join(p.read_text() for p in sorted(SCRIPTS.glob("*.py")))
    key = hashlib.sha256(f"{program}{scripts}{metadata.version(package)}{sys.executable}".encode())
    base = Path(tempfile.gettempdir()) / f"irscope-tests-{os.getuid()}"
    folder = base / f"{package}-{key.hexdigest()[:16]}"
    base.mkdir(parents=True, exist_ok=True)
    with open(base / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = folder / ".complete"
        fresh = not done.exists()
        if fresh:  # start clean: an interrupted compile may have left half a trace
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
        yield folder, fresh
        done.touch()


def torch_dumps() -> Path:
    """torch.compile of the seed examples on CPU (seed_torch.py --recompile), made once: a folder
    with trace/ (TORCH_TRACE), logs.txt (TORCH_LOGS), inductor_cache/, and trace_gb/ (a graph
    break)."""
    with _cached(SEED_COMMAND + GRAPH_BREAK_PROGRAM, "torch") as (folder, fresh):
        if fresh:
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


def compile_torch_seeds() -> dict[str, list[str]]:
    """TORCH_TRACE payloads of every seed example's first compile, grouped by record kind
    (torch_dumps' compile, less the recompiles of --recompile)."""
    grouped: dict[str, list[str]] = {}
    for kind, envelope, payload in read_trace_payloads(torch_dumps() / "trace"):
        if envelope.get("frame_compile_id", 0) == 0:
            grouped.setdefault(kind, []).append(payload)
    return grouped


def jit_jax_seeds() -> Path:
    """jax.jit every seed example on CPU with an XLA dump (plus NAME.jaxpr files); the folder."""
    with _cached(JAX_PROGRAM, "jax") as (folder, fresh):
        if fresh:
            program = JAX_PROGRAM.format(dump=str(folder), scripts=str(SCRIPTS))
            subprocess.run([sys.executable, "-c", program], check=True, capture_output=True,
                           timeout=600)
    return folder


def jit_jax_large(layers: int = 120) -> Path:
    """An XLA dump and jaxpr of a deep unrolled model: large real artifacts for benchmarks."""
    program = LARGE_JAX_PROGRAM.replace("{layers}", str(layers))
    with _cached(program, "jax") as (folder, fresh):
        if fresh:
            subprocess.run([sys.executable, "-c", program.format(dump=str(folder))], check=True,
                           capture_output=True, timeout=900)
    return folder


def dump_file(folder: Path, module: str, suffix: str) -> str:
    """Text of the dump file of XLA module ``module`` (e.g. jit_mlp) ending in ``suffix``."""
    matches = sorted(folder.glob(f"module_*.{module}.{suffix}"))
    assert matches, f"no {module}.{suffix} in {folder}"
    return matches[-1].read_text()
