"""The viewer's Profile and Top functions tabs on a free-threaded trace (the park probe's,
GILTRACER_TEST_PARK=1 on a GIL build; tests/test_park.py) say what they show, running /
parked, and never "GIL"; a GIL trace's keep their GIL headings (headless Chromium)."""

import os
import shutil
import tempfile
import threading

import pytest

import giltracer
from test_profile_tab import CHROMIUM, Page  # noqa: F401  (skips without chromium)
from workloads import run_threads, spin

pytestmark = pytest.mark.skipif(not CHROMIUM, reason="no chromium (apt-get install chromium)")
FREE_THREADED = giltracer.api.FREE_THREADED


def traced(park):
    if park:
        os.environ["GILTRACER_TEST_PARK"] = "1"
    try:
        lock = threading.Lock()

        def body():
            for _ in range(40):
                with lock:
                    spin(3000)

        with giltracer.trace(sched=False) as t:
            run_threads([body] * 3, [f"app-{i}" for i in range(3)])
    finally:
        os.environ.pop("GILTRACER_TEST_PARK", None)
    return t


def open_page(t, d):
    os.makedirs(d)
    return Page("file://" + t.save(os.path.join(d, "p.html")), os.path.join(d, "chromium"))


def headings(p):
    """The texts of the Profile tab (its size-by choices and legend), the Top functions
    table's header (with its tooltips) and the blame tab's name and note."""
    p.js("document.querySelector('.gt-tab[data-tab=profile]').click()")
    p.wait_for("document.getElementById('gt-pflegend').textContent.length > 0")
    prof = p.js("Array.from(document.querySelectorAll('#gt-pfstate option, #gt-pflegend *'))"
                ".map(function (e) { return e.textContent + ' ' + (e.title || ''); }).join(' | ')")
    p.js("document.querySelector('.gt-tab[data-tab=top]').click()")
    p.wait_for("document.querySelectorAll('#gt-top th').length > 0")
    top = p.js("Array.from(document.querySelectorAll('#gt-top th'))"
               ".map(function (e) { return e.textContent + ' ' + (e.title || ''); }).join(' | ')")
    blame = p.js("document.querySelector('.gt-tab[data-tab=blame]').textContent + ' ' + "
                 "document.querySelector('#gt-tab-blame > .gt-muted').textContent")
    return prof, top, blame


@pytest.fixture(scope="module")
def pages():
    d = tempfile.mkdtemp(prefix="giltracer-browser-")
    out = {}
    try:
        for park in (True, False):
            if park or not FREE_THREADED:
                t = traced(park)
                assert t.free_threaded == (park or FREE_THREADED)
                p = open_page(t, os.path.join(d, str(park)))
                out[park] = (p, headings(p))
        yield out
    finally:
        for p, _ in out.values():
            p.close()
        shutil.rmtree(d, ignore_errors=True)


def test_free_threaded_headings_say_running_and_parked(pages):
    p, (prof, top, blame) = pages[True]
    for text in (prof, top, blame):
        assert "GIL" not in text, text
    assert "Parked" in top and "Running" in top and "Parked time caused" in top, top
    assert "parked" in prof and "running" in prof, prof
    assert blame.startswith("Contention blame"), blame
    assert not p.errors, p.errors


@pytest.mark.skipif(FREE_THREADED, reason="free-threaded build: no GIL")
def test_gil_headings_stay(pages):
    p, (prof, top, blame) = pages[False]
    assert "GIL wait caused" in top and "waiting for the GIL" in prof, (top, prof)
    assert blame.startswith("GIL blame"), blame
    assert not p.errors, p.errors
