"""`irscope ptx` and `irscope stats` over several files and glob patterns."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def irscope(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "irscope", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_ptx_takes_files_and_globs_in_order():
    done = irscope("ptx", "samples/ptx/hand_loop.ptx", "samples/ptx/rot*.ptx", "--json")
    assert done.returncode == 0, done.stderr
    assert [d["file"] for d in json.loads(done.stdout)] == ["samples/ptx/hand_loop.ptx",
                                                           "samples/ptx/rotated_loop.ptx"]
    text = irscope("ptx", "samples/ptx/*.ptx").stdout
    assert text.count("target sm_") == len(list((ROOT / "samples" / "ptx").glob("*.ptx")))


def test_stats_goes_on_past_a_bad_file_and_fails_at_the_end(tmp_path):
    empty = tmp_path / "empty.ptx"
    empty.write_text("")
    done = irscope("stats", str(empty), "samples/hlo/**/*.hlo", "--json")
    assert done.returncode == 1
    assert "empty.ptx: file is empty" in done.stderr
    assert [d["kind"] for d in json.loads(done.stdout)] == ["hlo_after_opt"]


def test_one_file_keeps_its_document_and_a_pattern_must_match():
    doc = json.loads(irscope("stats", "samples/ptx/hand_loop.ptx", "--json").stdout)
    assert doc["kind"] == "ptx" and "file" not in doc
    done = irscope("ptx", "samples/ptx/*.nothing")
    assert done.returncode == 1 and "no file matches" in done.stderr
