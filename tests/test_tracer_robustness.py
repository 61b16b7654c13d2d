"""The function tracer where it is easy to get wrong: C functions whose method table dies
with them (pybind11), max_depth counted from where tracing began, every stream capped
with its drops counted and reported, threads not started by threading (3.9-3.11 too),
a stop racing new threads, blame after truncation."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
import warnings

import pytest

import giltracer
from conftest import needs_gil

CLIPPED_START, CLIPPED_END, C_FUNC = 1, 2, 8
HERE = os.path.dirname(os.path.abspath(__file__))


def me():
    return threading.get_native_id()


def names_of(t, tid=None):
    return [s[2] for s in t.spans(me() if tid is None else tid)]


# --- C functions whose PyMethodDef dies with them (pybind11) ------------------
def build_and_import(cmd, name, out, what):
    """Run the compiler command that writes the extension `out`, then import it as
    `name`; a build that fails skips the test, with the compiler's last words."""
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot build {what}: {r.stderr[-500:]}")
    spec = importlib.util.spec_from_file_location(name, str(out))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def dyndef(tmp_path_factory):
    """tests/ext/gt_dyndef.c built for the running interpreter."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    include = sysconfig.get_paths()["include"]
    if not cc:
        pytest.skip("no C compiler to build the test extension")
    if not os.path.exists(os.path.join(include, "Python.h")):
        pytest.skip(f"no Python.h for this interpreter in {include} (install its -dev package)")
    out = tmp_path_factory.mktemp("ext") / ("gt_dyndef" + sysconfig.get_config_var("EXT_SUFFIX"))
    cmd = [cc, "-shared", "-fPIC", "-O1", "-pthread", "-I", include,
           os.path.join(HERE, "ext", "gt_dyndef.c"), "-o", str(out)]
    return build_and_import(cmd, "gt_dyndef", out, "the test extension")


@pytest.mark.parametrize("holder", ["capsule", "record"])
def test_c_functions_created_and_freed_in_a_loop_keep_their_names(dyndef, holder):
    # Each function's PyMethodDef is freed with it, and malloc hands the same address
    # to the next one: keyed by that address, all of them merged into the first, whose
    # name was read after free at stop; and every one was called "PyCapsule.<name>"
    # (pybind11 2) or "<function record type>.<name>" (pybind11 3).
    n = 40
    with giltracer.trace() as t:
        for i in range(n):
            f = dyndef.make(f"fn_{i}", holder)
            f()
            f()
            del f
    spans = [s for s in t.spans(me()) if s[4] & C_FUNC and "fn_" in s[2]]
    got = sorted(s[2] for s in spans)
    assert got == sorted(f"gt_dyndef.fn_{i}" for i in range(n) for _ in range(2))



@pytest.fixture(scope="module")
def pyb(tmp_path_factory):
    """tests/ext/gt_pyb.cpp built with pybind11, when it is installed."""
    pybind11 = pytest.importorskip("pybind11", reason="pybind11 is not installed here "
                                   "(the C holders above cover the same mechanism)")
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    include = sysconfig.get_paths()["include"]
    if not cxx or not os.path.exists(os.path.join(include, "Python.h")):
        pytest.skip("no C++ compiler or no Python.h to build the pybind11 module")
    out = tmp_path_factory.mktemp("pyb") / ("gt_pyb" + sysconfig.get_config_var("EXT_SUFFIX"))
    cmd = [cxx, "-O0", "-shared", "-fPIC", "-std=c++17", "-I", include, "-I",
           pybind11.get_include(), os.path.join(HERE, "ext", "gt_pyb.cpp"), "-o", str(out)]
    return build_and_import(cmd, "gt_pyb", out, "the pybind11 module")


def test_pybind11_functions_are_named_and_not_merged(pyb):
    n = 30
    with giltracer.trace() as t:
        pyb.add(1, 2)
        for i in range(n):
            f = pyb.make(f"fn_{i}")  # no scope: no module to name it by
            f()
            del f
    names = [s[2] for s in t.spans(me()) if s[4] & C_FUNC]
    assert names.count("gt_pyb.add") == 1
    assert sorted(x for x in names if "fn_" in x) == sorted(f"fn_{i}" for i in range(n))

def test_builtin_methods_are_still_named_by_type():
    # The bound builtin made per call (3.11) is not what keys the function.
    with giltracer.trace() as t:
        for i in range(100):
            [].append(i)
            dict.fromkeys("ab")
    names = [s[2] for s in t.spans(me()) if s[4] & C_FUNC]
    assert names.count("list.append") == 100
    assert names.count("dict.fromkeys") == 100


# --- max_depth counts from where tracing began ---------------------------------
def cell_h():
    return 1


def cell_g():
    return cell_h()


def cell_f():
    return cell_g()


def at_depth(n, fn):
    return fn() if n == 0 else at_depth(n - 1, fn)


def test_max_depth_is_relative_to_the_frames_open_at_start():
    # A notebook cell runs 30-40 frames deep: counted from the bottom of the stack,
    # max_depth=2 recorded nothing of it.
    def cell():
        with giltracer.trace(c_calls=False, max_depth=2) as t:
            cell_f()
        return t

    t = at_depth(40, cell)
    names = names_of(t)
    assert names.count("cell_f") == 1
    assert names.count("cell_g") == 1
    assert "cell_h" not in names
    # The frames open at start are still there, clipped, and nest around the cell.
    assert names.count("at_depth") >= 40


def test_max_depth_in_a_thread_started_before_the_trace():
    go, done = threading.Event(), threading.Event()

    def worker():
        def body():
            go.wait()
            cell_f()
            done.set()
            time.sleep(0.05)
        at_depth(30, body)

    th = threading.Thread(target=worker, name="deep-worker")
    th.start()
    with giltracer.trace(c_calls=False, max_depth=2) as t:
        go.set()
        done.wait(10)
    th.join()
    spans = t.spans(th.native_id)
    names = [s[2] for s in spans]
    # 30+ frames deep: counted from the bottom, max_depth=2 recorded nothing of it.
    assert names.count("cell_f") == 1 and names.count("cell_g") == 1
    # Counted from its innermost frame open at start (inside go.wait()).
    open_depth = max(s[3] for s in spans if s[4] & CLIPPED_START)
    assert max(s[3] for s in spans if not s[4] & CLIPPED_START) <= open_depth + 2


# --- every stream is capped, drops are counted and reported --------------------
def gil_churn(n_threads=3, rounds=300):
    def work():
        for _ in range(rounds):
            sum(range(2000))
            time.sleep(0.0002)  # releases and retakes the GIL, and switches out

    ths = [threading.Thread(target=work) for _ in range(n_threads)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()


@needs_gil  # the cap is spent in GIL handoffs (gil_churn)
def test_tiny_cap_without_functions_caps_gil_events_and_reports_drops(tmp_path):
    cap = 300
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with giltracer.trace(functions=False, max_events=cap, sched=False) as t:
            gil_churn()
    if not t.gil_known:
        pytest.skip(f"no GIL probe here: {t.backend_reason}")
    assert t.result.gil_events <= cap
    # Past the cap GIL events are aggregated (tests/test_long_cells.py), not dropped.
    assert t.result.gil_aggregated > 0
    assert t.dropped["gil"] == 0
    assert t.dropped["calls"] == 0
    assert any("GIL and OS-state events" in str(w.message) for w in caught)
    assert f"NOTE: past max_events, {t.result.gil_aggregated} GIL events" in t.summary_text()
    # The viewer's metadata carries the counts and the cap (Chrome JSON shares it).
    t.save(tmp_path / "t.json")
    meta = json.loads((tmp_path / "t.json").read_text())["otherData"]
    assert meta["gil_aggregated"] == t.result.gil_aggregated and meta["max_events"] == cap


def test_tiny_cap_caps_scheduler_records_and_reports_drops():
    cap = 300
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        with giltracer.trace(functions=False, gil=False, max_events=cap) as t:
            gil_churn()
    if not t.sched_status.startswith("perf_event"):
        pytest.skip(f"no perf scheduler records here: {t.sched_status}")
    kept = sum(len(t.os_intervals(th.tid)) for th in t.threads)
    assert t.result.sched_aggregated > 0  # past the cap: aggregated, not dropped
    assert t.dropped["sched"] == 0
    # intervals, not records, plus each thread's coalesced tiles: loose bound
    assert kept <= 2 * cap + (2 + 3 * 2048) * len(t.threads)
    assert "scheduler records were aggregated" in t.summary_text()


def test_lost_scheduler_records_are_warned_as_lost_not_as_capped(monkeypatch):
    """Records a full perf ring refused (4 KiB rings that may not grow, drained only at the
    end: ~600 switches per thread against ~170 records a ring) are counted and warned
    about as lost, with the cause, not blamed on max_events (which aggregates)."""
    monkeypatch.setenv("GILTRACER_SCHED_RING_KB", "4")
    monkeypatch.setenv("GILTRACER_SCHED_RING_MAX_KB", "4")
    monkeypatch.setenv("GILTRACER_SCHED_PERIOD_MS", "5000")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with giltracer.trace(functions=False, gil=False) as t:
            gil_churn(3, 300)
    if not t.sched_status.startswith("perf_event"):
        pytest.skip(f"no perf scheduler records here: {t.sched_status}")
    assert t.dropped["sched"] == t.result.sched_lost > 0
    assert t.result.sched_aggregated == 0
    lost = [str(w.message) for w in caught if "were lost" in str(w.message)]
    assert lost == [f"giltracer: {t.dropped['sched']:,} scheduler records were lost (a probe's "
                    "buffer overflowed, or memory ran out; max_events never drops them, it "
                    "aggregates them): GIL figures and OS states may have gaps."]


def test_no_cap_no_drops():
    with giltracer.trace(max_events=None) as t:
        gil_churn(2, 50)
    assert t.dropped == {"calls": 0, "gil": 0, "sched": 0}


# --- threads not started by threading are traced (3.9-3.11 too) ---------------
def qual(name, cls=None):
    return f"{cls}.{name}" if cls and sys.version_info >= (3, 11) else name


def test_threads_from_start_new_thread_are_traced():
    import _thread

    done, tid = threading.Event(), []

    def raw_worker():
        tid.append(threading.get_native_id())
        for _ in range(100):
            cell_f()
        done.set()

    with giltracer.trace() as t:
        _thread.start_new_thread(raw_worker, ())
        assert done.wait(30)
    spans = t.spans(tid[0])
    names = [s[2] for s in spans]
    assert names.count("cell_f") == 100 and names.count("cell_h") == 100
    outer = [s for s in spans if s[2].endswith("raw_worker")]
    assert len(outer) == 1 and outer[0][3] == 0  # the thread's own outermost frame
    assert all(outer[0][0] <= s[0] and s[1] <= outer[0][1] for s in spans)


def test_threading_threads_are_recorded_once():
    # With threads attached as they appear, threading's own start-up hook must not
    # record the thread's first frames a second time.
    def worker():
        cell_f()

    with giltracer.trace() as t:
        th = threading.Thread(target=worker, name="once")
        th.start()
        th.join()
    spans = t.spans(th.native_id)
    names = [s[2] for s in spans]
    assert names.count(qual("_bootstrap_inner", "Thread")) == 1
    assert names.count(qual("_bootstrap", "Thread")) == 1
    assert names.count("cell_f") == 1
    assert not [s for s in spans if s[4] & CLIPPED_END and s[2] != qual("_bootstrap", "Thread")
                and s[2] != qual("_bootstrap_inner", "Thread")]


def test_threads_started_by_c_code_are_traced(dyndef):
    go, done, tid = threading.Event(), threading.Event(), []

    def in_c_thread():
        tid.append(threading.get_native_id())
        go.wait(30)
        for _ in range(50):
            cell_f()
        done.set()

    with warnings.catch_warnings(record=True):  # its first lines may run untraced
        warnings.simplefilter("always")
        with giltracer.trace(c_calls=False) as t:
            dyndef.call_in_c_thread(in_c_thread, 0)
            while not tid:  # C returns here let the tracer attach to the new thread
                time.sleep(0.001)
            time.sleep(0.01)
            go.set()
            assert done.wait(30)
    names = names_of(t, tid[0])
    assert names.count("cell_f") == 50



def test_a_c_thread_that_ran_untraced_is_reported(dyndef):
    # While every traced thread sleeps in C, a thread started by C runs Python code
    # that no hook sees (3.9-3.11; sys.monitoring sees it on 3.12+): said loudly.
    ran, leave, tid = threading.Event(), threading.Event(), []

    def in_c_thread():
        tid.append(threading.get_native_id())
        for _ in range(10):
            cell_f()
        ran.set()
        leave.wait(30)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with giltracer.trace(c_calls=False) as t:
                # Its thread state appears 50 ms later, while this thread blocks in
                # one C call (no hook runs here meanwhile).
                dyndef.call_in_c_thread(in_c_thread, 50_000)
                assert ran.wait(30)
        finally:
            leave.set()
    notes = [str(w.message) for w in caught if "before the function tracer" in str(w.message)]
    traced = names_of(t, tid[0]).count("cell_f")
    if sys.version_info >= (3, 12):
        assert not notes and t.result.tracer_note is None
        assert traced == 10
    elif notes:  # the usual case
        assert len(notes) == 1 and "1 thread(s) started by C code" in notes[0]
        assert "started by C code" in t.summary_text()
    else:  # this thread was slow enough to attach the new one before it ran
        assert traced == 10


# --- smaller cases ----------------------------------------------------------------------
def test_start_with_a_thread_list_that_is_not_a_sequence():
    # 3.9/3.10 look thread states up in this list: a failed len() left its error set,
    # and start() then failed with SystemError while the session kept recording.
    from giltracer import _core as core
    s = core.Session(own_dir=giltracer.api._PACKAGE_DIR, sched=False)
    try:
        s.start(iter([(threading.get_ident(), threading.get_native_id())]))
        cell_f()
    finally:
        s.stop()
    r = s.finish(None, None)
    assert r.event_count > 0


def test_stop_gives_no_dead_threads_profiler_to_a_new_thread():
    # The profiler a thread had at start is restored at stop by thread state; a thread
    # that ended meanwhile may leave its PyThreadState address to a new thread, which
    # then got the dead thread's profiler.
    def marker(*args):
        return None

    ready, leave, release = threading.Event(), threading.Event(), threading.Event()
    seen = []

    def old():
        sys.setprofile(marker)
        ready.set()
        leave.wait(30)

    def new():
        release.wait(30)
        seen.append(sys.getprofile())

    th = threading.Thread(target=old)
    th.start()
    assert ready.wait(30)
    news = [threading.Thread(target=new) for _ in range(8)]
    try:
        with giltracer.trace(c_calls=False):
            leave.set()
            th.join()
            for n in news:
                n.start()
    finally:
        release.set()
        for n in news:
            n.join()
    assert seen == [None] * len(news)


def test_blame_after_truncation_names_the_holders_function():
    def spin():
        end = time.monotonic() + 0.15
        while time.monotonic() < end:
            for _ in range(100):
                cell_h()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with giltracer.trace(c_calls=False, max_events=2000, sched=False) as t:
            ths = [threading.Thread(target=spin) for _ in range(2)]
            for th in ths:
                th.start()
            for th in ths:
                th.join()
    assert any("call trees" in str(w.message) for w in caught)
    if not t.gil_known:
        pytest.skip(f"no GIL probe here: {t.backend_reason}")
    unknown = "unknown (calls truncated: max_events)"
    rows = t.blame()
    assert rows, "two spinning threads never waited for each other"
    # Past the cut the call trees name the function that held the GIL (the spin loop's).
    named = sum(r.wait_ns for r in rows if r.function and r.function.split(".")[-1] in ("spin", "cell_h"))
    assert named >= 0.5 * sum(r.wait_ns for r in rows), rows
    assert not any(r.function == unknown and r.wait_ns > 0.1 * named for r in rows), rows
    assert "spin" in t.summary_text(top=50)


@needs_gil  # the cap is spent in GIL events: each sleep releases and takes the GIL
def test_cli_reports_drops_of_every_stream(tmp_path):
    script = tmp_path / "churn.py"
    script.write_text(
        "import threading, time\n"
        "def work():\n"
        "    for _ in range(300):\n"
        "        sum(range(2000)); time.sleep(0.0002)\n"
        "ts = [threading.Thread(target=work) for _ in range(3)]\n"
        "[t.start() for t in ts]; [t.join() for t in ts]\n")
    p = subprocess.run([sys.executable, "-m", "giltracer", "--no-functions", "--no-sched",
                        "--max-events", "300", "-o", str(tmp_path / "t.json"), str(script)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    meta = json.loads((tmp_path / "t.json").read_text())["otherData"]
    if not meta["gil_known"]:
        pytest.skip("no GIL probe here")
    assert meta["gil_aggregated"] > 0  # past the cap: aggregated, and the report says so
    assert f"NOTE: past max_events, {meta['gil_aggregated']} GIL events" in p.stderr
