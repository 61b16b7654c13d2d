"""Session lifecycle at the Python boundary: a Trace freed while it records
keeps the exception being raised; giltracer.stop_active() frees a trace nothing can stop;
concurrent profile builds keep one; a thread alive at stop runs to t1; a reused tid gets a
record of its own."""

import gc
import json
import os
import sys
import threading
import time

import pytest

import giltracer
from giltracer import _core
from conftest import FREE_THREADED


def work(n=2000):
    def f(i):
        return i * 2

    return sum(f(i) for i in range(n))


def hooks_gone():
    """No profile function or monitoring tool of giltracer's is left on this thread,
    and threading's hook for new threads is back to what it was (None here)."""
    if sys.version_info >= (3, 12):
        assert "giltracer" not in [sys.monitoring.get_tool(i) for i in range(6)]
    else:
        assert sys.getprofile() is None
    assert getattr(threading, "_profile_hook", None) is None


def later_trace_works():
    with giltracer.trace(backend="hooks") as t:
        work()
    assert t.event_count > 0
    assert any(r.name.endswith("f") and r.calls == 2000 for r in t.functions())


# -- a recording Trace freed while an exception is raised ---------------------------

def test_freed_recording_trace_keeps_the_type_error():
    with pytest.raises(TypeError, match="unsupported operand"):
        giltracer.trace(backend="hooks").start() + 1
    hooks_gone()
    later_trace_works()


def test_freed_recording_trace_keeps_the_zero_division_error():
    with pytest.raises(ZeroDivisionError):
        [giltracer.trace(backend="hooks").start(), 1 / 0]
    hooks_gone()
    later_trace_works()


def test_teardown_failure_in_dealloc_is_unraisable_and_the_error_kept(monkeypatch):
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", seen.append)
    real = threading.setprofile

    def refuse(func):
        raise OSError("setprofile refused")

    def break_setprofile():
        threading.setprofile = refuse

    try:
        with pytest.raises(ZeroDivisionError):
            [giltracer.trace(backend="hooks").start(), break_setprofile(), 1 / 0]
    finally:
        threading.setprofile = real
        real(None)  # what the failed restore left behind
    assert len(seen) == 1, seen
    assert isinstance(seen[0].exc_value, OSError)
    assert "giltracer stopped a trace freed while it was recording" in seen[0].err_msg
    hooks_gone()
    later_trace_works()


# -- giltracer.stop_active() --------------------------------------------------------

def test_stop_active_frees_a_trace_kept_alive_by_a_traceback():
    def start_then_fail():
        t = giltracer.trace(backend="hooks").start()  # noqa: F841 (kept by the frame)
        raise ValueError("the user's error")

    try:
        start_then_fail()
    except ValueError as e:
        tb = e.__traceback__  # as sys.last_traceback keeps it after an uncaught error
    with pytest.raises(RuntimeError, match=r"stop it first \(with its Trace's stop\(\), or "
                                           r"giltracer\.stop_active\(\)\)"):
        giltracer.trace(backend="hooks").start()
    assert giltracer.stop_active() is True
    assert giltracer.stop_active() is False
    hooks_gone()
    later_trace_works()
    old = tb.tb_next.tb_frame.f_locals["t"]
    released = r"this trace was stopped by giltracer\.stop_active\(\); its records were released"
    with pytest.raises(RuntimeError, match=released):
        old.stop()
    with pytest.raises(RuntimeError, match=released):
        old.stop()
    with pytest.raises(RuntimeError, match=released):
        old.summary()
    assert "released" in repr(old)
    with pytest.raises(RuntimeError, match=released):
        old._session.finish()
    del old, tb
    gc.collect()  # its Session's dealloc: nothing left to do
    later_trace_works()


def test_stop_active_of_a_stopped_unfinished_session():
    t = giltracer.trace(backend="hooks").start()
    work()
    t._session.stop()
    assert t._session.state == "stopped"
    assert giltracer.stop_active() is True
    assert t._session.state == "released"
    with pytest.raises(RuntimeError, match="stopped by giltracer.stop_active"):
        t.stop()
    later_trace_works()


def test_stop_active_while_the_owner_stops_is_refused(monkeypatch):
    """Python runs inside stop (threading.setprofile restores the thread hook): a
    stop_active() from there must not release the records the owner is finishing."""
    real = threading.setprofile
    seen = []

    def reentrant(func):
        try:
            seen.append(giltracer.stop_active())
        except RuntimeError as e:
            seen.append(str(e))
        real(func)

    t = giltracer.trace(backend="hooks").start()
    work()
    monkeypatch.setattr(threading, "setprofile", reentrant)
    t.stop()
    monkeypatch.undo()
    assert len(seen) == 1 and "right now; try again" in str(seen[0]), seen
    assert any(r.name.endswith("f") and r.calls == 2000 for r in t.functions())
    hooks_gone()
    later_trace_works()


def test_stop_active_without_a_session():
    assert giltracer.stop_active() is False


# -- concurrent profile builds ------------------------------------------------------

def test_concurrent_profile_builds_keep_one():
    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)

    with giltracer.trace(backend="hooks", gil=False, sched=False) as t:
        fib(22)  # ~57k calls: the build takes a while with the GIL released
    before = _core._live_profiles()
    n = 8
    barrier = threading.Barrier(n)
    out = [None] * n

    def worker(i):
        barrier.wait()
        out[i] = t.result.profile_functions(None)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert all(o == out[0] for o in out)
    assert any(row[1] > 1000 for row in out[0])  # fib's calls are there
    # One profile built and kept for the result; the losers of the race were freed.
    assert _core._live_profiles() == before + 1
    rows = t.functions()
    assert _core._live_profiles() == before + 1
    assert next(r for r in rows if r.name.endswith("fib")).calls == 57313


def test_one_result_used_from_several_threads_at_once(tmp_path):
    """Pages saved, profiles built, summaries and the page's settings set on one result
    from several threads at once (in parallel on a free-threaded build, where make
    test-tsan-py runs this under ThreadSanitizer): every answer is whole, and the same
    as the one given alone."""
    import pagedata

    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)

    with giltracer.trace(backend="hooks", gil=False, sched=False) as t:
        fib(16)
    r = t.result
    kinds = ['{"k":%d,"pad":"%s"}' % (k, "x" * (64 << 10)) for k in range(2)]

    def page(path):
        p = pagedata.payload(open(path, encoding="utf-8").read())
        return p.pop("lock_kinds", None), p

    r.set_what_if(4, 1.0)
    r.save(str(tmp_path / "alone.html"), "html")
    _, alone_page = page(tmp_path / "alone.html")
    alone = (r.summary(), r.profile_functions(None), r.profile(None), r.text(5, False))
    n, rounds = 6, 4
    barrier = threading.Barrier(n)
    out = {}
    errors = []

    def worker(i):
        try:
            barrier.wait()
            for k in range(rounds):
                op = (i + k) % 3
                if op == 0:
                    path = tmp_path / f"{i}-{k}.html"
                    r.save(str(path), "html")
                    out[i, k] = page(path)
                elif op == 1:
                    out[i, k] = (r.summary(), r.profile_functions(None), r.profile(None),
                                 r.text(5, False))
                else:  # what a page's save sets first (the same what-if: the page stays)
                    r.set_lock_kinds(kinds[(i + k) % 2])
                    r.set_what_if(4, 1.0)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    pages = [v for v in out.values() if len(v) == 2]
    assert pages and len(pages) + len([v for v in out.values() if len(v) == 4]) == len(out)
    for lock_kinds, p in pages:
        assert p == alone_page
        # the text whole, as one of the threads set it, or none yet
        assert lock_kinds in (None, *[json.loads(k) for k in kinds])
    for v in out.values():
        if len(v) == 4:
            assert v == alone


SAVE_WHILE_SET = r"""
import os, sys, tempfile, threading, time
import giltracer

with giltracer.trace(backend="hooks", gil=False, sched=False) as t:
    sum(range(1000))
r = t.result
r.set_lock_kinds('{"x":"' + os.urandom(2 << 20).hex() + '"}')
folder = tempfile.mkdtemp()
path = os.path.join(folder, "page.html")
os.mkfifo(path)  # its open returns when the writer has opened it: the start of the write
saver = threading.Thread(target=r.save, args=(path, "html"))
saver.start()
with open(path, "rb") as f:
    time.sleep(float(sys.argv[1]))
    r.set_lock_kinds(None)  # the text the writer is reading goes (unmapped at once, below)
    page = f.read()
saver.join()
print("READ", len(page))
"""


@pytest.mark.parametrize("delay", [0.0, 0.0005, 0.001, 0.003])
def test_setting_the_lock_kinds_while_a_page_is_written_frees_nothing_under_it(delay):
    """The page's lock kinds are set (free-threaded builds, at each save) while another
    thread writes a page without the GIL (which a free-threaded build has not anyway): the
    set must not free the text under the writer (it crashed it). With
    MALLOC_MMAP_THRESHOLD_ the freed text is unmapped at once, so a read of it faults."""
    import subprocess

    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536")
    p = subprocess.run([sys.executable, "-c", SAVE_WHILE_SET, str(delay)], capture_output=True,
                       text=True, timeout=120, env=env)
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr[-2000:])
    assert int(p.stdout.split("READ")[1]) > 2 << 20  # the whole page (the text is incompressible)


# -- a thread that exits between stop and finish ------------------------------------

def test_thread_alive_at_stop_runs_to_t1_even_if_it_exits_before_finish():
    ready, go = threading.Event(), threading.Event()

    def late():
        work()
        ready.set()
        go.wait()

    def early():
        work()

    def wait_gone(th):
        # join() returns before the kernel thread has exited (its last context switch
        # can still come after t1): wait until it has.
        deadline = time.monotonic() + 10
        while os.path.exists(f"/proc/self/task/{th.native_id}") and time.monotonic() < deadline:
            time.sleep(0.001)
        assert not os.path.exists(f"/proc/self/task/{th.native_id}")

    t = giltracer.trace(backend="hooks").start()
    a = threading.Thread(target=late, name="alive-at-stop")
    b = threading.Thread(target=early, name="ended-before-stop")
    a.start()
    b.start()
    b.join()
    wait_gone(b)
    assert ready.wait(10)
    t._session.stop()  # stop, then the thread exits, then finish (Trace.stop)
    go.set()
    a.join()
    wait_gone(a)
    t.stop()
    info = {x.name: x for x in t.threads}
    t1 = t.result.t1_ns
    assert info["alive-at-stop"].end_ns == t1
    assert info["ended-before-stop"].end_ns < t1


# -- a tid reused within a session --------------------------------------------------

def _pid_max():
    try:
        with open("/proc/sys/kernel/pid_max") as f:
            return int(f.read())
    except OSError:
        return None


# Tens of thousands of threads (~25 s): the tid's reuse is the registry's concern, the
# same on every interpreter (each one's thread records are tested above), so CI's matrix
# runs it on the main interpreter only.
@pytest.mark.any_python
@pytest.mark.filterwarnings("ignore:giltracer.*were lost:RuntimeWarning")
@pytest.mark.skipif(not _pid_max() or _pid_max() > 65536,
                    reason="tids are reused only after a wrap of pid_max (here too large to "
                           "wrap in a test); tests/c/record/test_registry.c covers the registry")
@pytest.mark.skipif(FREE_THREADED, reason="free-threaded build: with functions off, a thread "
                    "that neither parks nor wakes a parked one leaves no event, so no record")
def test_reused_tid_gets_its_own_thread_record():
    """Threads started and ended in turn until the kernel gives one a tid an earlier
    thread of the session had (pid_max wraps): each gets its own record, and the earlier
    one's life ends at its last event (it ended), not at t1."""
    import _thread

    done = _thread.allocate_lock()
    box = [0]

    def run():
        box[0] = threading.get_native_id()
        done.release()

    seen = set()
    reused = None
    deadline = time.monotonic() + 120
    # max_events small: tens of thousands of threads must not each take event blocks.
    with giltracer.trace(backend="hooks", functions=False, sched=False, max_events=4096) as t:
        for _ in range(_pid_max() + 1000):
            done.acquire()
            _thread.start_new_thread(run, ())
            done.acquire()  # released by the thread: it has run
            done.release()
            if box[0] in seen:
                reused = box[0]
                break
            seen.add(box[0])
            if time.monotonic() > deadline:
                break
    if reused is None:
        pytest.skip(f"no tid was reused within {len(seen)} threads")
    same = [x for x in t.threads if x.tid == reused]
    assert len(same) == 2, same
    assert same[0].end_ns < t.result.t1_ns  # ended (superseded), not running to t1


def test_a_failure_in_stop_leaves_no_plumbing_behind(monkeypatch):
    # Reading the lock-kind probe fails at stop: the gc callback (free-threaded builds'),
    # GILTRACER_CHILD and the fork hook (follow_children) go all the same, and the
    # trace is finished (no session stays active).
    import _giltracer_boot as boot
    from giltracer import api
    from giltracer.lockkinds import LockKinds

    def broken_stop(self):
        raise UnicodeDecodeError("utf-8", b"\xc3", 0, 1, "unexpected end of data")

    monkeypatch.setattr(api, "FREE_THREADED", True)  # the gc callback on any build
    monkeypatch.setattr(LockKinds, "stop", broken_stop)
    monkeypatch.delenv("GILTRACER_CHILD", raising=False)
    callbacks = list(gc.callbacks)
    t = giltracer.trace(functions=False, follow_children=True).start()
    assert os.environ.get("GILTRACER_CHILD") and boot._following is not None
    with pytest.raises(UnicodeDecodeError):
        t.stop()
    assert gc.callbacks == callbacks
    assert "GILTRACER_CHILD" not in os.environ
    assert boot._following is None
    assert not giltracer.stop_active()
    monkeypatch.undo()
    with giltracer.trace(functions=False) as again:
        work()
    assert again.duration_ns > 0


def test_a_start_that_fails_leaves_no_plumbing_behind(monkeypatch):
    # The lock-kind probe's start fails after the gc callback went in and the children's
    # variable was set: the start undoes both (and the followed children's folder).
    import _giltracer_boot as boot
    from giltracer import _child, api
    from giltracer.lockkinds import LockKinds

    def broken_start(self):
        raise OSError("the probe failed")

    folders = []
    made = _child.Children.__init__

    def init(self, options):
        made(self, options)
        folders.append(self.folder)

    monkeypatch.setattr(api, "FREE_THREADED", True)  # the gc callback on any build
    monkeypatch.setattr(LockKinds, "start", broken_start)
    monkeypatch.setattr(_child.Children, "__init__", init)
    monkeypatch.setenv("GILTRACER_CHILD", "the-parents-value")  # as in a followed child
    callbacks = list(gc.callbacks)
    with pytest.raises(OSError, match="the probe failed"):
        giltracer.trace(functions=False, follow_children=True).start()
    assert gc.callbacks == callbacks
    assert os.environ["GILTRACER_CHILD"] == "the-parents-value"
    assert boot._following is None
    assert folders and not os.path.exists(folders[0])
    assert not giltracer.stop_active()
