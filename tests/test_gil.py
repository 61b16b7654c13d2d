"""The GIL probes: ground truth that holds on any machine (ranges, not exact figures).

Every test runs with the in-process hooks and, where permitted (root and a build with
libbpf), again with the eBPF probe: both must see the same facts."""

import json
import os
import statistics
import sys
import time

import pytest

import giltracer
import giltracer._core
from conftest import needs_gil
from workloads import (cpu_pair, gil_shares, held_while_preempted, preempted_ns, run_threads, sleeper,
                       socket_waiter, spin_for, traced_cpu_pair)

_INFO = giltracer._core.build_info()
pytestmark = needs_gil
BACKENDS = [
    "hooks",
    # The hooks as they recorded a take before: at the signal of switch_cond, under the
    # GIL's mutex (GILTRACER_TAKE_RECORD=signal); by default at the mutex's unlock.
    "hooks-take-at-signal",
    pytest.param("bpf", marks=pytest.mark.skipif(
        not _INFO["bpf_available"], reason=f"bpf backend unavailable: {_INFO['bpf_why']}")),
]


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request):
    if request.param != "hooks-take-at-signal":
        yield request.param
        return
    os.environ["GILTRACER_TAKE_RECORD"] = "signal"
    try:
        yield "hooks"
    finally:
        del os.environ["GILTRACER_TAKE_RECORD"]


def by_name(t):
    return {s.name: s for s in t.summary()}


def holds(t, tid):
    return [(a, b) for a, b, s in t.gil_intervals(tid) if s == "held"]


@pytest.fixture(scope="module")
def two_cpu_threads(backend):
    t, threads = traced_cpu_pair(0.6, backend=backend, c_calls=False)
    t.pair = threads
    return t


def test_backend_says_what_ran_and_why(two_cpu_threads, backend):
    t = two_cpu_threads
    assert t.backend == backend
    assert t.backend_reason.startswith(backend)
    assert t.gil_known


def test_two_cpu_threads_each_hold_and_wait_about_half(two_cpu_threads):
    """While both spin, each of two CPU-bound threads holds the GIL about half of the time
    and waits the rest. On a loaded machine the OS also preempts a thread while it holds
    the GIL: its partner then waits for the whole preemption, which can skew one run's
    split by up to that time. The fixture keeps the least disturbed of a few runs; the
    range widens by the disturbance it measured (0 on a quiet machine)."""
    t = two_cpu_threads
    s = by_name(t)
    a, b = t.pair
    window = (max(a.spin_ns[0], b.spin_ns[0]), min(a.spin_ns[1], b.spin_ns[1]))
    assert window[1] - window[0] > 0.2e9, window  # they spun together
    slack = 100 * held_while_preempted(t, {a.native_id, b.native_id})
    for th in (a, b):
        row = s[th.name]
        assert abs(row.held_pct + row.wait_pct + row.released_pct - 100) < 1e-6
        assert row.held_ns + row.wait_ns + row.released_ns == row.wall_ns
        assert row.acquisitions >= 5, row
        share = gil_shares(t, th.native_id, window)
        # CPU-bound: holds or waits, but for time the OS kept it off a CPU between a forced
        # switch and its next take (released, though it never chose to be).
        off_cpu = 100 * preempted_ns(t, th.native_id, ("released",), window) / (window[1] - window[0])
        assert share["held"] + share["wait"] >= 95 - off_cpu, (off_cpu, share, row)
        assert 35 - slack <= share["held"] <= 65 + slack, (slack, share, row)
        assert 35 - slack <= share["wait"] <= 65 + slack, (slack, share, row)


def test_holds_never_overlap(two_cpu_threads):
    t = two_cpu_threads
    intervals = sorted(iv for th in t.threads for iv in holds(t, th.tid))
    assert len(intervals) >= 10
    for (a0, b0), (a1, b1) in zip(intervals, intervals[1:]):
        assert b0 <= a1, "two threads held the GIL at once"


def test_forced_switch_wait_is_decoded(two_cpu_threads, backend):
    """drop_gil's FORCE_SWITCHING wait (on switch_cond, until another thread takes the
    GIL) counts as waiting; when it ends the thread is briefly released, then wants the
    GIL again in take_gil: wait -> released -> wait runs."""
    def runs_of(t):
        states = [s for _, _, s in t.gil_intervals(by_name(t)["cpu-a"].tid)]
        return sum(1 for a, b, c in zip(states, states[1:], states[2:])
                   if (a, b, c) == ("wait", "released", "wait")), states

    # The wait happens only when the dropper finds the GIL not yet taken; on a loaded
    # machine other work can change that timing for a whole run: measure again (twice).
    runs, states = runs_of(two_cpu_threads)
    for _ in range(2):
        if runs >= 5:
            break
        t, _ = traced_cpu_pair(0.6, backend=backend, c_calls=False)
        runs, states = runs_of(t)
    assert runs >= 5, states[:40]


def test_handoffs_near_switch_interval(two_cpu_threads, backend):
    t = two_cpu_threads
    s = by_name(t)
    lengths = turns_less_preemption(t, [s["cpu-a"].tid])
    median_ms = statistics.median(lengths) / 1e6
    interval_ms = sys.getswitchinterval() * 1e3
    assert interval_ms * 0.5 <= median_ms <= interval_ms * 4, median_ms
    if backend == "hooks":  # the bpf probe does not watch the timed waits
        assert s["cpu-a"].drop_requests > 3  # forced switches were requested


def test_sleeping_thread_releases_the_gil(backend):
    with giltracer.trace(backend=backend, c_calls=False) as t:
        run_threads([sleeper], names=["sleeper"])
    row = by_name(t)["sleeper"]
    assert row.released_pct >= 90, row
    assert row.acquisitions >= 30
    if row.off_cpu_ns is not None:  # OS states known: the sleeper is mostly blocked
        assert row.off_cpu_ns >= 0.8 * row.wall_ns


def test_socket_io_thread_releases_the_gil(backend):
    with giltracer.trace(backend=backend, c_calls=False) as t:
        run_threads([socket_waiter], names=["waiter"])
    assert by_name(t)["waiter"].released_pct >= 90


def test_lone_computing_thread_holds_the_gil(backend):
    with giltracer.trace(backend=backend, c_calls=False) as t:
        run_threads([lambda: spin_for(0.3)], names=["alone"])
    row = by_name(t)["alone"]
    assert row.held_pct >= 90, row
    assert row.wait_pct <= 5


def turns_less_preemption(t, tids):
    """Lengths of the GIL holds of `tids`, less the time the OS kept either thread off a
    CPU although runnable (when OS states are known). On a loaded 2-CPU machine a
    preempted holder keeps the GIL without running and a preempted waiter asks for it
    late: both stretch a turn by about the time they were preempted."""
    preempted = [(a, b) for tid in tids for a, b, s in t.os_intervals(tid) if s == "preempted"]
    return [max(0, (b - a) - sum(max(0, min(b, d) - max(a, c)) for c, d in preempted))
            for tid in tids for a, b in holds(t, tid)]


def test_shorter_switch_interval_gives_shorter_turns(backend):
    """sys.setswitchinterval sets how long a CPU-bound thread keeps the GIL while another
    wants it: the median turn (less OS preemption) is ~1 ms at 0.001, ~5 ms at the default
    0.005 and ~20 ms at 0.02. On a loaded machine short turns stretch by the waiter's wake-up
    latency (seen up to 2.4 ms at 0.001), so the contrast is asserted between 0.02 and 0.001,
    with a 2x margin. A run that the machine disturbed anyway is measured again, at most
    twice."""
    def median_turn(interval):
        old = sys.getswitchinterval()
        sys.setswitchinterval(interval)
        try:
            with giltracer.trace(backend=backend, functions=False) as t:
                cpu_pair(0.4, names=("x", "y"))
        finally:
            sys.setswitchinterval(old)
        s = by_name(t)
        turns = turns_less_preemption(t, [s["x"].tid, s["y"].tid])
        return statistics.median(turns) if len(turns) >= 8 else None

    for _ in range(3):
        slow, fast, default = median_turn(0.02), median_turn(0.001), median_turn(0.005)
        if None not in (slow, fast, default) and slow >= 2 * fast and 1.5e6 <= default <= 10e6:
            break
    assert None not in (slow, fast, default), ("the threads hardly took turns", slow, fast, default)
    assert slow >= 2 * fast, (slow, fast)  # ~20x on a quiet machine
    # ~5 ms turns at the default interval (less the preemption of either thread, which
    # can overlap: on a loaded machine this undercounts, seen down to 2.3 ms)
    assert 1.5e6 <= default <= 10e6, default


def test_blame_names_the_holder_and_its_function(backend):
    with giltracer.trace(backend=backend, c_calls=False) as t:
        a, b = cpu_pair(0.4, names=("A", "B"))
    rows = t.blame()
    assert rows
    pairs = {(r.waiter, r.holder) for r in rows}
    assert (a.native_id, b.native_id) in pairs and (b.native_id, a.native_id) in pairs
    top_fns = {r.function for r in rows[:6]}
    assert top_fns & {"spin_for", "spin_on_cpu", "work_a", "work_b"}
    # Blame covers exactly the part of A's waits during which another thread held the GIL
    # (a wait that outlasts the hand-off, while the woken waiter is not yet on a CPU, has
    # no holder: on a loaded machine that part can be large, so it is computed, not assumed).
    waits = [(x, y) for x, y, st in t.gil_intervals(a.native_id) if st == "wait"]
    others = [iv for th in t.threads if th.tid != a.native_id for iv in holds(t, th.tid)]
    covered = sum(max(0, min(y, d) - max(x, c)) for x, y in waits for c, d in others)
    waited = sum(r.wait_ns for r in rows if r.waiter == a.native_id)
    assert waited <= by_name(t)["A"].wait_ns + 1
    assert covered > 0
    assert abs(waited - covered) <= 0.01 * covered + 1000, (waited, covered)


def test_gil_only_session_and_text_table(backend):
    with giltracer.trace(backend=backend, functions=False) as t:
        run_threads([lambda: spin_for(0.2), sleeper], names=["busy", "napper"])
    assert t.event_count == 0
    text = t.summary_text()
    assert "busy" in text and "napper" in text and "held" in text


def test_gil_and_os_tracks_in_json(tmp_path, two_cpu_threads):
    with open(two_cpu_threads.save(tmp_path / "t.json")) as f:
        doc = json.load(f)
    names = {e["name"] for e in doc["traceEvents"] if e["ph"] == "X"}
    assert "held" in names and any("wait" in n for n in names)


def test_off_cpu_known_or_explained(backend):
    with giltracer.trace(backend=backend, functions=False) as t:
        run_threads([sleeper], names=["s"])
    row = by_name(t)["s"]
    if t.sched_status.startswith("unavailable"):
        assert row.off_cpu_ns is None
    else:
        assert row.off_cpu_ns is not None and row.off_cpu_ns > 0


def test_gil_off_reports_none():
    with giltracer.trace(gil=False) as t:
        spin_for(0.01)
    assert t.backend == "none" and "gil=False" in t.backend_reason
    assert not t.gil_known
    assert "n/a" in t.summary_text()


def test_thread_that_ended_stops_at_its_last_event(backend):
    with giltracer.trace(backend=backend, functions=False) as t:
        (short,) = run_threads([lambda: spin_for(0.2)], names=["short"])
        time.sleep(0.6)  # the session goes on long after the thread has ended
    row = by_name(t)["short"]
    assert row.wall_ns < 0.5e9 < t.duration_ns
    # Not diluted by a 'released' afterlife (that would leave it under 30 %): it computed
    # (held, or waited while a loaded machine kept the main thread, which held the GIL, off
    # a CPU) until it ended. What it does without the GIL is its start and its exit after
    # the last release: under ASan on a loaded machine up to 9 ms (tearing down the fake
    # stacks), so the spin is long enough to keep that under 10 %.
    assert row.held_pct + row.wait_pct >= 90, row
    assert row.held_pct >= 30, row
