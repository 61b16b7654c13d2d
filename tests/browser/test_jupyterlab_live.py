"""The live GIL meter in real JupyterLab (headless Chromium on a server started by the
test, as test_jupyterlab.py does): while a 3 s %%giltracer cell runs, the output area
shows the meter, redrawn at least twice (its headline changes), with a bar per spinning
thread; when the cell ends the viewer's iframe takes its place."""

import os
import time

import pytest

pytest.importorskip("websocket", reason="pip install websocket-client")
pytest.importorskip("jupyterlab", reason='pip install "giltracer[jupyterlab]"')
pytest.importorskip("ipykernel", reason="pip install ipykernel")

from test_jupyterlab import (  # noqa: E402,F401  (lab: the fixture)
    Browser, lab, notebook, open_notebook, screenshot_on_failure, start_cell)
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


def test_live_meter_in_jupyterlab(lab, tmp_path):
    base, token, d = lab
    notebook(os.path.join(d, "live.ipynb"), CELLS)
    b = Browser(str(tmp_path / "chromium"))
    try:
        open_notebook(b, base, token, "live.ipynb", len(CELLS))
        t0 = time.time()
        for cell in range(len(CELLS)):
            start_cell(b, cell)
        started = time.time() - t0
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
        # What the page showed, should the meter be missing (seen once in a full suite run):
        # the cells' prompts, the time start_cell took and the outputs' text.
        page = (f"start_cell took {started:.1f} s; prompts: "
                + str(b.js("Array.from(document.querySelectorAll('.jp-Notebook .jp-InputPrompt'))"
                           ".map(function(e){return e.textContent})"))
                + "; outputs: " + str(b.js("Array.from(document.querySelectorAll('.jp-OutputArea-output'))"
                                           ".map(function(e){return e.textContent.slice(0, 200)})")))
        assert len(headlines) >= 2, (seen, page)  # redrawn at least twice during the cell
        assert any("spinner-0" in s and "spinner-1" in s for s in headlines), seen
        b.wait_for("document.querySelectorAll('.jp-OutputArea-output iframe').length === 1", timeout=60)
        assert b.js(f"{METER} === null")  # the viewer took the meter's place
        assert not b.errors, b.errors
    except BaseException:
        screenshot_on_failure(b)
        raise
    finally:
        b.close()
