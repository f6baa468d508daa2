"""One writer per run: while an `inspect` or `ingest` writes a run, a second one into the same
run is refused at once with one line, and the first run is left as it was."""

from __future__ import annotations

import subprocess
import sys

from conftest import SAMPLES

from irscope.store import Run, WriterLock

PTX = SAMPLES / "ptx" / "add_kernel.sm80.ptx"


def irscope(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "irscope", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_a_second_writer_is_refused_while_the_first_holds_the_run(tmp_path):
    run = tmp_path / "run"
    with WriterLock(run):  # what a running inspect or ingest holds
        script = tmp_path / "nothing.py"
        script.write_text("print('ran')\n")
        inspected = irscope("inspect", "-o", run, script, cwd=tmp_path)
        ingested = irscope("ingest", PTX, "-o", run, cwd=tmp_path)
    for outcome in (inspected, ingested):
        assert outcome.returncode == 1, outcome.stderr
        assert "another irscope is writing this run" in outcome.stderr
        assert "Traceback" not in outcome.stderr and "ran" not in outcome.stdout
    assert sorted(p.name for p in run.iterdir()) == []  # nothing filed, the lock let go


def test_the_lock_is_let_go_when_the_writer_ends(tmp_path):
    run = tmp_path / "run"
    assert irscope("ingest", PTX, "-o", run, cwd=tmp_path).returncode == 0
    again = irscope("ingest", SAMPLES / "ptx" / "add_kernel.sm90.cubin", "-o", run, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert not (run / "writer.lock").exists()
    with Run.open(run) as opened:
        assert len(opened.meta["ingests"]) == 2 and not opened.meta["partial"]


def test_a_killed_ingest_resumed_whole_leaves_the_run_complete(tmp_path):
    run = tmp_path / "run"
    assert irscope("ingest", PTX, "-o", run, cwd=tmp_path).returncode == 0
    cubin = SAMPLES / "ptx" / "add_kernel.sm90.cubin"
    with Run.open(run) as opened:  # as a killed second ingest leaves it: listed, never ended
        opened.update_meta({"partial": True, "ingests": [*opened.meta["ingests"],
                                                         {"inputs": [str(cubin)]}]})
    other = irscope("ingest", SAMPLES / "mlir" / "add_kernel.sm80.ttir", "-o", run, cwd=tmp_path)
    assert other.returncode == 0, other.stderr
    with Run.open(run) as opened:
        assert opened.meta["partial"]  # what the killed ingest was given is not filed yet
    resumed = irscope("ingest", cubin, "-o", run, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    with Run.open(run) as opened:
        assert not opened.meta["partial"]
