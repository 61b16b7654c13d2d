"""Headless Chromium over the DevTools protocol, and the PNG decoder for its screenshots:
what the browser tests, bench/payload_bench.py and notebooks/screenshot.py share. No pytest
here (the bench and the notebook script use it too)."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import threading
import time
import urllib.request
import zlib
from typing import List, Tuple

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def browser_env() -> dict:
    """The environment for Chromium: without `make test-asan`'s preloaded sanitizer
    runtime (meant for the interpreter and our extension; Chromium spins under it)."""
    drop = {"LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "PYTHONMALLOC"}
    return {k: v for k, v in os.environ.items() if k not in drop}


def launch(profile_dir: str, width: int, height: int, ws_timeout: float,
           extra_args: Tuple[str, ...] = ()):
    """Headless Chromium on a free DevTools port: (process, websocket to its first page).
    Raises RuntimeError when it does not start its endpoint within a minute."""
    import websocket  # websocket-client

    proc = subprocess.Popen(
        [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
         f"--user-data-dir={profile_dir}", "--remote-debugging-port=0",
         f"--window-size={width},{height}", "--force-device-scale-factor=1", *extra_args, "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=browser_env())
    port = None
    deadline = time.time() + 60
    while port is None and time.time() < deadline:
        line = proc.stderr.readline()
        m = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
        if m:
            port = int(m.group(1))
        elif not line and proc.poll() is not None:
            break
    if port is None:
        proc.kill()
        proc.wait()
        raise RuntimeError("chromium did not start its DevTools endpoint")
    threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep the pipe drained
    targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30))
    page = next(t for t in targets if t["type"] == "page")
    return proc, websocket.create_connection(page["webSocketDebuggerUrl"], timeout=ws_timeout)


class Tab:
    """The first tab of a launched Chromium: DevTools calls, answered in order; what
    arrives meanwhile (events) goes to _event."""

    POLL_S = 0.1  # wait_for's period

    def __init__(self, proc, ws):
        self.proc, self.ws, self.next_id = proc, ws, 0

    def _event(self, msg: dict) -> None:
        """An event that arrived while waiting for an answer (ignored here)."""

    def send(self, method: str, session: str = None, **params) -> int:
        """Send `method` without waiting for its answer (e.g. from _event, which runs
        while a call waits); its message id."""
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        self.ws.send(json.dumps(msg))
        return self.next_id

    def call(self, method: str, session: str = None, **params):
        """The result of `method`; `session`: a DevTools session (e.g. an iframe's)."""
        want = self.send(method, session, **params)
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == want:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self._event(msg)

    def js(self, expr: str, session: str = None):
        """The value of a JavaScript expression (a promise is awaited) in the page, or in
        a DevTools `session` (an iframe's); RuntimeError if it throws."""
        r = self.call("Runtime.evaluate", session, expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expr}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait_for(self, expr: str, timeout: float = 60) -> None:
        """Until `expr` is truthy (throwing counts as not yet: e.g. no document while
        navigating); TimeoutError after `timeout` seconds."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                if self.js(expr):
                    return
            except RuntimeError:
                pass
            time.sleep(self.POLL_S)
        raise TimeoutError(expr)

    def close(self) -> None:
        if getattr(self, "ws", None):
            self.ws.close()
        self.proc.kill()
        self.proc.wait()


Pixel = Tuple[int, int, int]


def png_pixels(data: bytes) -> Tuple[int, int, List[List[Pixel]]]:
    """(width, height, rows of RGB tuples) of an 8-bit RGB/RGBA, non-interlaced PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w, h, bpp = 8, b"", 0, 0, 3
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6)
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride, prev, rows = zlib.decompress(idat), w * bpp, bytearray(w * bpp), []
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(w)])
        prev = line
    return w, h, rows

