"""The function tracer: exact structure of what it records."""

import json
import sys
import threading
import time

import pytest

import giltracer
from workloads import spin_for

CLIPPED_START, CLIPPED_END, UNWIND, C_FUNC = 1, 2, 4, 8


def me():
    return threading.get_native_id()


def named(spans, name):
    return [s for s in spans if s[2] == name]


def encloses(outer, inner):
    return outer[0] <= inner[0] and inner[1] <= outer[1]


# --- a known call tree -------------------------------------------------------------
def h():
    return 1


def g():
    return h()


def f():
    g()
    g()


def test_call_tree_nests_and_balances():
    with giltracer.trace(c_calls=False) as t:
        f()
    spans = t.spans(me())
    (fs,) = named(spans, "f")
    gs = named(spans, "g")
    hs = named(spans, "h")
    assert len(gs) == 2 and len(hs) == 2
    assert [s[3] for s in gs] == [fs[3] + 1] * 2
    assert [s[3] for s in hs] == [fs[3] + 2] * 2
    for gspan, hspan in zip(gs, hs):
        assert encloses(fs, gspan) and encloses(gspan, hspan)
        assert gspan[4] == 0 and hspan[4] == 0  # complete, not clipped, no exception
    assert gs[0][1] <= gs[1][0]  # the two calls of g do not overlap
    assert fs[4] == 0
    # spans are sorted by start, parents first
    starts = [(s[0], s[3]) for s in spans]
    assert starts == sorted(starts)


def test_c_calls_recorded_with_owner_names():
    data = [3, 1, 2]
    with giltracer.trace() as t:
        len(data)
        sorted(data)
        data.append(4)
    names = {s[2]: s for s in t.spans(me())}
    assert "len" in names and "sorted" in names and "list.append" in names
    assert names["len"][4] & C_FUNC


def test_no_c_calls_option():
    with giltracer.trace(c_calls=False) as t:
        len([1])
    assert not [s for s in t.spans(me()) if s[4] & C_FUNC]


# --- exceptions ----------------------------------------------------------------------
def c3():
    raise ValueError("boom")


def b3():
    c3()


def a3():
    b3()


def catcher():
    try:
        a3()
    except ValueError:
        pass


def test_exception_unwinding_three_frames_closes_three_spans():
    with giltracer.trace(c_calls=False) as t:
        catcher()
    spans = t.spans(me())
    unwound = [s for s in spans if s[4] & UNWIND]
    assert sorted(s[2] for s in unwound) == ["a3", "b3", "c3"]
    (a,) = named(spans, "a3")
    (b,) = named(spans, "b3")
    (c,) = named(spans, "c3")
    (top,) = named(spans, "catcher")
    assert encloses(top, a) and encloses(a, b) and encloses(b, c)
    assert c[3] == b[3] + 1 == a[3] + 2
    assert not top[4] & UNWIND


# --- generators ----------------------------------------------------------------------
def gen():
    yield 1
    yield 2
    yield 3


def test_generator_resumed_three_times_gives_three_spans():
    it = gen()
    with giltracer.trace(c_calls=False) as t:
        next(it)
        next(it)
        next(it)
    spans = named(t.spans(me()), "gen")
    assert len(spans) == 3
    assert all(s[4] == 0 for s in spans)
    assert spans[0][1] <= spans[1][0] and spans[1][1] <= spans[2][0]


def test_deep_recursion_balances():
    def down(n):
        return 0 if n == 0 else 1 + down(n - 1)

    limit = min(sys.getrecursionlimit() - 100, 500)
    with giltracer.trace(c_calls=False) as t:
        down(limit)
    spans = named(t.spans(me()), "test_deep_recursion_balances.<locals>.down"
                  if sys.version_info >= (3, 11) else "down")
    assert len(spans) == limit + 1
    depths = sorted(s[3] for s in spans)
    assert depths == list(range(depths[0], depths[0] + limit + 1))
    assert all(s[4] == 0 for s in spans)


# --- clipping at the session bounds -----------------------------------------------
def stopper(t):
    t.stop()


def outer_open_at_stop(t):
    stopper(t)


def starter(t):
    t.start()
    spin_for(0.001)


def test_calls_open_at_start_and_stop_are_clipped():
    t = giltracer.trace(c_calls=False)
    starter(t)  # 'starter' is open when tracing starts
    outer_open_at_stop(t)  # these two are open when it stops
    spans = t.spans(me())
    (s,) = named(spans, "starter")
    assert s[4] & CLIPPED_START and not s[4] & CLIPPED_END
    (o,) = named(spans, "outer_open_at_stop")
    (st,) = named(spans, "stopper")
    assert o[4] & CLIPPED_END and st[4] & CLIPPED_END
    assert encloses(o, st)
    t0, t1 = t.result.t0_ns, t.result.t1_ns
    assert s[0] == t0 and o[1] <= t1 + 1


def test_frames_open_in_the_test_are_part_of_the_trace():
    # The test function itself was open at start: it appears as a clipped span that
    # encloses everything recorded in this thread.
    with giltracer.trace(c_calls=False) as t:
        f()
    spans = t.spans(me())
    (mine,) = named(spans, "test_frames_open_in_the_test_are_part_of_the_trace")
    (fs,) = named(spans, "f")
    assert mine[4] & CLIPPED_START and mine[4] & CLIPPED_END
    assert encloses(mine, fs) and fs[3] == mine[3] + 1


# --- threads -------------------------------------------------------------------------
def test_threads_before_and_during_tracing_both_appear():
    stop = threading.Event()

    def busy():
        while not stop.is_set():
            h()

    pre = threading.Thread(target=busy, name="started-before")
    pre.start()
    try:
        with giltracer.trace(c_calls=False) as t:
            inner = threading.Thread(target=lambda: [h() for _ in range(1000)], name="started-inside")
            inner.start()
            inner.join()
            spin_for(0.02)
    finally:
        stop.set()
        pre.join()
    by_name = {th.name: th for th in t.threads}
    assert by_name["started-before"].spans > 0
    assert by_name["started-inside"].spans >= 1000
    assert by_name["started-before"].tid == pre.native_id
    assert by_name["started-inside"].tid == inner.native_id
    assert by_name["started-inside"].ident == inner.ident
    assert t.spans(inner.native_id)  # an ended thread's events are kept
    assert len(named(t.spans("started-inside"), "h")) == 1000



def test_thread_names_while_other_threads_start():
    """Reading the names of ended threads (threading's weak set of them) while other threads
    are being created: the old list(WeakSet) raised "Set changed size during iteration"
    about 6 times a second here, which made a session's stop() fail."""
    from giltracer.api import _thread_names

    stop = threading.Event()

    def spawner():
        while not stop.is_set():
            batch = [threading.Thread(target=int) for _ in range(4)]
            for th in batch:
                th.start()
            for th in batch:
                th.join()

    spawners = [threading.Thread(target=spawner, name=f"spawner-{i}") for i in range(2)]
    for th in spawners:
        th.start()
    try:
        calls = 0
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            names = _thread_names()  # must not raise
            calls += 1
    finally:
        stop.set()
        for th in spawners:
            th.join()
    assert calls > 100
    assert names[spawners[0].native_id] == "spawner-0"
    assert names[threading.main_thread().native_id] == threading.main_thread().name


def test_threads_that_ended_before_the_session_lend_no_names():
    """The OS reuses the id of a thread that ended before the session (whose Thread object
    the caller may still hold): a thread of the session with that id, perhaps one without a
    Thread object, must not get the old thread's name. Threads that end during the
    session keep theirs."""
    from giltracer.api import _ended_threads, _thread_names

    before = threading.Thread(target=int, name="ended-before")
    before.start()
    before.join()
    ended_before = _ended_threads()
    during = threading.Thread(target=int, name="ended-during")
    during.start()
    during.join()
    names = _thread_names(ended_before)
    assert names.get(before.native_id) != "ended-before"
    assert names[during.native_id] == "ended-during"
    assert _thread_names().get(before.native_id) == "ended-before"  # without the snapshot


def test_a_thread_running_at_start_keeps_its_name_after_its_object_is_gone():
    """A thread that was running when the session started and ends during it, its Thread
    object dropped before stop (threading's weak set forgets it): named from the start."""
    import gc

    go = threading.Event()
    th = threading.Thread(target=go.wait, name="running-at-start")
    th.start()
    with giltracer.trace(c_calls=False, sched=False) as t:
        go.set()
        th.join()
        nid = th.native_id
        del th
        gc.collect()
    assert not any(x.name == "running-at-start" for x in threading.enumerate())
    assert [x.name for x in t.threads if x.tid == nid] == ["running-at-start"]

# --- bounds ------------------------------------------------------------------------
def test_max_events_truncates_and_reports():
    # Past the budget the calls go on into a call tree (tests/test_long_cells.py), none dropped.
    with pytest.warns(giltracer.api.BudgetNotice, match="call trees"):
        with giltracer.trace(c_calls=False, max_events=10_000) as t:
            for _ in range(50_000):
                h()
    assert t.event_count <= 10_000
    assert t.event_count >= 9_000  # other (idle) threads strand at most a little budget
    mine = len(t.spans(me()))
    aggregated = t.result.calls_aggregated
    assert aggregated >= 100_000 - 2 * mine - 100
    assert t.event_count + aggregated >= 100_000
    assert t.dropped_events == 0
    assert t.gil_known or t.backend == "none"  # the GIL probe kept running
    text = t.summary_text()
    assert "per-thread call tree" in text


def test_max_depth_limits_recorded_depth():
    def d(n):
        return 0 if n == 0 else d(n - 1)

    with giltracer.trace(c_calls=False, max_depth=3) as t:
        d(10)
    # Depth counts from the frames open at start (pytest's own, clipped): d(10), d(9)
    # and d(8) are the three levels below them.
    ds = named(t.spans(me()), "test_max_depth_limits_recorded_depth.<locals>.d"
               if sys.version_info >= (3, 11) else "d")
    assert len(ds) == 3
    assert [s[3] for s in ds] == sorted(s[3] for s in ds)


def test_include_and_exclude_filters():
    with giltracer.trace(c_calls=False, exclude=["*/test_tracer.py"]) as t:
        f()
    assert not named(t.spans(me()), "f")
    with giltracer.trace(c_calls=False, include=["*/test_tracer.py"]) as t:
        f()
        json.dumps([1])  # json/encoder.py is not included
    names = {s[2] for s in t.spans(me())}
    assert "f" in names and "dumps" not in names


# --- exports -------------------------------------------------------------------------
def test_json_export_round_trips(tmp_path):
    def worker():
        for _ in range(100):
            g()

    with giltracer.trace() as t:
        th = threading.Thread(target=worker, name="json-worker")
        th.start()
        th.join()
        f()
    path = t.save(tmp_path / "trace.json")
    doc = json.loads(open(path, encoding="utf-8").read())
    events = doc["traceEvents"]
    xs = [e for e in events if e["ph"] == "X"]
    assert xs
    for e in xs[:1000]:
        assert isinstance(e["name"], str)
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        assert 0 < e["tid"] < 2**31
        assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float))
        assert e["dur"] >= 0
    meta = [e for e in events if e["ph"] == "M"]
    thread_names = [e["args"]["name"] for e in meta if e["name"] == "thread_name"]
    assert any("json-worker" in n for n in thread_names)
    assert any(e["name"] == "process_name" for e in meta)
    worker_calls = [e for e in xs if e["tid"] == th.native_id and e["name"].startswith("g")]
    assert len(worker_calls) == 100


def test_save_rejects_unknown_format(tmp_path):
    with giltracer.trace() as t:
        f()
    with pytest.raises(ValueError, match="html"):
        t.save(tmp_path / "trace.xyz")


# --- hygiene -------------------------------------------------------------------------
def test_restores_previous_profile_function():
    seen = []

    def prof(frame, event, arg):
        seen.append(event)

    sys.setprofile(prof)
    try:
        with giltracer.trace() as t:
            f()
        assert sys.getprofile() is prof
    finally:
        sys.setprofile(None)
    assert named(t.spans(me()), "f")


def test_bad_options_are_clear_errors():
    with pytest.raises(ValueError, match="backend"):
        giltracer.trace(backend="perf")
    with pytest.raises(ValueError, match="max_events"):
        giltracer.trace(max_events=0)
    with pytest.raises(ValueError, match="glob"):
        giltracer.trace(include=[3])


def test_one_session_at_a_time():
    with giltracer.trace() as outer:
        with pytest.raises(RuntimeError, match="one session at a time|already running"):
            giltracer.trace().start()
    assert outer.event_count > 0


def _child_traces_itself(n):
    import os

    with giltracer.trace(backend="hooks") as t:
        total = sum(i * i for i in range(n))
    return os.getpid(), t.event_count > 0, t.backend, total


# 3.12+ warns about fork() in a multi-threaded process: while a session records, the
# scheduler poller (and the bpf drain thread) are threads of ours.
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_forked_children_do_not_inherit_the_session():
    import multiprocessing
    import os

    with giltracer.trace(backend="hooks") as t:
        with multiprocessing.get_context("fork").Pool(2) as pool:
            rows = pool.map(_child_traces_itself, [1000, 2000, 3000])
    assert [r[3] for r in rows] == [sum(i * i for i in range(n)) for n in (1000, 2000, 3000)]
    # (on a free-threaded build "hooks" is the park probe, the GIL probe's stand-in)
    assert all(r[1] and r[2] == "hooks" for r in rows)  # each child ran its own session
    assert all(r[0] != os.getpid() for r in rows)
    assert t.event_count > 0
