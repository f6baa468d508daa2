"""`irscope inspect` when the script fails, exits, is interrupted or killed, or runs twice."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from inspect_helpers import inspect, inspect_popen, jax_script, write

from irscope.store import Run, find_runs

SLEEP = "import time\ntime.sleep(120)"


def test_a_crashing_script_is_filed_as_partial_with_what_it_compiled(tmp_path):
    script = write(tmp_path, "crash.py",
                   jax_script("before_crash", tail="raise ValueError('boom')"))
    result = inspect(script, "--flag", run=tmp_path / "run")
    assert result.returncode == 1
    assert "ValueError: boom" in result.stderr
    assert "bootstrap" not in result.stderr  # the traceback is the script's own
    with Run.open(tmp_path / "run") as run:
        assert run.meta["partial"] is True and run.meta["exit_status"] == 1
        assert run.meta["error"] == "ValueError: boom"
        assert run.unit("jit_before_crash").source_line == 4
    assert "partial run: ValueError: boom" in result.stderr


def test_sys_exit_status_is_returned_and_the_empty_run_says_so(tmp_path):
    script = write(tmp_path, "exit3.py", "import sys\nprint(sys.argv[1:])\nsys.exit(3)\n")
    result = inspect(script, "a", "--b", run=tmp_path / "run", options=["--json"])
    assert result.returncode == 3
    printed, _, summary_json = result.stdout.partition("\n")
    assert printed == "['a', '--b']"  # the script saw its own argv
    data = json.loads(summary_json)
    assert data["exit_status"] == 3 and data["partial"] is True and data["units"] == {}
    text = inspect(script, run=tmp_path / "run", options=["--replace"]).stderr
    assert "empty run: the program imported none of torch, jax, triton" in text
    assert "partial run: exit status 3" in text


def test_a_module_runs_with_dash_m_from_the_working_directory(tmp_path, cli):
    write(tmp_path, "tool.py", "import sys\nprint('module argv', sys.argv[1:])\nsys.exit(4)\n")
    result = cli("inspect", "-o", str(tmp_path / "run"), "-m", "tool", "x", "--y", cwd=tmp_path)
    assert result.returncode == 4, result.stderr
    assert result.stdout == "module argv ['x', '--y']\n"
    with Run.open(tmp_path / "run") as run:
        assert run.meta["target"] == ["-m", "tool", "x", "--y"] and run.name == "tool"


def test_ctrl_c_ends_the_script_and_the_run_is_still_filed(tmp_path):
    script = write(tmp_path, "sleepy.py", jax_script("before_sleep", tail=SLEEP))
    child = inspect_popen(script, tmp_path / "run", tmp_path)
    assert child.stdout.readline().strip() == "compiled"
    os.killpg(child.pid, signal.SIGINT)  # what the terminal does on Ctrl-C
    _, stderr = child.communicate(timeout=120)
    assert child.returncode == 130, stderr
    assert "KeyboardInterrupt" in stderr
    with Run.open(tmp_path / "run") as run:
        assert run.meta["ended"] == "interrupted" and run.meta["partial"] is True
        assert run.unit("jit_before_sleep")


def test_a_killed_script_is_filed_with_its_signal(tmp_path):
    script = write(tmp_path, "sleepy.py", jax_script("before_kill", tail=SLEEP))
    parent = inspect_popen(script, tmp_path / "run", tmp_path)
    assert parent.stdout.readline().strip() == "compiled"
    child_pid = _child_of(parent.pid)
    os.kill(child_pid, signal.SIGKILL)
    _, stderr = parent.communicate(timeout=120)
    assert parent.returncode == 128 + signal.SIGKILL
    with Run.open(tmp_path / "run") as run:
        assert run.meta["ended"] == "killed by SIGKILL"
        assert run.unit("jit_before_kill")
    assert "partial run: killed by SIGKILL (exit status 137)" in stderr


def test_two_inspects_at_once_never_mix_their_artifacts(tmp_path):
    # Same script name, same second: both want the run directory <time>-job.
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    first = write(tmp_path / "a", "job.py", jax_script("only_in_first"))
    second = write(tmp_path / "b", "job.py", jax_script("only_in_second"))
    runs = [inspect_popen(script, None, tmp_path) for script in (first, second)]
    for child in runs:
        _, stderr = child.communicate(timeout=300)
        assert child.returncode == 0, stderr
    made = find_runs(tmp_path / ".irscope" / "runs")
    assert len(made) == 2
    for path in made:
        with Run.open(path) as run:
            names = {u.name for u in run.units("jax")} & {"jit_only_in_first", "jit_only_in_second"}
            assert len(names) == 1, names
            expected = "a/job.py" if names == {"jit_only_in_first"} else "b/job.py"
            assert run.meta["target"][0].endswith(expected)
            assert not (path / "staging").exists()


def test_the_users_own_xla_dump_folder_is_kept_and_read(tmp_path):
    mine = tmp_path / "my-dump"
    script = write(tmp_path, "mine.py", jax_script("with_my_flags"))
    env = {"XLA_FLAGS": f"--xla_dump_to={mine} --xla_dump_hlo_as_text"}
    result = inspect(script, run=tmp_path / "run", env=env)
    assert result.returncode == 0, result.stderr
    assert list(mine.glob("module_*.jit_with_my_flags.before_optimizations.txt"))
    with Run.open(tmp_path / "run") as run:
        unit = run.unit("jit_with_my_flags")
        assert {"jaxpr", "stablehlo", "hlo_before_opt", "hlo_after_opt"} <= {
            s.kind for s in run.stages(unit.id)}


def _child_of(pid: int) -> int:
    """The pid of the bootstrap child of an inspect process (Linux /proc)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                return int(entry)
    raise AssertionError(f"no child of {pid}")
