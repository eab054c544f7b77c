"""A headless Chromium driven over the DevTools protocol: open a page, wait for it, read its DOM through
JavaScript, list every URL it requested, take a screenshot. What the viewer's browser tests and
bench/view_build.py use (Debian's `chromium`; `make test-view` installs it). One websocket, no driver binary.

The flags: headless as root needs --no-sandbox; the rest keep the browser from reaching any network on its own
(component updates, sync, QUIC probes), so a page that asks for something off the machine is what we see.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars", "--remote-debugging-port=0"]  # fmt: skip
BINARIES = ("chromium", "chromium-browser", "google-chrome")


class BrowserError(RuntimeError):
    pass


def find_chromium() -> str | None:
    return next((p for b in BINARIES if (p := shutil.which(b))), None)


class Chromium:
    """`with Chromium() as b: b.open(url); b.eval("document.title")`; one tab, a fresh empty profile."""

    def __init__(
        self, width: int = 1280, height: int = 900, binary: str | None = None, timeout: float = 60.0
    ):
        from websockets.sync.client import connect

        self.binary = binary or find_chromium()
        if not self.binary:
            raise BrowserError("no Chromium found (apt-get install chromium; `make test-view` installs it)")
        self.timeout = timeout
        self.profile = Path(tempfile.mkdtemp(prefix="swe-rl-view-chromium-"))
        args = [
            self.binary,
            *FLAGS,
            f"--user-data-dir={self.profile}",
            f"--window-size={width},{height}",
            "about:blank",
        ]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            port = self._port()
            pages = json.loads(
                urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10).read()
            )
            ws = next(p["webSocketDebuggerUrl"] for p in pages if p.get("type") == "page")
            self.ws = connect(ws, max_size=None, open_timeout=10)
        except Exception:
            self.close()
            raise
        self.n = 0
        self.events: list[dict[str, Any]] = []
        self.size = (width, height)
        for domain in ("Page", "Runtime", "Network"):
            self.call(f"{domain}.enable")

    def _port(self) -> int:
        f = self.profile / "DevToolsActivePort"
        end = time.monotonic() + self.timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise BrowserError(f"{self.binary} exited with {self.proc.returncode} at start")
            if f.is_file() and (lines := f.read_text().split("\n")) and lines[0].strip():
                return int(lines[0])
            time.sleep(0.05)
        raise BrowserError(f"{self.binary}: no DevTools port after {self.timeout:.0f} s")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.n += 1
        self.ws.send(json.dumps({"id": self.n, "method": method, "params": params}))
        end = time.monotonic() + self.timeout
        while True:
            msg = json.loads(self.ws.recv(timeout=max(0.1, end - time.monotonic())))
            if msg.get("id") == self.n:
                if "error" in msg:
                    raise BrowserError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def _wait_event(self, method: str) -> dict[str, Any]:
        end = time.monotonic() + self.timeout
        while True:
            for i, e in enumerate(self.events):
                if e.get("method") == method:
                    return self.events.pop(i)
            self.events.append(json.loads(self.ws.recv(timeout=max(0.1, end - time.monotonic()))))

    def open(self, url: str) -> None:
        """Navigate and wait for the load event (scripts with `defer` have run by then)."""
        self.events.clear()
        self.call("Page.navigate", url=url)
        self._wait_event("Page.loadEventFired")

    def eval(self, expression: str) -> Any:
        res = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in res:
            raise BrowserError(f"{expression[:80]}: {res['exceptionDetails'].get('text')}")
        return res.get("result", {}).get("value")

    def requested(self) -> list[str]:
        """Every URL requested since the last open()."""
        return [
            e["params"]["request"]["url"]
            for e in self.events
            if e.get("method") == "Network.requestWillBeSent"
        ]

    def screenshot(self, path: str | Path, full: bool = True, max_height: int = 8000) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full:
            size = self.call("Page.getLayoutMetrics")["cssContentSize"]
            params.update(captureBeyondViewport=True, clip={"x": 0, "y": 0, "width": self.size[0],
                          "height": min(max_height, max(self.size[1], size["height"])), "scale": 1})  # fmt: skip
        data = base64.b64decode(self.call("Page.captureScreenshot", **params)["data"])
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(data)
        return Path(path)

    def close(self) -> None:
        ws = getattr(self, "ws", None)
        if ws is not None:
            ws.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
