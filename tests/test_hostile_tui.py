"""`irscope open` in a real pseudo-terminal on hostile runs: a blob that is a FIFO, a link out
of the run, a worker stuck reading: the app shows what it can, never prints what lies outside
the run, and q always quits."""

from __future__ import annotations

import fcntl
import os
import re
import select
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest
from fuzz_helpers import SAMPLES, SECRET, check, uncompressed_copy

ALT_SCREEN = b"\x1b[?1049h"  # Textual has taken the terminal
CSI = re.compile(r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]")  # "\x1b[38;2;1;2;3m": styles, moves
QUIT_LIMIT_S = 8.0
SHOWN_WAIT_S = 8.0
SHOWN = ("blob", SECRET, "def add_kernel", "tt.func public @add_kernel")  # the first stage's
# text (the Python source, or the TTIR a sample opens on), or the reason it is not shown
# `irscope open` with every stage read stuck for a minute, as on a hung network file system.
STUCK_READS = ("import sys, time\n"
               "import irscope.store as store\n"
               "store.Run.read_blob = lambda self, blob: time.sleep(60) or b''\n"
               "from irscope.cli import main\n"
               "sys.exit(main(['open', sys.argv[1]]))\n")


def _open_in_terminal(argv: list[str], cwd: Path, keys: bytes = b"q",
                      shown: tuple[str, ...] = SHOWN) -> tuple[str, float | None]:
    """Start ``argv`` in a 100x30 pseudo-terminal, type ``keys`` (q, and what follows it at
    once) when the app is up and has drawn one of ``shown``, and return (everything it
    drew, seconds from q to its exit or None when it did not exit)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "100", "LINES": "30"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env,
                            start_new_session=True, close_fds=True)
    os.close(slave)
    screen = bytearray()

    def drain() -> None:
        while True:
            try:
                ready, _, _ = select.select([master], [], [], 0.2)
                if ready:
                    chunk = os.read(master, 65536)
                    if not chunk:
                        return
                    screen.extend(chunk)
            except OSError:
                return
            if proc.poll() is not None and not select.select([master], [], [], 0)[0]:
                return

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    deadline = time.monotonic() + 30
    while ALT_SCREEN not in screen and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    drawn = time.monotonic() + SHOWN_WAIT_S  # the first stage, or why it cannot be shown
    while time.monotonic() < drawn and not any(
            mark in CSI.sub("", screen.decode("utf-8", "replace")) for mark in shown):
        time.sleep(0.1)
    time.sleep(0.5)
    pressed = time.monotonic()
    try:
        os.write(master, keys)
        proc.wait(timeout=QUIT_LIMIT_S)
        took = time.monotonic() - pressed
    except (subprocess.TimeoutExpired, OSError):
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        took = None
    reader.join(timeout=2)
    os.close(master)
    return CSI.sub("", screen.decode("utf-8", "replace")), took


def _hostile_copy(tmp_path: Path, how: str) -> Path:
    run = uncompressed_copy(SAMPLES / "gpu" / "triton_kernels", tmp_path / "runs" / "run")
    (tmp_path / "secret.txt").write_text(SECRET)
    fake = "cd" * 32
    db = sqlite3.connect(run / "index.sqlite")
    first = db.execute("SELECT id FROM stages ORDER BY unit_id, position, id").fetchall()
    db.executemany("UPDATE stages SET blob=? WHERE id=?",
                   [(fake if how != "digest-path" else "../../secret.txt", row[0])
                    for row in first])
    db.commit()
    db.close()
    folder = run / "blobs" / fake[:2]
    folder.mkdir(parents=True, exist_ok=True)
    if how == "fifo":
        os.mkfifo(folder / fake)
    elif how == "link-out":
        (folder / fake).symlink_to(tmp_path / "secret.txt")
    elif how == "dev-zero":
        (folder / fake).symlink_to("/dev/zero")
    return run


@pytest.mark.parametrize("how", ["fifo", "link-out", "dev-zero", "digest-path"])
def test_open_a_run_with_hostile_blobs_and_quit(tmp_path, how):
    run = _hostile_copy(tmp_path, how)
    screen, took = _open_in_terminal([sys.executable, "-m", "irscope", "open", str(run)],
                                     tmp_path)
    found = []
    if took is None:
        found.append(f"hang: q did not end the app within {QUIT_LIMIT_S:.0f} s")
    if SECRET in screen:
        found.append("read outside: the secret beside the run reached the screen")
    if "Traceback" in screen:
        found.append("traceback")
    check(f"tui/blob-{how}", found)


@pytest.mark.slow
@pytest.mark.parametrize("keys", [b"qe", b"qi"])
def test_a_key_typed_right_after_q_quits_cleanly(tmp_path, keys):
    """q then e (problems) or i (passes) in one go: the screen the second key asks for is
    not pushed into the closing app (it failed there with a NoMatches traceback)."""
    screen, took = _open_in_terminal([sys.executable, "-m", "irscope", "open",
                                      str(SAMPLES / "gpu" / "triton_kernels")], tmp_path, keys)
    found = [] if took is not None else [f"hang: {keys!r} did not end the app"]
    if "Traceback" in screen or "NoMatches" in screen:
        found.append("traceback on exit")
    check(f"tui/quit-then-{keys.decode()[1]}", found)


@pytest.mark.slow  # waits out a worker stuck on purpose
def test_q_quits_while_a_worker_is_stuck(tmp_path):
    """q once the app has drawn its header, while the first stage's read hangs."""
    run = tmp_path / "run"
    shutil.copytree(SAMPLES / "gpu" / "triton_kernels", run)
    script = tmp_path / "stuck.py"
    script.write_text(STUCK_READS)
    screen, took = _open_in_terminal([sys.executable, str(script), str(run)], tmp_path,
                                     shown=("4 units",))  # the header, with the run read
    found = [] if took is not None else [
        f"hang: q did not end the app within {QUIT_LIMIT_S:.0f} s while a worker was busy"]
    if "Traceback" in screen:
        found.append("traceback")
    check("tui/stuck-worker", found)


def test_show_to_a_terminal_shows_escape_sequences_as_text(tmp_path):
    """A stage holding escape sequences, printed by `irscope show` to a terminal."""
    run = tmp_path / "run"
    ptx = (SAMPLES / "ptx" / "add_kernel.sm80.ptx").read_text()
    (tmp_path / "k.ptx").write_text(ptx.replace("//", "// \x1b]0;pwned\x07\x1b[2J", 1))
    subprocess.run([sys.executable, "-m", "irscope", "ingest", str(tmp_path / "k.ptx"), "-o",
                    str(run)], check=True, capture_output=True, cwd=tmp_path)
    master, slave = os.openpty()
    done = subprocess.run([sys.executable, "-m", "irscope", "show", str(run), "k", "ptx"],
                          stdout=slave, stderr=slave, timeout=60, cwd=tmp_path)
    os.close(slave)
    shown = b""
    while select.select([master], [], [], 0.5)[0]:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the terminal's other end is closed and all was read
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    found = [] if done.returncode == 0 else [f"exit status {done.returncode}"]
    if b"\x1b]0;pwned" in shown or b"\x1b[2J" in shown:
        found.append("an escape sequence reached the terminal")
    check("tui/show-escapes", found)
