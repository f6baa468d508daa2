"""A multi-process `irscope inspect` whose script fails: a script that does not compile makes no
run and is reported once, whatever number of ranks tried it; a failure on one rank is the run's
one outcome, with what every rank collected kept."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli
from inspect_helpers import write

from irscope.store import Run, find_runs, locate_run

TORCHRUN = Path(sys.executable).with_name("torchrun")
SYNTAX = "import sys\ndef f(:\n    pass\n"
# A launcher irscope cannot see into: a shell script that starts two ranks of its arguments
# with an interpreter of its own choosing (here, this one) and exits with the worst status.
LAUNCH_TWO = """#!/bin/sh
RANK=0 WORLD_SIZE=2 "$RANKS_PYTHON" "$@" & first=$!
RANK=1 WORLD_SIZE=2 "$RANKS_PYTHON" "$@"; second=$?
wait $first; first=$?
exit $(( first > second ? first : second ))
"""


def _launcher(folder: Path) -> Path:
    script = write(folder, "launch_two", LAUNCH_TWO)
    script.chmod(0o755)
    return script


def _python(folder: Path, script: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, script], cwd=folder, capture_output=True, text=True)


def _with_ranks_python(env: dict | None = None) -> dict:
    return {"RANKS_PYTHON": sys.executable, **(env or {})}


@pytest.mark.parametrize("how", ["nproc", "nproc -m", "torchrun", "a launcher"])
def test_a_script_that_does_not_compile_is_reported_once_and_makes_no_run(tmp_path, how):
    """As with one process: Python's own report of the error (once, not once per rank), one
    line saying no run was made, Python's exit status, and `latest` stays the run before.
    Where irscope knows the interpreter the ranks run, the script is compiled before any
    starts (--nproc, torchrun); else (-m, a launcher it cannot see into) each rank keeps its
    report to itself and irscope shows it once."""
    if how == "torchrun" and not TORCHRUN.is_file():
        pytest.skip("torchrun not installed")
    write(tmp_path, "ok.py", "print('ran')\n")
    write(tmp_path, "syntax.py", SYNTAX)
    assert run_cli("inspect", "ok.py", cwd=tmp_path).returncode == 0
    runs = tmp_path / ".irscope" / "runs"
    kept = locate_run("latest", runs)
    command = {"nproc": ["--nproc", "2", "syntax.py"],
               "nproc -m": ["--nproc", "2", "-m", "syntax"],
               "torchrun": ["--", TORCHRUN, "--nproc-per-node", "2", "syntax.py"],
               "a launcher": ["--", _launcher(tmp_path), "syntax.py"]}[how]
    failed = run_cli("inspect", *command, cwd=tmp_path, env=_with_ranks_python())
    python = _python(tmp_path, "syntax.py")
    assert failed.returncode == python.returncode == 1, failed.stderr
    shown, said = failed.stderr.rsplit("irscope: error: ", 1)
    assert shown == python.stderr  # file, line and caret, as Python prints them, once
    name = "syntax" if how == "nproc -m" else "syntax.py"
    assert said == f"{name}: did not compile (the error is above); no run was made\n"
    assert find_runs(runs) == [kept] and locate_run("latest", runs) == kept


@pytest.mark.parametrize("how", ["nproc", "torchrun"])
def test_replace_keeps_the_run_when_the_ranks_script_does_not_compile(tmp_path, how):
    if how == "torchrun" and not TORCHRUN.is_file():
        pytest.skip("torchrun not installed")
    write(tmp_path, "ok.py", "print('ran')\n")
    write(tmp_path, "syntax.py", SYNTAX)
    assert run_cli("inspect", "-o", "run", "ok.py", cwd=tmp_path).returncode == 0
    before = sorted(p.name for p in (tmp_path / "run").iterdir())
    meta = (tmp_path / "run" / "run.json").read_text()
    command = (["--nproc", "2", "syntax.py"] if how == "nproc" else
               ["--", TORCHRUN, "--nproc-per-node", "2", "syntax.py"])
    failed = run_cli("inspect", "--replace", "-o", "run", *command, cwd=tmp_path)
    python = _python(tmp_path, "syntax.py")
    assert failed.returncode == python.returncode == 1
    shown, said = failed.stderr.rsplit("irscope: error: ", 1)
    assert shown == python.stderr
    assert said == "syntax.py: did not compile (the error is above); run was kept as it was\n"
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == before
    assert (tmp_path / "run" / "run.json").read_text() == meta


def test_a_launcher_rank_that_fails_is_the_runs_outcome(tmp_path):
    """Ranks a launcher starts say how they ended (the launcher alone knows their status): the
    rank that raised is named with its error in run.json and the summary, the run is partial
    and irscope's status is the launcher's, not 0."""
    write(tmp_path, "one_fails.py", "import os\nif os.environ['RANK'] == '1':\n"
                                    "    raise ValueError('rank 1 gives up')\nprint('done')\n")
    result = run_cli("inspect", "-o", "run", "--", _launcher(tmp_path), "one_fails.py",
                     cwd=tmp_path, env=_with_ranks_python())
    assert result.returncode == 1, result.stderr
    assert result.stderr.count("ValueError: rank 1 gives up") == 2  # its traceback, the summary
    assert "partial run: rank 1: ValueError: rank 1 gives up (exit status 1)" in result.stderr
    with Run.open(tmp_path / "run") as run:
        assert run.meta["ranks"] == [0, 1] and run.meta["failed_ranks"] == [1]
        assert (run.meta["ended"], run.meta["error"], run.meta["partial"]) == (
            "exception", "rank 1: ValueError: rank 1 gives up", True)


def test_a_process_of_a_rank_that_ends_well_keeps_the_ranks_failure(tmp_path):
    """A launched rank's own processes (Inductor's compile workers) have its rank and write
    its status as they exit: one that ends well after the rank raised leaves the failure."""
    from irscope.collectors.bootstrap import record_ending
    from irscope.collectors.staging import Staging

    rank = Staging(tmp_path / "rank_1").create()
    record_ending(rank, ValueError("rank 1 gives up"))
    record_ending(rank, None)  # the worker, after
    said = json.loads(rank.status.read_text())
    assert (said["ended"], said["error"], said["exit_status"]) == (
        "exception", "ValueError: rank 1 gives up", 1)
    fresh = Staging(tmp_path / "rank_0").create()
    record_ending(fresh, None)
    assert json.loads(fresh.status.read_text())["ended"] == "exit"


@pytest.mark.slow
def test_a_crash_on_one_rank_keeps_what_every_rank_compiled(tmp_path):
    """Rank 1 raises after its compile; rank 0 then fails in a barrier the other will never
    reach (gloo: the connection closed). The run's outcome is the first failure, rank 1's,
    the later one named after it; each rank's graph is kept."""
    write(tmp_path, "crash.py", (
        "import torch\nimport torch.distributed as dist\n\n"
        "dist.init_process_group('gloo')\nrank = dist.get_rank()\n"
        "f = torch.compile(lambda x: torch.relu(x) * 2)\nprint(f(torch.ones(4)).sum().item())\n"
        "if rank == 1:\n    raise RuntimeError('rank 1 gives up')\ndist.barrier()\n"))
    result = run_cli("inspect", "--nproc", "2", "-o", "run", "crash.py", cwd=tmp_path)
    assert result.returncode == 1, result.stderr[-3000:]
    assert ("partial run: rank 1: RuntimeError: rank 1 gives up (exit status 1); rank 0 "
            "failed after it") in result.stderr
    with Run.open(tmp_path / "run") as run:
        assert run.meta["failed_ranks"] == [1, 0]
        graphs = {u.name for u in run.units("torch") if u.name.startswith("[")}
    assert graphs == {"[0/0] <lambda>", "[0/0] <lambda> (rank 1)"}
    doc = json.loads(run_cli("ranks", tmp_path / "run", "--json").stdout)
    assert doc["ranks"] == [0, 1]
