"""The viewer's Profile tab in headless Chromium, driven over the DevTools protocol:
it renders without console errors, a known frame's state segments (read back from the
canvas pixels) match the profile's numbers within 2 px, and a click zooms into it."""

import contextlib
import os
import shutil
import tempfile
import threading
import time

import pytest

import giltracer
from test_environment import required
from workloads import pin_to_own_cpu

websocket = pytest.importorskip("websocket", reason="pip install websocket-client")
import devtools  # noqa: E402  (same directory)
from devtools import CHROMIUM  # noqa: E402
pytestmark = pytest.mark.skipif(not CHROMIUM, reason="no chromium (apt-get install chromium)")

STATES = ("running", "held_off_cpu", "waiting", "released", "unknown")
WIDTH, HEIGHT = 1200, 900


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def worker(barrier, index, done):
    """fib(17) over and over, for at least 0.1 s and until the other worker has done
    10 as well: however late the OS starts one of them, they compute together for
    most of the run, so each waits for the other's GIL."""
    barrier.wait()
    end = time.monotonic() + 0.1
    while done[index] < 10 or done[1 - index] < 10 or time.monotonic() < end:
        fib(17)
        done[index] += 1


def open_chromium(profile_dir, width, height, ws_timeout):
    """Headless Chromium on a free DevTools port: (process, websocket to its first page).
    Skips the test when Chromium does not start its endpoint (fails it in a run that
    requires Chromium: GILTRACER_REQUIRE)."""
    try:
        return devtools.launch(profile_dir, width, height, ws_timeout)
    except RuntimeError as e:
        if required("chromium"):
            pytest.fail(f"{e} (required by this run)")
        pytest.skip(str(e))


class Page(devtools.Tab):
    """One Chromium tab over the DevTools protocol, on `url`, collecting page errors."""

    def __init__(self, url, profile_dir):
        super().__init__(*open_chromium(profile_dir, WIDTH, HEIGHT, ws_timeout=60))
        self.errors = []
        self.call("Runtime.enable")
        self.call("Log.enable")
        self.call("Page.enable")
        self.call("Page.navigate", url=url)
        self.wait_for("document.documentElement && document.documentElement.getAttribute('data-gt-ready') !== null"
                      " && location.href.startsWith('file:')")

    def _event(self, msg):
        method, params = msg.get("method"), msg.get("params", {})
        if method == "Runtime.exceptionThrown":
            self.errors.append(params["exceptionDetails"].get("text", "exception"))
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.errors.append(" ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            self.errors.append(params["entry"].get("text"))

    def click(self, x, y):
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)


@contextlib.contextmanager
def saved_page(t, prefix, **save_options):
    """`t` saved into a fresh folder and opened in Chromium: yields (path, page); the page
    is closed and the folder removed after."""
    d = tempfile.mkdtemp(prefix=prefix)
    p = None
    try:
        path = t.save(os.path.join(d, "p.html"), **save_options)
        p = Page("file://" + path, os.path.join(d, "chromium"))
        yield path, p
    finally:
        if p is not None:
            p.close()
        shutil.rmtree(d, ignore_errors=True)


# The state of each pixel along one line of a frame, by its colour (nearest palette
# entry): the canvas as drawn, not the numbers the viewer meant to draw.
READ_ROW = """(function (fx, fw, y) {
  var cv = document.getElementById('gt-pfcv'), c = cv.getContext('2d');
  var pal = gtViewer.palette().profile.map(function (h) {  /* the viewer's own state colours */
    return [1, 3, 5].map(function (i) { return parseInt(h.slice(i, i + 2), 16); });
  });
  var x0 = Math.floor(fx), n = Math.max(1, Math.round(fw)), d = c.getImageData(x0, y, n, 1).data, out = [];
  for (var i = 0; i < n; i++) {
    var best = -1, bd = 1e9;
    for (var s = 0; s < pal.length; s++) {
      var e = Math.abs(d[4*i]-pal[s][0]) + Math.abs(d[4*i+1]-pal[s][1]) + Math.abs(d[4*i+2]-pal[s][2]);
      if (e < bd) { bd = e; best = s; }
    }
    out.push(bd < 60 ? best : -1);
  }
  return out;
})(%f, %f, %d)"""


@pytest.fixture(scope="module")
def page():
    for _ in range(4):  # measured again when a busy machine kept the threads from overlapping
        barrier, done = threading.Barrier(3), [0, 0]
        with giltracer.trace(backend="hooks", sched=False) as t:
            ts = [threading.Thread(target=worker, args=(barrier, i, done), name=f"w{i}") for i in range(2)]
            for th in ts:
                th.start()
            # On distinct CPUs, so that other load cannot keep them apart; pinned from
            # here: a thread pinning itself holds the GIL while it migrates, and on a loaded
            # machine the GIL wait that caused could outweigh fib's.
            for i, th in enumerate(ts):
                pin_to_own_cpu(i, th.native_id)
            barrier.wait()
            for th in ts:
                th.join()
        node = known_node(t)
        if node.states["waiting"] >= 0.2 * node.total_ns:
            break
    with saved_page(t, "giltracer-browser-", tab="profile") as (_, p):
        yield t, p


def known_node(t):
    (w,) = t.profile().find("worker")
    (node,) = [c for c in w.children if c.name == "fib"]
    return node


def frame(p, name, context=False):
    frames = [f for f in p.js("gtViewer.profileFrames()") if f["name"] == name and f["context"] == context]
    return max(frames, key=lambda f: f["w"]) if frames else None


def test_profile_tab_renders_without_errors(page):
    t, p = page
    assert p.js("!document.getElementById('gt-tab-profile').hidden")  # opened on Profile
    assert p.js("document.querySelector('.gt-tab.on').dataset.tab") == "profile"
    assert p.js("gtViewer.profileFrames().length") > 5
    legend = p.js("document.getElementById('gt-pflegend').textContent")
    # no OS states (sched=False): held is one state
    assert "held (OS states not recorded)" in legend and "waiting for the GIL" in legend
    assert "released" in legend and "held off CPU" not in legend
    assert not p.errors, p.errors


def test_known_frame_segments_match_the_numbers(page):
    t, p = page
    node, root = known_node(t), t.profile()
    fr = frame(p, "worker")
    width = frame(p, p.js("gtViewer.profileZoom()"))["w"]  # the root: the whole width
    fib_frame = [f for f in p.js("gtViewer.profileFrames()")
                 if f["name"] == "fib" and f["row"] == fr["row"] + 1 and not f["context"]]
    assert fib_frame
    ff = max(fib_frame, key=lambda f: f["w"])
    expect_w = node.total_ns / root.total_ns * width
    assert abs(ff["w"] - expect_w) <= 2, (ff["w"], expect_w)
    pixels = p.js(READ_ROW % (ff["x"], ff["w"], ff["y"] + 2))
    for s, state in enumerate(STATES[:4]):
        expect = node.states[state] / node.total_ns * expect_w
        drawn = sum(1 for v in pixels if v == s)
        assert abs(drawn - expect) <= 2, (state, drawn, expect, node.states)
    assert sum(1 for v in pixels if v == 2) > 20  # the two threads waited for each other


def test_click_zooms_into_the_frame(page):
    t, p = page
    fr = frame(p, "worker")
    (caller,) = [f["name"] for f in p.js("gtViewer.profileFrames()")  # Thread.run (run before 3.11)
                 if f["row"] == fr["row"] - 1 and f["x"] <= fr["x"] + 1 and f["x"] + f["w"] >= fr["x"] + fr["w"] - 1]
    box = p.js("(function(){var b=document.getElementById('gt-pfcv').getBoundingClientRect();"
               "return [b.left, b.top];})()")
    p.click(box[0] + fr["x"] + fr["w"] / 2, box[1] + fr["y"] + fr["h"] / 2)
    p.wait_for("gtViewer.profileZoom() === 'worker'", timeout=10)
    zoomed = frame(p, "worker")
    width = p.js("document.getElementById('gt-pfcv').clientWidth")
    assert zoomed["x"] == 0 and abs(zoomed["w"] - width) <= 2  # it fills the width now
    assert frame(p, caller, context=True)  # its callers stay above, as context
    crumbs = p.js("document.getElementById('gt-pfcrumbs').textContent")
    assert "worker" in crumbs and caller in crumbs
    p.js("document.querySelector('.gt-crumb').click()")  # the breadcrumb leads back
    assert p.js("gtViewer.profileZoom()") != "worker"
    assert not p.errors, p.errors


def test_state_filter_and_sandwich(page):
    t, p = page
    p.js("var s=document.getElementById('gt-pfstate'); s.value='2'; s.dispatchEvent(new Event('change'))")
    fr = frame(p, "worker")
    assert fr and all(seg[0] == 2 for seg in fr["split"])  # sized and coloured by waiting only
    p.js("var s=document.getElementById('gt-pfstate'); s.value='-1'; s.dispatchEvent(new Event('change'))")
    fr = frame(p, "fib")
    box = p.js("(function(){var b=document.getElementById('gt-pfcv').getBoundingClientRect();"
               "return [b.left, b.top];})()")
    p.click(box[0] + fr["x"] + fr["w"] / 2, box[1] + fr["y"] + fr["h"] / 2)
    p.js("document.getElementById('gt-pfsand').click()")
    names = [f["name"] for f in p.js("gtViewer.profileFrames()")]
    assert "worker" in names and "fib" in names  # a caller above, the function below
    assert "Sandwich of" in p.js("document.getElementById('gt-pfcrumbs').textContent")
    p.js("document.getElementById('gt-pfsand').click()")
    assert not p.errors, p.errors


def test_top_functions_gain_the_split(page):
    t, p = page
    p.js("gtViewer.showTab('top')")
    heads = p.js("Array.from(document.querySelectorAll('#gt-top th')).map(function(h){return h.textContent})")
    # (A free-threaded build's names: no GIL, its states are running / parked.)
    caused = "Parked time caused" if t.free_threaded else "GIL wait caused"
    for h in ("Running", "Parked" if t.free_threaded else "Waiting", "Released", caused):
        assert any(x.startswith(h) for x in heads), heads
    p.js("Array.from(document.querySelectorAll('#gt-top th')).find(function(h){"
         f"return h.textContent.startsWith('{caused}')}}).click()")
    first = p.js("document.querySelector('#gt-top tbody tr td').textContent")
    assert first == "fib"  # the function the other thread waited on
    p.js("gtViewer.showTab('profile')")
    assert not p.errors, p.errors
