"""The what-if model's tracer cost per call event measured on this machine, now
(giltracer.calibrate): t.what_if(event_ns="measure") and GILTRACER_EVENT_NS; the cache of
the last 10 minutes; the bench host's constant where measuring fails; and the source named
in the text."""
import sys

import pytest

import giltracer
from giltracer import calibrate, whatif_cost
from giltracer.whatif_policy import event_ns_for

from conftest import needs_gil
from workloads import spin

pytestmark = needs_gil


@pytest.fixture(scope="module")
def traced():
    def calls(n):
        for _ in range(n):
            spin(20)
    with giltracer.trace(sched=False) as t:
        calls(2000)
    return t


def test_measure_runs_in_a_child_and_is_kept(fresh_cache, traced, monkeypatch):
    before = giltracer.last()
    w = traced.what_if(cpus=1, ft_factor=1.0, event_ns="measure")
    # A tracer's event costs tens to hundreds of ns on any machine that runs these tests.
    assert 2 < w.event_ns < 5000, w.event_ns
    assert w.event_ns_source == "measured on this machine"
    assert f"cost per call event ({w.event_ns:.0f} ns): measured on this machine." in str(w)
    assert w.tracer_s == pytest.approx(w.events * w.event_ns / 1e9, rel=0.5)
    assert giltracer.last() is before  # the child's sessions are not this process's
    assert (fresh_cache / "giltracer" / "event-ns.json").exists()

    # Another process within 10 minutes (this one with its memory cleared) reads the file.
    monkeypatch.setattr(calibrate, "_cache", {})
    monkeypatch.setattr(calibrate, "_measure", lambda c_calls: pytest.fail("measured again"))
    again = traced.what_if(cpus=1, ft_factor=1.0, event_ns="measure")
    assert again.event_ns == w.event_ns


def test_stale_cache_is_measured_again(fresh_cache, monkeypatch):
    monkeypatch.setattr(calibrate, "_measure", lambda c_calls: 42.0)
    assert calibrate.event_ns(True) == (42.0, "measured on this machine")
    monkeypatch.setattr(calibrate, "_cache", {})
    monkeypatch.setattr(calibrate.time, "time", lambda: 1e12)  # far past CACHE_SECONDS
    monkeypatch.setattr(calibrate, "_measure", lambda c_calls: 43.0)
    assert calibrate.event_ns(True)[0] == 43.0


def test_measuring_that_fails_falls_back_to_the_table_and_says_so(fresh_cache, traced,
                                                                  monkeypatch):
    monkeypatch.setattr(calibrate, "_measure", lambda c_calls: None)
    w = traced.what_if(cpus=1, event_ns="measure")
    api = "sys.monitoring" if sys.version_info >= (3, 12) else "setprofile"
    assert w.event_ns == whatif_cost.TRACER_EVENT_NS[(api, "c_calls")]
    assert w.event_ns_source == "the bench host's (measuring here failed)"
    assert "measuring here failed" in str(w)


def test_environment_sets_the_default(fresh_cache, traced, monkeypatch):
    monkeypatch.setenv("GILTRACER_EVENT_NS", "40")
    w = traced.what_if(cpus=1)
    assert (w.event_ns, w.event_ns_source) == (40.0, "GILTRACER_EVENT_NS")
    monkeypatch.setattr(calibrate, "_measure", lambda c_calls: 77.0)
    monkeypatch.setenv("GILTRACER_EVENT_NS", "measure")
    assert traced.what_if(cpus=1).event_ns == 77.0
    monkeypatch.setenv("GILTRACER_EVENT_NS", "fast")
    with pytest.warns(RuntimeWarning, match="GILTRACER_EVENT_NS='fast' is neither"):
        w = traced.what_if(cpus=1)
    assert w.event_ns_source == "measured on the bench host"


def test_no_call_events_no_cost(fresh_cache, monkeypatch):
    monkeypatch.setattr(calibrate, "_measure", lambda c_calls: pytest.fail("measured"))
    assert event_ns_for({"functions": False}, "measure") == (0.0, "no call events traced")
    assert event_ns_for({"sample_ns": 5_000_000}, "measure")[0] == 0.0


@pytest.mark.parametrize("bad", ["fast", "", b"measure"])
def test_bad_event_ns_names_measure(traced, bad):
    with pytest.raises(ValueError, match='or "measure"'):
        traced.what_if(event_ns=bad)
