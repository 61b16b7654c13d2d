"""Ground truth on a free-threaded build (3.14t) with the GIL off: what replaces the GIL.

Threads run in parallel; what they wait for is the parking lot (a contended per-object
lock, a stop-the-world pause, a join). The park probe (hooks on the parking lot's
semaphore calls) records each parked interval and the thread that woke it.
On a GIL build these are skipped: tests/test_park.py runs the same probe and views there.
"""
import gc
import os
import queue
import sys
import sysconfig
import threading
import time

import pytest

import giltracer
from workloads import overlap_ns, pin_to_own_cpu, spin_for

FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


def _gil_enabled():
    import giltracer._core  # noqa: F401  (an extension without Py_mod_gil turns the GIL on)
    return getattr(sys, "_is_gil_enabled", lambda: True)()


pytestmark = [
    pytest.mark.skipif(not FREE_THREADED, reason="GIL build: no lock contention in place of "
                       "the GIL (tests/test_park.py covers the probe there)"),
    pytest.mark.skipif(FREE_THREADED and _gil_enabled(),
                       reason="free-threaded build with the GIL switched on (PYTHON_GIL=1, or "
                       "an extension without Py_mod_gil): run with PYTHON_GIL=0"),
]


def run_together(bodies, names):
    """Start the bodies in threads that pass one barrier together; returns (threads,
    the CLOCK_MONOTONIC ns at which the last one passed it)."""
    go = threading.Barrier(len(bodies))
    passed = []

    def wrap(body, index):
        def run():
            go.wait()
            passed.append(time.monotonic_ns())
            body(index)
        return run

    ts = [threading.Thread(target=wrap(b, i), name=names[i]) for i, b in enumerate(bodies)]
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    return ts, max(passed)


def preempted_share(t, tids):
    """Share of the threads' lives the OS kept them runnable but off a CPU (other load)."""
    rows = [r for r in t.summary() if r.tid in tids and r.preempted_ns is not None]
    return sum(r.preempted_ns for r in rows) / max(sum(r.wall_ns for r in rows), 1)


# As notebooks/claims.py: running at once needs free CPUs, so on a machine whose other
# load kept these threads off a CPU this much, that claim is not checked (skipped, saying so).
BUSY = 0.10


def parked_after(t, tids, since):
    return sum(max(0, b - max(a, since)) for tid in tids
               for a, b, s in t.gil_intervals(tid) if s == "parked")


def test_two_cpu_bound_threads_run_in_parallel():
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs")
    spans = {}

    def spin(i):
        pin_to_own_cpu(i)
        start = time.monotonic_ns()
        spin_for(0.5)
        spans[i] = (start, time.monotonic_ns())

    with giltracer.trace() as t:
        ts, _ = run_together([spin, spin], ["cpu-a", "cpu-b"])
    assert t.free_threaded, t.backend_reason
    rows = {s.name: s for s in t.summary()}
    # While spinning, neither parks. (Before, each parks in the barrier until the other
    # has started: 200 ms on a loaded machine, none of it the spinning's.)
    for i, th in enumerate(ts):
        lo, hi = spans[i]
        parked = sum(max(0, min(b, hi) - max(a, lo))
                     for a, b, s in t.gil_intervals(th.native_id) if s == "parked")
        assert parked < 0.1 * (hi - lo), (parked, rows[th.name])
    window = (max(s[0] for s in spans.values()), min(s[1] for s in spans.values()))
    if window[1] - window[0] <= 0.3e9:  # one started its 0.5 s spin late: the OS's doing
        pytest.skip(f"machine busy: the two spins overlapped {(window[1] - window[0]) / 1e6:.0f} ms "
                    "of 500, so running at once is not checked (no parked time was)")
    busy = preempted_share(t, {th.native_id for th in ts})
    if busy >= BUSY:
        pytest.skip(f"machine busy: the OS preempted the spinning threads {100 * busy:.0f} % of "
                    "their time, so running at once is not checked (no parked time was)")
    if not t.sched_status.startswith("off") and all(rows[n].off_cpu_ns is not None for n in rows):
        on = [[(max(a, window[0]), min(b, window[1])) for a, b, s in t.os_intervals(th.native_id)
               if s == "on-cpu"] for th in ts]
        both = overlap_ns(on[0], on[1]) / (window[1] - window[0])
        # ~100 % on an idle 2-CPU machine; other load on the shared CI machine takes a CPU
        # from one of them now and then.
        assert both > 0.6, both


def appenders(shared, n=4, items=200_000):
    lists = [[]] * n if shared else [[] for _ in range(n)]

    def append(i):
        lst = lists[i]
        for k in range(items):
            lst.append(k)

    with giltracer.trace() as t:
        ts, since = run_together([append] * n, [f"app-{i}" for i in range(n)])
    return t, {th.native_id for th in ts}, since


def test_one_shared_list_parks_far_more_than_own_lists_and_blames_the_other_appenders():
    ts, tids_s, since_s = appenders(shared=True)
    to, tids_o, since_o = appenders(shared=False)
    shared, own = parked_after(ts, tids_s, since_s), parked_after(to, tids_o, since_o)
    busy = preempted_share(ts, tids_s)
    if shared == 0 and busy >= BUSY:
        pytest.skip(f"machine busy: the appenders were preempted {100 * busy:.0f} % of their "
                    "time and never reached for the list at the same moment")
    # Own lists: nothing shared, so (next to) nothing parked after the barrier.
    assert shared > 0 and own * 5 < shared, (shared, own)
    rows = [b for b in ts.blame() if b.waiter in tids_s]
    assert rows
    by_appender = sum(b.wait_ns for b in rows if b.holder in tids_s and b.holder != b.waiter)
    assert by_appender >= 0.8 * sum(b.wait_ns for b in rows), rows[:5]


def test_forced_gc_collect_loop_parks_the_other_threads():
    stop = threading.Event()
    collector = []

    def collect(_):
        collector.append(threading.get_native_id())
        for _ in range(40):
            gc.collect()
        stop.set()

    def allocate(_):
        while not stop.is_set():
            [object() for _ in range(100)]

    with giltracer.trace() as t:
        ts, since = run_together([collect, allocate, allocate], ["gc", "alloc-1", "alloc-2"])
    allocs = {th.native_id for th in ts[1:]}
    # Each collection stops the world: the allocating threads park until the collector
    # restarts it.
    assert parked_after(t, allocs, since) > 0
    rows = [r for r in t.summary() if r.tid in allocs]
    # Parked inside the collector's collections: stop-the-world pauses (GC).
    assert sum(r.stop_the_world_ns for r in rows) > 0, rows
    assert all(r.stop_the_world_ns <= r.parked_ns for r in rows), rows
    assert any(b.holder == collector[0] for b in t.blame() if b.waiter in allocs), t.blame()[:5]


# A thread blocked on a threading primitive waits for another thread to act (put, set):
# on a GIL build that is "released" (the GIL is dropped in a blocking acquire), and so
# here: not lock contention, not parked, no blame, released in the profile split. The
# park probe tells it by the object parked on, so it holds with functions=False too.
IDLE_S = 0.5


def idle_waiter(wait, wake, functions):
    """A thread in `wait()` (on an empty queue, an unset event) for about IDLE_S until the
    main thread calls `wake()`; returns (trace, waiter's tid, (its wait's start, end))."""
    span = []

    def body():
        start = time.monotonic_ns()
        wait()
        span[:] = [start, time.monotonic_ns()]

    # No collection meanwhile: each stops the world, and with the heap earlier tests left
    # one pause parked the starting waiter for 55-160 ms (its start-up, not its wait).
    gc.collect()
    gc.disable()
    try:
        with giltracer.trace(functions=functions) as t:
            th = threading.Thread(target=body, name="idle")
            th.start()
            time.sleep(IDLE_S)
            wake()
            th.join()
    finally:
        gc.enable()
    return t, th.native_id, span


def assert_released_not_parked(t, tid, span, leaf):
    assert t.free_threaded, t.backend_reason
    (row,) = [r for r in t.summary() if r.tid == tid]
    lo, hi = span
    assert hi - lo >= 0.8 * IDLE_S * 1e9, (span, row)
    # Summary: a few ms of start-up at most parked; the idle wait released.
    assert row.parked_ns < 0.05 * row.wall_ns, row
    assert row.released_ns >= 0.7 * (hi - lo), row
    assert abs(row.running_ns + row.parked_ns + row.released_ns - row.wall_ns) <= 1000, row
    # The strips' intervals: the wait is released, not parked.
    ivs = t.gil_intervals(tid)
    inside = {s: sum(max(0, min(b, hi) - max(a, lo)) for a, b, q in ivs if q == s)
              for s in ("released", "parked", "running")}
    assert inside["parked"] < 0.05 * (hi - lo) and inside["released"] >= 0.8 * (hi - lo), inside
    # Blame: no park of the idle thread, so nobody is blamed for its wait.
    assert sum(b.wait_ns for b in t.blame(all_threads=True) if b.waiter == tid) < 0.05 * (hi - lo)
    # Text: its row's percentages (run, parked, released, off-cpu) say released.
    line = next(ln for ln in t.summary_text().splitlines() if ln.split()[:1] == [str(tid)])
    pct = [float(w.rstrip("%")) for w in line.split() if w.endswith("%")]
    assert pct[1] < 5 and pct[2] >= 70 * (hi - lo) / row.wall_ns, line
    if leaf is None:
        return
    # The profile's split: the blocking C call's time is released.
    nodes = [n for n in t.profile(tid).walk() if n.name == leaf]
    assert nodes, [n.name for n in t.profile(tid).walk()]
    total = sum(n.total_ns for n in nodes)
    assert total >= 0.8 * (hi - lo), nodes
    assert sum(n.states["released"] for n in nodes) >= 0.8 * total, nodes
    assert sum(n.states["waiting"] for n in nodes) < 0.05 * total, nodes


@pytest.mark.parametrize("functions", [True, False])
def test_a_consumer_idle_on_an_empty_queue_is_released_not_parked(functions):
    q = queue.Queue()
    t, tid, span = idle_waiter(q.get, lambda: q.put(1), functions)
    # Queue.get waits in Condition.wait: the acquire of its waiter lock.
    assert_released_not_parked(t, tid, span, "_thread.lock.acquire" if functions else None)


@pytest.mark.parametrize("functions", [True, False])
def test_an_event_wait_is_released_not_parked(functions):
    ev = threading.Event()
    t, tid, span = idle_waiter(ev.wait, ev.set, functions)
    assert_released_not_parked(t, tid, span, "_thread.lock.acquire" if functions else None)


def test_a_get_on_an_empty_simple_queue_is_released_not_parked():
    q = queue.SimpleQueue()
    t, tid, span = idle_waiter(q.get, lambda: q.put(1), True)
    assert_released_not_parked(t, tid, span, "_queue.SimpleQueue.get")


@pytest.mark.parametrize("kind", ["Lock", "RLock"])
def test_a_blocking_acquire_of_a_held_lock_is_released_not_parked(kind):
    # The rule, whatever the lock guards: a blocking acquire of a Python-level lock waits for
    # its holder to release it, as on a GIL build (released there too). Critical sections
    # and the interpreter's own locks stay parked (the shared-list tests above).
    lock = getattr(threading, kind)()
    lock.acquire()

    def wait():
        lock.acquire()
        lock.release()

    t, tid, span = idle_waiter(wait, lock.release, True)
    assert_released_not_parked(t, tid, span, f"{type(lock).__module__}.{type(lock).__name__}.acquire")
