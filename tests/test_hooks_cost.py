"""What tracing adds to a traced thread beyond its own events (the target: GIL only <= 1.05x
untraced CPU time). Structural facts, no timing: the costs themselves are measured by
bench/gil_event_bench.py and bench/run.py's GIL section.

- The registry's block refiller (gt-blocks) leaves the process's fd table: while a second
  thread shares it, the kernel takes and drops a reference on the file of every fd syscall
  (fdget's fast path is for a table of one thread), which made a single-threaded
  os.fstat loop (churn1) 1.14x instead of 1.05x under the GIL probe alone. The OS-state
  poller (gt-sched) has a table of its own too, which holds its perf events.
- The hooks' stop protocol pays its barrier on the stop side where the kernel has
  membarrier (PRIVATE_EXPEDITED), so a GIL event costs no fence, from the first session of
  a process on (its start registers the process).
"""

import ctypes
import json
import os
import subprocess
import sys
import threading
import time

import pytest

import giltracer
import giltracer._core as core

from conftest import FREE_THREADED

# Syscall numbers: close_range is 436 on both; membarrier differs.
SYS_CLOSE_RANGE = 436
SYS_MEMBARRIER = {"x86_64": 324, "aarch64": 283}.get(os.uname().machine)
MEMBARRIER_CMD_PRIVATE_EXPEDITED = 1 << 3

libc = ctypes.CDLL(None, use_errno=True)


def _helper_tids(name="gt-blocks"):
    tids = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                if f.read().strip() == name:
                    tids.append(int(tid))
        except OSError:
            pass
    return tids


def _have_close_range():
    # close_range(~0u - 1, ~0u, 0) closes nothing; it fails only without the syscall.
    return libc.syscall(SYS_CLOSE_RANGE, ctypes.c_uint(0xFFFFFFFE), ctypes.c_uint(0xFFFFFFFF),
                        ctypes.c_uint(0)) == 0


def test_block_refiller_leaves_the_fd_table():
    if not _have_close_range():
        pytest.skip("no close_range(2) in this kernel: the refiller shares the fd table")
    with open(os.devnull) as held:  # a descriptor this thread surely has
        with giltracer.trace(functions=False, sched=False):
            tids = _helper_tids()
            fds = {tid: os.listdir(f"/proc/self/task/{tid}/fd") for tid in tids}
            mine = os.listdir(f"/proc/self/task/{threading.get_native_id()}/fd")
        fd = held.fileno()
    assert tids, "no gt-blocks thread during the trace"
    assert str(fd) in mine
    assert all(not v for v in fds.values()), fds


PERF_EVENT = "anon_inode:[perf_event]"


def _fd_targets(tid):
    out = []
    for fd in os.listdir(f"/proc/self/task/{tid}/fd"):
        try:
            out.append(os.readlink(f"/proc/self/task/{tid}/fd/{fd}"))
        except OSError:  # closed meanwhile
            pass
    return out


def test_os_state_poller_keeps_its_events_in_a_table_of_its_own():
    if not _have_close_range():
        pytest.skip("no close_range(2) in this kernel: the poller shares the fd table")
    me = threading.get_native_id()
    # (As root an earlier trace's bpf probe may hold perf events of its own.)
    before = _fd_targets(me).count(PERF_EVENT)
    with giltracer.trace(functions=False, backend="hooks") as t:
        time.sleep(0.01)  # a GIL event: the thread is registered, its event opened
        pollers = _helper_tids("gt-sched")
        its = {tid: _fd_targets(tid) for tid in pollers}
        during = _fd_targets(me).count(PERF_EVENT)
    if not pollers:
        pytest.skip(f"no OS-state poller here: {t.sched_status}")
    (events,) = its.values()
    assert events and all(e == PERF_EVENT for e in events), events
    assert during == before, (before, during)


def test_stop_barrier_is_membarrier_where_the_kernel_has_it():
    """From a process's first session on: its start registers the process for membarrier
    (waiting for it, GIL released), so the hooks of a notebook's first cell skip their
    fence too. In a fresh process, with a second thread running (registration then waits
    for an RCU grace period)."""
    kw = "" if FREE_THREADED else "backend='hooks'"  # free-threaded: the park probe's
    code = (
        "import json, threading, time, giltracer, giltracer._core as core\n"
        "stop = threading.Event()\n"
        "other = threading.Thread(target=stop.wait); other.start()\n"
        f"with giltracer.trace(functions=False, sched=False, {kw}):\n"
        "    first = core.probe_info()\n"
        "stop.set(); other.join()\n"
        "print(json.dumps(dict(membarrier=first['membarrier'], slots=first['slots_patched'])))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout.strip().splitlines()[-1])
    if not info["slots"] or SYS_MEMBARRIER is None:
        pytest.skip("no hooks installed here, or an architecture without the syscall number")
    query = libc.syscall(SYS_MEMBARRIER, 0, 0, 0)  # MEMBARRIER_CMD_QUERY
    assert info["membarrier"] == (query > 0 and bool(query & MEMBARRIER_CMD_PRIVATE_EXPEDITED)), \
        (query, info)


def test_a_take_is_recorded_after_the_gil_mutex_is_unlocked(monkeypatch):
    """take_gil signals switch_cond holding the GIL's mutex; a record there keeps the
    mutex longer, and the waiter the last drop woke blocks on it more often. So the take
    is recorded at the mutex's unlock wherever the interpreter's object imports
    pthread_mutex_unlock (every CPython on glibc); GILTRACER_TAKE_RECORD=signal records it
    at the signal (bench/churn_cost.py compares the two)."""
    if FREE_THREADED:
        pytest.skip("no GIL: the park probe records, not take_gil")
    info = core.probe_info()
    if not info["slots_patched"]:
        pytest.skip(f"no hooks installed here: {info['hooks_why']}")
    assert info["take_record"] == "unlock", info
    monkeypatch.setenv("GILTRACER_TAKE_RECORD", "signal")
    assert core.probe_info()["take_record"] == "signal"
    monkeypatch.setenv("GILTRACER_TAKE_RECORD", "unlock")
    assert core.probe_info()["take_record"] == "unlock"


def _fstat_churn(n=2000):
    """Two threads calling os.fstat: a GIL hand-off at every call."""
    def work():
        for _ in range(n):
            os.fstat(0)
    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_the_floor_decodes_every_gil_call_and_records_nothing(monkeypatch):
    """bench/churn_cost.py's floor (GILTRACER_HOOKS_FLOOR=1, read at a session's
    start): the hooks run as when recording but record no GIL event, so the bench can
    tell their decoding from the records' cost. Unset, the same churn records its takes."""
    if FREE_THREADED:
        pytest.skip("no GIL: the park probe records, not take_gil")
    info = core.probe_info()
    if not info["slots_patched"]:
        pytest.skip(f"no hooks installed here: {info['hooks_why']}")
    assert info["hooks_floor"] is False

    def takes():
        t = giltracer.trace(functions=False, sched=False, backend="hooks").start()
        try:
            _fstat_churn()
        finally:
            t.stop()
        return sum(r.acquisitions for r in t.summary(all_threads=True))

    monkeypatch.setenv("GILTRACER_HOOKS_FLOOR", "1")
    assert core.probe_info()["hooks_floor"] is True
    assert takes() == 0
    monkeypatch.setenv("GILTRACER_HOOKS_FLOOR", "0")
    assert core.probe_info()["hooks_floor"] is False
    assert takes() >= 2000  # every fstat call releases and retakes the GIL
