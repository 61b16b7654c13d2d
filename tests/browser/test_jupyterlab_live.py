"""The live GIL meter in real JupyterLab (headless Chromium on a server started by the
test, as test_jupyterlab.py does): while a 3 s %%giltracer cell runs, the output area
shows the meter, redrawn at least twice (its headline changes), with a bar per spinning
thread; when the cell ends the viewer's iframe takes its place."""

import json
import os
import time

import pytest

pytest.importorskip("websocket", reason="pip install websocket-client")
pytest.importorskip("jupyterlab", reason='pip install "giltracer[jupyterlab]"')
pytest.importorskip("ipykernel", reason="pip install ipykernel")

from test_jupyterlab import Browser, lab, screenshot_on_failure  # noqa: E402,F401  (lab: the fixture)
from test_profile_tab import CHROMIUM  # noqa: E402

pytestmark = pytest.mark.skipif(not CHROMIUM, reason="no chromium (apt-get install chromium)")

CELLS = [
    "%load_ext giltracer",
    "%%giltracer\n"
    "import threading, time\n"
    "def spin(seconds):\n"
    "    end = time.perf_counter() + seconds\n"
    "    while time.perf_counter() < end:\n"
    "        pass\n"
    "ts = [threading.Thread(target=spin, args=(3,), name=f'spinner-{i}') for i in range(2)]\n"
    "for t in ts: t.start()\n"
    "for t in ts: t.join()\n",
]

METER = "document.querySelector('.jp-OutputArea-output .giltracer-live')"


def write_notebook(path):
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "cells": [{"cell_type": "code", "id": f"c{i}", "metadata": {}, "execution_count": None,
                   "outputs": [], "source": src} for i, src in enumerate(CELLS)]}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(nb, f)


def test_live_meter_in_jupyterlab(lab, tmp_path):
    base, token, d = lab
    write_notebook(os.path.join(d, "live.ipynb"))
    b = Browser(str(tmp_path / "chromium"))
    try:
        b.call("Page.navigate", url=f"{base}/lab/tree/live.ipynb?token={token}")
        b.wait_for(f"document.querySelectorAll('.jp-Notebook .jp-Cell .cm-content').length >= {len(CELLS)}",
                   timeout=90)
        b.wait_for("/Idle/.test((document.querySelector('.jp-Notebook-ExecutionIndicator')||{}).title||'')"
                   " || document.querySelector('[data-status=\"idle\"]') !== null", timeout=90)
        box = b.js("(function(){var r=document.querySelector('.jp-Notebook .jp-Cell .cm-content')"
                   ".getBoundingClientRect();return [r.left+20, r.top+5];})()")
        for kind in ("mousePressed", "mouseReleased"):
            b.call("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)
        for cell in range(len(CELLS)):
            prompt = f"document.querySelectorAll('.jp-Notebook .jp-InputPrompt')[{cell}].textContent"
            for _ in range(3):  # a key sent while the notebook is still busy may be dropped
                b.shift_enter()
                try:
                    b.wait_for(f"!/\\[ \\]/.test({prompt})", timeout=15)
                    break
                except TimeoutError:
                    pass
        # Cell 1 runs for 3 s: sample the meter's text as the page shows it.
        seen, deadline = [], time.time() + 60
        while time.time() < deadline:
            text = b.js(f"({METER}||{{}}).textContent || ''")
            if text and (not seen or seen[-1] != text):
                seen.append(text)
            if b.js("document.querySelectorAll('.jp-OutputArea-output iframe').length") >= 1:
                break
            time.sleep(0.1)
        headlines = [s for s in seen if s.startswith("giltracer: ")]
        assert len(headlines) >= 2, seen  # redrawn at least twice during the cell
        assert any("spinner-0" in s and "spinner-1" in s for s in headlines), seen
        b.wait_for("document.querySelectorAll('.jp-OutputArea-output iframe').length === 1", timeout=60)
        assert b.js(f"{METER} === null")  # the viewer took the meter's place
        assert not b.errors, b.errors
    except BaseException:
        screenshot_on_failure(b)
        raise
    finally:
        b.close()
