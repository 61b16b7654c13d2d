"""A free-threaded trace in the viewer (headless Chromium): the banner says there is no GIL
and that lock contention is shown, the thread table, the legend, the blame tab and the
Profile legend speak of running / parked, and the page runs without console errors.
The trace is the park probe's on this build (GILTRACER_TEST_PARK=1, tests/test_park.py)."""

import os
import shutil
import tempfile

import pytest

from test_profile_tab import CHROMIUM, Page  # noqa: F401  (skips without chromium)
from workloads import park_lock_trace

pytestmark = pytest.mark.skipif(not CHROMIUM, reason="no chromium (apt-get install chromium)")


@pytest.fixture(scope="module")
def page():
    t = park_lock_trace()
    d = tempfile.mkdtemp(prefix="giltracer-browser-")
    p = Page("file://" + t.save(os.path.join(d, "p.html")), os.path.join(d, "chromium"))
    yield t, p
    p.close()
    shutil.rmtree(d, ignore_errors=True)


def text(p, element_id):
    return p.js(f"document.getElementById('{element_id}').textContent")


def test_the_page_says_no_gil_and_shows_lock_contention(page):
    t, p = page
    assert "free-threaded build: no GIL; showing lock contention" in text(p, "gt-banners")
    summary = text(p, "gt-summary")
    assert all(w in summary for w in ("Running", "Parked", "Parks", "Woken mostly by")), summary
    assert "Held" not in summary
    assert "parked (lock contention)" in text(p, "gt-legend")
    blame = text(p, "gt-blame")
    assert "Woken by" in blame and "app-" in blame, blame
    p.js("document.querySelector('.gt-tab[data-tab=profile]').click()")
    p.wait_for("document.getElementById('gt-pflegend').textContent.length > 0")
    legend = text(p, "gt-pflegend")
    assert "parked" in legend and "waiting for the GIL" not in legend, legend
    assert not p.errors, p.errors
