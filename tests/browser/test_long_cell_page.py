"""A trace past max_events in headless Chromium: the page loads with a clean console, says
what changed form (calls in call trees, GIL and OS strips coalesced), draws the coalesced
GIL strip, and its Profile counts every call."""

import os
import shutil
import tempfile
import threading
import time
import warnings

import pytest

import giltracer

from test_profile_tab import CHROMIUM, Page

pytestmark = pytest.mark.skipif(not CHROMIUM, reason="no chromium (apt-get install chromium)")

OUTER, INNER = 40, 1000


def leaf(i):
    return i


def middle():
    for i in range(INNER):
        leaf(i)
    for _ in range(100):
        time.sleep(0)  # GIL handoffs: past the GIL budget too


def worker():
    for _ in range(OUTER):
        middle()


@pytest.fixture(scope="module")
def page():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with giltracer.trace(backend="hooks", c_calls=False, max_events=3000) as t:
            th = threading.Thread(target=worker, name="the-worker")
            th.start()
            th.join()
    assert t.result.calls_aggregated and t.result.gil_aggregated
    d = tempfile.mkdtemp(prefix="giltracer-long-")
    p = Page("file://" + t.save(os.path.join(d, "long.html")), os.path.join(d, "chromium"))
    yield t, p
    p.close()
    shutil.rmtree(d, ignore_errors=True)


def test_the_page_says_what_changed_form(page):
    t, p = page
    text = p.js("document.getElementById('gt-banners').innerText")
    assert "max_events reached: the timeline shows the calls recorded until then" in text, text
    assert "were aggregated" in text and "coalesced" in text, text
    assert not p.errors, p.errors


def test_the_profile_tab_counts_every_call(page):
    t, p = page
    rows = {r.name: r for r in t.functions("the-worker")}
    assert rows["leaf"].calls == OUTER * INNER
    p.js("gtViewer.showTab('profile')")
    p.wait_for("document.getElementById('gt-pfcv') !== null")
    assert not p.errors, p.errors
