"""`irscope serve`: the app in headless Chromium, driven by keys, and a served run left untouched."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shlex
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from irscope.commands.serve import app_command, served_app
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


def test_the_app_command_quotes_the_run_and_isolates_the_interpreter(hostile_run):
    words = shlex.split(app_command(hostile_run, show_all=True))
    assert words == [sys.executable, "-I", "-m", "irscope.commands.serve", "--app",
                     str(hostile_run), "--all"]


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


def test_serve_refuses_a_missing_run(tmp_path):
    done = subprocess.run([sys.executable, "-m", "irscope", "serve", str(tmp_path / "nope")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "no such run" in done.stderr


# -- in a browser ------------------------------------------------------------------------------
from browser_helpers import CHROMIUM, Browser, png_size, wait_for  # noqa: E402

needs_browser = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_port(port: int, server: subprocess.Popen, timeout: float = 30.0) -> None:
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


async def screen_showing(page, *texts: str) -> str:
    last = [""]

    async def probe():
        last[0] = await page.terminal_text() or ""
        return last[0] if all(t in last[0] for t in texts) else None
    try:
        return await wait_for(probe, timeout=45)  # an upper bound for a loaded machine
    except AssertionError:
        raise AssertionError(f"{texts} never appeared; the screen was:\n{last[0]}") from None


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
                # (textual-serve's page asks for a web font and a favicon: failed loads)
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
