"""`inspect --profile`'s window, counted in the script's own process on the CPU: top-level calls
of compiled functions (torch.compile, jax.jit) or the blocks it marks are its steps; with no GPU
the window says there is nothing to time, and the run is kept."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from conftest import run_cli

from irscope.collectors.staging import Staging

TORCH_SCRIPT = """
import torch

@torch.compile(backend="eager")
def inner(x):
    return x * 2

@torch.compile(backend="eager")
def outer(x):
    return inner(x) + 1  # a compiled call inside another: not a step of its own

model = torch.compile(torch.nn.Linear(4, 4), backend="eager")
x = torch.ones(4)
for _ in range(3):
    outer(x)
model(x)
"""
JAX_SCRIPT = """
import jax
import jax.numpy as jnp
from functools import partial

@jax.jit
def inner(x):
    return x * 2

@partial(jax.jit, static_argnums=1)
def outer(x, n):
    return inner(x) + n

x = jnp.ones(4)
jnp.sum(x)  # an eager op: no step
for _ in range(4):
    outer(x, 1)
assert outer.lower(x, 1) is not None  # the jitted function's own attributes still answer
"""
MARKED_SCRIPT = """
import torch
import irscope

step = torch.compile(lambda x: x + 1, backend="eager")
step(torch.ones(2))  # a compiled call before the marks: its window is dropped
for _ in range(2):
    with irscope.profile():
        step(torch.ones(2))
        step(torch.ones(2))
"""


def window_of(tmp_path, script: str, skip=None, steps=3) -> dict:
    """Run ``script`` as the child of ``inspect --profile`` would, and read its window."""
    staging = Staging(tmp_path / "staging").create()
    config = staging.write_config({"staging": str(staging.root), "only": ["torch", "jax"],
                                   "xla_dumps": False, "profile": {"skip": skip,
                                                                   "steps": steps}})
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(script), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "irscope.collectors.bootstrap", str(config),
                           "--", str(path)], capture_output=True, text=True, timeout=300,
                          env={"JAX_PLATFORMS": "cpu", "CUDA_VISIBLE_DEVICES": "",
                               "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    window = json.loads((staging.root / "profile" / "window.json").read_text())
    return window["irscope_profile_window"]


@pytest.mark.slow
def test_top_level_torch_compile_calls_are_the_steps(tmp_path):
    window = window_of(tmp_path, TORCH_SCRIPT, skip=3)
    # outer x3 and the compiled module's forward: the window opens at the 4th, finds no GPU
    assert window == {"framework": "torch", "skip": 3, "steps": 3, "steps_profiled": 0,
                      "steps_seen": 4, "marked": False, "reason": "PyTorch sees no GPU"}


def test_top_level_jax_jit_calls_are_the_steps(tmp_path):
    pytest.importorskip("jax")
    window = window_of(tmp_path, JAX_SCRIPT, skip=5)
    assert window["steps_seen"] == 4 and window["framework"] is None
    assert window["reason"] == "the script began 4 step(s); --profile-skip 5 left none to " \
                               "profile"
    window = window_of(tmp_path / "again", JAX_SCRIPT, skip=1)
    assert (window["steps_seen"], window["reason"]) == (2, "JAX runs on cpu, not a GPU")


@pytest.mark.slow
def test_marked_blocks_replace_compiled_calls_as_steps(tmp_path):
    window = window_of(tmp_path, MARKED_SCRIPT)
    assert window["marked"] and window["skip"] == 0 and window["steps_seen"] == 1
    assert window["reason"] == "PyTorch sees no GPU"


def test_profile_without_a_gpu_says_so_in_one_line_and_keeps_the_run(tmp_path):
    script = tmp_path / "script.py"
    script.write_text("import sys\nprint('ran')\n", encoding="utf-8")
    done = run_cli("inspect", "--profile", "-o", str(tmp_path / "run"), str(script),
                   env={"CUDA_VISIBLE_DEVICES": ""})
    assert done.returncode == 0 and "ran" in done.stdout
    said = [line for line in done.stderr.splitlines() if "--profile" in line]
    assert said == ["irscope: warning: --profile: no GPU is visible here, so there is nothing "
                    "to time; the run is captured without measured time"]
    assert (tmp_path / "run" / "index.sqlite").is_file()
    bad = run_cli("inspect", "--profile", "--profile-steps", "0", str(script))
    assert bad.returncode == 2 and "--profile-steps takes 1 or more" in bad.stderr
