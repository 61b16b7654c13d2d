"""Long cells: past max_events the GIL and OS-state facts stay exact.

A worker first spends the event budget in a burst of GIL handoffs (time.sleep(0) releases
and takes the GIL each time), then sleeps (released) and spins (held) for fixed times. The
per-thread table must still know those phases, which happen entirely past the budget:
bounds that hold on any machine (a sleep of S seconds is at least S seconds released; a
spin that used C seconds of CPU held the GIL at least C seconds), and the same table as a
run with an unlimited budget, phase by phase."""

import threading
import time

import pytest

import giltracer
import giltracer._core
from conftest import FREE_THREADED, needs_bpf_backend, needs_gil

_INFO = giltracer._core.build_info()
BACKENDS = [
    "hooks",
    pytest.param("bpf", marks=needs_bpf_backend(_INFO)),
]

YIELDS = 4000       # GIL handoffs before the phases: >= 3 events each, past any small budget
SLEEP_S = 0.4       # released, entirely past the budget
SPIN_S = 0.25       # held (nobody else wants the GIL: the main thread is in join())
SMALL_BUDGET = 600  # events per kind of stream


def phases(out):
    for _ in range(YIELDS):
        time.sleep(0)
    t0 = time.monotonic_ns()
    time.sleep(SLEEP_S)
    t1 = time.monotonic_ns()
    c0 = time.thread_time()
    end = time.monotonic() + SPIN_S
    while time.monotonic() < end:
        pass
    out["spin_cpu_ns"] = int((time.thread_time() - c0) * 1e9)
    # The phases' windows, 1 ms inside their ends (the calls around them are no part).
    out["sleep"] = (t0 + 1_000_000, t1 - 1_000_000)
    out["spin"] = (t1 + 1_000_000, time.monotonic_ns() - 1_000_000)


def traced(backend, max_events):
    out = {}
    with giltracer.trace(backend=backend, functions=False, max_events=max_events) as t:
        th = threading.Thread(target=phases, args=(out,), name="phases")
        th.start()
        th.join()
    row = {s.name: s for s in t.summary()}["phases"]
    return t, row, out


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request):
    return request.param


@needs_gil  # the budget is spent in GIL handoffs, and sleeping is 'released'
def test_table_exact_past_the_gil_budget(backend):
    t, row, out = traced(backend, SMALL_BUDGET)
    assert t.result.gil_aggregated > 0, "the budget was not spent: the test proves nothing"
    assert t.dropped["gil"] == 0, t.dropped  # aggregated, not dropped
    assert row.held_ns + row.wait_ns + row.released_ns == row.wall_ns
    assert row.acquisitions >= YIELDS, row  # every handoff counted, not just the budget's
    assert row.released_ns >= SLEEP_S * 1e9, row
    assert row.held_ns >= out["spin_cpu_ns"], (row, out)
    if row.off_cpu_ns is not None:  # OS states known: the sleep was off CPU
        assert row.off_cpu_ns >= 0.9 * SLEEP_S * 1e9, row


def share(t, tid, window, state):
    """Fraction of `window` that thread `tid` spent in GIL `state`."""
    lo, hi = window
    got = sum(max(0, min(b, hi) - max(a, lo)) for a, b, s in t.gil_intervals(tid) if s == state)
    return got / (hi - lo)


@needs_gil
def test_phases_past_the_budget_match_an_unlimited_run(backend):
    """Where in time, too: the sleep and the spin happen entirely past the budget, where
    the strip is coalesced into tiles of at most 1/2048 of the coalesced stretch (< 1 ms
    here), so each phase's window is >= 95 % in its state (held while spinning: nobody
    else wants the GIL) with the small budget as with an unlimited one. (Whole-run shares
    are no fair comparison between two runs: the handoff burst before the phases takes
    from a few ms to hundreds on a loaded machine.)"""
    for cap in (SMALL_BUDGET, None):
        t, row, out = traced(backend, cap)
        assert share(t, row.tid, out["sleep"], "released") >= 0.95, (cap, row)
        assert share(t, row.tid, out["spin"], "held") >= 0.95, (cap, row)
        assert row.acquisitions >= YIELDS, (cap, row)


def test_timeline_coalesced_but_covering(backend):
    """Past the budget the GIL strip is coalesced (at most 2048 tiles per thread), still
    one contiguous cover of the thread's life; the text says so."""
    t, row, _ = traced(backend, SMALL_BUDGET)
    iv = t.gil_intervals("phases")
    assert iv[-1][1] - iv[0][0] == row.wall_ns
    assert all(a[1] == b[0] for a, b in zip(iv, iv[1:]))
    assert len(iv) <= SMALL_BUDGET + 3 * 2048 + 16, len(iv)
    assert "were aggregated: the table is exact" in t.summary_text()


# -- calls past the call budget: a call tree, not a cliff -----------------------------------

CALLS_BUDGET = 5000
OUTER, INNER = 50, 1000  # 50 * 1000 leaf calls: ten times the budget
NAP_S = 0.15


def leaf(i):
    return i


def middle():
    for i in range(INNER):
        leaf(i)


def worker():
    for _ in range(OUTER // 2):
        middle()
    time.sleep(NAP_S)  # released, inside worker (no C calls traced: its self time)
    for _ in range(OUTER - OUTER // 2):
        middle()


def traced_calls(backend):
    with giltracer.trace(backend=backend, max_events=CALLS_BUDGET, c_calls=False) as t:
        th = threading.Thread(target=worker, name="the-worker")
        th.start()
        th.join()
    return t


def test_profile_counts_every_call_past_the_budget(backend):
    t = traced_calls(backend)
    assert t.result.calls_aggregated > OUTER * INNER // 2, t.result.calls_aggregated
    assert t.dropped["calls"] == 0, t.dropped
    rows = {r.name: r for r in t.functions("the-worker")}
    assert rows["leaf"].calls == OUTER * INNER, rows["leaf"]
    assert rows["middle"].calls == OUTER, rows["middle"]
    root = t.profile("the-worker")
    wall = {s.name: s for s in t.summary()}["the-worker"].wall_ns
    # The whole traced life, nothing cut off: to the ns but for the tick-to-ns rounding of
    # each call-tree node's time (half a ns per node and state, a few dozen nodes).
    assert abs(root.total_ns - wall) <= 1000, (root.total_ns, wall)
    (w,) = root.find("worker")
    assert w.total_ns >= NAP_S * 1e9
    if backend == "hooks":  # the thread's own GIL counters split the aggregated time
        if FREE_THREADED:  # no GIL to release: the nap is not parked (running or off CPU)
            napped = w.self_states["running"] + w.self_states["held_off_cpu"]
        else:
            napped = w.self_states["released"]
        assert napped >= NAP_S * 1e9, w.self_states
        assert w.self_states["unknown"] == 0, w.self_states


def test_budget_notice_says_what_changed_form():
    t = traced_calls("hooks")
    notice = t.budget_notice()
    assert notice.startswith("giltracer: the event budget (max_events=5,000) was reached.")
    assert "Profile and Top functions cover the whole run" in notice
    assert "--max-events" in notice
    assert "per-thread call tree" in t.summary_text()
