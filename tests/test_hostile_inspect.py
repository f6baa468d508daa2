"""`irscope inspect` on scripts that change directory (as Hydra does) before or after they
compile, with the default run folder and relative paths: everything is still collected, the
script's exit status is kept and nothing lands outside the run."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest
from fuzz_helpers import check, irscope, problems, tree_state

CHDIR_JAX = """
import os, sys, tempfile
import jax, jax.numpy as jnp
elsewhere = tempfile.mkdtemp(dir={away!r})
if sys.argv[1] == "before":
    os.chdir(elsewhere)
jax.jit(lambda x: jnp.tanh(x) * 2.0)(jnp.ones(4)).block_until_ready()
if sys.argv[1] == "after":
    os.chdir(elsewhere)
jax.jit(lambda x: jnp.sin(x) + 1.0)(jnp.ones(4)).block_until_ready()
sys.exit(int(sys.argv[2]))
"""

CHDIR_TORCH = """
import os, sys, tempfile
elsewhere = tempfile.mkdtemp(dir={away!r})
if sys.argv[1] == "before":
    os.chdir(elsewhere)
import torch
torch.compile(lambda x: torch.sin(x) + 1)(torch.ones(4))
if sys.argv[1] == "after":
    os.chdir(elsewhere)
torch.compile(lambda x: torch.cos(x) * 2)(torch.ones(4))
sys.exit(int(sys.argv[2]))
"""


def _units(run: Path, framework: str) -> list[str]:
    db = sqlite3.connect(f"file:{run / 'index.sqlite'}?mode=ro", uri=True)
    try:
        return [r[0] for r in db.execute("SELECT name FROM units WHERE framework=?",
                                         (framework,))]
    finally:
        db.close()


def _inspect_with_chdir(tmp_path: Path, script: str, when: str, status: int, output: bool):
    away = tmp_path / "away"
    away.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    (work / "script.py").write_text(script.format(away=str(away)))
    args = ["inspect", *(["-o", "out/run"] if output else []), "script.py", when, str(status)]
    outcome = irscope(*args, cwd=work, memory=None, limit_s=180)
    runs = sorted((work / "out").glob("run")) if output else sorted(
        (work / ".irscope" / "runs").glob("*"))
    return outcome, runs, away


@pytest.mark.parametrize("output", [False, True], ids=["default-run", "relative-o"])
@pytest.mark.parametrize("when", ["before", "after"])
def test_jax_script_that_changes_directory(tmp_path, when, output):
    pytest.importorskip("jax")
    outcome, runs, away = _inspect_with_chdir(tmp_path, CHDIR_JAX, when, 3, output)
    found = problems(outcome, ok=(3,))
    if len(runs) != 1:
        found.append(f"loss: {len(runs)} runs made")
    elif len([n for n in _units(runs[0], "jax") if n.startswith("jit__lambda")]) != 2:
        found.append(f"loss: jax units {_units(runs[0], 'jax')}")
    stray = [path for path, state in tree_state(away).items() if state[0] == "file"]
    if stray:
        found.append(f"written outside the run: {stray[:3]}")
    check(f"inspect/chdir-jax/{when}/{'o' if output else 'default'}", found, outcome)


@pytest.mark.slow
@pytest.mark.parametrize("when", ["before", "after"])
def test_torch_script_that_changes_directory(tmp_path, when):
    pytest.importorskip("torch")
    outcome, runs, away = _inspect_with_chdir(tmp_path, CHDIR_TORCH, when, 0, output=False)
    found = problems(outcome, ok=(0,))
    graphs = [n for n in _units(runs[0], "torch") if n.startswith("[")] if runs else []
    if len(graphs) < 2:
        found.append(f"loss: torch graphs {graphs}")
    if any(state[0] == "file" for state in tree_state(away).values()):
        found.append("written outside the run: a trace in the script's new directory")
    check(f"inspect/chdir-torch/{when}", found, outcome)


DISK_SCRIPT = """
import sys
import jax, jax.numpy as jnp
jax.jit(lambda x: jnp.tanh(x) * 2.0)(jnp.ones(4)).block_until_ready()
sys.exit(3)
"""


@pytest.mark.parametrize("room", [40_000, 90_000],
                         ids=["no-room-for-the-index", "full-while-filing"])
def test_disk_full_keeps_the_scripts_exit_status(tmp_path, room):
    """A full disk (files past ``room`` bytes fail) while the run is made or filed: one clear
    line, the script's own exit status, and a run that says it is partial."""
    pytest.importorskip("jax")
    (tmp_path / "script.py").write_text(DISK_SCRIPT)
    outcome = irscope("inspect", "-o", "run", "script.py", cwd=tmp_path, memory=None,
                      file_size=room, limit_s=180)
    found = problems(outcome, ok=(3,))
    if "irscope: error:" not in outcome.stderr:
        found.append("the full disk went unsaid")
    meta = tmp_path / "run" / "run.json"
    if meta.is_file() and not json.loads(meta.read_text()).get("partial"):
        found.append("the run is not marked partial")
    check(f"inspect/disk-full/{room}", found, outcome)


NESTED_OUTER = """
import subprocess, sys, torch
torch.compile(lambda x: torch.sin(x) + 1)(torch.randn(8))
subprocess.run([sys.executable, "-m", "irscope", "inspect", "-o", sys.argv[1], sys.argv[2]],
               check=True)
"""
NESTED_INNER = "import torch\ntorch.compile(lambda x: torch.cos(x) * 3)(torch.randn(8))\n"


def _kernels(run: Path) -> set[str]:
    outcome = irscope("ls", run, "--json", cwd=run.parent)
    return {u["name"] for u in json.loads(outcome.stdout) if u["framework"] == "cpp"}


@pytest.mark.slow
def test_a_script_that_runs_inspect_itself_gets_two_runs_of_their_own(tmp_path):
    """An `irscope inspect` inside an inspected script: each run holds its own script's
    compile alone (the inner one sets its own folders, the outer one never reads them)."""
    (tmp_path / "outer.py").write_text(NESTED_OUTER)
    (tmp_path / "inner.py").write_text(NESTED_INNER)
    outcome = irscope("inspect", "-o", tmp_path / "outer", tmp_path / "outer.py",
                      tmp_path / "inner", tmp_path / "inner.py", cwd=tmp_path, limit_s=300)
    check("nested", problems(outcome, ok=(0,)), outcome)
    assert _kernels(tmp_path / "outer") == {"cpp_fused_add_sin_0"}
    assert _kernels(tmp_path / "inner") == {"cpp_fused_cos_mul_0"}


OWN_TRACE = """
import os
os.environ["TORCH_TRACE"] = os.path.abspath("its_own_trace")
import torch
torch.compile(lambda x: torch.relu(x) * 2)(torch.randn(8))
"""


@pytest.mark.slow
def test_a_script_that_sets_torch_trace_itself_is_followed_there(tmp_path):
    (tmp_path / "own.py").write_text(OWN_TRACE)
    outcome = irscope("inspect", "-o", tmp_path / "run", tmp_path / "own.py", cwd=tmp_path,
                      limit_s=300)
    check("own-trace", problems(outcome, ok=(0,)), outcome)
    assert "the script set TORCH_TRACE=" in outcome.stderr
    assert _kernels(tmp_path / "run") == {"cpp_fused_mul_relu_0"}


SIGNALLED = """
import multiprocessing as mp, sys, time

def worker():
    time.sleep(120)

if __name__ == "__main__":
    workers = [mp.Process(target=worker) for _ in range(2)]
    for w in workers:
        w.start()
    with open(sys.argv[1], "w") as fh:
        fh.write(" ".join(str(w.pid) for w in workers))
    time.sleep(120)
"""


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_signal_to_irscope_ends_the_script_and_files_the_run(tmp_path, sig):
    """`kill -INT/-TERM/-HUP` of irscope's pid alone: the script ends, its multiprocessing
    workers too, the run is filed and marked partial, irscope exits 128 + the signal, and
    nothing is left running."""
    import signal
    import subprocess
    import sys
    import time

    script, pids = tmp_path / "workers.py", tmp_path / "pids"
    script.write_text(SIGNALLED)
    proc = subprocess.Popen([sys.executable, "-m", "irscope", "inspect", "-o", tmp_path / "run",
                             script, pids], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    for _ in range(600):  # wait on state: the workers have started
        if pids.is_file() and pids.read_text().strip():
            break
        time.sleep(0.1)
    workers = [int(p) for p in pids.read_text().split()]
    number = getattr(signal, sig)
    proc.send_signal(number)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + number, err
    assert not re.search(r'File "[^"]*/irscope/', err)  # the script's own traceback at most
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    assert meta["partial"] is True and meta["exit_status"] == 128 + number
    for _ in range(100):
        if not any(_running(pid) for pid in workers):
            break
        time.sleep(0.1)
    assert not any(_running(pid) for pid in workers)
