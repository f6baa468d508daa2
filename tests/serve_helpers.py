"""`irscope serve` from outside, as a browser page (or any page) would reach it: the server in a
child process, its app processes found by their command line, WebSockets opened with any
Host and Origin, and the terminal size an app draws read from its output."""

from __future__ import annotations

import asyncio
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import aiohttp

# "\x1b[200;1H": the app moves the cursor to row 200, column 1
CURSOR_MOVE = re.compile(rb"\x1b\[(\d+);(\d+)H")
# any other escape sequence: "\x1b[38;2;1;2;3m" (colours), "\x1b[?1049h", "\x1b]22;x\x07"
SEQUENCE = re.compile(rb"\x1b(?:\[[0-9;?$<>=]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])"
                      rb"|[\r\n]")
APP_MARK = "irscope.commands.serve"  # the module each viewer's app process runs
WAIT_S = 45.0  # an upper bound for a state to be reached on a loaded machine
MEMORY_BYTES = 3 << 30  # address space of the server and of each app: a leak dies, not the machine


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_port(port: int, server: subprocess.Popen, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"irscope serve exited: {server.stdout.read()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError("irscope serve never listened")


@contextmanager
def served(run: Path, *options: str, cwd: Path | None = None):
    """``irscope serve RUN --port P OPTIONS`` running; yields (server process, port). The
    server and its apps may use ``MEMORY_BYTES`` each; the server and any app process of
    ``run`` left are killed on the way out."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "irscope", "serve", str(run), "--port",
                               str(port), *options], cwd=cwd or run.parent,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              start_new_session=True, preexec_fn=_memory_limit)
    try:
        wait_for_port(port, server)
        yield server, port
    finally:
        if server.poll() is None:
            server.kill()
        server.communicate(timeout=30)
        for pid in app_processes(run):
            os.kill(pid, signal.SIGKILL)


def _memory_limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))


def app_processes(run: Path) -> set[int]:
    """Live app processes serving ``run`` (by their command line), whoever their parent."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            words = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and APP_MARK.encode() in words and str(run).encode() in words:
            found.add(int(entry.name))
    return found


def wait_until(probe, timeout: float = WAIT_S, interval: float = 0.1):
    """The first truthy ``probe()``, or its last value after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


async def connect(session: aiohttp.ClientSession, port: int, query: str = "",
                  origin: str | None = "own", host: str | None = None):
    """A WebSocket to the server's /ws as a page of ``origin`` ("own": the server's) would
    open it, with ``host`` as its Host header; the handshake's status when refused."""
    headers = {"Host": host} if host is not None else {}
    if origin == "own":
        origin = f"http://127.0.0.1:{port}"
    try:
        return await session.ws_connect(f"http://127.0.0.1:{port}/ws{query}", origin=origin,
                                        headers=headers, max_msg_size=0)
    except aiohttp.WSServerHandshakeError as refused:
        return refused.status


async def drawn(ws, until_rows: int | None = None, timeout: float = WAIT_S) -> tuple[int, int]:
    """(rows, columns) of the screen an app draws: the lowest row its output moves the cursor
    to, and the most cells it writes from one move to the next, read until it has drawn
    ``until_rows`` rows (or for a quiet second)."""
    data = b""
    rows = 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            wait = 1.0 if data else max(0.1, deadline - time.monotonic())
            message = await ws.receive(timeout=wait)
        except asyncio.TimeoutError:
            if data:
                break
            continue
        if message.type != aiohttp.WSMsgType.BINARY:
            break
        data += message.data
        rows = max((int(r) for r, _ in CURSOR_MOVE.findall(data)), default=0)
        if until_rows is not None and rows >= until_rows:
            break
    runs = [SEQUENCE.sub(b"", piece) for piece in CURSOR_MOVE.split(data)[::3]]
    return rows, max((len(r.decode("utf-8", "replace")) for r in runs), default=0)
