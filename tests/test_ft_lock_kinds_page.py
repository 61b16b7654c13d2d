"""The saved page of a free-threaded trace carries the park labels (the payload's
"lock_kinds", core/viewer/README.md): on 3.14t as root a forced gc.collect() loop's page
says every thread's stop-the-world time and labels its parks "stop-the-world (GC)", the
same as Trace.summary() and Trace.park_labels(); unprivileged it says why they are not
labelled; a GIL build's page has no such key."""
import gc
import sys
import sysconfig
import threading

import pytest

import giltracer
import pagedata
from giltracer import _core
from giltracer.lockkinds import STW_GC

FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
BPF = _core.build_info()["bpf_available"]
ft = pytest.mark.skipif(not FREE_THREADED, reason="GIL build: no parking-lot contention to label")
ft_gil_off = pytest.mark.skipif(FREE_THREADED and getattr(sys, "_is_gil_enabled", lambda: True)(),
                                reason="free-threaded build with the GIL switched on (PYTHON_GIL=1)")


def gc_loop_trace(n=3):
    go = threading.Barrier(n)

    def collect():
        go.wait()
        for _ in range(30):
            [[] for _ in range(200)]
            gc.collect()

    ts = [threading.Thread(target=collect, name=f"gc-{i}") for i in range(n)]
    with giltracer.trace() as t:
        for th in ts:
            th.start()
        for th in ts:
            th.join()
    return t, {th.native_id for th in ts}


def page_lock_kinds(t, path):
    with open(t.save(str(path)), encoding="utf-8") as f:
        return pagedata.data(f.read()).get("lock_kinds")


@ft
@ft_gil_off
@pytest.mark.skipif(not BPF, reason="the lock-kind probe needs bpf: " + str(_core.build_info()["bpf_why"]))
def test_gc_loop_page_carries_stop_the_world_labels(tmp_path):
    # Each thread is parked by the others' collections, as a rule; a run where one of them
    # never was (its only labelled park another stop-the-world: once in CI) is measured
    # again, up to 3 runs.
    for _ in range(3):
        t, tids = gc_loop_trace()
        lk = page_lock_kinds(t, tmp_path / "gc.html")
        assert lk is not None and lk["labelled"], lk and lk["reason"]
        assert STW_GC in lk["labels"], lk["labels"]
        gc_label = lk["labels"].index(STW_GC)
        if all(gc_label in lk["threads"].get(str(tid), {}).get("parks", {}).get("l", [])
               for tid in tids):
            break
    rows = {r.tid: r for r in t.summary()}
    for tid in tids:
        th = lk["threads"][str(tid)]
        assert th["stw_ns"] == rows[tid].stop_the_world_ns > 0, (tid, th["stw_ns"], rows[tid])
        assert dict(th["kinds"]) == rows[tid].park_kinds
        # each labelled park on the page is one of the thread's parks with that label
        want = {(a - t.result.t0_ns, lab) for a, _, lab in t.park_labels(tid) if lab}
        got = {(s, lk["labels"][i]) for s, i in zip(th["parks"]["s"], th["parks"]["l"])}
        assert got == want and gc_label in th["parks"]["l"], (tid, len(got), len(want))
    # contention blame: the stopped threads' parks, woken at the restart of the world,
    # say the GC's pause; so does the text's blame section
    kinds = [b.kind for b in t.blame() if b.waiter in tids]
    assert STW_GC in kinds, [(b.waiter, b.holder, b.kinds) for b in t.blame()]
    assert "blame: what the parked waited for" in t.summary_text()
    assert any(b[0] in tids and STW_GC in dict(b[2]) for b in lk["blame"]), lk["blame"][:5]


@ft
@pytest.mark.skipif(BPF, reason="the unprivileged path: this process may load bpf")
def test_unprivileged_page_says_why_parks_are_unlabelled(tmp_path):
    t, _ = gc_loop_trace(2)
    lk = page_lock_kinds(t, tmp_path / "gc.html")
    assert lk is not None and not lk["labelled"] and lk["labels"] == []
    assert lk["reason"] == t.lock_kinds_reason and "bpf" in lk["reason"], lk["reason"]
    assert all("parks" not in th for th in lk["threads"].values())
    assert "blame" not in lk and all(b.kind is None for b in t.blame())


@pytest.mark.skipif(FREE_THREADED, reason="a GIL build's page")
def test_gil_build_page_has_no_lock_kinds(tmp_path):
    t, _ = gc_loop_trace(2)
    assert page_lock_kinds(t, tmp_path / "gc.html") is None
