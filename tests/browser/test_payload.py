"""The page's compact payload (zlib-compressed binary columns, decoded by the browser's
DecompressionStream) in headless Chromium: every span and GIL interval the viewer lays
out equals the C core's, exactly, on a known two-thread trace."""

import os
import re
import threading
import time

import pytest

import giltracer
import pagedata

from test_profile_tab import CHROMIUM, Page, saved_page  # the DevTools harness (same directory)

pytestmark = pytest.mark.skipif(not CHROMIUM, reason="no chromium (apt-get install chromium)")


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def fails(k):
    raise ValueError(k)


def worker(barrier, out):
    barrier.wait()
    for k in range(30):
        fib(12)
        out.append(k)  # a C call
        try:
            fails(k)  # a span left by an exception
        except ValueError:
            pass


@pytest.fixture(scope="module")
def traced():
    barrier, out = threading.Barrier(2), []
    with giltracer.trace(backend="hooks", sched=False) as t:
        ts = [threading.Thread(target=worker, args=(barrier, out), name=f"w{i}") for i in range(2)]
        for th in ts:
            th.start()
        for th in ts:
            th.join()
    with saved_page(t, "giltracer-payload-") as (path, p):
        yield t, p, path


def test_the_page_carries_compressed_binary_columns(traced):
    t, p, path = traced
    html = open(path, encoding="utf-8").read()
    data = pagedata.data(html)
    assert data["version"] == 2
    assert all(set(th["spans"]) == {"n", "c"} for th in data["threads"])  # no JSON columns
    assert re.search(r'type="application/octet-stream" id="gt-bin">\s*[A-Za-z0-9+/=]{100,}\s*</script>', html)


def test_decoded_spans_equal_the_core_spans(traced):
    t, p, _ = traced
    assert p.js("gtPayload.threads()") == len(t.threads)
    checked = 0
    for i in range(len(t.threads)):
        got = p.js(f"gtPayload.thread({i})")
        t0 = int(got["t0"])
        want = sorted((s - t0, e - t0, name, depth, flags) for s, e, name, depth, flags in t.spans(got["tid"]))
        assert sorted(tuple(x) for x in got["spans"]) == want
        gil = [(a - t0, b - t0, s) for a, b, s in t.gil_intervals(got["tid"])]
        states = {"released": 0, "wait": 1, "held": 2}
        assert [tuple(x) for x in got["gil"]] == [(a, b, states[s]) for a, b, s in gil]
        checked += len(want)
    assert checked > 1000
    # the known trace has C calls (flag 8) and spans left by an exception (flag 4)
    w0 = p.js("gtPayload.thread(%d)" % next(i for i, th in enumerate(t.threads) if th.name == "w0"))
    assert any(s[2] == "fails" and s[4] & 4 for s in w0["spans"])
    assert any(s[4] & 8 for s in w0["spans"])
    assert not p.errors, p.errors


class FramePage(Page):
    """A Page that also reaches its out-of-process iframes (a sandboxed srcdoc frame has
    an opaque origin, so Chromium runs it in a process of its own): DevTools sessions."""

    def _event(self, msg):
        if msg.get("method") == "Target.attachedToTarget":
            info = msg["params"]["targetInfo"]
            if info["type"] == "iframe":
                self.__dict__.setdefault("frames", []).append(msg["params"]["sessionId"])
        elif msg.get("sessionId"):  # an event of a frame: only its errors matter
            super()._event({k: v for k, v in msg.items() if k != "sessionId"})
            return
        super()._event(msg)


def test_the_columns_unpack_in_a_worker_inside_the_notebooks_sandboxed_iframe(traced, tmp_path):
    """As a notebook shows it: the page in <iframe srcdoc sandbox="allow-scripts">, an
    opaque origin; the worker still runs there, and nothing logs an error."""
    t, _, _ = traced
    # data-gt-ready on the outer page only lets the harness start; the frame is checked below
    (tmp_path / "nb.html").write_text('<!DOCTYPE html><html data-gt-ready="outer"><body>' +
                                      t.display_bundle()["text/html"] + "</body></html>", encoding="utf-8")
    p = FramePage("file://" + str(tmp_path / "nb.html"), str(tmp_path / "chromium"))
    try:
        p.call("Target.setAutoAttach", autoAttach=True, waitForDebuggerOnStart=False, flatten=True)
        deadline, ready = time.time() + 60, None
        while ready is None and time.time() < deadline:
            for session in list(getattr(p, "frames", [])):
                try:
                    p.call("Runtime.enable", session)
                    p.call("Log.enable", session)
                    if p.js("document.documentElement.getAttribute('data-gt-ready')", session):
                        ready = session
                except RuntimeError:
                    pass
            time.sleep(0.1)
            p.js("1")  # let events arrive
        assert ready is not None, "the viewer in the iframe never got ready"
        assert p.js("gtViewer.perf.decodedIn", ready) == "worker"
        assert p.js("gtPayload.threads()", ready) == len(t.threads)
        assert p.js("document.getElementById('gt-errors').hidden", ready)
        assert not p.errors, p.errors
    finally:
        p.close()


def test_without_workers_the_page_unpacks_the_columns_itself(traced, tmp_path):
    t, _, path = traced
    page = open(path, encoding="utf-8").read()
    # a browser (or a policy) without workers: the page falls back to its own thread
    page = page.replace("<script>\n", "<script>\nwindow.Worker = undefined;\n", 1)
    (tmp_path / "noworker.html").write_text(page, encoding="utf-8")
    p = Page("file://" + str(tmp_path / "noworker.html"), str(tmp_path / "chromium"))
    try:
        assert p.js("gtViewer.perf.decodedIn") == "page"
        got = p.js("gtPayload.thread(0)")
        want = sorted((s - int(got["t0"]), e - int(got["t0"]), n, d, f) for s, e, n, d, f in t.spans(got["tid"]))
        assert sorted(tuple(x) for x in got["spans"]) == want
        assert not p.errors, p.errors
    finally:
        p.close()


def test_odd_spans_round_trip_through_the_page(traced, tmp_path):
    """Columns no tracer makes (a child before its parent, depth jumps, an end before its
    start, times far apart, no function): negative deltas take the escape; the page
    reads back what was written."""
    import pagedata

    t, _, path = traced
    page = open(path, encoding="utf-8").read()
    funcs = pagedata.payload(page)["funcs"]
    f = next(i for i, c in enumerate(funcs["c"]) if not c)  # a Python function
    odd = [(5000, 9000, f, 0, 0), (4000, 8000, f, 3, 0), (7000, 6000, f, 1, 0),
           (1 << 45, (1 << 45) + 1, -1, 2, 4), (0, 1 << 46, f, 0, 1), (3, 3, f, 40, 2)]
    (tmp_path / "odd.html").write_text(pagedata.with_spans(page, 0, odd), encoding="utf-8")
    p = Page("file://" + str(tmp_path / "odd.html"), str(tmp_path / "chromium"))
    try:
        got = sorted(tuple(x) for x in p.js("gtPayload.thread(0)")["spans"])
        name = funcs["name"][f]
        want = sorted((s, max(e, s), name if fn >= 0 else "(unknown function)", d, fl)
                      for s, e, fn, d, fl in odd)
        assert got == want
        assert not p.errors, p.errors
    finally:
        p.close()
