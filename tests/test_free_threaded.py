"""Free-threaded builds (3.13t+) are traced like any other build.

On a GIL build these run too: the same trace must hold there."""

import sys
import sysconfig
import threading

import giltracer

FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


def leaf(i):
    return i * 2


def worker(n):
    total = 0
    for i in range(n):
        total += leaf(i)
    return total


def test_build_info_and_api_agree_on_the_build_kind():
    import giltracer._core as core

    assert core.build_info()["free_threaded"] is FREE_THREADED
    assert giltracer.api.FREE_THREADED is FREE_THREADED


def test_every_call_in_every_thread_is_recorded():
    n, nthreads = 2000, 4
    barrier = threading.Barrier(nthreads)
    ids = []

    def run():
        ids.append(threading.get_native_id())
        barrier.wait()
        worker(n)

    with giltracer.trace(c_calls=False) as t:
        threads = [threading.Thread(target=run) for _ in range(nthreads)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    assert len(ids) == nthreads
    for tid in ids:
        spans = t.spans(tid)
        assert len([s for s in spans if s[2] == "worker"]) == 1, tid
        assert len([s for s in spans if s[2] == "leaf"]) == n, tid


def test_the_gil_stays_as_the_build_has_it():
    """Loading and running the tracer does not switch a free-threaded build's GIL on."""
    with giltracer.trace(c_calls=False):
        worker(10)
    if hasattr(sys, "_is_gil_enabled"):
        assert sys._is_gil_enabled() is (not FREE_THREADED)
