"""Headless Chromium driven over the DevTools protocol (aiohttp's websocket client).

Debian's chromium package is the browser; tests that need it skip when it is absent.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import subprocess
import tempfile
import time

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--remote-debugging-port=0", "--remote-allow-origins=*")

# The xterm.js terminal of a textual-serve page, read line by line (the page draws on a canvas,
# so its text is not in the DOM). `this` is the array of the page's session objects.
TERMINAL_TEXT = """function() {
  const term = this[0].terminal, buffer = term.buffer.active, lines = [];
  for (let i = 0; i < term.rows; i++) lines.push(buffer.getLine(i).translateToString(true));
  return lines.join("\\n");
}"""
# Colours that each cover at least 0.1% of a PNG (a data: URL), counted on a canvas: the app's
# screen has a dozen and more (highlighting, panels, bars); a blank or loading page a few.
MAIN_COLOURS = """async (src) => {
  const img = new Image(); img.src = src; await img.decode();
  const canvas = document.createElement("canvas");
  canvas.width = img.width; canvas.height = img.height;
  const context = canvas.getContext("2d"); context.drawImage(img, 0, 0);
  const data = context.getImageData(0, 0, img.width, img.height).data, seen = new Map();
  for (let i = 0; i < data.length; i += 4) {
    const rgb = (data[i] << 16) | (data[i + 1] << 8) | data[i + 2];
    seen.set(rgb, (seen.get(rgb) || 0) + 1);
  }
  return [...seen.values()].filter(n => n * 1000 >= img.width * img.height).length;
}"""
KEY_CODES = {"ArrowDown": 40, "ArrowUp": 38, "Enter": 13, "Escape": 27, "Tab": 9}


class Browser:
    """One headless Chromium with one page; ``async with Browser() as page``."""

    def __init__(self, width: int = 1200, height: int = 800) -> None:
        self.size = (width, height)

    async def __aenter__(self) -> "Page":
        import aiohttp

        self.profile = tempfile.mkdtemp(prefix="irscope-chromium-")
        self.process = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={self.profile}",
             f"--window-size={self.size[0]},{self.size[1]}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = os.path.join(self.profile, "DevToolsActivePort")
        deadline = time.monotonic() + 20
        while not os.path.exists(port_file) or not open(port_file).read().strip():
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError("chromium did not start")
            await asyncio.sleep(0.05)
        port = open(port_file).read().split()[0]
        self.session = aiohttp.ClientSession()
        async with self.session.get(f"http://127.0.0.1:{port}/json/list") as response:
            targets = await response.json()
        page = next(t for t in targets if t["type"] == "page")
        socket = await self.session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0)
        self.page = Page(socket)
        await self.page.call("Runtime.enable")
        await self.page.call("Log.enable")
        await self.page.call("Network.enable")
        return self.page

    async def __aexit__(self, *exc) -> None:
        await self.session.close()
        self.process.terminate()
        self.process.wait(timeout=10)
        shutil.rmtree(self.profile, ignore_errors=True)


class Page:
    """A page target: protocol calls, console errors seen so far, and a few conveniences."""

    def __init__(self, socket) -> None:
        self.socket = socket
        self.next_id = 0
        self.errors: list[str] = []  # console errors and failed loads, with their URL
        self.exceptions: list[str] = []  # uncaught script exceptions
        self.requests: list[str] = []  # the URL of every request the page made

    async def call(self, method: str, **params):
        self.next_id += 1
        mine = self.next_id
        await self.socket.send_json({"id": mine, "method": method, "params": params})
        while True:
            message = await self.socket.receive_json()
            if message.get("id") == mine:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self._note(message)

    def _note(self, event: dict) -> None:
        params = event.get("params", {})
        if event.get("method") == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            self.exceptions.append(details.get("exception", {}).get("description")
                                   or details.get("text", "exception"))
        elif event.get("method") == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.errors.append(" ".join(str(a.get("value", a.get("description")))
                                        for a in params.get("args", [])))
        elif event.get("method") == "Log.entryAdded" and params["entry"]["level"] == "error":
            self.errors.append(f"{params['entry']['text']} {params['entry'].get('url', '')}")
        elif event.get("method") == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])

    async def goto(self, url: str) -> None:
        await self.call("Page.enable")
        await self.call("Page.navigate", url=url)

    async def evaluate(self, expression: str):
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                                 awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(result["exceptionDetails"].get("text"))
        return result["result"].get("value")

    async def screenshot(self) -> bytes:
        return base64.b64decode((await self.call("Page.captureScreenshot", format="png"))["data"])

    async def main_colours(self, png: bytes) -> int:
        """How many colours each cover at least 0.1% of the picture ``png``."""
        source = "data:image/png;base64," + base64.b64encode(png).decode()
        return await self.evaluate(f"({MAIN_COLOURS})({json.dumps(source)})")

    async def press(self, *keys: str) -> None:
        for key in keys:
            code = KEY_CODES.get(key, ord(key.upper()) if len(key) == 1 else 0)
            text = key if len(key) == 1 else ("\r" if key == "Enter" else "")
            await self.call("Input.dispatchKeyEvent", type="keyDown", key=key,
                            windowsVirtualKeyCode=code, text=text, code=key)
            await self.call("Input.dispatchKeyEvent", type="keyUp", key=key,
                            windowsVirtualKeyCode=code, code=key)

    async def terminal_text(self) -> str | None:
        """The screen of the page's textual-serve terminal, or None before it exists."""
        sessions = await self._terminal_sessions()
        if sessions is None:
            return None
        result = await self.call("Runtime.callFunctionOn", objectId=sessions,
                                 functionDeclaration=TERMINAL_TEXT, returnByValue=True)
        return result["result"].get("value")

    async def _terminal_sessions(self) -> str | None:
        """The page's terminal session objects: their class is found among the variables that
        the page's onload handler closes over, its instances by the protocol's queryObjects."""
        onload = (await self.call("Runtime.evaluate", expression="window.onload"))["result"]
        if "objectId" not in onload:
            return None
        scopes = await self.call("Runtime.getProperties", objectId=onload["objectId"])
        chain = next(p for p in scopes["internalProperties"] if p["name"] == "[[Scopes]]")
        for scope in (await self.call("Runtime.getProperties",
                                      objectId=chain["value"]["objectId"]))["result"]:
            if scope["value"].get("description", "").startswith("Global"):
                continue
            names = await self.call("Runtime.getProperties", objectId=scope["value"]["objectId"])
            for variable in names["result"]:
                value = variable.get("value", {})
                if value.get("type") != "function" or "objectId" not in value:
                    continue
                found = await self.call(
                    "Runtime.callFunctionOn", objectId=value["objectId"], returnByValue=True,
                    functionDeclaration="function() { return String(this)"
                                        ".includes('sessionWebsocketUrl') && !!this.prototype }")
                if found["result"].get("value"):
                    prototype = await self.call("Runtime.callFunctionOn",
                                                objectId=value["objectId"],
                                                functionDeclaration="function() "
                                                                    "{ return this.prototype }")
                    objects = await self.call("Runtime.queryObjects",
                                              prototypeObjectId=prototype["result"]["objectId"])
                    return objects["objects"]["objectId"]
        return None


async def wait_for(probe, timeout: float = 20.0, interval: float = 0.2):
    """The first truthy value of ``await probe()``; fails after ``timeout`` seconds."""
    deadline, value = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        value = await probe()
        if value:
            return value
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out; last value: {value!r}")


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's header."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
