"""The live meter on the park probe (the free-threaded build's account: running / parked /
released), on any build: GILTRACER_TEST_PARK=1 makes a GIL build's session take the
free-threaded path (tests/test_park.py), whose contended threading.Lock parks on the
semaphore calls the probe interposes. The park probe feeds the one per-thread account
that progress() reads (and the call tree past the budget: tests/c/aggregate/test_account.c).
On a free-threaded build a thread blocked on a threading.Lock waits for another thread and
reads released (as a GIL build shows it): only the test mode's GIL build parks on it."""
import threading
import time

import pytest

import giltracer
from giltracer import live


# What a thread blocked on a threading.Lock reads in the park probe's account.
BLOCKED = "released" if giltracer.api.FREE_THREADED else "parked"


@pytest.fixture
def park(monkeypatch):
    monkeypatch.setenv("GILTRACER_TEST_PARK", "1")


def holder_and_waiter(hold):
    """Thread `holder` takes a lock and runs `hold()` holding it; thread `waiter` takes the
    lock once `held` is set. Returns (held, [holder, waiter]), not started."""
    lock = threading.Lock()
    held = threading.Event()

    def holder():
        with lock:
            held.set()
            hold()

    def waiter():
        held.wait()
        with lock:
            pass

    return held, [threading.Thread(target=holder, name="holder"),
                  threading.Thread(target=waiter, name="waiter")]


def blocked_on_a_lock(t, hold_s=0.4, until_parked=True):
    """Thread `holder` holds a lock (spinning) while thread `waiter` blocks on it, for at
    least `hold_s` and (`until_parked`) until the waiter reads BLOCKED (a contended lock spins and yields
    before it parks: on a busy machine that takes a while; at most 5 s); returns (progress
    while the waiter waits, progress after both ended, the two threads)."""
    release = threading.Event()

    def spin():
        while not release.is_set():
            sum(range(100))

    held, ths = holder_and_waiter(spin)
    with t:
        try:
            for th in ths:
                th.start()
            held.wait()
            time.sleep(hold_s / 2)
            end = time.monotonic() + 5
            while True:
                during = t.progress()
                state = {th["native_id"]: th["state"] for th in during["threads"]}
                parked = state.get(ths[1].native_id) == BLOCKED
                if parked or not until_parked or time.monotonic() > end:
                    break
                time.sleep(0.02)
            time.sleep(hold_s / 2)
        finally:
            release.set()
        for th in ths:
            th.join()
        after = t.progress()
    return during, after, ths


def test_progress_reports_running_and_parked(park):
    t = giltracer.trace()
    during, after, (holder, waiter) = blocked_on_a_lock(t)
    assert t.free_threaded, t.backend_reason
    assert during["free_threaded"] is True
    by_id = {th["native_id"]: th for th in during["threads"]}
    assert by_id[waiter.native_id]["state"] == BLOCKED, by_id
    assert by_id[holder.native_id]["state"] == "running", by_id
    # Every state word is the free-threaded build's.
    assert {th["state"] for th in during["threads"]} <= {"running", "parked", "released",
                                                         "unknown"}
    w = {th["native_id"]: th for th in after["threads"]}[waiter.native_id]
    assert w["parked_ns"] == w["wait_ns"] and w["running_ns"] == w["held_ns"]
    # The live account agrees with the trace's own table (10 % of the life + 30 ms).
    row = {s.tid: s for s in t.summary(all_threads=True)}[waiter.native_id]
    field = BLOCKED + "_ns"
    assert w[field] > 0.15e9, w
    slack = 0.1 * row.wall_ns + 30e6
    assert abs(w[field] - getattr(row, field)) < slack, (w, row)


def test_meter_text_speaks_of_running_and_parked(park):
    t = giltracer.trace()
    during, _, (holder, waiter) = blocked_on_a_lock(t)
    names = {holder.native_id: "holder", waiter.native_id: "waiter"}
    text = live.text(during, names)
    assert "park events" in text and "running" in text and "parked" in text, text
    assert "GIL" not in text and "held" not in text and "waiting" not in text, text
    html = live.html_meter(during, names)
    assert "GIL" not in html and "parked" in html, html


def test_gil_meter_keeps_its_words():
    """A GIL build's meter without the park path: held / waiting, GIL events."""
    if giltracer.api.FREE_THREADED:
        pytest.skip("free-threaded build: no GIL")
    t = giltracer.trace()
    during, _, (holder, waiter) = blocked_on_a_lock(t, 0.2, until_parked=False)
    assert during["free_threaded"] is False
    text = live.text(during, {})
    assert "GIL events" in text and "held" in text and "waiting" in text, text
    assert "parked" not in text and "running" not in text, text


def test_an_ended_thread_stops_running(park):
    """A thread's account ends with it (released from its exit on), so the meter does not
    count a thread that ended as running on (it ended running: it never parked last)."""
    _, ths = holder_and_waiter(lambda: time.sleep(0.1))
    t = giltracer.trace()
    with t:
        for th in ths:
            th.start()
        for th in ths:
            th.join()
        time.sleep(0.05)
        first = {th["native_id"]: th for th in t.progress()["threads"]}
        time.sleep(0.3)
        later = {th["native_id"]: th for th in t.progress()["threads"]}
    for th in ths:
        a, b = first[th.native_id], later[th.native_id]
        # (The same ticks; their conversion to ns moves with the clock fit: < 1 ms.)
        assert b["state"] == "released" and abs(b["held_ns"] - a["held_ns"]) < 1e6, (a, b)
