"""Lock-kind labels in the viewer (headless Chromium): on a free-threaded trace the THREADS
table has a stop-the-world column, and a parked interval's tooltip says what it waited
for. The trace is the park probe's on this build (GILTRACER_TEST_PARK=1, as
test_park_view.py); the lock-kind probe needs 3.14t as root (tests/test_ft_lock_kinds.py),
so its records are made here from the trace's own parks: LockKinds labels them, the page
carries them (Trace.save -> Result.set_lock_kinds -> the payload's "lock_kinds")."""

import os
import threading
import time

import pytest

import giltracer
import pagedata
from giltracer.lockkinds import F_OBJECT, F_SUSPENDED, GC_BEGIN, GC_END, PARK, PARK_RET, STW_BEGIN, STW_END, STW_GC, LockKinds
from test_profile_tab import CHROMIUM, Page  # noqa: F401  (skips without chromium)
from workloads import park_lock_trace

pytestmark = pytest.mark.skipif(not CHROMIUM, reason="no chromium (apt-get install chromium)")
CRIT = "critical section on list object"
APPS = ("app-0", "app-1", "app-2")


def spin(n):
    x = 0
    for i in range(n):
        x += i
    return x


def park_trace():
    return park_lock_trace()


def label_parks(t):
    """Probe records for each parked interval of the app threads: the one parked longest
    (STOPPED) stopped (suspended) inside a GC's stop-the-world window of another thread,
    the others parked on a list's per-object lock."""
    lk = LockKinds()
    lk.running, lk.reason = True, "lock kinds: test records"
    events, tids = [], {th.name: th.tid for th in t.threads}
    rows = {r.name: r for r in t.summary()}
    stopped = max(APPS, key=lambda n: rows[n].parked_ns)
    for name in APPS:
        tid = tids[name]
        for a, b, state in t.gil_intervals(tid):
            if state != "parked":
                continue
            events += [(a - 1, 0x1000, tid, PARK, F_SUSPENDED if name == stopped else F_OBJECT, "list"),
                       (b + 1, 0, tid, PARK_RET, 0, "")]
            if name == stopped:  # the stopper: a made-up tid that collects meanwhile
                events += [(a - 3, 0, 1, GC_BEGIN, 0, ""), (a - 2, 0, 1, STW_BEGIN, 0, ""),
                           (b + 2, 0, 1, STW_END, 0, ""), (b + 3, 0, 1, GC_END, 0, "")]
    lk._build(events)
    t._locks = lk
    return tids, stopped


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    t = park_trace()
    tids, stopped = label_parks(t)
    others = [n for n in APPS if n != stopped]
    d = tmp_path_factory.mktemp("lock-kinds")
    path = t.save(str(d / "p.html"))
    p = Page("file://" + path, str(d / "chromium"))
    yield t, tids, path, p, stopped, others
    p.close()


def test_the_payload_carries_the_labels_and_stop_the_world(page):
    t, tids, path, _, stopped, others = page
    with open(path, encoding="utf-8") as f:
        lk = pagedata.data(f.read())["lock_kinds"]
    assert lk["labelled"] and set(lk["labels"]) == {STW_GC, CRIT}, lk["labels"]
    rows = {r.name: r for r in t.summary()}
    for name in APPS:
        th = lk["threads"][str(tids[name])]
        assert th["stw_ns"] == rows[name].stop_the_world_ns
        assert dict(th["kinds"]) == rows[name].park_kinds
        assert len(th["parks"]["s"]) == sum(1 for *_, s in t.gil_intervals(name) if s == "parked")
    assert rows[stopped].stop_the_world_ns == rows[stopped].parked_ns > 0
    assert all(rows[n].stop_the_world_ns == 0 for n in others)


def test_the_table_shows_a_stop_the_world_column(page):
    _, _, _, p, stopped, others = page
    heads = p.js("Array.from(document.querySelectorAll('#gt-summary thead th')).map(function(h){return h.textContent})")
    assert "Stop-the-world" in heads, heads
    i = heads.index("Stop-the-world")
    assert heads[i - 1] == "Parked", heads
    # (rows that span the table, e.g. the folded background threads', have fewer cells)
    cells = p.js("Object.fromEntries(Array.from(document.querySelectorAll('#gt-summary tbody tr'))"
                 f".filter(function(tr){{return tr.cells.length > {i}}}).map("
                 f"function(tr){{return [tr.cells[0].textContent, [tr.cells[{i}].textContent, tr.cells[{i}].title]]}}))")
    text, title = cells[stopped]
    assert " \u00b7 " in text and "%" in text, cells
    # all its parks were the GC's pauses: the column's time is theirs
    assert title.endswith("parked: " + STW_GC + " " + text.split(" \u00b7 ")[0]), (title, text)
    assert CRIT in cells[others[0]][1], cells[others[0]]
    assert not p.errors, p.errors


@pytest.mark.parametrize("who, label", [("stopped", STW_GC), ("other", CRIT)])
def test_a_parked_interval_tooltip_says_its_label(page, who, label):
    _, _, _, p, stopped, others = page
    name = stopped if who == "stopped" else others[0]
    where = p.js(f"gtViewer.gilAt('{name}', 1)")
    assert where, "no parked interval drawn"
    time.sleep(0.3)  # let the scroll event (which hides tooltips) pass
    p.call("Input.dispatchMouseEvent", type="mouseMoved", x=where["x"], y=where["y"])
    p.wait_for("!document.getElementById('gt-tip').hidden", timeout=10)
    tip = p.js("document.getElementById('gt-tip').innerText")
    assert "waited for: " + label in tip, tip
    # a free-threaded strip's interval is named as the legend names it, not as the GIL's
    assert tip.startswith("parked \u00b7 ") and "GIL" not in tip, tip
    p.call("Input.dispatchMouseEvent", type="mouseMoved", x=1, y=1)
    assert not p.errors, p.errors


def test_unlabelled_parks_say_why_and_no_column_without_stop_the_world(tmp_path):
    t = park_trace()
    lk = LockKinds()
    lk.reason = "lock kinds: needs root (bpf)"
    t._locks = lk
    path = t.save(str(tmp_path / "p.html"))
    with open(path, encoding="utf-8") as f:
        data = pagedata.data(f.read())["lock_kinds"]
    assert not data["labelled"] and data["labels"] == []
    assert all(th["stw_ns"] is None and "parks" not in th for th in data["threads"].values())
    p = Page("file://" + path, str(tmp_path / "chromium"))
    try:
        heads = p.js("Array.from(document.querySelectorAll('#gt-summary thead th')).map(function(h){return h.textContent})")
        assert "Stop-the-world" not in heads, heads
        where = p.js("gtViewer.gilAt('app-1', 1)")
        time.sleep(0.3)
        p.call("Input.dispatchMouseEvent", type="mouseMoved", x=where["x"], y=where["y"])
        p.wait_for("!document.getElementById('gt-tip').hidden", timeout=10)
        tip = p.js("document.getElementById('gt-tip').innerText")
        assert "not labelled: lock kinds: needs root (bpf)" in tip, tip
        assert not p.errors, p.errors
    finally:
        p.close()


def test_a_gil_build_page_has_no_lock_kinds(tmp_path):
    with giltracer.trace(sched=False) as t:
        spin(1000)
    assert not t.free_threaded
    with open(t.save(str(tmp_path / "p.html")), encoding="utf-8") as f:
        assert "lock_kinds" not in pagedata.data(f.read())


def test_blame_rows_say_what_the_parked_waited_for(page):
    t, tids, _, p, stopped, others = page
    rows = t.blame()
    names = {v: k for k, v in tids.items()}
    mine = [b for b in rows if names.get(b.waiter) in APPS]
    assert mine, rows
    for b in mine:
        # all of a thread's parks had one label: every pair of its says it
        assert b.kind == (STW_GC if names[b.waiter] == stopped else CRIT), b
        assert sum(b.kinds.values()) > 0 and set(b.kinds) == {b.kind}, b
    assert "blame: what the parked waited for" in t.summary_text()
    p.js("gtViewer.showTab('blame')")
    heads = p.js("Array.from(document.querySelectorAll('#gt-blame thead th')).map(function(h){return h.textContent})")
    assert heads[-1] == "Waited for", heads
    shown = p.js("Array.from(document.querySelectorAll('#gt-blame tbody tr')).map(function(tr){"
                 "return [tr.cells[0].textContent, tr.cells[tr.cells.length - 1].textContent]})")
    assert any(w == stopped and k == STW_GC for w, k in shown), shown
    assert any(w in others and k == CRIT for w, k in shown), shown
    p.js("gtViewer.showTab('timeline')")
    assert not p.errors, p.errors
