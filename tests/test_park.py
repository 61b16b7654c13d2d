"""The park probe (lock contention, the free-threaded build's view) on any build.

GILTRACER_TEST_PARK=1 makes a session on a GIL build take the free-threaded path: the
hooks interpose the interpreter object's semaphore calls, which a contended
threading.Lock parks on there too (3.9-3.12: PyThread_acquire_lock's sem_*; 3.13+: the
parking lot's), and the views speak of lock contention. The probe, the merge and every
view run for real; only the GIL itself is still there (so the waits are shorter than on
3.14t, where the lock holder never has to take turns with the waiter for the GIL).
"""
import json
import sys
import threading
import time

import pytest

import giltracer
from pagedata import payload

# A free-threaded build takes this path anyway; its ground truth (threads that really run
# at once) is tests/test_free_threaded_contention.py. The views' tests run on both.
gil_build_only = pytest.mark.skipif(
    bool(__import__("sysconfig").get_config_var("Py_GIL_DISABLED")),
    reason="free-threaded build: its ground truth is test_free_threaded_contention.py")


def spin(n):
    x = 0
    for i in range(n):
        x += i
    return x


def appender(lock, rounds):
    for _ in range(rounds):
        with lock:
            spin(3000)


def run_appenders(shared, n=3, rounds=150):
    """n threads spinning under one lock (shared) or each under its own; a barrier lines
    them up so the contention does not depend on thread start-up."""
    locks = [threading.Lock()] * n if shared else [threading.Lock() for _ in range(n)]
    go = threading.Barrier(n)
    passed = []

    def body(lock):
        go.wait()
        passed.append(time.monotonic_ns())
        appender(lock, rounds)

    ts = [threading.Thread(target=body, args=(locks[i],), name=f"app-{i}") for i in range(n)]
    t = giltracer.trace()
    with t:
        for th in ts:
            th.start()
        for th in ts:
            th.join()
    t.contention_from = max(passed)  # every appender is past the barrier
    return t


def parked_after(t, tids, since):
    """Parked time of `tids` from `since` on (CLOCK_MONOTONIC ns, as the intervals)."""
    return sum(max(0, b - max(a, since)) for tid in tids
               for a, b, s in t.gil_intervals(tid) if s == "parked")


@pytest.fixture
def park(monkeypatch):
    monkeypatch.setenv("GILTRACER_TEST_PARK", "1")


def workers(t):
    return {s.tid: s for s in t.summary() if s.name.startswith("app-")}


@gil_build_only
def test_shared_lock_parks_and_blame_names_the_other_appenders(park):
    # On a GIL build an appender parks only when the GIL switches away from the lock's
    # holder: a 1 ms switch interval makes that five times as likely, and the run is made
    # again (up to 6 times) while the appenders parked one another under 5 ms in all: then
    # start-up and join parks outweigh the lock's (0.1 of 0.6 ms once on 3.15; 0.9 ms in
    # 3 runs once on 3.14 at the default 5 ms).
    old = sys.getswitchinterval()
    sys.setswitchinterval(0.001)
    try:
        for _ in range(6):
            t = run_appenders(shared=True)
            w = workers(t)
            if sum(b.wait_ns for b in t.blame() if b.waiter in w and b.holder in w) >= 5_000_000:
                break
    finally:
        sys.setswitchinterval(old)
    assert t.free_threaded and t.gil_known, t.backend_reason
    assert "free-threaded build: no GIL; showing lock contention" in t.backend_reason
    w = workers(t)
    assert len(w) == 3
    assert sum(s.parked_ns for s in w.values()) > 0
    assert all(s.parked_ns == s.wait_ns and s.running_ns == s.held_ns for s in w.values())
    assert all(s.parks == s.acquisitions for s in w.values())
    rows = [b for b in t.blame() if b.waiter in w]
    assert rows, "no appender was parked by another"
    # Each parked appender was woken by another appender (the lock's releaser), in the
    # function that releases it.
    worker_rows = [b for b in rows if b.holder in w]
    assert sum(b.wait_ns for b in worker_rows) >= 0.8 * sum(b.wait_ns for b in rows)
    assert all(b.holder != b.waiter for b in rows)
    # ... while it held the lock: in spin() (or appender() around it). The rest are the
    # barrier's and thread start-up's parks.
    in_lock = sum(b.wait_ns for b in worker_rows if b.function in ("spin", "appender"))
    assert in_lock >= 0.8 * sum(b.wait_ns for b in worker_rows)
    states = {s for tid in w for _, _, s in t.gil_intervals(tid)}
    assert states <= {"running", "parked"} and "parked" in states


@gil_build_only
def test_own_locks_park_far_less_than_one_shared_lock(park):
    # From the moment all are past the barrier (which parks them all alike). On a GIL
    # build the appenders also take turns for the GIL: a loaded machine can keep them from
    # ever reaching for the shared lock at once, so that run is measured again. With the GIL
    # the lock is contended only when a switch interval ends inside it: 600 rounds (about
    # 60 ms) give a dozen such switches.
    for _ in range(3):
        ts, to = run_appenders(shared=True, rounds=600), run_appenders(shared=False, rounds=600)
        shared = parked_after(ts, workers(ts), ts.contention_from)
        own = parked_after(to, workers(to), to.contention_from)
        if shared > 5_000_000:
            break
    assert shared > 5_000_000, (own, shared)
    assert own * 10 < shared, (own, shared)


def test_views_say_lock_contention(park, tmp_path):
    t = run_appenders(shared=True, rounds=60)
    text = t.summary_text()
    assert "free-threaded build: no GIL; showing lock contention" in text
    assert "Top lock contention (parked waiter <- waker in function)" in text
    assert " parks " in text.splitlines()[2] or "parks" in text
    page = t.to_html()
    p = payload(page)
    assert p["meta"]["free_threaded"] is True
    # The intervals carry no interpreter ids (their aux is the waker, kept in the blame).
    assert all("interp" not in th["gil"] for th in p["threads"])
    chrome = json.loads(open(t.save(tmp_path / "t.json")).read())
    events = chrome["traceEvents"] if isinstance(chrome, dict) else chrome
    names = {e.get("args", {}).get("name") for e in events if e.get("ph") == "M"}
    assert any(n and n.startswith("Lock contention, no GIL") for n in names)
    assert "parked (lock contention)" in {e.get("name") for e in events}


def test_picture_and_profile_text_say_lock_contention(park):
    from giltracer import picture

    t = run_appenders(shared=True, rounds=60)
    pic = picture.svg(t)
    assert "free-threaded build: no GIL; showing lock contention" in pic
    assert "parked (lock contention)" in pic and "waiting for the GIL" not in pic
    assert t.profile_text().startswith("Contention profile of ")


@gil_build_only
def test_gil_build_default_is_unchanged(monkeypatch):
    monkeypatch.delenv("GILTRACER_TEST_PARK", raising=False)
    t = giltracer.trace()
    with t:
        spin(1000)
    assert not t.free_threaded
    assert all(s.parked_ns is None and s.running_ns is None and s.stop_the_world_ns is None for s in t.summary())
    assert "lock contention" not in t.summary_text()
    assert "free_threaded" not in payload(t.to_html())["meta"]
    assert t.profile_text().startswith("GIL profile of ")


def test_bpf_or_crosscheck_asked_on_a_free_threaded_trace_says_why_not(park):
    for options in ({"backend": "bpf"}, {"crosscheck": True}):
        with pytest.raises(Exception, match="no GIL; the lock-contention probe cannot run: the bpf probe"):
            with giltracer.trace(**options):
                spin(10)
