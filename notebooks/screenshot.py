"""Screenshot a rendered lesson's first viewer in headless Chromium, and check that it shows
the GIL: two lanes whose GIL strips alternate *held* and *waiting*.

    python notebooks/screenshot.py build/notebooks/01-meet-the-gil.html docs/lesson-1-meet-the-gil.png
    python notebooks/screenshot.py --any build/notebooks/09-one-c-call-one-turn.html docs/lesson-9-one-c-call-one-turn.png

Exits non-zero when the viewer did not draw, or (without --any) no two strips alternate.
`make lesson-shot` renders lesson 1 and writes the picture the user guide shows, `make
lesson-shots` every lesson's first viewer into docs/lesson-N-*.png; tests/test_notebooks.py runs the
same check on lesson 1 whenever Chromium is there.
"""

from __future__ import annotations

import argparse
import base64
import os
import shutil
import sys
import tempfile
import time
from typing import List, Optional, Sequence, Tuple

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "browser"))
import devtools  # noqa: E402  (the DevTools harness the browser tests use)

WIDTH, HEIGHT = 1300, 1000
# The light theme's GIL colours (core/viewer/theme.js): held, and waiting (drawn with a
# light stripe pattern on top, so its pixels are the colour or a paler mix of it).
HELD = (0x00, 0x72, 0xB2)
WAIT = (0xD5, 0x5E, 0x00)
WAIT_PALE = tuple(round(c * 0.45 + 255 * 0.55) for c in WAIT)

Pixel = Tuple[int, int, int]


def chromium() -> Optional[str]:
    return devtools.CHROMIUM


class Browser(devtools.Tab):
    """One headless Chromium tab over the DevTools protocol, without scrollbars."""

    def __init__(self, profile_dir: str):
        super().__init__(*devtools.launch(profile_dir, WIDTH, HEIGHT, ws_timeout=60,
                                          extra_args=("--hide-scrollbars",)))


def png_rows(data: bytes) -> List[List[Pixel]]:
    return devtools.png_pixels(data)[2]


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


def shoot(page_path: str, png_path: str, timeout: float = 60.0,
          min_strips: int = 2) -> List[Tuple[int, int]]:
    """Open the rendered lesson, bring its first viewer into view, wait until its GIL
    strips are drawn (`min_strips` of them alternating; with 0, a few seconds), write the
    viewer's picture to png_path; returns the alternating strips found (see
    alternating_strips)."""
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
            settled = time.time() + 2  # with min_strips=0: once the viewer has loaded its data
            while time.time() < deadline:  # the viewer decodes its columns asynchronously
                time.sleep(0.5)
                r = b.js("(function(){var r=document.querySelector('iframe').getBoundingClientRect();"
                         "return [r.left + scrollX, r.top + scrollY, r.width, r.height];})()")
                clip = dict(x=r[0], y=r[1], width=r[2], height=r[3], scale=1)  # page coordinates
                png = base64.b64decode(b.call("Page.captureScreenshot", format="png", clip=clip,
                                              captureBeyondViewport=True)["data"])
                strips = alternating_strips(png_rows(png))
                if len(strips) >= max(min_strips, 1):
                    break
                if min_strips == 0 and time.time() > settled and b.js(
                        "(function(){var d = document.querySelector('iframe').contentDocument;"
                        " return !!d && !!d.body && /Longest wait/.test(d.body.innerText)"
                        " && !/Loading trace/.test(d.body.innerText);})()"):
                    time.sleep(1.0)  # the lanes are drawn right after the data is decoded
                    png = base64.b64decode(b.call("Page.captureScreenshot", format="png", clip=clip,
                                                  captureBeyondViewport=True)["data"])
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
    ap.add_argument("--any", action="store_true",
                    help="any lesson: do not require two strips that alternate held and waiting")
    a = ap.parse_args(argv)
    if not chromium():
        print("screenshot: no chromium (apt-get install chromium)", file=sys.stderr)
        return 2
    strips = shoot(a.page, a.png, min_strips=0 if a.any else 2)
    print(f"screenshot: wrote {a.png}; GIL strips alternating held/waiting: "
          + (", ".join(f"y={y} ({n} turns)" for y, n in strips) or "none"))
    return 0 if a.any or len(strips) >= 2 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
