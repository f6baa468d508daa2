"""`irscope serve`: the app in headless Chromium, driven by keys, and a served run left untouched."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from serve_helpers import (app_processes, close, connect, drawn, free_port, served,
                           wait_for_port, wait_until)

from irscope.commands.serve import app_words, served_app
from irscope.errors import RunError

SAMPLE = Path(__file__).parent.parent / "samples" / "gpu" / "triton_kernels"
# Files a run could carry to have code run by whoever serves it: modules shadowing irscope and
# textual (imported if the run's directory reached sys.path) and the interpreter's start-up hooks.
PLANTED = ("irscope/__init__.py", "textual/__init__.py", "sitecustomize.py", "usercustomize.py")


@pytest.fixture
def hostile_run(tmp_path) -> Path:
    """The committed Triton run under a name the shell would act on, with files that record
    being executed, and run.json saying nothing of read-only (the server must see to it)."""
    run = tmp_path / "run 'q' $(touch SHELL_RAN) `touch TICK_RAN` <b>bold"
    shutil.copytree(SAMPLE, run)
    meta = json.loads((run / "run.json").read_text())
    meta.pop("read_only", None)
    (run / "run.json").write_text(json.dumps(meta, indent=2))
    for name in PLANTED:
        (run / name).parent.mkdir(exist_ok=True)
        (run / name).write_text(f"open({str(tmp_path / 'EXECUTED')!r}, 'a').write({name!r})\n")
    return run


def tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` with the SHA-256 of its bytes."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_app_runs_without_a_shell_in_an_isolated_interpreter(hostile_run):
    assert app_words(hostile_run, show_all=True) == [
        sys.executable, "-I", "-m", "irscope.commands.serve", "--app", str(hostile_run),
        "--server", str(os.getpid()), "--all"]


def test_the_served_app_opens_the_run_read_only(hostile_run):
    app = served_app(hostile_run)
    run = app.store()
    assert run.read_only
    with pytest.raises(RunError, match="copy it to add to it"):
        with run.transaction():
            pass
    run.close()


def test_serve_listens_on_this_machine_only_unless_told():
    from irscope.cli import build_parser

    args = build_parser("serve").parse_args(["serve", "some-run"])
    assert (args.host, args.port) == ("127.0.0.1", 8000)


def test_only_the_servers_own_hosts_and_origins_are_answered():
    pytest.importorskip("textual_serve")
    from irscope.serving import host_refusal, origin_refusal

    own = "127.0.0.1:8000"
    assert host_refusal(own, "127.0.0.1", ()) is None
    assert host_refusal("localhost:8000", "127.0.0.1", ()) is None
    assert host_refusal("[::1]:8000", "127.0.0.1", ()) is None
    assert host_refusal("192.168.1.5:8000", "0.0.0.0", ()) is None  # an address: no rebinding
    for rebound in ("evil.example:8000", "localhost.evil.example", "", "127.0.0.1:port"):
        assert host_refusal(rebound, "127.0.0.1", ()) is not None, rebound
    proxy = ("https://irscope.example.com",)
    assert host_refusal("irscope.example.com", "127.0.0.1", proxy) is None
    assert origin_refusal(None, own, ()) is None  # no page made the request
    assert origin_refusal("http://127.0.0.1:8000", own, ()) is None
    assert origin_refusal("https://irscope.example.com", "irscope.example.com", proxy) is None
    for foreign in ("http://evil.example", "null", "http://127.0.0.1:8001", "file://",
                    "https://127.0.0.1:8000", "http://127.0.0.1:8000/path"):
        assert origin_refusal(foreign, own, ()) is not None, foreign


def test_terminal_sizes_are_held_to_bounds():
    pytest.importorskip("textual_serve")
    from irscope.serving import terminal_size

    assert terminal_size("100000", "100000") == (500, 200)
    assert terminal_size(10**30, -5) == (500, 4)
    assert terminal_size("1e9", None) == (80, 24)
    assert terminal_size(True, 3.5) == (80, 24)
    assert terminal_size("120", 40) == (120, 40)


def test_serve_refuses_a_missing_run(tmp_path):
    done = subprocess.run([sys.executable, "-m", "irscope", "serve", str(tmp_path / "nope")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "no such run" in done.stderr


# -- in a browser ------------------------------------------------------------------------------
from browser_helpers import CHROMIUM, Browser, png_size, wait_for  # noqa: E402

needs_browser = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")


async def screen_showing(page, *texts: str) -> str:
    last = [""]

    async def probe():
        last[0] = await page.terminal_text() or ""
        return last[0] if all(t in last[0] for t in texts) else None
    try:
        return await wait_for(probe, timeout=45)  # an upper bound for a loaded machine
    except AssertionError:
        raise AssertionError(f"{texts} never appeared; the screen was:\n{last[0]}") from None


@pytest.mark.slow
@needs_browser
def test_two_viewers_browse_a_served_run_which_stays_untouched(hostile_run, tmp_path):
    pytest.importorskip("textual_serve")
    before = tree(hostile_run)
    port = free_port()
    # The console script, started inside the run: `python -m` would put the run on sys.path.
    script = Path(sys.executable).with_name("irscope")
    server = subprocess.Popen([str(script), "serve", str(hostile_run), "--port", str(port)],
                              cwd=hostile_run, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    try:
        wait_for_port(port, server)
        url = f"http://127.0.0.1:{port}/"

        async def browse() -> bytes:
            async with Browser() as first, Browser() as second:
                await asyncio.gather(first.goto(url), second.goto(url))
                screen = await screen_showing(first, "add_kernel · TTIR", "tt.func public")
                assert "softmax_kernel" in screen and "$(touch SHELL_RAN)" in screen
                # the page names the run as text too (textual-serve's template escapes it)
                assert await first.evaluate("document.querySelector('.intro b')") is None
                assert "<b>bold" in await first.evaluate("document.title + "
                                                         "document.querySelector('.intro').innerText")
                for page in (first, second):  # keys go to xterm.js's input element
                    await page.evaluate("document.querySelector('.xterm-helper-textarea').focus()")
                # one stage down per key, each seen by its title and its own text
                for stage, text in (("TTGIR", "#ttg"), ("LLVM IR", "define"), ("PTX", ".version")):
                    await first.press("]")
                    screen = await screen_showing(first, f"add_kernel · {stage}", text)
                assert "sm_90" in screen
                # the second viewer has an app of its own, still on the first stage
                await second.press("]")
                await screen_showing(second, "add_kernel · TTGIR", "#ttg")
                assert "add_kernel · PTX" in await first.terminal_text()
                picture = await first.screenshot()
                colours = await first.main_colours(picture)
                assert colours >= 8, f"the screenshot shows {colours} colours: no app on it"
                # the page loads nothing from elsewhere (it asked Google for a web font)
                own = (url, f"ws://127.0.0.1:{port}/", "data:")
                for page in (first, second):
                    assert [u for u in page.requests if not u.startswith(own)] == []
                    assert [e for e in page.errors if not e.endswith("/favicon.ico")] == []
                assert first.exceptions == second.exceptions == []
                return picture

        picture = asyncio.run(browse())
    finally:
        server.terminate()
        log = server.communicate(timeout=20)[0]
    (tmp_path / "served.png").write_bytes(picture)
    width, height = png_size(picture)
    assert width == 1200 and height > 400
    assert len(picture) > 20_000, "the screenshot is nearly blank"
    assert "Traceback" not in log, log
    ran = [p for p in (tmp_path, hostile_run) for p in p.glob("*_RAN")]
    assert not ran, "the shell ran a command from the run's name"
    assert not (tmp_path / "EXECUTED").exists(), "code from the run was executed"
    assert tree(hostile_run) == before, "serving wrote to the run"


def test_pipes_collected_after_the_server_loop_closed_are_not_reported():
    """Ctrl-C on `irscope serve`: asyncio reports an app process's pipe collected after the
    server's loop closed as an unraisable "Event loop is closed" with a traceback; that one
    is left out, any other still reaches the hook it replaced."""
    from types import SimpleNamespace

    from irscope.commands.serve import _closed_loop_quiet

    seen = []
    hook = _closed_loop_quiet(seen.append)
    closed = SimpleNamespace(exc_type=RuntimeError, exc_value=RuntimeError("Event loop is closed"),
                             exc_traceback=None, err_msg=None, object=None)
    other = SimpleNamespace(exc_type=ValueError, exc_value=ValueError("bad"),
                            exc_traceback=None, err_msg=None, object=None)
    hook(closed)
    hook(other)
    assert seen == [other]


# -- pages of other sites, oversize terminals, and app processes that outlive the server -------
def test_a_page_of_another_site_is_refused_and_starts_no_app(tmp_path):
    """A WebSocket from another origin, or naming another host (DNS rebinding), is refused
    before any app starts (it received the run's names and IR); the server's own page
    gets its app."""
    pytest.importorskip("textual_serve")
    aiohttp = pytest.importorskip("aiohttp")
    run = tmp_path / "run"
    shutil.copytree(SAMPLE, run)

    async def visit(port: int) -> tuple[list, int]:
        async with aiohttp.ClientSession() as session:
            refused = [await connect(session, port, origin="http://evil.example"),
                       await connect(session, port, host=f"evil.example:{port}",
                                     origin=f"http://evil.example:{port}")]
            started = len(app_processes(run))
            own = await connect(session, port)
            rows, _ = await drawn(own, until_rows=24)
            await close(own)
            return refused + [started], rows

    with served(run) as (_, port):
        (evil, rebound, started), rows = asyncio.run(visit(port))
    assert (evil, rebound, started) == (403, 403, 0)
    assert rows == 24, "the server's own page got no app"


@pytest.mark.slow
def test_an_oversize_terminal_is_clamped(tmp_path):
    """/ws?width=100000&height=100000, then a resize to a billion cells: the app draws at
    most 500 columns and 200 rows (it grew to gigabytes drawing what it was asked)."""
    pytest.importorskip("textual_serve")
    aiohttp = pytest.importorskip("aiohttp")
    run = tmp_path / "run"
    shutil.copytree(SAMPLE, run)

    async def visit(port: int) -> list[tuple[int, int]]:
        async with aiohttp.ClientSession() as session:
            ws = await connect(session, port, "?width=100000&height=100000")
            first = await drawn(ws, until_rows=200)
            await ws.send_json(["resize", {"width": 10**9, "height": 10**9}])
            await ws.send_json(["stdin", "j"])  # something to draw after the resize
            later = await drawn(ws, timeout=10)
            await close(ws)
            return [first, later]

    with served(run) as (_, port):
        first, later = asyncio.run(visit(port))
    assert first == (200, 500)
    assert later[0] <= 200 and later[1] <= 500


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_app_processes_end_with_the_server(tmp_path, how):
    """Two viewers connected, then the server ends (SIGTERM, Ctrl-C, or killed outright):
    no app process of theirs is left (they kept reading and growing after it was gone)."""
    pytest.importorskip("textual_serve")
    aiohttp = pytest.importorskip("aiohttp")
    run = tmp_path / "run"
    shutil.copytree(SAMPLE, run)

    async def viewers(port: int, server) -> tuple[int, int]:
        async with aiohttp.ClientSession() as session:
            sockets = [await connect(session, port) for _ in range(2)]
            await asyncio.gather(*(drawn(ws, until_rows=24) for ws in sockets))
            apps = len(app_processes(run))
            server.send_signal(how)
            await asyncio.get_running_loop().run_in_executor(None, server.wait, 60)
            return apps, len(wait_until(lambda: not app_processes(run)) and [] or
                             app_processes(run))

    with served(run) as (server, port):
        apps, left = asyncio.run(viewers(port, server))
        log = server.stdout.read()
    assert apps == 2
    assert left == 0, f"{left} app processes outlived the server"
    assert "Traceback" not in log, log
