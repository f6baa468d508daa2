"""The web server of `irscope serve`: textual-serve's, answering its own origin only, with
bounded viewers whose app processes end with them and with the server.

textual-serve gives each WebSocket an app process started through a shell, accepts any
Host and Origin, any terminal size and message, and waits without end for an app to quit.
Here every request passes ``host_refusal`` and ``origin_refusal`` (any web page the viewer
has open can make requests to the server: a DNS rebinding names another host, a page of
another site carries its own origin), the app runs without a shell in a process group of
its own, sizes are clamped, messages bounded, and an app that does not quit within
``QUIT_GRACE_S`` is killed, as is every app left when the server stops (Ctrl-C, SIGTERM,
SIGHUP; each app also asks the kernel to end it with the server, see commands/serve.py).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import re
import signal
import socket
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp_jinja2
import jinja2
from aiohttp import WSCloseCode, WSMsgType, web
from textual_serve.app_service import AppService
from textual_serve.server import Server

from irscope.console import note, warn

PAGE = "app_index.html"
# A viewer's terminal, in cells: what the browser asks for, held to these bounds (a page
# asking for 100000x100000 would have its app allocate gigabytes).
COLUMNS, ROWS = (10, 500), (4, 200)
DEFAULT_SIZE = (80, 24)
WHOLE_NUMBER_RE = re.compile(r"[+-]?\d{1,40}")  # "120", "-5", "100000"
MAX_MESSAGE_BYTES = 64 << 10  # a viewer's keys, resizes and pings; pastes included
QUIT_GRACE_S = 3.0  # an app asked to quit has this long before its process group is killed
# The only sources the page may load from: the server itself (the web font included).
POLICY = ("default-src 'self'; script-src 'self' 'unsafe-inline'; "
          "style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self'; "
          "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
HEADERS = {"Content-Security-Policy": POLICY, "X-Content-Type-Options": "nosniff",
           "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"}
# textual-serve's page links its font from Google Fonts:
# <link rel="stylesheet" href="https://fonts.googleapis.com/css?family=Roboto%20Mono" />
REMOTE_LINK_RE = re.compile(r"<link\b[^>]*\bhref=\"https?://[^\"]*\"[^>]*>\s*")
FONT_FACES = """
      @font-face { font-family: "Roboto Mono"; font-style: normal; font-weight: 100 700;
        src: url("{{ config.static.url }}fonts/RobotoMono-VariableFont_wght.ttf"); }
      @font-face { font-family: "Roboto Mono"; font-style: italic; font-weight: 100 700;
        src: url("{{ config.static.url }}fonts/RobotoMono-Italic-VariableFont_wght.ttf"); }"""
SHUTDOWN_S = QUIT_GRACE_S + 2  # what aiohttp gives open connections once the apps are ended


# -- who may use the server ------------------------------------------------------------------
def normalized_origin(text: str) -> str | None:
    """``scheme://host[:port]`` of an origin, lower case, default port left out; None when
    ``text`` is no http(s) origin (a path, a query, ``null``)."""
    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/") \
            or parts.query or parts.fragment or parts.username or parts.password:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    default = 80 if parts.scheme == "http" else 443
    return f"{parts.scheme}://{host}" + (f":{port}" if port and port != default else "")


def host_refusal(host_header: str, bound: str, origins: tuple[str, ...]) -> str | None:
    """Why a request's ``Host`` is refused, or None: it must be an address (a DNS rebinding
    always names a host), ``localhost``, the name the server was bound to or this machine's
    name, or the host of an allowed origin."""
    try:
        hostname = urlsplit(f"//{host_header}").hostname
        urlsplit(f"//{host_header}").port  # noqa: B018  a malformed port raises
    except ValueError:
        hostname = None
    if not hostname:
        return f"Host {host_header!r} is malformed"
    try:
        ipaddress.ip_address(hostname)
        return None
    except ValueError:
        pass
    names = {"localhost", bound.lower(), socket.gethostname().lower(),
             *(urlsplit(o).hostname for o in origins)}
    if hostname in names:
        return None
    return (f"Host {hostname!r} is not a name of this server (a page of another site "
            f"resolving to it?); use --allow-origin for a proxy")


def origin_refusal(origin: str | None, host_header: str, origins: tuple[str, ...]) -> str | None:
    """Why a request's ``Origin`` is refused, or None: absent (no browser page made it), the
    server's own (http and the ``Host`` asked for, which passed ``host_refusal``), or
    allowed (https behind a proxy, for one)."""
    if origin is None:
        return None
    normal = normalized_origin(origin)
    if normal is None:
        return f"Origin {origin[:100]!r} is not a web origin"
    if normal in origins or normal == normalized_origin(f"http://{host_header}"):
        return None
    return f"Origin {normal!r} is another site's; use --allow-origin to allow it"


def terminal_size(width: object, height: object) -> tuple[int, int]:
    """A viewer's requested size in cells held to ``COLUMNS`` x ``ROWS`` (what is not a
    whole number gets the default)."""
    def bounded(value: object, limits: tuple[int, int], default: int) -> int:
        if isinstance(value, str):
            value = int(value) if WHOLE_NUMBER_RE.fullmatch(value.strip()) else default
        if not isinstance(value, int) or isinstance(value, bool):
            value = default
        return min(max(value, limits[0]), limits[1])
    return bounded(width, COLUMNS, DEFAULT_SIZE[0]), bounded(height, ROWS, DEFAULT_SIZE[1])


def offline_page(templates: Path) -> str:
    """textual-serve's page without its link to Google Fonts: the same font comes from the
    server's own static folder, so the page loads nothing from elsewhere."""
    page = REMOTE_LINK_RE.sub("", (templates / PAGE).read_text(encoding="utf-8"))
    return page.replace("<style>", "<style>" + FONT_FACES, 1)


class ViewerApp(AppService):
    """One viewer's app process: started without a shell in a new process group (so that
    it and anything it starts can be ended at once), told its size within bounds, and
    killed when it does not quit in time."""

    def __init__(self, words: list[str], **kwargs) -> None:
        super().__init__(" ".join(words), **kwargs)
        self.words = words

    async def _open_app_process(self, width: int = 80, height: int = 24):
        environment = self._build_environment(width=width, height=height)
        self._process = process = await asyncio.create_subprocess_exec(
            *self.words, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=environment, start_new_session=True)
        self._stdin = process.stdin
        return process

    async def set_terminal_size(self, width: int, height: int) -> None:
        await super().set_terminal_size(*terminal_size(width, height))

    async def stop(self) -> None:
        """Ask the app to quit; kill its process group if it has not within the grace."""
        process = self._process
        if process is None:
            return
        try:
            if process.returncode is None:
                await self.send_meta({"type": "quit"})
                try:
                    await asyncio.wait_for(process.wait(), QUIT_GRACE_S)
                except asyncio.TimeoutError:
                    self.kill()
                    await process.wait()
            if self._task is not None:
                await self._task
                self._task = None
        except asyncio.CancelledError:
            self.kill()
            raise

    def kill(self) -> None:
        """End the app's process group now (nothing to save: the app only reads)."""
        process = self._process
        if process is not None and process.returncode is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


class GuardedServer(Server):
    """textual-serve's server for one run's app command (``words``), answering pages of its
    own origin and of ``origins`` only, with at most ``max_viewers`` app processes."""

    def __init__(self, words: list[str], host: str, port: int, title: str,
                 origins: tuple[str, ...] = (), max_viewers: int = 8) -> None:
        super().__init__(" ".join(words), host=host, port=port, title=title)
        self.words, self.origins, self.max_viewers = words, origins, max_viewers
        self.viewers: set[ViewerApp] = set()
        self.sockets: set[web.WebSocketResponse] = set()

    async def _make_app(self) -> web.Application:
        app = web.Application(middlewares=[self.guard], client_max_size=MAX_MESSAGE_BYTES)
        aiohttp_jinja2.setup(app, loader=jinja2.DictLoader(
            {PAGE: offline_page(self.templates_path)}))
        app.add_routes([web.get("/", self.handle_index, name="index"),
                        web.get("/ws", self.handle_websocket, name="websocket"),
                        web.static("/static", self.statics_path, name="static")])
        app.on_response_prepare.append(self._secure_headers)
        app.on_startup.append(self.on_startup)
        app.on_shutdown.append(self.on_shutdown)
        return app

    @web.middleware
    async def guard(self, request: web.Request, handler):
        """Refuse, with one line, a request for another host or from another site's page."""
        host = request.headers.get("Host", "")
        refusal = (host_refusal(host, self.host, self.origins)
                   or origin_refusal(request.headers.get("Origin"), host, self.origins))
        if refusal:
            return web.Response(status=403, text=f"irscope serve: refused: {refusal}\n")
        return await handler(request)

    @staticmethod
    async def _secure_headers(request: web.Request, response: web.StreamResponse) -> None:
        for name, value in HEADERS.items():
            response.headers.setdefault(name, value)

    def _full(self) -> web.Response | None:
        if len(self.viewers) < self.max_viewers:
            return None
        return web.Response(status=503, text=(
            f"irscope serve: {len(self.viewers)} viewers are reading this run, the most "
            f"--max-viewers allows; try again when one leaves\n"))

    @aiohttp_jinja2.template(PAGE)
    async def _page(self, request: web.Request) -> dict:
        own = self._public_url(request)
        asked = request.query.get("fontsize", "")
        font_size = min(max(int(asked), 6), 64) if asked.isdigit() and len(asked) < 4 else 16
        return {"font_size": font_size,
                "app_websocket_url": own.replace("http", "ws", 1) + "/ws",
                "config": {"static": {"url": f"{own}/static/"}},
                "application": {"name": self.title}}

    async def handle_index(self, request: web.Request) -> web.StreamResponse:
        return self._full() or await self._page(request)

    def _public_url(self, request: web.Request) -> str:
        """The origin the page was asked for (its Host passed the guard), https where an
        allowed origin of that host says so (a proxy ending TLS)."""
        host = request.headers.get("Host", f"{self.host}:{self.port}")
        secure = any(o == f"https://{host}".lower() for o in self.origins)
        return f"{'https' if secure else 'http'}://{host}"

    async def handle_websocket(self, request: web.Request) -> web.StreamResponse:
        full = self._full()
        if full is not None:
            return full
        websocket = web.WebSocketResponse(heartbeat=15, max_msg_size=MAX_MESSAGE_BYTES)
        viewer = ViewerApp(self.words, write_bytes=websocket.send_bytes,
                           write_str=websocket.send_str, close=websocket.close,
                           download_manager=self.download_manager)
        self.viewers.add(viewer)  # the place is taken before anything is awaited
        try:
            await websocket.prepare(request)
            self.sockets.add(websocket)
            await viewer.start(*terminal_size(request.query.get("width"),
                                              request.query.get("height")))
            await self._relay(websocket, viewer)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            try:
                await viewer.stop()
            finally:
                self.viewers.discard(viewer)
                self.sockets.discard(websocket)
                if websocket.prepared:
                    await websocket.close()
        return websocket

    async def _relay(self, websocket: web.WebSocketResponse, viewer: ViewerApp) -> None:
        """Pass the page's keys, sizes and focus to the app; anything else is left out."""
        async for message in websocket:
            if message.type != WSMsgType.TEXT:
                continue
            try:
                envelope = json.loads(message.data)
            except ValueError:
                continue
            if not isinstance(envelope, list) or len(envelope) < 1:
                continue
            kind, data = envelope[0], envelope[1] if len(envelope) > 1 else None
            if kind == "stdin" and isinstance(data, str):
                await viewer.send_bytes(data.encode("utf-8", "replace"))
            elif kind == "resize" and isinstance(data, dict):
                await viewer.set_terminal_size(data.get("width"), data.get("height"))
            elif kind == "ping":
                await websocket.send_json(["pong", data])
            elif kind == "blur":
                await viewer.blur()
            elif kind == "focus":
                await viewer.focus()

    async def on_startup(self, app: web.Application) -> None:
        note(f"irscope serve: {self.title} on http://{self._shown_host()}:{self.port}/ "
             f"(Ctrl+C stops it)")

    def _shown_host(self) -> str:
        return f"[{self.host}]" if ":" in self.host else self.host

    async def on_shutdown(self, app: web.Application) -> None:
        """End every viewer's app and close its socket, so that nothing outlives the server."""
        await asyncio.gather(*(v.stop() for v in list(self.viewers)), return_exceptions=True)
        for websocket in list(self.sockets):
            await websocket.close(code=WSCloseCode.GOING_AWAY, message=b"irscope serve stopped")

    def end_viewers(self) -> None:
        """Kill the app of any viewer still open (the server's loop is gone)."""
        for viewer in list(self.viewers):
            viewer.kill()

    def serve(self, debug: bool = False) -> None:
        """Serve until Ctrl-C, SIGTERM or SIGHUP, then end every app."""
        self.initialize_logging()
        # bound before the app starts, which says where it serves: a port in use fails first
        listening = socket.create_server(
            (self.host, self.port), family=socket.AF_INET6 if ":" in self.host else socket.AF_INET)
        loop = asyncio.new_event_loop()
        for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(number, self.request_exit)
        try:
            web.run_app(self._make_app(), sock=listening, handle_signals=False,
                        loop=loop, print=None, shutdown_timeout=SHUTDOWN_S,
                        access_log=None)
        finally:
            if self.viewers:
                warn(f"{len(self.viewers)} app process(es) did not quit: killed")
            self.end_viewers()
