"""The eBPF lock-kind probe on a free-threaded build (3.14t) as root: what each parked
interval waited for. A forced gc.collect() loop parks every thread in stop-the-world
pauses labelled "stop-the-world (GC)"; threads appending to one shared list park on its
per-object lock, labelled "critical section on list object", not stop-the-world.
Unprivileged, the park probe (hooks) still runs and the output says why the parks are
not labelled. The labelling rules themselves are checked on any build."""
import gc
import os
import sys
import sysconfig
import threading

import pytest

import giltracer
from giltracer import _core
from giltracer.lockkinds import (F_OBJECT, F_SUSPENDED, GC_BEGIN, GC_END, PARK, PARK_RET, STW,
                                 STW_BEGIN, STW_END, STW_GC, LockKinds)

FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
BPF = _core.build_info()["bpf_available"]
BPF_WHY = _core.build_info()["bpf_why"]


def _gil_enabled():
    return getattr(sys, "_is_gil_enabled", lambda: True)()


ft = pytest.mark.skipif(not FREE_THREADED, reason="GIL build: no parking-lot contention to label")
ft_gil_off = pytest.mark.skipif(FREE_THREADED and _gil_enabled(),
                                reason="free-threaded build with the GIL switched on (PYTHON_GIL=1)")
root_bpf = pytest.mark.skipif(not BPF, reason=f"the lock-kind probe needs bpf: {BPF_WHY}")


def run_threads(body, n, prefix):
    go = threading.Barrier(n)

    def run(i):
        go.wait()
        body(i)

    ts = [threading.Thread(target=run, args=(i,), name=f"{prefix}-{i}") for i in range(n)]
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    return {th.native_id for th in ts}


@ft
@ft_gil_off
@root_bpf
def test_gc_collect_loop_stops_the_world_in_every_thread():
    def collect(_):
        for _ in range(30):
            [[] for _ in range(200)]
            gc.collect()

    with giltracer.trace() as t:
        tids = run_threads(collect, 3, "gc")
    assert "stop_the_world" in t.lock_kinds_reason and "gc_collect_main" in t.lock_kinds_reason, \
        t.lock_kinds_reason
    rows = {r.tid: r for r in t.summary() if r.tid in tids}
    assert set(rows) == tids
    for r in rows.values():
        # Each thread parked while another one's collection had the world stopped.
        assert r.park_kinds.get(STW_GC, 0) > 0, (r.name, r.park_kinds)
        assert 0 < r.stop_the_world_ns <= r.parked_ns, r
    labels = {lab for tid in tids for _, _, lab in t.park_labels(tid)}
    assert STW_GC in labels, labels
    assert "what the parks waited for" in t.summary_text() and STW_GC in t.summary_text()


@ft
@ft_gil_off
@root_bpf
def test_shared_list_appends_park_on_its_critical_section():
    shared = []
    lock_addr = id(shared) + 10  # &shared->ob_mutex (lockprobe_abi.h: GTL_OB_MUTEX_OFF)

    def append(_):
        for i in range(200_000):
            shared.append(i)

    # A busy machine can serialize the appenders so that none parks on the list: up to
    # three traces to see contention at all (each is checked the same way).
    for _ in range(3):
        with giltracer.trace() as t:
            tids = run_threads(append, 4, "append")
        on_list = [(tid, p) for tid in tids for p in t._locks.parks.get(tid, []) if p[2] == lock_addr]
        if on_list:
            break
    assert on_list, "the appenders never parked on the shared list"
    # The BPF side names the object behind the mutex: a list; so does every such park's label.
    assert all(p[3] & F_OBJECT and p[4] == "list" for _, p in on_list), on_list[:5]
    crit = "critical section on list object"
    labels = [(tid, lab) for tid in tids for a, b, lab in t.park_labels(tid)
              if t._locks._park(tid, a, b) is not None and t._locks._park(tid, a, b)[2] == lock_addr]
    assert labels and all(lab == crit for _, lab in labels), labels[:5]
    kinds = {}
    for r in t.summary():
        if r.tid in tids:
            for k, v in r.park_kinds.items():
                kinds[k] = kinds.get(k, 0) + v
    assert kinds.get(crit, 0) > 0, kinds


@ft
@pytest.mark.skipif(BPF, reason="the unprivileged path: this process may load bpf")
def test_unprivileged_parks_still_traced_and_say_why_unlabelled():
    shared = []

    def append(_):
        for i in range(100_000):
            shared.append(i)

    with giltracer.trace() as t:
        run_threads(append, 2, "append")
    assert t.free_threaded and t.backend == "hooks"
    assert t.lock_kinds_reason and "bpf" in t.lock_kinds_reason, t.lock_kinds_reason
    assert all(r.park_kinds is None for r in t.summary())
    assert t.park_labels(threading.main_thread()) == []
    assert "parks not labelled: " + t.lock_kinds_reason in t.summary_text()


@pytest.mark.skipif(FREE_THREADED, reason="a GIL build's trace: no lock kinds")
def test_gil_build_has_no_lock_kinds():
    with giltracer.trace() as t:
        sum(range(1000))
    assert t.lock_kinds_reason is None
    assert all(r.park_kinds is None for r in t.summary())


def test_labels_follow_the_park_that_contains_the_interval():
    """The rules on recorded events: a thread stopped (suspended) in another thread's
    stop-the-world window inside gc_collect_main is that pause, and so is the stopper's
    own wait in its window; a lock park keeps its lock's label even while a window is
    open; an object's lock is named by its type; an interval no probed park contains
    stays unknown."""
    lk = LockKinds()
    lk.running = True
    lk._build([
        (100, 0, 1, GC_BEGIN, 0, ""), (110, 0x50, 1, STW_BEGIN, 0, ""),
        (112, 0x58, 1, PARK, 0, ""), (118, 0, 1, PARK_RET, 0, ""),            # stopper waits
        (300, 0, 1, STW_END, 0, ""), (310, 0, 1, GC_END, 0, ""),
        (120, 0x7000, 2, PARK, F_SUSPENDED, ""), (290, 0, 2, PARK_RET, 0, ""),  # stopped
        (50, 0x800a, 3, PARK, F_OBJECT, "list"), (350, 0, 3, PARK_RET, 0, ""),  # lock, before
        (115, 0x8800, 8, PARK, 0, ""), (295, 0, 8, PARK_RET, 0, ""),         # lock, during
        (400, 0x9000, 4, PARK, 0, ""), (430, 0x7400, 4, PARK, F_SUSPENDED, ""),  # plain lock,
        (440, 0, 4, PARK_RET, 0, ""), (450, 0, 4, PARK_RET, 0, ""),        # a stop inside
        (500, 0x50, 5, STW_BEGIN, 0, ""), (520, 0x7100, 6, PARK, F_SUSPENDED, ""),
        (560, 0, 6, PARK_RET, 0, ""), (600, 0, 5, STW_END, 0, ""),          # stw, no GC
    ])
    assert lk.label(2, 130, 280) == STW_GC
    assert lk.label(1, 113, 117) == STW_GC
    assert lk.label(3, 60, 340) == "critical section on list object"
    assert lk.label(8, 120, 290) == "lock at 0x8800"
    assert lk.label(4, 410, 425) == "lock at 0x9000"
    assert lk.label(4, 445, 449) == "lock at 0x9000"
    assert lk.label(4, 432, 438) == STW  # nested: re-attaching while the world is stopped
    assert lk.label(6, 530, 550) == STW
    assert lk.label(4, 390, 440) == ""  # begun before the probed park
    assert lk.label(7, 130, 140) == ""  # no park of that thread
    assert lk.kinds(2, [(130, 280), (400, 410)]) == {STW_GC: 150, "": 10}


def test_a_type_name_cut_inside_a_character_loses_that_character_only():
    from giltracer.lockkinds import type_name

    name = "äöü" * 10  # 2-byte characters: the probe's 39 bytes end inside one
    cut = name.encode()[:39]
    with pytest.raises(UnicodeDecodeError):
        cut.decode()
    got = type_name(cut)
    assert name.startswith(got) and len(got.encode()) == 38, got
    assert type_name(b"list") == "list"
    assert type_name(b"") == ""
    assert type_name(b"a\xffb") == "a\ufffdb"  # no UTF-8: a label all the same


# A list subclass: its append takes the critical section of the instance, whose type's
# tp_name (this class's name) is what the probe reads, cut at 39 bytes inside the "ä".
LONG_NAME = "L" * 38 + "ärm"
Contended = type(LONG_NAME, (list,), {})


@ft
@ft_gil_off
@root_bpf
def test_a_non_ascii_type_name_cut_by_the_probe_labels_and_stop_succeeds():
    shared = Contended()
    lock_addr = id(shared) + 10  # &shared->ob_mutex (lockprobe_abi.h: GTL_OB_MUTEX_OFF)

    def append(_):
        for i in range(200_000):
            shared.append(i)

    for _ in range(3):  # as above: a busy machine may serialize the appenders
        with giltracer.trace() as t:
            tids = run_threads(append, 4, "append")
        assert t._gc not in gc.callbacks
        on_list = [p for tid in tids for p in t._locks.parks.get(tid, []) if p[2] == lock_addr]
        if on_list:
            break
    assert on_list, "the appenders never parked on the shared object"
    assert all(p[3] & F_OBJECT and p[4] == "L" * 38 for p in on_list), on_list[:5]
