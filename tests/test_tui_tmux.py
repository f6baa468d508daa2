"""A real terminal: `irscope open` inside tmux, driven by keys, read back from the pane."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid

import pytest

if shutil.which("tmux") is None:
    pytest.skip("tmux is not installed", allow_module_level=True)

from tui_helpers import build_run  # noqa: E402


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=True).stdout


def wait_for_screen(session: str, text: str, timeout: float = 30.0) -> str:
    """The captured pane once it shows ``text``; fails with the last screen otherwise."""
    screen = ""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        screen = tmux("capture-pane", "-p", "-t", session)
        if text in screen:
            return screen
        time.sleep(0.2)
    raise AssertionError(f"{text!r} never appeared; screen was:\n{screen}")


@pytest.fixture
def session(tmp_path):
    run = build_run(tmp_path / "run", kernels=("softmax_kernel", "add_kernel"))
    name = f"irscope-{uuid.uuid4().hex[:8]}"
    command = f"{sys.executable} -m irscope open {run}"
    env = {**os.environ, "TERM": "xterm-256color"}
    subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "100", "-y", "30", command],
                   check=True, env=env)
    yield name
    subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)


def test_open_in_a_real_terminal_navigates_searches_and_quits(session):
    screen = wait_for_screen(session, "softmax_kernel · TTIR")
    assert "add_kernel" in screen and "tt.func public @softmax_kernel" in screen
    tmux("send-keys", "-t", session, "Down", "Down", "Down")
    screen = wait_for_screen(session, "softmax_kernel · PTX")
    assert ".version" in screen
    tmux("send-keys", "-t", session, "/")
    wait_for_screen(session, "Search")
    tmux("send-keys", "-t", session, "bar.sync", "Enter")
    screen = wait_for_screen(session, "/bar.sync:")
    assert "bar.sync" in screen.split("/bar.sync:")[0]  # the cursor's line is on screen
    tmux("send-keys", "-t", session, "?")
    wait_for_screen(session, "irscope keys")
    tmux("send-keys", "-t", session, "Escape")  # alone: tmux reads "Escape q" as alt+q
    time.sleep(1.0)
    tmux("send-keys", "-t", session, "q")
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if subprocess.run(["tmux", "has-session", "-t", session],
                          capture_output=True).returncode:
            return  # the session ended with the app
        time.sleep(0.2)
    raise AssertionError("q did not quit the app")
