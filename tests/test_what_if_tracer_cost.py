"""Trace.what_if() predicts the untraced cell: the tracer's own cost, event_ns per call event
(a call's start or end) in the time a thread held the GIL, is not work without the GIL
(core/analyze/whatif.c; the measured default in giltracer.whatif_cost.TRACER_EVENT_NS)."""
import json
import sys

import pytest

import giltracer
from giltracer import whatif_cost
from conftest import needs_gil
from workloads import call_loop

pytestmark = needs_gil

API = "sys.monitoring" if sys.version_info >= (3, 12) else "setprofile"


def test_call_events_cost_removed_from_the_work():
    # sched=False: no OS states, so the work is the held time itself (CPU share 1)
    with giltracer.trace(backend="hooks", sched=False) as t:
        call_loop(100_000)
    w0 = t.what_if(cpus=1, ft_factor=1.0, event_ns=0)
    # 10 ns: under any traced call's time here (larger, a piece shorter than its events'
    # cost is clamped to none left)
    w1 = t.what_if(cpus=1, ft_factor=1.0, event_ns=10)
    assert w0.events >= 200_000, w0.events  # 100k calls of leaf: a start and an end each
    assert w1.events == w0.events and w0.tracer_s == 0
    assert w1.event_ns == 10
    assert w1.tracer_s == pytest.approx(w1.events * 10e-9, rel=1e-9)
    # one thread on one CPU: the prediction is shorter by exactly the events' cost
    assert w0.predicted_wall_s - w1.predicted_wall_s == pytest.approx(w1.tracer_s, rel=1e-6)
    assert w1.gil_replay_wall_s == pytest.approx(w0.gil_replay_wall_s, rel=1e-9)
    assert "10 ns a call event" in w1.assumptions[0], w1.assumptions[0]


def test_no_call_events_nothing_removed():
    with giltracer.trace(backend="hooks", sched=False, functions=False) as t:
        call_loop(100_000)
    w0 = t.what_if(cpus=1, ft_factor=1.0, event_ns=0)
    w1 = t.what_if(cpus=1, ft_factor=1.0, event_ns=50)
    assert w1.events == 0 and w1.tracer_s == 0
    assert w1.predicted_wall_s == w0.predicted_wall_s
    assert t.what_if().event_ns == 0  # calls not traced: no default cost either


def test_default_is_the_measured_cost():
    with giltracer.trace(backend="hooks") as t:
        call_loop(1000)
    want = whatif_cost.TRACER_EVENT_NS[(API, "c_calls")]
    assert want > 0
    w = t.what_if()
    assert w.event_ns == want and w.tracer_s > 0
    # the viewer's What if tab is predicted with the same default
    page = json.loads(t.result.payload())
    assert f"{want:.0f} ns a call event" in page["what_if"]["assumptions"][0]
    with giltracer.trace(backend="hooks", c_calls=False) as t2:
        call_loop(1000)
    assert t2.what_if().event_ns == whatif_cost.TRACER_EVENT_NS[(API, "functions")]


@pytest.mark.parametrize("bad", [-1.0, float("inf"), float("nan"), True, "5"])
def test_event_ns_checked(bad):
    with giltracer.trace(backend="hooks") as t:
        call_loop(10)
    with pytest.raises(ValueError, match="event_ns"):
        t.what_if(event_ns=bad)
