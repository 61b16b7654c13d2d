"""The viewer's "What if" tab in headless Chromium: a page made by the core, with a known
payload["what_if"] put into its payload (the contract with the model, core/viewer/README.md),
shows the headline, the per-thread bars, the functions table and the assumptions with those
numbers; a page without what_if (an older trace), or with what_if null (no GIL data), has no
such tab."""

import decimal
import json
import os
import shutil
import tempfile
import threading

import pytest

import giltracer
import pagedata

from test_profile_tab import CHROMIUM, Page, saved_page  # the DevTools harness (same directory)

pytestmark = pytest.mark.skipif(not CHROMIUM, reason="no chromium (apt-get install chromium)")

WHAT_IF = {
    "cpus": 4, "ft_factor": 1.25, "parallel_speed": 0.8, "measured_wall_s": 1.2, "predicted_wall_s": 0.6, "speedup": 2.0,
    "threads": [
        {"tid": 101, "name": "w0", "measured_s": 1.2, "predicted_s": 0.6, "gil_wait_s": 0.5},
        {"tid": 102, "name": "w1", "measured_s": 0.8, "predicted_s": 0.4, "gil_wait_s": 0.2},
    ],
    "functions": [
        {"name": "fib", "file": "/x/demo.py", "line": 3, "gil_wait_caused_s": 0.7,
         "release_predicted_wall_s": 0.75, "release_speedup": 1.6},
        {"name": "crunch", "file": "/x/other.py", "line": 42, "gil_wait_caused_s": 0.003,
         "release_predicted_wall_s": 1.19, "release_speedup": 1.0084},
    ],
    "assumptions": ["threads keep their order of work", "a <b> & c stays text"],
}


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def worker(barrier):
    barrier.wait()
    for _ in range(20):
        fib(12)


def with_payload(html, change):
    """The page with its JSON payload changed by `change(dict)`, written back escaped as the
    core writes it (`<`, `>`, `&` as \\u escapes)."""
    data = pagedata.data(html)
    change(data)
    return pagedata.with_data(html, data)


@pytest.fixture(scope="module")
def traced():
    """Two threads computing at once, traced (one trace for the module's pages)."""
    barrier = threading.Barrier(2)
    with giltracer.trace(backend="hooks", sched=False) as t:
        ts = [threading.Thread(target=worker, args=(barrier,), name=f"w{i}") for i in range(2)]
        for th in ts:
            th.start()
        for th in ts:
            th.join()
    return t


@pytest.fixture(scope="module")
def pages(traced):
    t = traced
    d = tempfile.mkdtemp(prefix="giltracer-whatif-")
    html = open(t.save(os.path.join(d, "page.html")), encoding="utf-8").read()
    plain = os.path.join(d, "plain.html")  # an older trace: no what_if (a build with the model writes one)
    with open(plain, "w", encoding="utf-8") as f:
        f.write(with_payload(html, lambda data: data.pop("what_if", None)))

    def add(data):
        data["what_if"] = WHAT_IF
        data["view"] = "whatif"
    injected = os.path.join(d, "whatif.html")
    with open(injected, "w", encoding="utf-8") as f:
        f.write(with_payload(html, add))
    null = os.path.join(d, "null.html")  # the model's answer without GIL data
    with open(null, "w", encoding="utf-8") as f:
        f.write(with_payload(html, lambda data: data.update(what_if=None, view="whatif")))
    yield d, plain, injected, null
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def page(pages):
    d, _, injected, _ = pages
    p = Page("file://" + injected, os.path.join(d, "chromium"))
    yield p
    p.close()


def pct(frac):
    """A fraction as the % of a CSS width (which the browser keeps to about 4 decimals)."""
    return pytest.approx(100 * frac, abs=0.01)


def text(p, sel):
    return p.js("Array.from(document.querySelectorAll(%s)).map(function(e){return e.textContent})" % json.dumps(sel))


def test_the_tab_opens_with_the_headline(page):
    p = page
    assert p.js("document.querySelector('.gt-tab.on').dataset.tab") == "whatif"  # view: whatif
    assert p.js("!document.querySelector('.gt-tab[data-tab=whatif]').hidden")
    assert p.js("!document.getElementById('gt-tab-whatif').hidden")
    assert p.js("document.getElementById('gt-tab-timeline').hidden")
    head = p.js("document.getElementById('gt-wihead').textContent")
    assert "Measured 1.20 s \u2192 predicted 600 ms without the GIL on 4 CPUs: 2.00\u00d7 speed-up" in head, head
    assert "cost factor 1.25\u00d7; each CPU at 0.80 of its speed alone with all busy)" in head, head
    assert not p.errors, p.errors


def cells(p, table):
    """The text of each cell of each body row of `table` (a CSS selector)."""
    return p.js("Array.from(document.querySelectorAll('" + table + " tbody tr')).map(function(tr){"
                "return Array.from(tr.cells).map(function(c){return c.textContent.trim()})})")


def test_per_thread_bars_measured_and_predicted(page):
    p = page
    rows = cells(p, "#gt-withreads")
    assert rows == [["w0", "1.20 s", "600 ms", "2.00\u00d7", "500 ms"],
                    ["w1", "800 ms", "400 ms", "2.00\u00d7", "200 ms"]], rows
    # bar lengths on one scale (the longest, w0 measured, 1.2 s): segment widths in % of the bar
    widths = p.js("Array.from(document.querySelectorAll('#gt-withreads tbody tr')).map(function(tr){"
                  "return Array.from(tr.querySelectorAll('.gt-wibar')).map(function(b){"
                  "return Array.from(b.children).map(function(i){return [i.className, parseFloat(i.style.width)]})})})")
    (w0m, w0p), (w1m, w1p) = widths
    assert [c for c, _ in w0m] == ["gt-b2", "gt-b1"] and [c for c, _ in w0p] == ["gt-b2"]
    assert w0m[0][1] == pct(0.7 / 1.2) and w0m[1][1] == pct(0.5 / 1.2)
    assert w0p[0][1] == pct(0.5)
    assert w1m[0][1] == pct(0.6 / 1.2) and w1m[1][1] == pct(0.2 / 1.2)
    assert w1p[0][1] == pct(0.4 / 1.2)
    # drawn lengths follow: the predicted bar of w0 is half the measured one
    px = p.js("Array.from(document.querySelectorAll('#gt-withreads tbody tr')[0].querySelectorAll('.gt-wibar'))"
              ".map(function(b){var s=0;Array.from(b.children).forEach(function(i){s+=i.getBoundingClientRect().width});return s})")
    assert px[1] == pytest.approx(px[0] / 2, abs=1.5), px


def test_functions_table_if_released(page):
    p = page
    rows = cells(p, "#gt-wifuncs")
    assert rows == [["fib", "demo.py:3", "700 ms", "750 ms", "1.60\u00d7"],
                    ["crunch", "other.py:42", "3.00 ms", "1.19 s", "1.01\u00d7"]], rows
    assert p.js("document.querySelector('#gt-wifuncs tbody td').title") == "/x/demo.py:3"
    heads = text(p, "#gt-wifuncs th")
    assert heads[0] == "If this function released the GIL", heads


def test_assumptions_are_listed_as_text(page):
    p = page
    assert text(p, "#gt-wiassume li") == WHAT_IF["assumptions"]
    assert p.js("document.querySelector('#gt-wiassume b')") is None  # payload text is never HTML


def test_switching_tabs_hides_and_shows_it(page):
    p = page
    p.js("document.querySelector('.gt-tab[data-tab=timeline]').click()")
    assert p.js("document.getElementById('gt-tab-whatif').hidden")
    p.js("document.querySelector('.gt-tab[data-tab=whatif]').click()")
    assert p.js("!document.getElementById('gt-tab-whatif').hidden")
    assert not p.errors, p.errors


@pytest.mark.parametrize("which", ["absent", "null"])
def test_without_what_if_the_tab_is_hidden(pages, which):
    d, plain, _, null = pages
    p = Page("file://" + (plain if which == "absent" else null), os.path.join(d, "chromium-" + which))
    try:
        assert p.js("document.querySelector('.gt-tab[data-tab=whatif]').hidden")
        assert p.js("getComputedStyle(document.querySelector('.gt-tab[data-tab=whatif]')).display") == "none"
        assert p.js("document.getElementById('gt-tab-whatif').hidden")
        assert p.js("document.querySelector('.gt-tab.on').dataset.tab") == "timeline"
        assert not p.errors, p.errors
    finally:
        p.close()


# ---- a real trace: the model's own what_if (skipped in a build without it)

def to_fixed(v, digits):
    """JavaScript's Number.prototype.toFixed: the exact double rounded half up (Python's
    format rounds an exact tie to even: 3.625 -> 3.62 where JS writes 3.63)."""
    q = decimal.Decimal(1).scaleb(-digits)
    return str(decimal.Decimal(v).quantize(q, rounding=decimal.ROUND_HALF_UP))


def fmt_dur(ns):
    """The viewer's fmtDur (decode.js), for the numbers the page shows."""
    def sig(v):
        a = abs(v)
        return to_fixed(v, 0) if a >= 100 else to_fixed(v, 1) if a >= 10 else to_fixed(v, 2)
    a = abs(ns)
    if a < 1e3:
        return f"{round(ns)} ns"
    if a < 1e6:
        return sig(ns / 1e3) + " \u00b5s"
    if a < 1e9:
        return sig(ns / 1e6) + " ms"
    return sig(ns / 1e9) + " s"


@pytest.fixture(scope="module")
def real(traced):
    t = traced
    with saved_page(t, "giltracer-whatif-real-", tab="whatif") as (path, p):  # opens on it
        data = pagedata.data(open(path, encoding="utf-8").read())
        assert data.get("what_if"), "a build with t.what_if writes payload['what_if'] for a trace with the GIL"
        yield data["what_if"], p


def test_real_trace_shows_the_models_numbers(real):
    W, p = real
    assert p.js("!document.querySelector('.gt-tab[data-tab=whatif]').hidden")
    assert p.js("!document.getElementById('gt-tab-whatif').hidden")  # save(tab="whatif")
    p.js("gtViewer.showTab('whatif')")
    head = p.js("document.getElementById('gt-wihead').textContent")
    cpus = f"{W['cpus']} CPU" + ("" if W["cpus"] == 1 else "s")
    assert (f"Measured {fmt_dur(W['measured_wall_s'] * 1e9)} \u2192 predicted {fmt_dur(W['predicted_wall_s'] * 1e9)}"
            f" without the GIL on {cpus}: {to_fixed(W['speedup'], 2)}\u00d7 speed-up") in head, (head, W)
    assert W["parallel_speed"] == 1.0 and "speed alone" not in head, head  # the default: not said
    names = p.js("Array.from(document.querySelectorAll('#gt-withreads tbody tr td:first-child')).map(function(c){return c.textContent})")
    assert names == [str(t["name"]) for t in W["threads"]]
    fnames = text(p, "#gt-wifuncs tbody tr:not(.gt-empty) td:first-child")
    assert fnames == [str(f["name"]) for f in W["functions"]]
    assert text(p, "#gt-wiassume li") == [str(a) for a in W["assumptions"]] and W["assumptions"]
    assert not p.errors, p.errors
