"""The flight recorder's mark in headless Chromium: with keep="last" the
timeline says which window it shows ("last N events: from t=...") where a thread's kept
calls start, and shades what lies before it (those calls are in the Profile only)."""

import warnings

import pytest

import giltracer

from test_profile_tab import CHROMIUM, saved_page

pytestmark = pytest.mark.skipif(not CHROMIUM, reason="no chromium (apt-get install chromium)")

BUDGET = 3000


def leaf(i):
    return i


def run():
    for i in range(20000):  # far past the budget
        leaf(i)


@pytest.fixture(scope="module")
def page():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with giltracer.trace(backend="hooks", c_calls=False, max_events=BUDGET, keep="last") as t:
            run()
    assert t.result.calls_aggregated, "the budget was not spent: the test proves nothing"
    with saved_page(t, "giltracer-kept-") as (path, p):
        yield open(path, encoding="utf-8").read(), p


def test_the_timeline_marks_where_the_window_starts(page):
    import pagedata

    html, p = page
    th = {t["name"]: t for t in pagedata.payload(html)["threads"]}["MainThread"]
    kept = th.get("calls_kept_from")
    assert kept is not None and th["start"] < kept, th
    lane = {x["name"]: x for x in p.js("gtViewer.lanes()")}["MainThread"]
    assert lane["kept"] == kept, (lane["kept"], kept)
    marks = [c for c in p.js("gtViewer.cuts()") if c["name"] == "MainThread"]
    assert marks, p.js("gtViewer.cuts()")
    text = marks[0]["text"]
    assert text.startswith(f"last {BUDGET:,} events: from t=") and "Profile" in text, text
    assert 0 < marks[0]["x"] <= p.js("window.innerWidth"), marks[0]
    assert not p.errors, p.errors
