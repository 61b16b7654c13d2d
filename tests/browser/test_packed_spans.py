"""A thread of more calls than the page ships one by one: its calls under a pixel
at full zoom-out are packed at save into one record per pixel and depth. In headless
Chromium the packed block is drawn, its tooltip says how many calls it stands for, and
Top functions still counts every call (figures from the spans as recorded)."""

import os
import shutil
import tempfile
import threading
import time

import pytest

import giltracer

from test_profile_tab import CHROMIUM, Page

pytestmark = pytest.mark.skipif(not CHROMIUM, reason="no chromium (apt-get install chromium)")

N = 150_000  # f calls g: 300,000 spans, past the 200,000 a thread ships one by one


def g(i):
    return i


def f(i):
    return g(i)


def pause():
    time.sleep(0.05)  # one call long enough to stay as recorded


def work():
    for i in range(N):
        f(i)
    pause()


@pytest.fixture(scope="module")
def page():
    with giltracer.trace(backend="hooks", c_calls=False) as t:
        th = threading.Thread(target=work, name="packer")
        th.start()
        th.join()
    d = tempfile.mkdtemp(prefix="giltracer-packed-")
    p = Page("file://" + t.save(os.path.join(d, "packed.html")), os.path.join(d, "chromium"))
    yield t, p
    p.close()
    shutil.rmtree(d, ignore_errors=True)


def lane(p):
    return p.js("""(function () {
      for (var i = 0; i < gtPayload.threads(); i++) {
        var t = gtPayload.thread(i);
        if (t.spans.some(function (s) { return s[2] === 'pause'; })) return t.spans;
      }
      return null;
    })()""")


def test_the_page_ships_packed_records(page):
    t, p = page
    recorded = t.spans("packer")
    assert len(recorded) >= 2 * N
    shipped = lane(p)
    packed = [s for s in shipped if s[4] & 16]
    assert packed, "no packed record"
    assert len(shipped) < len(recorded) // 20, (len(shipped), len(recorded))
    # the long call is shipped as it is
    (pause,) = [s for s in recorded if s[2] == "pause"]
    assert [s for s in shipped if s[2] == "pause"][0][1] - [s for s in shipped if s[2] == "pause"][0][0] == pause[1] - pause[0]
    assert not p.errors, p.errors


def test_a_packed_block_is_drawn_and_its_tooltip_says_so(page):
    t, p = page
    where = p.js("gtViewer.spanAt('packer', 'f', 16)")  # the longest packed record named f
    time.sleep(0.3)  # let the scroll event (which hides tooltips) pass
    where = p.js("gtViewer.spanAt('packer', 'f', 16)")
    assert where and where["visible"], where
    p.js("gtViewer.view(%f, %f)" % (where["start"] - 1000, where["end"] + 1000))  # the block fills the plot
    where = p.js("gtViewer.spanAt('packer', 'f', 16)")
    p.js("gtViewer.redraw()")  # this frame drawn now, not at the next animation frame
    # drawn, with the packed mark: the block's bottom two pixels in the edge colour
    px = p.js("""(function (x, y) {
      var c = document.getElementById('gt-cv'), b = c.getBoundingClientRect(), r = c.width / b.width;
      var d = c.getContext('2d').getImageData(Math.round((x - b.left) * r), Math.round((y - b.top) * r), 1, 1).data;
      return Array.from(d).slice(0, 3);
    })(%f, %f)""" % (where["x"], where["y"] + 6))
    edge = p.js("gtViewer.theme().palette.edge")
    assert px == [int(edge[i:i + 2], 16) for i in (1, 3, 5)], (px, edge)
    p.call("Input.dispatchMouseEvent", type="mouseMoved", x=where["x"], y=where["y"])
    p.wait_for("!document.getElementById('gt-tip').hidden", timeout=10)
    tip = p.js("document.getElementById('gt-tip').innerText")
    assert tip.startswith("f") and "packed: " in tip and " calls" in tip, tip
    n = int(tip.split("packed: ")[1].split(" calls")[0].replace(",", "").replace("\u202f", "").replace(" ", ""))
    assert n >= 2, tip
    assert "self" not in tip, tip  # the calls it packs are inside it: no self time to show
    assert not p.errors, p.errors


def test_top_functions_count_every_call(page):
    t, p = page
    calls = p.js("""(function () {
      gtViewer.showTab('top');
      var out = {};
      document.querySelectorAll('#gt-top tr').forEach(function (tr) {
        var c = Array.from(tr.cells).map(function (x) { return x.innerText; });
        if (c.length > 2 && (c[0] === 'f' || c[0] === 'g')) out[c[0]] = c;
      });
      return out;
    })()""")
    assert calls.get("f") and calls.get("g"), calls
    for name in ("f", "g"):
        assert any(c.replace(",", "").replace("\u202f", "") == str(N) for c in calls[name]), calls[name]
    assert not p.errors, p.errors
