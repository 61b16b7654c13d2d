"""Blame past the call budget names functions, not "unknown".

Two threads run the same CPU-bound loop and hand the GIL back and forth (each waits for
the other's switch interval). Their calls spend a tiny max_events within milliseconds;
from then on the threads' calls go to the per-thread call trees. Their GIL events stay
well within the (separate) GIL budget, so every wait is exact and blamed; the holder's
function during those waits must be the loop's (burn or its callee tick), not "unknown"."""

import threading
import time

import pytest

import giltracer
import giltracer._core
from conftest import needs_gil

_INFO = giltracer._core.build_info()
BACKENDS = [
    "hooks",  # in-thread GIL counters: the held time votes
    pytest.param("bpf", marks=pytest.mark.skipif(  # no counters: the whole time votes
        not _INFO["bpf_available"], reason=f"bpf backend unavailable: {_INFO['bpf_why']}")),
]

BUDGET = 4000      # call events (the GIL budget is as large: the GIL events stay under it)
RUN_S = 0.6        # each thread's run, past the call budget all but its first milliseconds
CPU_FUNCS = {"burn", "tick"}


def tick(i):
    return i + 1


def burn(barrier):
    barrier.wait()
    end = time.monotonic() + RUN_S
    i = 0
    while time.monotonic() < end:
        for _ in range(200):
            i = tick(i)


@needs_gil  # GIL blame: a free-threaded build blames parks, past the budget too
@pytest.mark.parametrize("backend", BACKENDS)
def test_blame_names_the_holders_function_past_the_call_budget(backend):
    barrier = threading.Barrier(2)
    with giltracer.trace(backend=backend, c_calls=False, max_events=BUDGET) as t:
        ths = [threading.Thread(target=burn, args=(barrier,), name=f"burner-{k}") for k in range(2)]
        for th in ths:
            th.start()
        for th in ths:
            th.join()
    assert t.result.calls_aggregated > 10 * BUDGET, "the call budget was not spent"
    assert t.dropped["gil"] == 0 and not t.result.gil_aggregated, \
        "the GIL events went past their budget: waits would not be blamed at all"
    tids = {th.native_id for th in ths}
    rows = [r for r in t.blame() if r.waiter in tids and r.holder in tids]
    total = sum(r.wait_ns for r in rows)
    # Two CPU-bound threads wait for each other most of the run.
    assert total >= 0.25 * RUN_S * 1e9, rows
    named = sum(r.wait_ns for r in rows if r.function in CPU_FUNCS)
    unknown = sum(r.wait_ns for r in rows if r.function and r.function.startswith("unknown"))
    assert named >= 0.9 * total, (named, unknown, total, rows[:6])
    assert unknown <= 0.05 * total, (named, unknown, total, rows[:6])
