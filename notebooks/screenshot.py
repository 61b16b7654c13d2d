"""Screenshot a rendered lesson's first viewer in headless Chromium, and check that it shows
the GIL: two lanes whose GIL strips alternate *held* and *waiting*.

    python notebooks/screenshot.py build/notebooks/01-meet-the-gil.html docs/lesson-1-meet-the-gil.png

Exits non-zero when the viewer did not draw, or no two strips alternate. `make lesson-shot`
renders lesson 1 and writes the picture the README shows; tests/test_notebooks.py runs the
same check on lesson 1 whenever Chromium is there.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import zlib
from typing import List, Optional, Sequence, Tuple

WIDTH, HEIGHT = 1300, 1000
# The light theme's GIL colours (core/viewer/theme.js): held, and waiting (drawn with a
# light stripe pattern on top, so its pixels are the colour or a paler mix of it).
HELD = (0x00, 0x72, 0xB2)
WAIT = (0xD5, 0x5E, 0x00)
WAIT_PALE = tuple(round(c * 0.45 + 255 * 0.55) for c in WAIT)

Pixel = Tuple[int, int, int]


def chromium() -> Optional[str]:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


class Browser:
    """One headless Chromium tab over the DevTools protocol (only what this needs)."""

    def __init__(self, profile_dir: str):
        import websocket  # websocket-client, in the test set-up

        env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS")}
        self.proc = subprocess.Popen(
            [chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             f"--user-data-dir={profile_dir}", "--remote-debugging-port=0", f"--window-size={WIDTH},{HEIGHT}",
             "--force-device-scale-factor=1", "--hide-scrollbars", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        port, deadline = None, time.time() + 60
        while port is None and time.time() < deadline:
            line = self.proc.stderr.readline()
            m = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
            if m:
                port = int(m.group(1))
            elif not line and self.proc.poll() is not None:
                break
        if port is None:
            self.close()
            raise RuntimeError("chromium did not start its DevTools endpoint")
        threading.Thread(target=self.proc.stderr.read, daemon=True).start()
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30))
        page = next(t for t in targets if t["type"] == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=60)
        self.next_id = 0

    def call(self, method: str, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def js(self, expr: str):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        return r.get("result", {}).get("value")

    def close(self) -> None:
        if getattr(self, "ws", None):
            self.ws.close()
        self.proc.kill()
        self.proc.wait()


def png_rows(data: bytes) -> List[List[Pixel]]:
    """The RGB rows of an 8-bit RGB/RGBA, non-interlaced PNG (what Chromium writes)."""
    pos, idat, w, h, bpp = 8, b"", 0, 0, 3
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
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
    return rows


def _near(p: Pixel, q: Sequence[int], tol: int = 40) -> bool:
    return sum(abs(a - b) for a, b in zip(p, q)) <= tol


def alternating_strips(rows: List[List[Pixel]], min_turns: int = 8) -> List[Tuple[int, int]]:
    """Rows of the picture that cross a GIL strip alternating held and waiting: (y, turns),
    one per strip. A turn is a run of held pixels that follows a run of waiting ones."""
    found: List[Tuple[int, int]] = []
    last = -10  # the last row that matched: rows of one strip come one after another
    for y, row in enumerate(rows):
        kinds = ["h" if _near(p, HELD) else "w" if (_near(p, WAIT) or _near(p, WAIT_PALE)) else "" for p in row]
        runs = [k for i, k in enumerate(kinds) if k and (i == 0 or kinds[i - 1] != k)]
        turns = sum(1 for a, b in zip(runs, runs[1:]) if a == "w" and b == "h")
        if turns >= min_turns and kinds.count("h") > 0.1 * len(row) and kinds.count("w") > 0.1 * len(row):
            if y - last > 1:  # a new strip, not the next row of the same one
                found.append((y, turns))
            last = y
    return found


def shoot(page_path: str, png_path: str, timeout: float = 60.0) -> List[Tuple[int, int]]:
    """Open the rendered lesson, bring its first viewer into view, wait until its GIL
    strips are drawn, write the viewer's picture to png_path; returns the alternating
    strips found (see alternating_strips)."""
    profile = tempfile.mkdtemp(prefix="giltracer-shot-")
    try:
        b = Browser(profile)
        try:
            b.call("Page.enable")
            b.call("Page.navigate", url="file://" + os.path.abspath(page_path))
            deadline = time.time() + timeout
            while not b.js("!!document.querySelector('iframe') && document.readyState === 'complete'"):
                if time.time() > deadline:
                    raise RuntimeError("the page has no viewer iframe")
                time.sleep(0.2)
            b.js("document.querySelector('iframe').scrollIntoView({block: 'start'})")
            strips: List[Tuple[int, int]] = []
            png = b""
            while time.time() < deadline:  # the viewer decodes its columns asynchronously
                time.sleep(0.5)
                r = b.js("(function(){var r=document.querySelector('iframe').getBoundingClientRect();"
                         "return [r.left + scrollX, r.top + scrollY, r.width, r.height];})()")
                clip = dict(x=r[0], y=r[1], width=r[2], height=r[3], scale=1)  # page coordinates
                png = base64.b64decode(b.call("Page.captureScreenshot", format="png", clip=clip,
                                              captureBeyondViewport=True)["data"])
                strips = alternating_strips(png_rows(png))
                if len(strips) >= 2:
                    break
            with open(png_path, "wb") as f:
                f.write(png)
            return strips
        finally:
            b.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)  # Chromium may still write there as it ends


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("page", help="a lesson rendered by notebooks/lessons.py")
    ap.add_argument("png", help="where to write the picture")
    a = ap.parse_args(argv)
    if not chromium():
        print("screenshot: no chromium (apt-get install chromium)", file=sys.stderr)
        return 2
    strips = shoot(a.page, a.png)
    print(f"screenshot: wrote {a.png}; GIL strips alternating held/waiting: "
          + (", ".join(f"y={y} ({n} turns)" for y, n in strips) or "none"))
    return 0 if len(strips) >= 2 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
