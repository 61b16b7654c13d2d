"""The what-if model's free-threading factor measured here (giltracer.calibrate.ft_factor):
t.what_if(ft_factor="measure") and GILTRACER_FT_FACTOR; finding this Python's
free-threaded build (GILTRACER_FT_PYTHON, python3.Nt on PATH); the bench host's factor,
with the reason, where it cannot be measured; the cache; the source named in the text."""
import math
import os
import shutil
import sys

import pytest

import giltracer
from giltracer import calibrate, whatif_cost
from giltracer.whatif_policy import ft_factor_for

from conftest import needs_gil
from workloads import spin

pytestmark = needs_gil
VERSION = "%d.%d" % sys.version_info[:2]
BENCH = whatif_cost.FT_SINGLE_THREAD_FACTOR


@pytest.fixture(scope="module")
def traced():
    with giltracer.trace(sched=False) as t:
        spin(200_000)
    return t


def fake_runs(monkeypatch, ft_times, ft_version=VERSION, free_threaded=True):
    """calibrate._ft_run answering for this interpreter (times 1.0 each) and for any other
    (`ft_times`, a list per round or one dict); returns the calls made."""
    calls = []
    rounds = iter(ft_times if isinstance(ft_times, list) else [ft_times] * 10)

    def run(python, reps):
        calls.append((python, dict(reps)))
        if python == sys.executable:
            return {"version": VERSION, "free_threaded": False, "gil_enabled": True,
                    "reps": {"a": 7, "b": 9}, "times": {"a": 1.0, "b": 1.0}}
        return {"version": ft_version, "free_threaded": free_threaded,
                "gil_enabled": not free_threaded, "reps": reps, "times": next(rounds)}
    monkeypatch.setattr(calibrate, "_ft_run", run)
    return calls


def test_measure_is_the_median_of_rounds_geometric_means(fresh_cache, traced, monkeypatch):
    monkeypatch.setenv("GILTRACER_FT_PYTHON", "/opt/ft/bin/python3t")
    calls = fake_runs(monkeypatch, [{"a": 1.2, "b": 1.5}, {"a": 2.0, "b": 2.0},
                                    {"a": 1.0, "b": 1.21}])
    w = traced.what_if(cpus=2, ft_factor="measure")
    # Rounds: sqrt(1.2 * 1.5) = 1.342, 2.0, 1.1: the median.
    assert w.ft_factor == pytest.approx(math.sqrt(1.8), rel=1e-9)
    assert w.ft_factor_source == "measured on this machine against /opt/ft/bin/python3t"
    assert (f"  - Free-threading's single-thread cost ({w.ft_factor:.2f}x): measured on this "
            "machine against /opt/ft/bin/python3t.") in str(w).splitlines()
    # Each round: this interpreter sizes the batches, the other runs the same calls.
    assert [c[0] for c in calls] == [sys.executable, "/opt/ft/bin/python3t"] * 3
    assert calls[1][1] == {"a": 7, "b": 9}
    assert w.predicted_wall_s > traced.what_if(cpus=2, ft_factor=1.0).predicted_wall_s

    # Kept: this process, and another one within 10 minutes (memory cleared), read it.
    monkeypatch.setattr(calibrate, "_ft_cache", {})
    monkeypatch.setattr(calibrate, "measure_ft_factor", lambda p: pytest.fail("measured again"))
    assert ft_factor_for("measure")[0] == w.ft_factor
    assert (fresh_cache / "giltracer" / "event-ns.json").exists()


@pytest.mark.parametrize("version, free_threaded, why", [
    ("3.99", True, "is Python 3.99, not " + VERSION),
    (VERSION, False, "is not a free-threaded build running without the GIL"),
])
def test_a_wrong_interpreter_falls_back_to_the_bench_hosts_and_says_why(
        fresh_cache, traced, monkeypatch, version, free_threaded, why):
    monkeypatch.setenv("GILTRACER_FT_PYTHON", "/opt/other/python")
    fake_runs(monkeypatch, {"a": 1.3, "b": 1.3}, version, free_threaded)
    w = traced.what_if(cpus=2, ft_factor="measure")
    assert w.ft_factor == BENCH
    assert w.ft_factor_source == (f"measured on the bench host (measuring it here failed: "
                                  f"/opt/other/python {why})")


def test_no_free_threaded_build_found_says_where_it_looked(fresh_cache, traced, monkeypatch,
                                                           tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(calibrate.sys, "executable", str(tmp_path / "python"))
    monkeypatch.setattr(calibrate.sys, "base_prefix", str(tmp_path))
    monkeypatch.setattr(calibrate, "_ft_run", lambda *a: pytest.fail("ran"))
    w = traced.what_if(cpus=2, ft_factor="measure")
    assert w.ft_factor == BENCH
    assert w.ft_factor_source == (
        f"measured on the bench host (measuring it here failed: no free-threaded "
        f"python{VERSION}t on PATH or beside {tmp_path / 'python'} (GILTRACER_FT_PYTHON "
        f"names one))")


def test_a_real_run_against_this_interpreter_is_refused(fresh_cache):
    """The real child, run by a build with the GIL named as the free-threaded one."""
    v, why = calibrate.measure_ft_factor(sys.executable, rounds=1)
    assert v is None
    assert why == f"{sys.executable} is not a free-threaded build running without the GIL"


def test_environment_sets_the_default(fresh_cache, traced, monkeypatch):
    monkeypatch.setenv("GILTRACER_FT_FACTOR", "1.7")
    w = traced.what_if(cpus=2)
    assert (w.ft_factor, w.ft_factor_source) == (1.7, "GILTRACER_FT_FACTOR")
    with giltracer.trace(sched=False) as t:  # the viewer's tab: the same default
        spin(1000)
    import json
    assert json.loads(t.result.payload())["what_if"]["ft_factor"] == pytest.approx(1.7)
    monkeypatch.setenv("GILTRACER_FT_FACTOR", "0")
    with pytest.warns(RuntimeWarning, match="GILTRACER_FT_FACTOR='0' is neither"):
        w = traced.what_if(cpus=2)
    assert w.ft_factor == BENCH and w.ft_factor_source.startswith("measured on the bench host")


def test_the_default_names_the_bench_host_and_how_to_measure(traced):
    w = traced.what_if(cpus=2)
    if os.environ.get("GILTRACER_FT_FACTOR"):
        pytest.skip("GILTRACER_FT_FACTOR is set")
    assert w.ft_factor == BENCH
    assert 'ft_factor="measure" measures it here' in w.ft_factor_source


@pytest.mark.parametrize("bad", ["fast", "", b"measure"])
def test_bad_ft_factor_names_measure(traced, bad):
    with pytest.raises(ValueError, match='or "measure"'):
        traced.what_if(ft_factor=bad)


def free_threaded_build():
    """This Python's free-threaded build where calibrate finds one (PATH, beside this
    interpreter, GILTRACER_FT_PYTHON), else None; read once, before any fixture."""
    found, _ = calibrate.find_ft_python()
    found = found and shutil.which(found)
    return found or None


FT_BUILD = free_threaded_build()


@pytest.mark.skipif(not FT_BUILD, reason=f"no free-threaded python{VERSION}t here (make "
                                         "pythons-ft builds 3.14t; make test-sid puts it on PATH)")
def test_a_real_measurement_against_the_free_threaded_build(fresh_cache):
    v, why = calibrate.measure_ft_factor(FT_BUILD, rounds=1)
    assert why == ""
    # 3.14t's single-thread time against 3.14's here: 1.2-1.6 (bench/ft_cost.py).
    assert 0.8 < v < 3.0, v
