"""Hostile requests to `irscope serve`, as any web page the viewer has open could make them:
WebSockets and pages of other origins or naming other hosts (DNS rebinding), terminal sizes
of billions of cells, oversize and malformed messages, more viewers than allowed, the page's
own loads, and the server ended in every way while viewers are connected. The server
answers its own origin only, draws at most 500x200 cells, refuses what it cannot take with
a status, and leaves no app process behind."""

from __future__ import annotations

import asyncio
import re
import shutil
import signal
import urllib.error
import urllib.request
from pathlib import Path

import aiohttp
import pytest
from fuzz_helpers import SAMPLES, Checks, rng
from serve_helpers import app_processes, close, connect, drawn, served, wait_until

pytestmark = pytest.mark.fuzz  # make test runs the campaign; make test-fast leaves it out
pytest.importorskip("textual_serve")

FOREIGN_ORIGINS = {"other-site": "http://evil.example", "null": "null",
                   "other-port": "http://127.0.0.1:{other}", "file": "file://",
                   "suffix": "http://127.0.0.1.evil.example:{port}",
                   "https-of-this-host": "https://127.0.0.1:{port}"}
FOREIGN_HOSTS = {"rebound": "evil.example:{port}", "localhost-suffix": "localhost.evil.example",
                 "bad-port": "127.0.0.1:port", "empty": ""}
# the size asked for in /ws?width=&height=, and the one the app must draw (rows, columns)
SIZES = {"huge": (("100000", "100000"), (200, 500)), "negative": (("-5", "-5"), (4, 10)),
         "not-numbers": (("1e9", "nan"), (24, 80)),
         "enormous": ((str(10**30), str(10**30)), (200, 500))}
MALFORMED = ["not json", "[]", "[1, 2]", '{"a": 1}', '["resize", "x"]', '["stdin", 5]',
             '["resize", {"width": "9", "height": [1]}]', '["unknown"]']
ENDINGS = {"SIGTERM": signal.SIGTERM, "SIGINT": signal.SIGINT, "SIGHUP": signal.SIGHUP,
           "SIGKILL": signal.SIGKILL}
MAX_ROWS, MAX_COLUMNS = 200, 500
URL = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)|url\(["']?([^"')]+)""")


@pytest.fixture
def run(tmp_path) -> Path:
    target = tmp_path / "run"
    shutil.copytree(SAMPLES / "gpu" / "triton_kernels", target)
    return target


def _get(port: int, path: str = "/", host: str | None = None) -> tuple[int, dict, str]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if host is not None:
        request.add_header("Host", host)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read().decode(errors="replace")
    except urllib.error.HTTPError as refused:
        return refused.code, dict(refused.headers), refused.read().decode(errors="replace")


def test_pages_of_other_sites_and_hosts_are_refused(run):
    async def visit(port: int, checks: Checks) -> None:
        async with aiohttp.ClientSession() as session:
            for case, origin in FOREIGN_ORIGINS.items():
                origin = origin.format(port=port, other=port + 1)
                got = await connect(session, port, origin=origin)
                found = [] if got == 403 else ["a page of another origin got a viewer"]
                if not isinstance(got, int):
                    await close(got)
                found += _apps_left(run)
                checks(f"serve/origin/{case}", found)
            for case, host in FOREIGN_HOSTS.items():
                host = host.format(port=port)
                got = await connect(session, port, host=host, origin=f"http://{host}")
                found = [] if got == 403 else ["a request for another host got a viewer"]
                if not isinstance(got, int):
                    await close(got)
                status, _, _ = await asyncio.to_thread(_get, port, "/", host)
                if status != 403:
                    found.append(f"a request for another host got the page ({status})")
                found += _apps_left(run)
                checks(f"serve/host/{case}", found)

    with served(run) as (_, port), Checks() as checks:
        asyncio.run(visit(port, checks))


def _apps_left(run: Path) -> list[str]:
    left = wait_until(lambda: not app_processes(run), timeout=10)
    return [] if left else [f"{len(app_processes(run))} app process(es) started"]


def test_terminal_sizes_and_messages_are_bounded(run):
    async def visit(port: int, checks: Checks) -> None:
        async with aiohttp.ClientSession() as session:
            for case, ((width, height), expected) in SIZES.items():
                ws = await connect(session, port, f"?width={width}&height={height}")
                found = _size_problems(await drawn(ws, until_rows=MAX_ROWS + 1), expected)
                await close(ws)
                checks(f"serve/size/{case}", found)
            ws = await connect(session, port)
            await drawn(ws, until_rows=24)
            order = rng("serve/resize")
            await ws.send_json(["resize", {"width": order.randrange(10**6, 10**9),
                                           "height": order.randrange(10**6, 10**9)}])
            checks("serve/size/resize", _size_problems(
                await drawn(ws, until_rows=MAX_ROWS + 1, timeout=15), (MAX_ROWS, MAX_COLUMNS)))
            for text in rng("serve/malformed").sample(MALFORMED, len(MALFORMED)):
                await ws.send_str(text)
            await ws.send_json(["ping", "still there"])
            answer = await _reply(ws)
            checks("serve/messages/malformed", [] if answer == ["pong", "still there"] else [
                f"after malformed messages the viewer got {str(answer)[:80]}"])
            try:
                await ws.send_json(["stdin", "x" * (1 << 20)])
                closed = await _reply(ws)
            except ConnectionError:
                closed = "closed"
            found = [] if closed in ("closed", 1009) else [
                f"a 1 MiB message was taken ({str(closed)[:60]})"]
            checks("serve/messages/oversize", found + _apps_left(run))

    with served(run) as (server, port), Checks() as checks:
        asyncio.run(visit(port, checks))
        server.send_signal(signal.SIGTERM)
        log = server.communicate(timeout=60)[0]
        checks("serve/log", ["a traceback in the server's log"] if "Traceback" in log else [])


def _size_problems(size: tuple[int, int], expected: tuple[int, int]) -> list[str]:
    rows, columns = size
    if not rows:
        return ["nothing was drawn"]
    if size != expected:
        return [f"the app drew {columns}x{rows} cells, not {expected[1]}x{expected[0]}"]
    return []


async def _reply(ws, timeout: float = 30.0):
    """The next text message's JSON, the close code, "closed", or "no answer" when none came
    within ``timeout`` seconds (frames of the screen go by)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            message = await ws.receive(timeout=max(0.1, deadline - asyncio.get_running_loop()
                                                   .time()))
        except asyncio.TimeoutError:
            return "no answer"
        if message.type == aiohttp.WSMsgType.TEXT:
            return message.json()
        if message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSING):
            return message.data
        if message.type in (aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):
            return "closed"


def test_viewers_beyond_the_cap_are_refused_clearly(run):
    async def visit(port: int, checks: Checks) -> None:
        async with aiohttp.ClientSession() as session:
            first, second = [await connect(session, port) for _ in range(2)]
            third = await connect(session, port)
            status, _, text = await asyncio.to_thread(_get, port)
            found = [] if third == 503 else ["a viewer beyond --max-viewers got an app"]
            if status != 503 or "--max-viewers" not in text:
                found.append(f"the page beyond the cap said {status} {text[:60]!r}")
            if len(app_processes(run)) > 2:
                found.append(f"{len(app_processes(run))} app processes for 2 viewers")
            await close(first)
            again = await _admitted(session, port)
            if isinstance(again, int):
                found.append(f"a viewer after one left was refused ({again})")
            else:
                await close(again)
            await close(second)
            checks("serve/viewers/cap", found)

    with Checks() as checks:
        try:
            with served(run, "--max-viewers", "2") as (_, port):
                asyncio.run(visit(port, checks))
        except AssertionError as failed:  # it never listened
            checks("serve/viewers/cap", [str(failed).splitlines()[0][:200]])


async def _admitted(session, port: int, timeout: float = 15.0):
    """A viewer once the server has a place again (it frees one when the app that left has
    ended), or the last refusal's status after ``timeout`` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        got = await connect(session, port)
        if not isinstance(got, int) or asyncio.get_running_loop().time() > deadline:
            return got
        await asyncio.sleep(0.1)


def test_the_page_loads_nothing_from_elsewhere(run):
    with served(run) as (_, port), Checks() as checks:
        status, headers, page = _get(port)
        own = f"http://127.0.0.1:{port}/"
        foreign = [u for pair in URL.findall(page) for u in pair
                   if u and not u.startswith(own) and not u.startswith("/")]
        found = [f"the page loads {u}" for u in foreign]
        policy = headers.get("Content-Security-Policy", "")
        if "default-src 'self'" not in policy:
            found.append("no policy keeps the page to its own origin")
        fonts = [u for pair in URL.findall(page) for u in pair if u.endswith(".ttf")]
        found += [f"{u}: {code}" for u in fonts if (code := _get(port, u[len(own) - 1:])[0]) != 200]
        checks("serve/page/offline", found if status == 200 else [f"the page: {status}"])


@pytest.mark.parametrize("ending", ENDINGS)
def test_no_app_outlives_the_server(run, ending):
    async def viewers(port: int, server) -> list[str]:
        async with aiohttp.ClientSession() as session:
            sockets = [await connect(session, port) for _ in range(2)]
            await asyncio.gather(*(drawn(ws, until_rows=24) for ws in sockets))
            started = len(app_processes(run))
            server.send_signal(ENDINGS[ending])
            await asyncio.to_thread(server.wait, 60)
            gone = await asyncio.to_thread(wait_until, lambda: not app_processes(run), 15)
            return [] if gone and started == 2 else [
                f"{len(app_processes(run))} of {started} app processes outlived the server"]

    with served(run) as (server, port), Checks() as checks:
        checks(f"serve/end/{ending}", asyncio.run(viewers(port, server)))


def test_an_app_ends_when_its_viewer_leaves(run):
    async def visit(port: int) -> list[str]:
        async with aiohttp.ClientSession() as session:
            ws = await connect(session, port, "?width=100000&height=100000")
            await drawn(ws, until_rows=24, timeout=15)
            await close(ws)
            gone = await asyncio.to_thread(wait_until, lambda: not app_processes(run), 15)
            return [] if gone else ["the app kept running after its viewer left"]

    with served(run) as (_, port), Checks() as checks:
        checks("serve/end/viewer-left", asyncio.run(visit(port)))
