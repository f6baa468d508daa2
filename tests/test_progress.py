"""The filing progress bar as a terminal shows it: kernels filed of all, on stderr, drawn once
filing takes a second, and nothing at all when stderr is not a terminal.

`irscope ingest` files a Triton cache of three real compiles while its NVIDIA tools are held
(each waits for a file the test writes), so the test reads the terminal while filing is
under way and lets it finish when it has seen what it waits for: no sleeps, no timings.
"""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ingest_helpers import write_triton_entry

from irscope import nvtools

KERNELS = 3
SAFETY_S = 120  # a test that waits longer than this has failed: filing hangs
# what Rich draws on a line of the bar: "add_kernel ━━━━━━╸━━━━━━━ 2/3 0:00:01"
BAR = re.compile(r"(\S+) [━╸╺ ]+ (\d+)/(\d+) ")
# cursor movement and erasing between the frames of the bar
CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture(scope="module")
def triton_cache(tmp_path_factory) -> Path:
    """A Triton cache of three compiles of the vector add (1, 2 and 4 warps)."""
    root = tmp_path_factory.mktemp("triton-cache")
    for warps in (1, 2, 4):
        write_triton_entry(root, "add_kernel", num_warps=warps)
    return root


@pytest.fixture
def held_tools(tmp_path) -> tuple[Path, Path]:
    """(folder of NVIDIA tools that each mark that they started, then wait for the release
    file before running the real tool; the release file)."""
    real = {name: nvtools.find_tool(name) for name in ("nvdisasm", "cuobjdump", "ptxas")}
    if real["nvdisasm"] is None:
        pytest.skip("no nvdisasm")
    folder, release = tmp_path / "tools", tmp_path / "release"
    folder.mkdir()
    for name, path in real.items():
        if path is not None:
            script = folder / name
            script.write_text(f'#!/bin/sh\ntouch "{folder}/started.$$"\n'
                              f'while [ ! -e "{release}" ]; do sleep 0.02; done\n'
                              f'exec "{path}" "$@"\n')
            script.chmod(0o755)
    return folder, release


def _ingest(run: Path, cache: Path, tools: Path, tmp_path: Path) -> tuple[list[str], dict]:
    """The command line and environment of an ingest of ``cache`` with the held tools."""
    env = {key: value for key, value in os.environ.items() if key not in ("CI", "NO_COLOR")}
    env.update(IRSCOPE_CUDA_BIN=str(tools), IRSCOPE_CACHE_DIR=str(tmp_path / f"{run.name}-tools"),
               TERM="xterm-256color", COLUMNS="100", LINES="30")
    return [sys.executable, "-m", "irscope", "ingest", "-o", str(run), str(cache)], env


class Terminal:
    """A command on a pseudo-terminal (stdout and stderr both), its output read as it comes."""

    def __init__(self, argv: list[str], env: dict):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the command on the terminal
            os.execvpe(argv[0], argv, env)
        self.text, self.status = "", None

    def read_until(self, done) -> str:
        """Read until ``done(text)`` holds or the command ends; the text read so far."""
        deadline = time.monotonic() + SAFETY_S
        while not done(self.text) and self.status is None and time.monotonic() < deadline:
            ready, _, _ = select.select([self.fd], [], [], 1.0)
            if ready:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:  # the command ended and closed the terminal
                    data = b""
                if data:
                    self.text += data.decode("utf-8", "replace")
                    continue
                self.status = os.waitpid(self.pid, 0)[1]
        return self.text

    def finish(self) -> int:
        """Read to the end; the command's exit code."""
        self.read_until(lambda text: False)
        if self.status is None:
            os.kill(self.pid, 9)
            self.status = os.waitpid(self.pid, 0)[1]
        return os.waitstatus_to_exitcode(self.status)


def bar_counts(text: str) -> list[tuple[str, int, int]]:
    """(label, done, total) of every frame of the bar drawn in ``text``."""
    frames = (CONTROL.sub("", frame) for frame in re.split(r"[\r\n]|\x1b\[2K", text))
    return [(m[1], int(m[2]), int(m[3])) for frame in frames if (m := BAR.search(frame))]


@pytest.mark.slow
def test_the_bar_counts_kernels_filed_of_all_on_a_terminal(triton_cache, held_tools,
                                                             tmp_path):
    tools, release = held_tools
    terminal = Terminal(*_ingest(tmp_path / "run", triton_cache, tools, tmp_path))
    # the tools hold the first kernel: once filing has taken its second, the bar is drawn
    terminal.read_until(lambda text: bar_counts(text))
    release.touch()
    assert terminal.finish() == 0, terminal.text
    counts = bar_counts(terminal.text)
    assert counts[0][1:] == (0, KERNELS) and counts[-1][1:] == (KERNELS, KERNELS)
    assert {total for _, _, total in counts} == {KERNELS}
    assert [done for _, done, _ in counts] == sorted(done for _, done, _ in counts)
    assert "add_kernel" in {label for label, _, _ in counts}  # named by kernel, not by hash
    assert "ingested" in terminal.text and "3 new units" in terminal.text


@pytest.mark.slow
def test_no_bar_when_stderr_is_not_a_terminal(triton_cache, held_tools, tmp_path):
    tools, release = held_tools
    argv, env = _ingest(tmp_path / "piped", triton_cache, tools, tmp_path)
    piped = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        # held at its first tool, so its bar's delay is counting; a second ingest started
        # now on a terminal draws its bar once that delay has passed for both
        deadline = time.monotonic() + SAFETY_S
        while not any(tools.glob("started.*")) and piped.poll() is None \
                and time.monotonic() < deadline:
            select.select([], [], [], 0.02)
        witness = Terminal(*_ingest(tmp_path / "witness", triton_cache, tools, tmp_path))
        witness.read_until(lambda text: bar_counts(text))
        release.touch()
        out, err = piped.communicate(timeout=SAFETY_S)
    finally:
        release.touch()
        if piped.poll() is None:
            piped.kill()
    assert witness.finish() == 0 and bar_counts(witness.text)
    assert piped.returncode == 0, err
    assert not bar_counts(err) and "━" not in err and "\x1b[" not in err
    assert "3 new units" in out + err


def test_inspect_counts_each_staged_kernel_once(triton_cache, tmp_path):
    """Filing after a script: the watch analyses the staged kernels, then filing stores them;
    the bar counts each kernel once over both passes."""
    import shutil

    from irscope.collectors.staging import Staging
    from irscope.collectors.triton import SIDECAR
    from irscope.filing.folder import Passes, file_staging
    from irscope.filing.watch import StagingWatch
    from irscope.store import Run

    class Recorded:
        def __init__(self):
            self.totals, self.done = [], 0

        def total(self, total):
            self.totals.append(total)

        def advance(self, n=1, description=None):
            self.done += n

    run = Run.create(tmp_path / "run")
    staging = Staging(tmp_path / "staging").create()
    for entry in sorted(triton_cache.iterdir()):  # as the compile hooks stage them
        shutil.copytree(entry, staging.triton / entry.name)
        (staging.triton / entry.name / SIDECAR).write_text("{}")
    recorded = Recorded()
    progress = Passes(recorded)
    prepared = StagingWatch(staging).finish(progress)[staging.root]
    assert len(prepared.analyses) == KERNELS
    file_staging(run, staging, [], progress, prepared=prepared)
    assert len(run.units("triton")) == KERNELS
    assert recorded.done == recorded.totals[-1] == KERNELS
