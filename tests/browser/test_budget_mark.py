"""The budget mark in headless Chromium: where a thread's recorded calls end
(max_events reached), the payload carries the time and the timeline draws a mark saying
the calls past it are in the Profile and Top functions only."""

import threading
import time
import warnings

import pytest

import giltracer

from test_profile_tab import CHROMIUM, saved_page

pytestmark = pytest.mark.skipif(not CHROMIUM, reason="no chromium (apt-get install chromium)")

CALLS = 20000  # far past the budget
BUDGET = 3000
SLEEP_S = 0.3  # after the calls: entirely past the cut


def leaf(i):
    return i


def worker():
    for i in range(CALLS):
        leaf(i)
    time.sleep(SLEEP_S)


@pytest.fixture(scope="module")
def page():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with giltracer.trace(backend="hooks", c_calls=False, max_events=BUDGET) as t:
            th = threading.Thread(target=worker, name="the-worker")
            th.start()
            th.join()
    assert t.result.calls_aggregated, "the budget was not spent: the test proves nothing"
    with saved_page(t, "giltracer-cut-") as (path, p):
        yield open(path, encoding="utf-8").read(), p


def test_the_payload_carries_the_cut(page):
    import pagedata

    html, p = page
    th = {t["name"]: t for t in pagedata.payload(html)["threads"]}["the-worker"]
    cut = th.get("calls_cut")
    # The budget ran out during the calls, before the sleep that ends the thread.
    assert cut is not None and th["start"] < cut < th["end"] - SLEEP_S * 1e9 * 0.9, th
    # The timeline's calls end there: every recorded span of the thread ends by the cut.
    sp = th["spans"]
    ends = [s + d for s, d in zip(sp["start"], sp["dur"])]
    assert ends and max(ends) <= cut, (max(ends), cut)
    lane = {x["name"]: x for x in p.js("gtViewer.lanes()")}["the-worker"]
    assert lane["cut"] == cut, (lane["cut"], cut)
    assert not p.errors, p.errors


def test_the_timeline_marks_the_cut(page):
    _, p = page
    cuts = {c["name"]: c for c in p.js("gtViewer.cuts()")}
    assert "the-worker" in cuts, cuts
    c = cuts["the-worker"]
    assert c["text"] == "calls past here: in Profile/Top functions only", c
    assert 0 < c["x"] <= p.js("window.innerWidth"), c
    assert not p.errors, p.errors
