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
SOCKET_S = 10.0  # a handshake or a close that takes longer counts as none
KEEP_BYTES = 4 << 20  # of an app's output, what is kept to measure its lines
MESSAGE_BYTES = 64 << 20  # a larger frame from the server ends the socket (a runaway app)
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
    open it, with ``host`` as its Host header; the handshake's status when refused, 0 when
    none came within ``SOCKET_S``."""
    headers = {"Host": host} if host is not None else {}
    if origin == "own":
        origin = f"http://127.0.0.1:{port}"
    try:
        return await asyncio.wait_for(session.ws_connect(
            f"http://127.0.0.1:{port}/ws{query}", origin=origin, headers=headers,
            max_msg_size=MESSAGE_BYTES, timeout=aiohttp.ClientWSTimeout(ws_close=SOCKET_S)),
            SOCKET_S)
    except aiohttp.WSServerHandshakeError as refused:
        return refused.status
    except (asyncio.TimeoutError, aiohttp.ClientError):
        return 0


async def close(ws) -> None:
    """Close a socket (if ``connect`` gave one), waiting at most ``SOCKET_S`` for the server
    to agree."""
    if isinstance(ws, int):
        return
    try:
        await asyncio.wait_for(ws.close(), SOCKET_S)
    except (asyncio.TimeoutError, aiohttp.ClientError, ConnectionError):
        pass


async def drawn(ws, until_rows: int | None = None, timeout: float = WAIT_S) -> tuple[int, int]:
    """(rows, columns) of the screen an app draws: the lowest row its output moves the cursor
    to, and the most cells it writes from one move to the next (in its first ``KEEP_BYTES``),
    read until it has drawn ``until_rows`` rows, for a quiet second, or ``timeout`` seconds;
    (0, 0) without a socket."""
    if isinstance(ws, int):
        return 0, 0
    seen = [0, 0]  # rows, columns so far
    try:
        await asyncio.wait_for(_drawn(ws, until_rows, seen), timeout)
    except asyncio.TimeoutError:
        pass
    return seen[0], seen[1]


async def _drawn(ws, until_rows: int | None, seen: list[int]) -> None:
    kept, rows, columns = bytearray(), 0, 0
    while True:
        try:
            message = await ws.receive(timeout=1.0 if kept else None)
        except asyncio.TimeoutError:
            break
        if message.type != aiohttp.WSMsgType.BINARY:
            break
        rows = max([rows, *(int(r) for r, _ in CURSOR_MOVE.findall(message.data))])
        if len(kept) < KEEP_BYTES:
            kept += message.data
            runs = [SEQUENCE.sub(b"", piece) for piece in CURSOR_MOVE.split(bytes(kept))[::3]]
            columns = max((len(r.decode("utf-8", "replace")) for r in runs), default=0)
        seen[:] = rows, columns
        if until_rows is not None and rows >= until_rows:
            break
