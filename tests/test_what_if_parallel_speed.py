"""The what-if model's parallel speed: each CPU's speed with all of them busy, against one
alone (CPUs that share a core or a host give less together than N times one). Given,
from GILTRACER_PARALLEL_SPEED, or measured here (giltracer.calibrate.parallel_speed: spinning
processes alone and together, cached 10 minutes); in the prediction, its text, the payload."""
import json
import os

import pytest

import giltracer
from giltracer import calibrate

from conftest import needs_gil
from test_what_if import cpu_bound_pair, work_ns

pytestmark = needs_gil


@pytest.fixture(scope="module")
def pair():
    """Two CPU-bound threads with the same work, freed by their barrier together. A run
    where one held the GIL much longer for it, or where the OS woke the barrier's waiter
    late, was disturbed: measured again, up to 5 runs. (The late wake-up: on this idle
    2-CPU VM the kernel at times queues the woken thread behind its waker, on the waker's
    CPU, for the rest of its slice, ~4 ms of the ~10 ms of work; the model then starts that
    thread's work late, as it was, and the two run side by side for that much less.)"""
    for _ in range(5):
        with giltracer.trace() as t:
            cpu_bound_pair(600_000)
        a, b = work_ns(t, "cpu-0"), work_ns(t, "cpu-1")
        freed = [barrier_left_ns(t, name) for name in ("cpu-0", "cpu-1")]
        if max(a, b) <= 1.25 * min(a, b) and abs(freed[0] - freed[1]) <= 0.1 * min(a, b):
            break
    return t


def barrier_left_ns(t, name):
    """When a thread of cpu_bound_pair left its barrier: the end of its last stretch
    without the GIL before its first hold of over a millisecond (its work)."""
    left = None
    for start, end, state in t.gil_intervals(name):
        if state == "held" and end - start > 1_000_000:
            return left if left is not None else start
        if state == "released":
            left = end
    raise AssertionError(f"{name} never held the GIL for its work")


def test_slower_cpus_together_lengthen_the_side_by_side_part(pair, fresh_cache):
    full = pair.what_if(cpus=2, ft_factor=1.0)
    half = pair.what_if(cpus=2, ft_factor=1.0, parallel_speed=0.5)
    assert (full.parallel_speed, half.parallel_speed) == (1.0, 0.5)
    assert half.parallel_speed_source == "given"
    # The two threads' work runs side by side while both have work: at half speed each,
    # that part takes twice as long, so the prediction grows by about the shorter thread's
    # work (its held time). The main thread's start and join, and the longer thread's
    # rest, run alone and keep their length: how much of the cell they are depends on the
    # load (up to 40 % of it under load on 3.15, whose work here is short), so the test
    # is on the growth, not on the ratio.
    held = {x.name: x.held_ns / 1e9 for x in pair.summary()}
    shorter = min(held["cpu-0"], held["cpu-1"])
    grown = half.predicted_wall_s - full.predicted_wall_s
    assert 0.7 * shorter <= grown <= 1.15 * shorter, (shorter, str(full), str(half))
    assert half.predicted_wall_s <= 2.02 * full.predicted_wall_s
    # One CPU: nothing runs side by side, so the speed changes nothing.
    one = pair.what_if(cpus=1, ft_factor=1.0)
    one_half = pair.what_if(cpus=1, ft_factor=1.0, parallel_speed=0.5)
    assert one_half.predicted_wall_s == pytest.approx(one.predicted_wall_s, rel=1e-9)
    # The replay with the GIL runs one thread at a time: unchanged either way.
    assert half.gil_replay_wall_s == pytest.approx(full.gil_replay_wall_s, rel=1e-9)
    assert "at 0.50 of its speed alone (1.00 CPUs' worth" in half.assumptions[1]
    assert str(half).splitlines()[-1] == (
        "  - Each CPU's speed with all busy (0.50 of one alone): given.")


def test_environment_sets_the_default_and_the_page_uses_it(fresh_cache, monkeypatch):
    monkeypatch.setenv("GILTRACER_PARALLEL_SPEED", "0.8")
    with giltracer.trace() as t:
        cpu_bound_pair(200_000)
    w = t.what_if(cpus=2)
    assert (w.parallel_speed, w.parallel_speed_source) == (0.8, "GILTRACER_PARALLEL_SPEED")
    p = json.loads(t.result.payload())["what_if"]
    assert p["parallel_speed"] == pytest.approx(0.8)
    # The page's prediction is made with the same value on this machine's CPUs.
    same = t.what_if(cpus=os.cpu_count() or 1)
    assert p["predicted_wall_s"] == pytest.approx(same.predicted_wall_s, abs=2e-6)
    # A value that is neither a number in (0, 1] nor "measure" is ignored, with a warning.
    monkeypatch.setenv("GILTRACER_PARALLEL_SPEED", "2")
    with pytest.warns(RuntimeWarning, match=r"GILTRACER_PARALLEL_SPEED='2' is neither"):
        w = t.what_if(cpus=2)
    assert w.parallel_speed == 1.0


def test_measure_uses_the_measurement_and_keeps_it(pair, fresh_cache, monkeypatch):
    calls = []

    def fake(cpus, rounds=3, window=0.2):
        calls.append(cpus)
        return 0.7, [0.6, 0.7, 0.9]

    monkeypatch.setattr(calibrate, "measure_parallel_speed", fake)
    w = pair.what_if(cpus=2, parallel_speed="measure")
    assert (w.parallel_speed, w.parallel_speed_source) == (0.7, "measured on this machine")
    assert calls == [2]
    # Another process within 10 minutes reads the cache file instead of measuring.
    monkeypatch.setattr(calibrate, "_cache", {})
    monkeypatch.setattr(calibrate, "measure_parallel_speed",
                        lambda *a, **k: pytest.fail("measured again"))
    assert pair.what_if(cpus=2, parallel_speed="measure").parallel_speed == 0.7
    # Another number of CPUs is another measurement.
    monkeypatch.setattr(calibrate, "measure_parallel_speed", lambda cpus, **k: (0.5, [0.5]))
    assert pair.what_if(cpus=4, parallel_speed="measure").parallel_speed == 0.5


def test_measuring_that_fails_assumes_independent_cpus_and_says_so(pair, fresh_cache,
                                                                    monkeypatch):
    monkeypatch.setattr(calibrate, "measure_parallel_speed", lambda *a, **k: None)
    w = pair.what_if(cpus=2, parallel_speed="measure")
    assert w.parallel_speed == 1.0
    assert "measuring it here failed" in str(w)
    # One CPU needs no measurement.
    assert calibrate.parallel_speed(1) == (1.0, "one CPU")


def test_the_real_measurement_spins_processes_alone_and_together(fresh_cache):
    got = calibrate.measure_parallel_speed(2, rounds=1, window=0.1)
    assert got is not None
    speed, each = got
    # Two CPUs, or one shared by both: each runs at least at a fraction of its speed alone
    # (a loaded machine lowers it; clamped to (0.05, 1]).
    assert 0.05 <= speed <= 1.0 and len(each) == 1 and each[0] > 0, got
