"""A real terminal: `irscope open` inside tmux, driven by keys, read back from the pane.

Every key waits for the screen to show the state the previous key led to, never for a
fixed time: a loaded machine makes the test slower, not flaky.
"""

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

TIMEOUT = 60.0


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=True).stdout


def status_line(screen: str) -> str:
    """The viewer's status line: the last line holding `line N/M`."""
    return next((line for line in reversed(screen.splitlines()) if " line " in line
                 and "/" in line), "")


def wait_for(session: str, ready, what: str, timeout: float = TIMEOUT) -> str:
    """The captured pane once ``ready(screen)`` holds; fails with the last screen otherwise."""
    screen = ""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        screen = tmux("capture-pane", "-p", "-t", session)
        if ready(screen):
            return screen
        time.sleep(0.1)
    raise AssertionError(f"{what} never appeared; screen was:\n{screen}")


def wait_for_screen(session: str, text: str) -> str:
    return wait_for(session, lambda screen: text in screen, repr(text))


def wait_for_status(session: str, *words: str) -> str:
    return wait_for(session, lambda screen: all(w in status_line(screen) for w in words),
                    f"status with {words}")


def keys(session: str, *names: str) -> None:
    tmux("send-keys", "-t", session, *names)


@pytest.fixture
def session(tmp_path):
    run = build_run(tmp_path / "run", kernels=("softmax_kernel", "add_kernel"))
    name = f"irscope-{uuid.uuid4().hex[:8]}"
    command = f"{sys.executable} -m irscope open {run}"
    env = {**os.environ, "TERM": "xterm-256color"}
    subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "120", "-y", "32", command],
                   check=True, env=env)
    yield name
    subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)


def test_open_in_a_real_terminal_navigates_searches_and_quits(session):
    screen = wait_for_status(session, "line 1/", "TTIR", "softmax_kernel")
    assert "add_kernel" in screen and "tt.func public @softmax_kernel" in screen
    keys(session, "BTab")  # the viewer has the focus at start; the tree is before it
    keys(session, "Down")
    wait_for_status(session, "TTGIR", "softmax_kernel")
    keys(session, "Down", "Down")
    screen = wait_for_status(session, "PTX", "softmax_kernel")
    assert ".version" in screen
    keys(session, "/")
    wait_for_screen(session, "=ld.global")  # the prompt's input is drawn (its placeholder)
    keys(session, "bar.sync")
    wait_for(session, lambda screen: any("bar.sync" in line and "▎" in line or "│ bar.sync"
                                         in line for line in screen.splitlines()),
             "the pattern in the prompt")
    keys(session, "Enter")
    screen = wait_for_status(session, "/bar.sync:")
    assert "bar.sync" in screen.split(status_line(screen))[0]  # the cursor's line is on screen
    keys(session, "?")
    wait_for_screen(session, "irscope keys")
    keys(session, "Escape")  # alone: tmux reads "Escape q" as alt+q
    wait_for(session, lambda screen: "irscope keys" not in screen, "the help closing")
    keys(session, "q")
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if subprocess.run(["tmux", "has-session", "-t", session],
                          capture_output=True).returncode:
            return  # the session ended with the app
        time.sleep(0.2)
    raise AssertionError("q did not quit the app")


@pytest.mark.slow
def test_follow_a_line_from_python_source_down_to_sass(session):
    """The committed H100 softmax kernel: from its `tl.load` line in the Python source stage,
    `]` through TTIR, TTGIR, LLVM IR and PTX (the same source marked each time) to SASS."""
    wait_for_status(session, "line 1/", "TTIR", "softmax_kernel")
    keys(session, "BTab", "Up")  # the tree: from TTIR up to the Python source stage
    wait_for_status(session, "Python source", "softmax_kernel")
    keys(session, "Enter")  # enter reads the stage: the focus moves to the viewer
    wait_for(session, lambda screen: "▶def softmax_kernel" in screen.replace(" ", "")
             or "▶ def softmax_kernel" in screen or "▶def" in screen, "the focused viewer")
    keys(session, ":")
    wait_for_screen(session, "Go to line")
    keys(session, "4", "Enter")
    screen = wait_for_status(session, "line 4/", "Python source")
    assert "tl.load(in_ptr" in screen
    for title in ("TTIR", "TTGIR", "LLVM IR", "PTX"):
        keys(session, "]")
        screen = wait_for_status(session, title, "followed 1/")
    assert ".loc" in screen or "ld.global" in screen
    keys(session, "]")
    wait_for_status(session, "SASS", "softmax_kernel")
    screen = wait_for_screen(session, "/*0000*/")  # the stage's text follows its status line
    assert ".byte" not in screen
    keys(session, "b")  # back to the PTX line the last follow left
    wait_for_status(session, "PTX", "followed 1/")
