"""`irscope inspect` when the script fails, exits, is interrupted or killed, or runs twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

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
    with Run.open(tmp_path / "run") as run:  # where the time went, filing's parts within it
        phases, filing = run.meta["phases_s"], run.meta["filing_phases_s"]
    assert list(phases) == ["start", "child_start", "script", "child_exit", "filing"]
    assert list(filing) == ["watch", "ingest"]
    assert sum(filing.values()) == pytest.approx(phases["filing"], abs=0.002)
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


def test_a_start_that_fails_makes_no_run_and_latest_stays_the_run_before(tmp_path, cli):
    """A script that raised is kept and is `latest`; one that does not compile shows Python's
    own error and no frame of irscope's, a binary file is refused in one line, and so is an
    interpreter that is not there: none of them leaves a run or a folder behind."""
    from irscope.store import locate_run

    write(tmp_path, "raises.py", "raise ValueError('boom')\n")
    write(tmp_path, "syntax.py", "import sys\ndef f(:\n    pass\n")
    (tmp_path / "garbage.bin").write_bytes(bytes(range(256)) * 4)
    assert cli("inspect", "raises.py", cwd=tmp_path).returncode == 1
    runs = tmp_path / ".irscope" / "runs"
    kept = locate_run("latest", runs)
    python = subprocess.run([sys.executable, "syntax.py"], cwd=tmp_path, capture_output=True,
                            text=True)
    failed = cli("inspect", "syntax.py", cwd=tmp_path)
    assert failed.returncode == python.returncode == 1
    shown, said = failed.stderr.rsplit("irscope: error: ", 1)
    assert shown == python.stderr  # file, line and caret, as Python prints them
    assert said == "syntax.py: did not compile (the error is above); no run was made\n"
    binary = cli("inspect", "garbage.bin", cwd=tmp_path)
    assert (binary.returncode, binary.stderr) == (
        2, "irscope: error: garbage.bin: not a Python script (binary)\n")
    absent = cli("inspect", "--python", str(tmp_path / "no-python"), "raises.py", cwd=tmp_path)
    assert absent.returncode == 1 and absent.stderr.count("\n") == 1, absent.stderr
    assert list(runs.iterdir()) == [kept] and locate_run("latest", runs) == kept


def test_replace_keeps_the_run_when_the_new_script_does_not_compile(tmp_path, cli):
    """--replace empties the run only for a script that compiles: a typo keeps the last run."""
    write(tmp_path, "ok.py", "print('ran')\n")
    write(tmp_path, "syntax.py", "import sys\ndef f(:\n    pass\n")
    assert cli("inspect", "-o", "run", "ok.py", cwd=tmp_path).returncode == 0
    before = sorted(p.name for p in (tmp_path / "run").iterdir())
    meta = (tmp_path / "run" / "run.json").read_text()
    python = subprocess.run([sys.executable, "syntax.py"], cwd=tmp_path, capture_output=True,
                            text=True)
    failed = cli("inspect", "--replace", "-o", "run", "syntax.py", cwd=tmp_path)
    assert failed.returncode == python.returncode == 1
    shown, said = failed.stderr.rsplit("irscope: error: ", 1)
    assert shown == python.stderr  # file, line and caret, as Python prints them
    assert said == "syntax.py: did not compile (the error is above); run was kept as it was\n"
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == before
    assert (tmp_path / "run" / "run.json").read_text() == meta


def test_a_framework_that_fails_to_import_shows_pythons_traceback(tmp_path, cli):
    """The import hook irscope puts on jax leaves no frame in the script's traceback."""
    write(tmp_path, "jax.py", "raise ImportError('broken jax')\n")  # found before the real one
    write(tmp_path, "main.py", "import jax\n")
    python = subprocess.run([sys.executable, "main.py"], cwd=tmp_path, capture_output=True,
                            text=True)
    failed = cli("inspect", "-o", str(tmp_path / "run"), "main.py", cwd=tmp_path)
    assert failed.returncode == python.returncode == 1
    assert failed.stderr.startswith(python.stderr), failed.stderr


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


# Counts the SIGINTs it gets; SIGTERM (after them: lower signals are handled first) writes
# the count and ends it as Ctrl-C would.
COUNTS_SIGINTS = """import signal, sys
got = []
signal.signal(signal.SIGINT, lambda *_: got.append(1))
def end(*_):
    open(sys.argv[1], "w").write(str(len(got)))
    raise KeyboardInterrupt
signal.signal(signal.SIGTERM, end)
print("ready", flush=True)
while True:
    signal.pause()
"""


def test_a_signal_to_the_process_group_reaches_the_script_once(tmp_path):
    """SIGINT to the group (a terminal's Ctrl-C, `kill -INT -PGID`) reaches the script
    directly, so irscope does not pass it on as well; SIGTERM to irscope's pid alone is."""
    script, count = write(tmp_path, "counts.py", COUNTS_SIGINTS), tmp_path / "count"
    parent = subprocess.Popen([sys.executable, "-m", "irscope", "inspect", "-o",
                               tmp_path / "run", script, count], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True)
    assert parent.stdout.readline().strip() == "ready"
    os.killpg(parent.pid, signal.SIGINT)
    os.kill(parent.pid, signal.SIGTERM)  # handled by irscope after the SIGINT
    _, stderr = parent.communicate(timeout=120)
    assert count.read_text() == "1", stderr
    assert parent.returncode == 130, stderr
    with Run.open(tmp_path / "run") as run:
        assert run.meta["ended"] == "interrupted" and run.meta["partial"] is True


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


XLA_STAGES = {"hlo_before_opt", "hlo_after_opt", "buffer_assignment", "memory_usage"}


def _xla_kinds(run_path: Path, unit: str) -> set[str]:
    with Run.open(run_path) as run:
        return {s.kind for s in run.stages(run.unit(unit).id)} & XLA_STAGES


@pytest.mark.slow
def test_jax_persistent_cache_hits_still_show_the_xla_dump(tmp_path):
    """JAX's persistent compilation cache skips XLA, and with it XLA's dump. A run of the
    script alone fills JAX's cache; the run under irscope that follows uses the same cache
    keys (it adds no entry), compiles what irscope holds no dump of, and caches that dump;
    the next run files the cached dump. Without irscope's cache, each run compiles to dump."""
    script = write(tmp_path, "persistent.py", jax_script("from_disk"))
    jax_cache = {"JAX_COMPILATION_CACHE_DIR": str(tmp_path / "jax-cache"),
                 "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
                 "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "-1"}
    plain = subprocess.run([sys.executable, str(script)], env={**os.environ, **jax_cache},
                           capture_output=True, text=True, timeout=300)
    assert plain.returncode == 0, plain.stderr[-3000:]
    entries = sorted(p.name for p in (tmp_path / "jax-cache").iterdir())
    assert any(name.startswith("jit_from_disk-") for name in entries)
    ours = {**jax_cache, "IRSCOPE_CACHE_DIR": str(tmp_path / "dumps")}
    for out, options in (("cold", ()), ("warm", ()), ("uncached", ["--no-dump-cache"])):
        result = inspect(script, run=tmp_path / out, env=ours, options=options)
        assert result.returncode == 0, result.stderr[-3000:]
        assert _xla_kinds(tmp_path / out, "jit_from_disk") == XLA_STAGES, out
        assert sorted(p.name for p in (tmp_path / "jax-cache").iterdir()) == entries, out
    assert list((tmp_path / "dumps" / "xla-dumps").glob("jit_from_disk-*.zip"))


@pytest.mark.slow
def test_no_dump_cache_dumps_every_compile_and_caches_nothing(tmp_path):
    script = write(tmp_path, "plain.py", jax_script("uncached"))
    env = {"IRSCOPE_CACHE_DIR": str(tmp_path / "dumps")}
    for out in ("first", "second"):
        result = inspect(script, run=tmp_path / out, env=env, options=["--no-dump-cache"])
        assert result.returncode == 0, result.stderr[-3000:]
        assert _xla_kinds(tmp_path / out, "jit_uncached") == XLA_STAGES
    assert not (tmp_path / "dumps").exists()


@pytest.mark.slow
def test_a_damaged_cached_dump_is_noted_dropped_and_dumped_again(tmp_path):
    script = write(tmp_path, "two.py", jax_script("kept", "damaged"))
    env = {"IRSCOPE_CACHE_DIR": str(tmp_path / "dumps")}
    assert inspect(script, run=tmp_path / "first", env=env).returncode == 0
    (entry,) = (tmp_path / "dumps" / "xla-dumps").glob("jit_damaged-*.zip")
    entry.write_bytes(b"not a zip file")
    result = inspect(script, run=tmp_path / "second", env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "cached XLA dump of jit_damaged unreadable" in result.stderr
    assert "Traceback" not in result.stderr and not entry.exists()
    assert _xla_kinds(tmp_path / "second", "jit_kept") == XLA_STAGES
    assert _xla_kinds(tmp_path / "second", "jit_damaged") == set()
    result = inspect(script, run=tmp_path / "third", env=env)
    assert result.returncode == 0 and _xla_kinds(tmp_path / "third", "jit_damaged") == XLA_STAGES
