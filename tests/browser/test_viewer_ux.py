"""The timeline's notebook experience in headless Chromium (DevTools protocol): frames
outside the traced code fold into the trace's root span and unfold with the toggle, idle
threads fold into one row, the tooltip shows a call's GIL split (checked against
t.spans / t.gil_intervals), a plain wheel does not zoom, keys work without a click, the
dark theme renders dark, and the console stays clean."""

import base64
import os
import shutil
import tempfile
import threading
import time

import pytest

import giltracer
from giltracer.magics import run_traced

from devtools import png_pixels  # noqa: F401  (test_jupyterlab takes it from here)
from test_profile_tab import CHROMIUM, Page, worker  # noqa: F401  (skips without chromium)

pytestmark = pytest.mark.skipif(not CHROMIUM, reason="no chromium (apt-get install chromium)")

TITLE = "%%giltracer cell"
IDLE = ("idle-a", "idle-b", "idle-c")
CLIPPED_START = 1


def workload():
    barrier, done = threading.Barrier(2), [0, 0]
    ts = [threading.Thread(target=worker, args=(barrier, i, done), name=f"w{i}") for i in range(2)]
    for th in ts:
        th.start()
    for th in ts:
        th.join()


def traced():
    """A trace run the way %%giltracer runs a cell, with three threads idle throughout."""
    release = threading.Event()
    idlers = [threading.Thread(target=release.wait, name=n) for n in IDLE]
    for th in idlers:
        th.start()
    t = giltracer.Trace(backend="hooks", sched=False, title=TITLE)
    try:
        _, error = run_traced(t, workload)
    finally:
        release.set()
        for th in idlers:
            th.join()
    assert error is None
    return t


def luminance(rows):
    """Median relative luminance (0..255) of a screenshot: its background, whatever is drawn on it."""
    values = sorted(0.2126 * r + 0.7152 * g + 0.0722 * b for row in rows for r, g, b in row)
    return values[len(values) // 2]


@pytest.fixture(scope="module")
def trace_dir():
    t = traced()
    d = tempfile.mkdtemp(prefix="giltracer-ux-")
    yield t, d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def page(trace_dir):
    t, d = trace_dir
    p = Page("file://" + t.save(os.path.join(d, "light.html"), theme="light"), os.path.join(d, "chromium"))
    yield t, p
    p.close()


def lanes(p):
    return {lane["name"]: lane for lane in p.js("gtViewer.lanes()")}


def leading_clipped(t):
    """How many depths of the main thread's spans were all open when the trace started."""
    spans = t.spans(threading.main_thread())
    depth = 0
    while any(s[3] == depth for s in spans) and all(s[4] & CLIPPED_START for s in spans if s[3] == depth):
        depth += 1
    return depth, spans


def test_outer_frames_fold_into_the_root_span_and_unfold(page):
    t, p = page
    outer, spans = leading_clipped(t)
    assert outer >= 2  # pytest's own frames were open when the trace started
    main = lanes(p)["MainThread"]
    assert main["outer"] == outer
    assert main["rows"][0] == [TITLE]  # one root span named after the cell
    assert "workload" in main["rows"][1]  # the traced code right below it
    assert p.js("document.getElementById('gt-scope').textContent") == "Show outer frames"
    p.js("document.getElementById('gt-scope').click()")
    main = lanes(p)["MainThread"]
    assert main["rows"][0] == [s[2] for s in spans if s[3] == 0]  # pytest's frames are back
    assert "workload" in main["rows"][outer]
    p.js("document.getElementById('gt-scope').click()")
    assert lanes(p)["MainThread"]["rows"][0] == [TITLE]
    assert not p.errors, p.errors


def test_idle_threads_fold_into_one_row(page):
    t, p = page
    ls = p.js("gtViewer.lanes()")
    idle = [lane["name"] for lane in ls if lane["idle"]]
    assert set(IDLE) <= set(idle), idle  # the test process may have idle threads of its own
    assert all(lane["hidden"] and lane["h"] == 0 for lane in ls if lane["idle"])  # no lane
    # main thread first, then the busy ones (among this test's threads: the test process
    # may run others, e.g. one ending during the trace, ranked by their GIL time too)
    ours = [lane["name"] for lane in ls if lane["name"] in ("MainThread", "w0", "w1") + IDLE]
    assert ours[0] == "MainThread" and set(ours[1:3]) == {"w0", "w1"}, ours
    row = p.js("document.getElementById('gt-idlerow').textContent")
    assert row.startswith(f"\u25b8 {len(idle)} background threads") and all(n in row for n in IDLE)
    hidden = p.js("Array.from(document.querySelectorAll('#gt-summary tbody tr')).filter("
                  "function(r){return r.hidden}).map(function(r){return r.firstChild.textContent})")
    assert sorted(hidden) == sorted(idle)
    p.js("document.getElementById('gt-idlerow').click()")
    assert not any(lane["hidden"] for lane in p.js("gtViewer.lanes()"))
    p.js("document.getElementById('gt-idlerow').click()")
    assert not p.errors, p.errors


def profile_names(p, root_only=False):
    p.js("gtViewer.showTab('profile')")
    frames = p.js("gtViewer.profileFrames()")
    return [f["name"] for f in frames if not root_only or f["row"] == 1]


def top_rows(p):
    p.js("gtViewer.showTab('top')")
    return p.js("Array.from(document.querySelectorAll('#gt-top tbody tr')).map("
                "function(r){return [r.children[0].textContent, r.children[2].textContent]})")


def test_profile_and_top_functions_fold_like_the_timeline(page):
    t, p = page
    assert p.js("gtViewer.scopeFolded()") is True
    # traced() was open when the trace started (giltracer's own frames are not recorded)
    first = profile_names(p, root_only=True)  # the root's children: the traced code's calls
    assert "workload" in first and not any(n.startswith("test_") or n == "traced" for n in first), first
    assert {r[1] for r in top_rows(p)}.isdisjoint(IDLE)
    assert "traced" not in {r[0] for r in top_rows(p)}
    p.js("gtViewer.scopeFolded(false)")
    assert "traced" in profile_names(p) and "traced" in {r[0] for r in top_rows(p)}
    p.js("gtViewer.scopeFolded(true)")
    assert "traced" not in profile_names(p)
    button = "document.getElementById('gt-background')"
    assert p.js(button + ".textContent") == "Show background threads"
    p.js(button + ".click()")
    assert set(IDLE) <= {r[1] for r in top_rows(p)}
    assert not any(lane["hidden"] for lane in p.js("gtViewer.lanes()"))
    p.js(button + ".click()")
    assert {r[1] for r in top_rows(p)}.isdisjoint(IDLE)
    p.js("gtViewer.showTab('timeline')")
    assert not p.errors, p.errors


def overlap(intervals, a, b, state):
    return sum(max(0, min(b, e) - max(a, s)) for s, e, st in intervals if st == state)


def test_tooltip_shows_the_gil_split_of_a_call(page):
    t, p = page
    (s0, e0, *_), = [s for s in t.spans("w0") if s[2] == "worker"]
    gil = t.gil_intervals("w0")
    expect = {"held": overlap(gil, s0, e0, "held"), "wait": overlap(gil, s0, e0, "wait"),
              "released": overlap(gil, s0, e0, "released")}
    assert expect["wait"] > 0  # the two workers contended
    others = {n: t.gil_intervals(n) for n in ("w1", "MainThread")}
    blame = {n: sum(overlap(iv, max(s0, a), min(e0, b), "held") for a, b, st in gil if st == "wait")
             for n, iv in others.items()}
    p.js("gtViewer.spanAt('w0', 'worker')")  # scrolls its lane into view
    time.sleep(0.3)  # let the scroll event (which hides tooltips) pass
    where = p.js("gtViewer.spanAt('w0', 'worker')")
    assert where and where["visible"]
    assert where["end"] - where["start"] == e0 - s0
    p.call("Input.dispatchMouseEvent", type="mouseMoved", x=where["x"], y=where["y"])
    p.wait_for("!document.getElementById('gt-tip').hidden", timeout=10)
    shown = p.js("Object.fromEntries(Array.from(document.querySelectorAll('#gt-tip td[data-key]')).map("
                 "function(td){return [td.dataset.key, +td.dataset.ns]}))")
    for key, ns in expect.items():
        assert abs(shown[key] - ns) <= 2, (key, shown, expect)
    tip = p.js("document.getElementById('gt-tip').innerText")
    assert tip.startswith("worker") and "self" in tip and "waiting for the GIL" in tip
    holder = p.js("document.querySelector('#gt-tip [data-holder]').dataset.holder")
    assert holder == max(blame, key=blame.get)
    assert not p.errors, p.errors


def plot_point(p):
    return p.js("(function(){var b=document.getElementById('gt-ov').getBoundingClientRect();"
                "return [b.left + b.width * 0.6, b.top + 120];})()")


def test_a_plain_wheel_does_not_zoom(page):
    t, p = page
    p.js("gtViewer.view(0, 1e18)")  # the whole trace
    time.sleep(0.1)
    x, y = plot_point(p)
    full = p.js("gtViewer.range()")
    p.call("Input.dispatchMouseEvent", type="mouseWheel", x=x, y=y, deltaX=0, deltaY=300)
    time.sleep(0.2)
    assert p.js("gtViewer.range()") == full
    p.call("Input.dispatchMouseEvent", type="mouseWheel", x=x, y=y, deltaX=0, deltaY=-300, modifiers=2)  # ctrl
    p.wait_for(f"gtViewer.range()[1] - gtViewer.range()[0] < {(full[1] - full[0]) * 0.9}", timeout=10)
    zoomed = p.js("gtViewer.range()")
    p.call("Input.dispatchMouseEvent", type="mouseWheel", x=x, y=y, deltaX=0, deltaY=200, modifiers=8)  # shift
    p.wait_for(f"gtViewer.range()[0] !== {zoomed[0]}", timeout=10)
    panned = p.js("gtViewer.range()")
    assert abs((panned[1] - panned[0]) - (zoomed[1] - zoomed[0])) < 1e-6 * (zoomed[1] - zoomed[0]) + 1
    assert not p.errors, p.errors


def test_keys_work_with_the_pointer_over_the_lanes(page):
    t, p = page
    p.js("gtViewer.view(0, 1e18); document.activeElement && document.activeElement.blur()")
    full = p.js("gtViewer.range()")
    x, y = plot_point(p)
    p.call("Input.dispatchMouseEvent", type="mouseMoved", x=x - 40, y=y + 200)
    p.call("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)  # no click
    p.wait_for("document.activeElement && document.activeElement.id === 'gt-tl'", timeout=10)  # it took the focus
    for key, code, mods in (("W", "KeyW", 8), ("w", "KeyW", 0)):  # either case
        before = p.js("gtViewer.range()")
        p.call("Input.dispatchKeyEvent", type="keyDown", key=key, code=code, text=key, modifiers=mods)
        p.call("Input.dispatchKeyEvent", type="keyUp", key=key, code=code, modifiers=mods)
        p.wait_for(f"gtViewer.range()[1] - gtViewer.range()[0] < {(before[1] - before[0]) * 0.9}", timeout=10)
    assert p.js("gtViewer.range()[1] - gtViewer.range()[0]") < (full[1] - full[0]) * 0.5
    p.call("Input.dispatchKeyEvent", type="keyDown", key="?", code="Slash", text="?", modifiers=8)
    p.wait_for("!document.getElementById('gt-keys').hidden", timeout=10)
    assert "zoom" in p.js("document.getElementById('gt-keys').textContent")
    p.call("Input.dispatchKeyEvent", type="keyDown", key="Escape", code="Escape")
    p.wait_for("document.getElementById('gt-keys').hidden", timeout=10)
    assert not p.errors, p.errors


def test_profile_states_share_the_gil_palette(page):
    t, p = page
    pal = p.js("gtViewer.palette()")
    held, wait, released = pal["gil"][2], pal["gil"][1], pal["gil"][0]
    assert pal["profile"][0] == held and pal["profile"][2] == wait and pal["profile"][3] == released


def test_dark_theme_renders_dark(trace_dir):
    t, d = trace_dir
    shots = {}
    for theme in ("light", "dark"):
        p = Page("file://" + t.save(os.path.join(d, f"{theme}-2.html"), theme=theme), os.path.join(d, f"chromium-{theme}"))
        try:
            assert p.js("gtViewer.theme().name") == theme
            assert p.js("document.documentElement.dataset.gtTheme") == theme
            w, h, rows = png_pixels(base64.b64decode(p.call("Page.captureScreenshot", format="png")["data"]))
            shots[theme] = luminance(rows)
            assert not p.errors, p.errors
        finally:
            p.close()
    assert shots["dark"] < 60 and shots["light"] > 200, shots


def test_gil_handoffs_are_drawn_as_arrows(page):
    t, p = page
    p.js("gtViewer.view(0, 1e18)")
    p.js("gtViewer.redraw()")
    # Every shown thread's holds: besides the workers, other threads of this process (e.g.
    # a harness thread draining Chromium's stderr) may take the GIL during the trace; the
    # background ones among them are folded, and no arrow goes to a folded lane.
    held = sorted((s, e, th.tid) for th in t.threads if not th.background
                  for s, e, st in t.gil_intervals(th.tid) if st == "held")
    if len(held) > 200 or len(held) * 8 > p.js("gtViewer.plotWidth()"):
        pytest.skip("too many GIL turns to draw at this width")  # the viewer draws none then
    expect = sum(1 for a, b in zip(held, held[1:]) if a[2] != b[2] and a[1] <= b[0] + 1)
    assert expect > 0
    assert p.js("gtViewer.handoffs()") == expect
    assert not p.errors, p.errors


SCRIPT = """import threading
def spin(n):
    return sum(i * i for i in range(n))
ts = [threading.Thread(target=spin, args=(50_000,)) for _ in range(2)]
for t in ts: t.start()
for t in ts: t.join()
"""


def test_the_cli_folds_its_runpy_frames(tmp_path):
    import subprocess
    import sys

    script, out = tmp_path / "two.py", tmp_path / "two.html"
    script.write_text(SCRIPT)
    subprocess.run([sys.executable, "-m", "giltracer", "--backend", "hooks", "--no-sched", "-o", str(out),
                    str(script)], check=True, cwd=tmp_path, stdout=subprocess.DEVNULL, timeout=120)
    p = Page("file://" + str(out), str(tmp_path / "chromium"))
    try:
        main = lanes(p)["MainThread"]
        title = p.js("document.getElementById('gt-title').textContent")
        assert main["rows"][0] == [title] and main["rows"][1] == ["<module>"]  # the script, right below
        p.js("gtViewer.scopeFolded(false)")
        unfolded = lanes(p)["MainThread"]["rows"]
        # runpy's frames of `python -m giltracer` are back
        assert any("_run_module_as_main" in row for row in unfolded) and len(unfolded) > len(main["rows"])
        assert not p.errors, p.errors
    finally:
        p.close()
