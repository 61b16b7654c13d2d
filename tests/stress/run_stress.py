#!/usr/bin/env python3
"""make stress: try what a profiler inside a kernel must survive, and report.

Each case runs in its own subprocess with a timeout: fork inside a trace, nested
sessions, 1,000 threads, 1,000 start/stop cycles, KeyboardInterrupt inside a traced
block, exceptions in threads, competing profilers, extreme switch intervals, a pids
limit, a tiny max_events, and the bpf backend where permitted. And what a user can do to
the hook, the session and the CLI: an audit hook refusing sys.setprofile (and
sys.monitoring) while a trace stops, or letting the GIL go inside a new thread's hook
install while the trace stops, cProfile enabled inside a trace and already running
when one starts, a recording trace kept alive by a traceback (giltracer.stop_active()),
5,000 short threads with tids reused in one session (forced in a private pid namespace as
root), SIGTERM to the CLI during a trace, and the CLI with a closed stdout. The child prints one
``RESULT {json}`` line with its counts and the problems it saw; the parent adds the
exit status (or signal), the time, and whether it hung.

A case FAILs if the child crashed (signal or non-zero exit), hung (timeout), printed
no result, or reported a problem: a leak beyond the threshold, data lost silently
(drops without a warning), a broken session. SKIP says why a case could not run here.
Writes <out>/report.md, prints it, and exits 1 if anything FAILed.

    python tests/stress/run_stress.py [--out build/stress] [--only NAME ...] [--python PY]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

# RSS growth allowed from cycle 100 to cycle 1,000 of start/stop (the first 100 warm
# up caches and the allocator).
LEAK_THRESHOLD_KB = 16 * 1024

PRELUDE = textwrap.dedent(
    r'''
    import json, os, sys, threading, time, warnings
    import giltracer

    BACKEND = os.environ.get("GT_STRESS_BACKEND", "hooks")
    # ASan's quarantine holds freed memory: RSS growth is no leak measure there.
    UNDER_ASAN = "libasan" in os.environ.get("LD_PRELOAD", "")
    problems = []

    def rss_kb():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return -1

    def spin(n):
        x = 0
        for i in range(n):
            x += i
        return x

    def counts(t):
        """Sizes of a finished trace, and whether every loss was reported."""
        r = t.result
        text = t.summary_text()
        c = dict(events=t.event_count, dropped=t.dropped_events,
                 gil_dropped=getattr(r, "gil_dropped", 0), sched_lost=getattr(r, "sched_lost", 0),
                 threads=len(t.threads), backend=t.backend, gil_known=t.gil_known)
        lost = c["dropped"] or c["gil_dropped"] or c["sched_lost"]
        if lost and "WARNING" not in text:
            problems.append("events lost but summary_text() has no WARNING (silent loss)")
        for s in t.summary():
            if t.gil_known and s.wall_ns and abs(s.held_pct + s.wait_pct + s.released_pct - 100) > 0.01:
                problems.append(f"thread {s.tid}: held+wait+released = "
                                f"{s.held_pct + s.wait_pct + s.released_pct:.3f} %")
        return c

    def report(**kw):
        kw["problems"] = problems
        print("RESULT " + json.dumps(kw), flush=True)

    def calls_by_pid(path, name):
        """A saved Chrome trace's calls of function `name`, counted per process (a Counter;
        empty when the file is missing)."""
        from collections import Counter
        calls = Counter()
        if os.path.exists(path):
            for e in json.load(open(path))["traceEvents"]:
                if e.get("ph") == "X" and e.get("name", "").startswith(name + " "):
                    calls[e["pid"]] += 1
        return calls

    def scratch_dir():
        """A temporary folder, removed when the case's process exits."""
        import atexit, shutil, tempfile
        d = tempfile.mkdtemp(prefix="gt-stress-")
        atexit.register(shutil.rmtree, d, True)
        return d
    '''
)


@dataclass
class Case:
    name: str
    what: str
    code: str
    timeout: float = 120.0
    backend: str = "hooks"
    pids_max: Optional[int] = None  # run the child in a pids cgroup with this limit
    pidns: bool = False  # as root, run the child in its own pid namespace (GT_STRESS_PIDNS=1)
    skip: Optional[Callable[[], Optional[str]]] = None


@dataclass
class Outcome:
    case: Case
    status: str = "PASS"
    exit: str = ""
    seconds: float = 0.0
    result: Dict = field(default_factory=dict)
    notes: List[str] = field(default_factory=list)
    stderr_tail: str = ""


CASES: List[Case] = []


def case(name: str, what: str, **kw):
    def add(fn: Callable[[], str]):
        CASES.append(Case(name, what, textwrap.dedent(fn()), **kw))
        return fn

    return add


# ---- the cases ---------------------------------------------------------------------

FORK = r'''
MODE = "{mode}"
stop = threading.Event()
def worker():
    while not stop.is_set():
        spin(20000)
pid = -1
with giltracer.trace(backend=BACKEND) as t:
    th = threading.Thread(target=worker)
    th.start()
    spin(300000)
    t_fork = time.monotonic_ns()
    pid = os.fork()
    if pid == 0:
        stop.set()
        if MODE == "sys_exit":
            sys.exit(0)
        if MODE == "os_exit":
            os._exit(0)
        # "end_of_with": leave the block normally, exit after it.
    else:
        _, status = os.waitpid(pid, 0)
        t_child_gone = time.monotonic_ns()
        spin(600000)  # the parent keeps running, traced, after the fork
        stop.set()
        th.join()
if pid == 0:
    os._exit(0)
child = (f"signal {{os.WTERMSIG(status)}}" if os.WIFSIGNALED(status)
         else f"exit {{os.WEXITSTATUS(status)}}")
if child != "exit 0":
    problems.append(f"forked child: {{child}}")
c = counts(t)
after = {{}}
if "unavailable" not in t.sched_status and "n/a" not in t.sched_status:
    for x in t.threads:
        after[x.name] = sum(1 for a, b, s in t.os_intervals(x.tid) if a > t_child_gone)
    # Two threads share the GIL while the parent spins on: they keep switching.
    if not any(after.values()):
        problems.append("parent's OS states stop once the child is gone "
                        "(no context switch recorded after it)")
report(child=child, os_intervals_after_child=after, sched=t.sched_status, **c)
'''

for _mode, _how in (("sys_exit", "sys.exit(0)"), ("os_exit", "os._exit(0)"),
                    ("end_of_with", "leaving the with block")):
    case(f"fork-{_mode.replace('_', '-')}",
         f"os.fork() inside a trace (2 threads, perf OS states); the child exits by {_how}; "
         "the parent keeps tracing")(lambda m=_mode: FORK.format(mode=m))


@case("nested-sessions", "giltracer.trace() inside a running giltracer.trace() with 2 CPU-bound "
      "threads; the outer session's GIL view must stay intact")
def _():
    return r'''
    def cpu():
        spin(2_000_000)
    with giltracer.trace(backend=BACKEND) as outer:
        ths = [threading.Thread(target=cpu, name=f"cpu-{i}") for i in range(2)]
        for th in ths:
            th.start()
        inner_error = None
        try:
            with giltracer.trace(backend=BACKEND) as inner:
                spin(10000)
        except Exception as e:
            inner_error = f"{type(e).__name__}: {e}"
        for th in ths:
            th.join()
    c = counts(outer)
    held = {s.name: round(s.held_pct, 1) for s in outer.summary()}
    if not outer.gil_known:
        problems.append("outer session lost its GIL probe")
    for name in ("cpu-0", "cpu-1"):
        if held.get(name, 0) < 15:  # about 45 % each when the probe works
            problems.append(f"outer session: {name} held the GIL {held.get(name)} % (probe broken)")
    report(inner_error=inner_error, held_pct=held, **c)
    '''


@case("threads-1000", "1,000 threads alive at once (barrier), each calling a few functions",
      timeout=240)
def _():
    return r'''
    threading.stack_size(256 * 1024)
    N = 1000
    barrier = threading.Barrier(N + 1, timeout=120)
    def f():
        spin(200)
        barrier.wait()
        spin(200)
    with giltracer.trace(backend=BACKEND) as t:
        ths = [threading.Thread(target=f) for _ in range(N)]
        for th in ths:
            th.start()
        barrier.wait()
        for th in ths:
            th.join()
    c = counts(t)
    traced = sum(1 for x in t.threads if x.spans > 0 and x.name != "MainThread")
    if traced < N:
        problems.append(f"only {traced} of {N} threads have spans")
    os_threads = sum(1 for x in t.threads if x.os_states)
    report(threads_with_spans=traced, threads_with_os_states=os_threads, sched=t.sched_status, **c)
    '''


@case("cycles-1000", "1,000 start/stop cycles (a thread every 10th), RSS from cycle 100 to 1,000",
      timeout=600)
def _():
    return r'''
    rss = {}
    events = dropped = 0
    t0 = time.monotonic()
    for i in range(1000):
        with giltracer.trace(backend=BACKEND) as t:
            spin(2000)
            if i % 10 == 0:
                th = threading.Thread(target=spin, args=(2000,))
                th.start()
                th.join()
        events += t.event_count
        dropped += t.dropped_events
        if i == 0:
            t.summary_text()
        if i in (99, 999):
            rss[i + 1] = rss_kb()
    growth = rss[1000] - rss[100]
    if growth > LEAK_KB and not UNDER_ASAN:
        problems.append(f"RSS grew {growth} KiB over 900 cycles (threshold {LEAK_KB} KiB)")
    report(events=events, dropped=dropped, rss_kb=rss, rss_growth_kb=growth,
           seconds_per_cycle=round((time.monotonic() - t0) / 1000, 4), backend=t.backend)
    '''.replace("LEAK_KB", str(LEAK_THRESHOLD_KB))


@case("keyboard-interrupt", "SIGINT from a timer thread while the main thread loops in a traced "
      "block with a worker thread; the trace must finish, then a new one must work")
def _():
    return r'''
    import signal
    # A process started in the background by a shell without job control inherits SIGINT
    # ignored, and Python then leaves it so: the interrupt would never come.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    stop = threading.Event()
    def worker():
        while not stop.is_set():
            spin(5000)
    th = threading.Thread(target=worker)
    interrupted = False
    t = giltracer.trace(backend=BACKEND)
    try:
        with t:
            th.start()
            threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
            while True:
                spin(1000)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        stop.set()
        th.join()
    if not interrupted:
        problems.append("KeyboardInterrupt did not propagate")
    c = counts(t)
    if not c["events"]:
        problems.append("no events recorded")
    with giltracer.trace(backend=BACKEND) as t2:
        spin(1000)
    if not t2.event_count:
        problems.append("the next trace after the interrupt recorded nothing")
    report(interrupted=interrupted, next_trace_events=t2.event_count, **c)
    '''


@case("thread-exceptions", "20 threads that raise (deep in recursion) inside a trace")
def _():
    return r'''
    threading.excepthook = lambda args: None
    def deep(n):
        if n == 0:
            raise ValueError("boom")
        return deep(n - 1)
    with giltracer.trace(backend=BACKEND) as t:
        ths = [threading.Thread(target=deep, args=(50,)) for _ in range(20)]
        for th in ths:
            th.start()
        for th in ths:
            th.join()
    c = counts(t)
    unwound = sum(1 for x in t.threads for s in t.spans(x.tid) if s[4] & 4)
    if unwound < 20 * 50:
        problems.append(f"only {unwound} spans left by an exception (expected >= 1000)")
    report(unwound_spans=unwound, **c)
    '''


@case("competing-setprofile", "sys.setprofile(f) active before the trace; f must be back after")
def _():
    return r'''
    calls = [0]
    def prof(frame, event, arg):
        calls[0] += 1
    sys.setprofile(prof)
    err = None
    try:
        with giltracer.trace(backend=BACKEND) as t:
            [spin(10) for _ in range(200)]
    except Exception as e:
        err = f"{type(e).__name__}: {e}"
    if err is None and t.event_count < 400:
        problems.append(f"only {t.event_count} events with another profiler set")
    restored = sys.getprofile() is prof
    sys.setprofile(None)
    if not restored:
        problems.append("the other profile function was not restored")
    c = counts(t) if err is None else {}
    report(error=err, restored=restored, **c)
    '''


@case("competing-cprofile", "cProfile enabled around the trace; it must keep profiling after it")
def _():
    return r'''
    import cProfile, pstats, io
    def marker():
        return spin(10)
    p = cProfile.Profile()
    p.enable()
    err = None
    try:
        with giltracer.trace(backend=BACKEND) as t:
            [spin(10) for _ in range(200)]
    except Exception as e:
        err = f"{type(e).__name__}: {e}"
    if err is None and t.event_count < 400:
        problems.append(f"only {t.event_count} events with cProfile enabled")
    marker()
    p.disable()
    s = io.StringIO()
    pstats.Stats(p, stream=s).print_stats("marker")
    seen = "marker" in s.getvalue()
    if not seen:
        problems.append("cProfile stopped profiling after the trace")
    if err and "profil" not in err.lower() and "monitoring" not in err.lower():
        problems.append(f"unclear error: {err}")
    c = counts(t) if err is None else {}
    report(error=err, cprofile_still_works=seen, **c)
    '''


@case("competing-monitoring", "another sys.monitoring tool holds the profiler id (3.12+), and one "
      "in the debugger id is active: the trace takes another id, the others are left as they were")
def _():
    return r'''
    if sys.version_info < (3, 12):
        report(skipped="sys.monitoring needs Python 3.12+")
        sys.exit(0)
    m = sys.monitoring
    m.use_tool_id(m.PROFILER_ID, "other-profiler")
    m.use_tool_id(m.DEBUGGER_ID, "debugger")
    m.set_events(m.DEBUGGER_ID, m.events.PY_START)
    m.register_callback(m.DEBUGGER_ID, m.events.PY_START, lambda *a: None)
    err = None
    try:
        with giltracer.trace(backend=BACKEND) as t:
            spin(1000)
    except Exception as e:
        err = f"{type(e).__name__}: {e}"
    if err is not None:
        problems.append(f"trace() failed beside other tools: {err}")
    if m.get_tool(m.PROFILER_ID) != "other-profiler":
        problems.append("the other tool's id was taken or freed")
    if m.get_tool(m.DEBUGGER_ID) != "debugger":
        problems.append("the debugger tool was disturbed")
    m.free_tool_id(m.PROFILER_ID)
    c = counts(t) if err is None else {}
    report(error=err, **c)
    '''


for _iv in ("1e-6", "1.0"):
    case(f"switch-interval-{_iv}", f"sys.setswitchinterval({_iv}) with 2 CPU-bound threads for "
         "about 0.5 s")(lambda iv=_iv: r'''
    sys.setswitchinterval(IV)
    def cpu():
        t_end = time.monotonic() + 0.5
        while time.monotonic() < t_end:
            spin(1000)
    with giltracer.trace(backend=BACKEND) as t:
        ths = [threading.Thread(target=cpu, name=f"cpu-{i}") for i in range(2)]
        for th in ths:
            th.start()
        for th in ths:
            th.join()
    c = counts(t)
    acq = {s.name: s.acquisitions for s in t.summary()}
    report(acquisitions=acq, **c)
    '''.replace("IV", iv))


@case("pids-limit-1", "a pids cgroup allowing 1 task: every pthread_create fails (session "
      "threads too); the trace must run or fail cleanly", pids_max=1)
def _():
    return r'''
    err = None
    t = None
    try:
        with giltracer.trace(backend=BACKEND) as t:
            spin(10000)
    except Exception as e:
        err = f"{type(e).__name__}: {e}"
    c = counts(t) if t is not None and err is None else {}
    # And it keeps working afterwards.
    err2 = None
    try:
        with giltracer.trace(backend=BACKEND) as t2:
            spin(1000)
    except Exception as e:
        err2 = f"{type(e).__name__}: {e}"
    report(error=err, second_error=err2, sched=getattr(t, "sched_status", None), **c)
    '''


@case("pids-limit-poller", "a pids cgroup allowing 1 task while the session starts (its poller "
      "thread cannot start), then lifted: 4 threads start inside the trace", pids_max=64)
def _():
    return r'''
    cgroup = os.environ["GT_STRESS_CGROUP"]
    def pids_max(v):
        with open(os.path.join(cgroup, "pids.max"), "w") as f:
            f.write(str(v))
    t = giltracer.trace(backend=BACKEND)
    pids_max(1)
    err = None
    try:
        t.start()
    except Exception as e:
        err = f"{type(e).__name__}: {e}"
    finally:
        pids_max("max")
    if err is None:
        ths = [threading.Thread(target=spin, args=(20000,)) for _ in range(4)]
        for th in ths:
            th.start()
        for th in ths:
            th.join()
        t.stop()
    c = counts(t) if err is None else {}
    report(error=err, sched=getattr(t, "sched_status", None) if err is None else None, **c)
    '''


@case("pids-limit-4", "a pids cgroup allowing 4 tasks; the traced block tries to start 8 "
      "threads (some fail with \"can't start new thread\")", pids_max=4)
def _():
    return r'''
    started = failed = 0
    err = None
    go = threading.Event()
    def f():
        go.wait(30)  # all alive at once, so the limit bites
        spin(20000)
    try:
        with giltracer.trace(backend=BACKEND) as t:
            ths = []
            for i in range(8):
                th = threading.Thread(target=f)
                try:
                    th.start()
                    ths.append(th)
                    started += 1
                except RuntimeError:
                    failed += 1
            go.set()
            for th in ths:
                th.join()
    except Exception as e:
        err = f"{type(e).__name__}: {e}"
    c = counts(t) if err is None else {}
    if not failed:
        problems.append("the pids limit did not bite (no thread failed to start)")
    report(threads_started=started, threads_failed=failed, error=err, **c)
    '''


@case("tiny-max-events", "max_events=100 on a busy block: the events past it are aggregated "
      "(call trees, GIL and OS totals), counted and reported (warning and summary), never silent")
def _():
    return r'''
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with giltracer.trace(backend=BACKEND, max_events=100) as t:
            th = threading.Thread(target=spin, args=(10000,))
            th.start()
            [spin(10) for _ in range(2000)]
            th.join()
    c = counts(t)
    aggregated = t.result.calls_aggregated + t.result.gil_aggregated + t.result.sched_aggregated
    if not aggregated:
        problems.append("nothing aggregated past max_events=100")
    if c["events"] > 100:
        problems.append(f"{c['events']} events recorded with max_events=100")
    if not any("event budget" in str(x.message) for x in w):
        problems.append("no Python warning about the budget")
    if "max_events (100) reached" not in t.summary_text():
        problems.append("summary_text() does not mention the budget")
    report(warned=[str(x.message)[:80] for x in w], aggregated=aggregated, **c)
    '''


# ---- what users do to the profile hook, the session and the CLI --------------

# Keywords for texts the core and the Python layer word (the exact wording is theirs): a
# stop whose hook removal was refused says it could not remove it; a displaced or paused
# profiler is named as such.
PROFILE_TEXTS = r'''
import re
def all_text(t, extra=()):
    """Everything a trace told the user: its note, its summary, and `extra` messages."""
    parts = list(extra)
    try:
        parts += [t.result.tracer_note or "", t.summary_text()]
    except Exception as e:  # no result: the stop failed before finishing
        parts.append(f"(no result: {type(e).__name__}: {e})")
    return "\n".join(p for p in parts if p)
def says_removal_failed(text):
    return bool(re.search(r"remov|uninstall", text, re.I)) and bool(
        re.search(r"hook|profil|monitoring", text, re.I))
def says_displaced(text):
    return bool(re.search(r"profil", text, re.I)) and bool(
        re.search(r"displaced|replaced|paused", text, re.I))
def calls_of(t, name, tid=None):
    tid = tid or threading.main_thread().native_id
    return sum(1 for s in t.spans(tid) if s[2] == name)
def cprofile_calls(p, name):
    import pstats
    return sum(v[1] for k, v in pstats.Stats(p).stats.items() if k[2] == name)
'''


@case("audit-refuses-setprofile", "an audit hook added inside a hooks trace refuses "
      "\"sys.setprofile\" (and \"sys.monitoring.register_callback\" on 3.12+): the stop cannot "
      "remove the hook; then 4 threads call Python functions for 1 s and new traces start")
def _():
    return textwrap.indent(PROFILE_TEXTS, "    ") + r'''
    REFUSED = {"sys.setprofile", "sys.monitoring.register_callback"}
    refuse = [False]
    refused = []
    def audit(event, args):
        if refuse[0] and event in REFUSED:
            refused.append(event)
            raise RuntimeError(f"stress: the audit hook refuses {event}")
    unraisable = []
    sys.unraisablehook = lambda u: unraisable.append(
        f"{u.err_msg or 'unraisable'}: {type(u.exc_value).__name__}: {u.exc_value}")
    ran = []
    def work(i):
        ran.append(i)
        t_end = time.monotonic() + 1.0
        while time.monotonic() < t_end:
            spin(200)
    stop_error = None
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        # Threads that run across the stop: their hooks are installed when it fails.
        stop = threading.Event()
        running = threading.Semaphore(0)
        def busy():
            running.release()
            while not stop.is_set():
                spin(500)
        early = [threading.Thread(target=busy) for _ in range(2)]
        t = giltracer.trace(backend="hooks").start()
        for th in early:
            th.start()
        for th in early:  # past their start-up hook (which resets the thread's profiler
            running.acquire()  # on 3.12+): what is refused from here is the stop's
        spin(20000)
        sys.addaudithook(audit)
        refuse[0] = True
        try:
            t.stop()
        except Exception as e:
            stop_error = f"{type(e).__name__}: {e}"
        refused_at_stop = sorted(set(refused))
        # The stale hooks fire from here on (3.9-3.11): nothing may crash.
        ths = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for th in ths:
            th.start()
        work(-1)
        for th in ths:
            th.join()
        stop.set()
        for th in early:
            th.join()
        tool = ("giltracer" if sys.version_info >= (3, 12) and "giltracer" in
                [sys.monitoring.get_tool(i) for i in range(6)] else None)
    texts = [str(x.message) for x in w] + unraisable + ([stop_error] if stop_error else [])
    text = all_text(t, texts)
    # The removal failed if the audit hook refused it, or if our monitoring tool is still
    # registered: then the user must be told.
    removal_failed = bool(refused_at_stop) or tool == "giltracer"
    if removal_failed and not says_removal_failed(text):
        problems.append("the stop could not remove the hook but no error or warning says so")
    if sorted(ran) != [-1, 0, 1, 2, 3]:
        problems.append(f"only threads {sorted(ran)} ran their target after the stop")
    c = counts(t) if t._result is not None else {}
    # A new trace while the audit hook still refuses: it may fail, cleanly.
    refused_error = None
    try:
        with giltracer.trace(backend="hooks") as t2:
            spin(2000)
    except Exception as e:
        refused_error = f"{type(e).__name__}: {e}"
    refuse[0] = False
    # And with the audit hook quiet again, a new trace records calls.
    err3 = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with giltracer.trace(backend="hooks") as t3:
                th = threading.Thread(target=spin, args=(20000,))
                th.start()
                [spin(10) for _ in range(100)]
                th.join()
    except Exception as e:
        err3 = f"{type(e).__name__}: {e}"
        problems.append(f"a trace after the audit hook let go failed: {err3}")
    if err3 is None and calls_of(t3, "spin") < 100:
        problems.append(f"a trace after the audit hook let go recorded {calls_of(t3, 'spin')} "
                        "of 100 calls of spin on the main thread")
    report(refused_at_stop=refused_at_stop, monitoring_tool_after_stop=tool,
           stop_says=[x[:200] for x in texts], error=refused_error, **c)
    '''


@case("audit-hook-lets-gil-go", "an audit hook that sleeps (the GIL let go) on a new thread's "
      "\"sys.setprofile\" while the trace stops: once at the thread's first call (threading's "
      "bootstrap), once at its second (the core installing its hook); the threads then run",
      timeout=60)
def _():
    return r'''
    main_ident = threading.get_ident()
    state = dict(nth=0, entered=threading.Event())
    seen = {}
    def audit(event, args):
        if event != "sys.setprofile" or threading.get_ident() == main_ident or not state["nth"]:
            return
        n = seen[threading.get_ident()] = seen.get(threading.get_ident(), 0) + 1
        if n == state["nth"]:
            state["entered"].set()
            time.sleep(0.3)  # the trace stops meanwhile
    sys.addaudithook(audit)
    ran = []
    def work(i):
        t_end = time.monotonic() + 0.5
        while time.monotonic() < t_end:
            spin(200)
        ran.append(i)
    errors, hit = {}, {}
    for nth in (1, 2):
        print(f"sleeping at the thread's setprofile call {nth}", file=sys.stderr, flush=True)
        state.update(nth=nth, entered=threading.Event())
        seen.clear()
        ran.clear()
        t = giltracer.trace(backend="hooks").start()
        ths = [threading.Thread(target=work, args=(i,)) for i in range(2)]
        for th in ths:
            th.start()
        hit[nth] = state["entered"].wait(5)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t.stop()
        except Exception as e:
            errors[nth] = f"{type(e).__name__}: {e}"
        for th in ths:
            th.join()
        state["nth"] = 0
        if sorted(ran) != [0, 1]:
            problems.append(f"sleep at setprofile call {nth}: threads {sorted(ran)} of [0, 1] "
                            "finished their work")
    with giltracer.trace(backend="hooks") as t2:
        th = threading.Thread(target=spin, args=(20000,))
        th.start()
        th.join()
    if not any(x.spans for x in t2.threads if x.name != "MainThread"):
        problems.append("a trace after the race recorded nothing in a new thread")
    report(error=errors or None, setprofile_calls_seen=hit, **counts(t2))
    '''


@case("cprofile-inside", "cProfile enabled inside a running trace: 3.9-3.11 the trace's note "
      "or warnings say the hook was displaced; 3.12+ both record (the trace holds another "
      "sys.monitoring tool id than the profiler's)")
def _():
    return textwrap.indent(PROFILE_TEXTS, "    ") + r'''
    import cProfile
    def before():
        return spin(10)
    def during():
        return spin(10)
    def after():
        return spin(10)
    enable_error = None
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with giltracer.trace(backend=BACKEND) as t:
            [before() for _ in range(100)]
            p = cProfile.Profile()
            try:
                p.enable()
            except Exception as e:
                enable_error = f"{type(e).__name__}: {e}"
            [during() for _ in range(100)]
            if enable_error is None:
                p.disable()
            [after() for _ in range(100)]
    text = all_text(t, [str(x.message) for x in w])
    recorded = {f: calls_of(t, f) for f in ("before", "during", "after")}
    if sys.version_info >= (3, 12):
        if enable_error is not None:
            problems.append(f"cProfile.enable() inside a sys.monitoring trace failed: {enable_error}")
        elif cprofile_calls(p, "during") != 100:
            problems.append(f"cProfile counted {cprofile_calls(p, 'during')} of 100 calls")
        if recorded != {"before": 100, "during": 100, "after": 100}:
            problems.append(f"the trace did not record every call beside cProfile: {recorded}")
    else:
        if not says_displaced(text):
            problems.append("cProfile displaced the hook but the trace's note and warnings "
                            "do not say so")
    c = counts(t)
    report(error=enable_error, recorded=recorded,
           warned=[str(x.message)[:200] for x in w], note=t.result.tracer_note, **c)
    '''


@case("cprofile-outside", "cProfile already enabled when the trace starts: 3.9-3.11 the note "
      "says cProfile was paused, the trace records, and cProfile counts calls again after it; "
      "3.12+ both record")
def _():
    return textwrap.indent(PROFILE_TEXTS, "    ") + r'''
    import cProfile
    def inside():
        return spin(10)
    def after():
        return spin(10)
    p = cProfile.Profile()
    p.enable()
    err = None
    t = None
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            with giltracer.trace(backend=BACKEND) as t:
                [inside() for _ in range(100)]
        except Exception as e:
            err = f"{type(e).__name__}: {e}"
    [after() for _ in range(50)]
    p.disable()
    counted_after = cprofile_calls(p, "after")
    if counted_after != 50:
        problems.append(f"cProfile counted {counted_after} of 50 calls after the trace")
    recorded = None
    if sys.version_info >= (3, 12):
        if err is not None:
            problems.append(f"the trace failed to start beside cProfile: {err}")
        else:
            recorded = calls_of(t, "inside")
            if recorded != 100:
                problems.append(f"the trace recorded {recorded} of 100 calls")
            if cprofile_calls(p, "inside") != 100:
                problems.append(f"cProfile counted {cprofile_calls(p, 'inside')} of 100 calls "
                                "inside the trace")
    else:
        if err is not None:
            problems.append(f"the trace failed to start: {err}")
        else:
            recorded = calls_of(t, "inside")
            if recorded < 100:
                problems.append(f"the trace recorded {recorded} of 100 calls")
            if not says_displaced(all_text(t, [str(x.message) for x in w])):
                problems.append("the trace paused cProfile but its note and warnings do not "
                                "say so")
    c = counts(t) if t is not None and err is None else {}
    report(error=err, recorded=recorded, cprofile_counted_after=counted_after,
           warned=[str(x.message)[:200] for x in w],
           note=t.result.tracer_note if c else None, **c)
    '''


@case("traceback-keeps-session", "a trace started in a function that raises, kept alive by "
      "sys.last_traceback: a new trace fails naming giltracer.stop_active(), which stops it; "
      "200 cycles, RSS from cycle 20 to 200", timeout=300)
def _():
    return r'''
    def work():
        t = giltracer.trace(backend=BACKEND).start()
        spin(1000)
        raise ValueError("the user's error")
    rss = {}
    errors = set()
    stopped = set()
    events = 0
    for i in range(200):
        try:
            work()
        except ValueError as e:
            sys.last_type, sys.last_value, sys.last_traceback = type(e), e, e.__traceback__
        try:
            giltracer.trace(backend=BACKEND).start().stop()
            problems.append("a new trace started while another one was recording")
            break
        except Exception as e:
            errors.add(str(e)[:300])
            if "giltracer.stop_active()" not in str(e):
                problems.append(f"the error does not mention giltracer.stop_active(): {e}")
                break
        try:
            r = giltracer.stop_active()
        except Exception as e:
            problems.append(f"giltracer.stop_active() failed: {type(e).__name__}: {e}")
            break
        stopped.add(repr(r))
        if r is not True:
            problems.append(f"giltracer.stop_active() returned {r!r} with a trace recording")
            break
        with giltracer.trace(backend=BACKEND) as t:
            spin(1000)
        events += t.event_count
        if not t.event_count:
            problems.append("the trace after stop_active() recorded nothing")
            break
        if i in (19, 199):
            rss[i + 1] = rss_kb()
    again = giltracer.stop_active() if hasattr(giltracer, "stop_active") else None
    if again not in (None, False):
        problems.append(f"stop_active() with no trace recording returned {again!r}")
    growth = rss[200] - rss[20] if len(rss) == 2 else None
    if growth is not None and growth > LEAK_KB and not UNDER_ASAN:
        problems.append(f"RSS grew {growth} KiB over 180 cycles (threshold {LEAK_KB} KiB)")
    report(error=sorted(errors), stop_active_returned=sorted(stopped), idle_stop_active=again,
           rss_kb=rss, rss_growth_kb=growth, events=events)
    '''.replace("LEAK_KB", str(LEAK_THRESHOLD_KB))


@case("tid-reuse", "5,000 short threads one after another in one trace, each with its own "
      "function; as root in a private pid namespace every second thread is given its "
      "predecessor's tid (ns_last_pid): each must be its own thread record", timeout=600,
      pidns=True)
def _():
    return r'''
    from collections import Counter
    N = 5000
    NS_LAST = "/proc/sys/kernel/ns_last_pid"
    force = os.environ.get("GT_STRESS_PIDNS") == "1" and os.access(NS_LAST, os.W_OK)
    with open("/proc/sys/kernel/pid_max") as f:
        pid_max = int(f.read())
    ns = {"spin": spin, "threading": threading}
    for i in range(N):
        exec(f"def w{i}(out):\n    out.append(threading.get_native_id())\n    spin(50)\n", ns)
    tids = []
    forced = 0
    with giltracer.trace(backend=BACKEND) as t:
        for i in range(N):
            if force and i % 2 and tids:
                prev = tids[-1]
                t_end = time.monotonic() + 2
                while os.path.exists(f"/proc/self/task/{prev}") and time.monotonic() < t_end:
                    time.sleep(0.0002)
                with open(NS_LAST, "w") as f:
                    f.write(str(prev - 1))
                forced += 1
            out = []
            th = threading.Thread(target=ns[f"w{i}"], args=(out,))
            th.start()
            th.join()
            tids.append(out[0])
    c = counts(t)
    uses = Counter(tids)
    reused = {tid: n for tid, n in uses.items() if n > 1}
    records = Counter(x.tid for x in t.threads)
    merged = [tid for tid, n in reused.items() if records[tid] < n]
    if merged:
        problems.append(f"{len(merged)} reused tids have fewer thread records than threads "
                        f"(e.g. tid {merged[0]}: {reused[merged[0]]} threads, "
                        f"{records[merged[0]]} record(s))")
    if len(t.threads) < N + 1:
        problems.append(f"{len(t.threads)} thread records for {N} threads and the main thread")
    # A record that holds the calls of two thread functions is two threads merged.
    mixed = 0
    for tid, n in records.items():
        if n == 1 and tid in uses:
            names = {s[2] for s in t.spans(tid) if s[2][:1] == "w" and s[2][1:].isdigit()}
            mixed += len(names) > 1
    if mixed:
        problems.append(f"{mixed} thread records hold the calls of two thread functions")
    report(pid_max=pid_max, forced=forced, reused_tids=len(reused),
           threads_reusing=sum(reused.values()), thread_records=len(t.threads), **c)
    '''


@case("cli-sigterm", "SIGTERM to `python -m giltracer -o OUT.html forever.py` once the script "
      "printed ready: exit 143 within 30 s, a complete OUT.html, stderr says it was interrupted")
def _():
    return r'''
    import re, select, signal, subprocess
    d = scratch_dir()
    script, out = os.path.join(d, "forever.py"), os.path.join(d, "OUT.html")
    with open(script, "w") as f:
        f.write("import threading\n"
                "def step():\n    return sum(range(100))\n"
                "def worker():\n    while True:\n        step()\n"
                "threading.Thread(target=worker, daemon=True).start()\n"
                "print('ready', flush=True)\n"
                "while True:\n    step()\n")
    p = subprocess.Popen([sys.executable, "-m", "giltracer", "-o", out, script],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ready = select.select([p.stdout], [], [], 60)[0] and p.stdout.readline().strip() == "ready"
    if not ready:
        problems.append("the script did not print ready within 60 s")
    time.sleep(0.5)
    os.kill(p.pid, signal.SIGTERM)
    t0 = time.monotonic()
    try:
        _, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
        problems.append("the CLI did not exit within 30 s of SIGTERM")
    took = round(time.monotonic() - t0, 1)
    # 143 from exit(), or death by SIGTERM re-raised (the shell shows 143 for both).
    if p.returncode not in (143, -signal.SIGTERM):
        problems.append(f"exit status {p.returncode} after SIGTERM (expected 143)")
    page = open(out, encoding="utf-8", errors="replace").read() if os.path.exists(out) else None
    if page is None:
        problems.append("no OUT.html written")
    elif not page.rstrip().endswith("</html>"):
        problems.append(f"OUT.html is incomplete ({len(page)} characters, no </html> at the end)")
    if not re.search(r"interrupt|sigterm|terminat", err, re.I):
        problems.append("stderr does not say the run was interrupted")
    report(exit_status=p.returncode, seconds_to_exit=took,
           page_chars=len(page) if page else None, stderr_tail=err.strip()[-300:])
    '''


@case("cli-closed-stdout", "the CLI with stdout closed under it: `echo '{\"a\":1}' | python -m "
      "giltracer -q -m json.tool` (json.tool closes stdout), a script that closes sys.stdout "
      "(with and without -q), and fd 1 closed from the start: rc 0, output kept, trace written")
def _():
    return r'''
    import glob, subprocess, tempfile
    facts = {}
    def complete(path):
        return os.path.exists(path) and open(path, encoding="utf-8").read().rstrip().endswith("</html>")
    def run(name, argv, cwd, **kw):
        p = subprocess.run([sys.executable, "-m", "giltracer"] + argv, cwd=cwd, text=True,
                           capture_output="stdout" not in kw, timeout=300, **kw)
        facts[name] = dict(rc=p.returncode, stderr=(p.stderr or "").strip()[-300:])
        if p.returncode != 0:
            problems.append(f"{name}: exit status {p.returncode}")
        return p
    d = scratch_dir()
    p = run("json.tool", ["-q", "-m", "json.tool"], d, input='{"a":1}\n')
    if '"a": 1' not in p.stdout:
        problems.append(f"json.tool: the JSON is not on stdout: {p.stdout[:200]!r}")
    pages = glob.glob(os.path.join(d, "*.html"))
    if not pages or not complete(pages[0]):
        problems.append("json.tool: no complete trace written")
    script = os.path.join(d, "closes.py")
    with open(script, "w") as f:
        f.write("import sys\nprint('before the close')\nsys.stdout.close()\n"
                "def f():\n    return sum(range(10))\n[f() for _ in range(100)]\n")
    for quiet in ([], ["-q"]):
        name = "closes-stdout" + (" -q" if quiet else "")
        out = os.path.join(d, f"closes{len(quiet)}.html")
        p = run(name, quiet + ["-o", out, script], d)
        if "before the close" not in p.stdout:
            problems.append(f"{name}: the script's output is lost")
        if not complete(out):
            problems.append(f"{name}: no complete trace written")
    # fd 1 closed before Python starts: sys.stdout is None.
    script = os.path.join(d, "calls.py")
    with open(script, "w") as f:
        f.write("def f():\n    return sum(range(10))\n[f() for _ in range(100)]\n")
    out = os.path.join(d, "nofd1.html")
    p = subprocess.run(["sh", "-c", 'exec "$@" >&-', "sh", sys.executable, "-m", "giltracer",
                        "-q", "-o", out, script], cwd=d, text=True, stderr=subprocess.PIPE,
                       timeout=300)
    facts["fd1-closed -q"] = dict(rc=p.returncode, stderr=p.stderr.strip()[-300:])
    if p.returncode != 0:
        problems.append(f"fd1-closed -q: exit status {p.returncode}")
    if not complete(out):
        problems.append("fd1-closed -q: no complete trace written")
    report(runs=facts)
    '''


@case("child-checkpoints-busy", "4 followed fork children, each starting and ending 8 "
      "threads calling functions for 1.5 s, checkpointing every 20 ms (the spooler names "
      "threads while the main thread answers looks): none hangs, each child's calls arrive")
def _():
    return r'''
    import multiprocessing as mp
    import _giltracer_boot
    _giltracer_boot.SPOOL_EVERY = 0.02
    def g(i):
        return i * 2
    def churn(end):
        while time.monotonic() < end:
            ths = [threading.Thread(target=lambda: [g(i) for i in range(200)]) for _ in range(8)]
            for th in ths:
                th.start()
            for th in ths:
                th.join()
    ctx = mp.get_context("fork")
    hung = []
    with giltracer.trace(follow_children=True, sched=False) as t:
        ps = [ctx.Process(target=churn, args=(time.monotonic() + 1.5,)) for _ in range(4)]
        for p in ps:
            p.start()
        for p in ps:
            p.join(60)
            if p.is_alive():
                hung.append(p.pid)
                p.kill()
    if hung:
        problems.append(f"children hung: {hung}")
    calls = {p.pid: sum(1 for th in t.threads if th.pid == p.pid for s in t.spans(th.tid)
                        if s[2].split()[0] == "g") for p in t.processes}
    short = [p.pid for p in ps if calls.get(p.pid, 0) < 200]
    if short:
        problems.append(f"children whose calls did not arrive: {short}")
    report(children=len(ps), calls=sum(calls.values()), note=t.result.tracer_note)
    '''


@case("child-sigkill-at-random", "12 followed fork children checkpointing every 50 ms, each "
      "SIGKILLed at a random point (0.02-0.6 s): every one that lived past a checkpoint keeps "
      "its calls up to it, and the note names each with what was lost")
def _():
    return r'''
    import multiprocessing as mp, random, re, signal
    import _giltracer_boot
    _giltracer_boot.SPOOL_EVERY = 0.05
    def h(i):
        return i + 1
    def busy():
        i = 0
        while True:
            h(i)
            i += 1
            if i % 200 == 0:
                time.sleep(0.001)
    rng = random.Random(int.from_bytes(os.urandom(4), "little"))
    ctx = mp.get_context("fork")
    with giltracer.trace(follow_children=True, sched=False) as t:
        ps = []
        for _ in range(12):
            p = ctx.Process(target=busy)
            p.start()
            ps.append((p, rng.uniform(0.02, 0.6)))
        born = time.monotonic()
        for p, at in sorted(ps, key=lambda x: x[1]):
            time.sleep(max(0.0, born + at - time.monotonic()))
            os.kill(p.pid, signal.SIGKILL)
        for p, _ in ps:
            p.join(30)
    note = t.result.tracer_note or ""
    calls = {p.pid: sum(1 for th in t.threads if th.pid == p.pid for s in t.spans(th.tid)
                        if s[2].split()[0] == "h") for p in t.processes}
    cut = {int(m.group(1)) for m in re.finditer(r"(\d+) \(\+[0-9.]+ ms; up to [0-9.]+ ms lost\)", note)}
    for p, at in ps:
        if p.pid in cut and calls.get(p.pid, 0) == 0:
            problems.append(f"child {p.pid} killed at {at:.2f} s: a checkpoint but no calls")
    # Every child is counted in the note (which names at most 6 of a kind): with its last
    # checkpoint, or as having written none.
    def count(pattern):
        m = re.search(pattern, note)
        return int(m.group(1)) if m else 0
    counted = (count(r"(\d+) child process(?:es)? killed \(e\.g\. by SIGKILL\)")
               + count(r"(\d+) child process(?:es)? \(pid [^)]*\) ended without writing"))
    if counted != len(ps):
        problems.append(f"the note counts {counted} of {len(ps)} killed children: {note[:300]}")
    report(children=len(ps), with_checkpoint=len(cut), calls=sum(calls.values()))
    '''


@case("cli-terminated-fork-children", "the CLI with --follow-children; a fork Pool's workers "
      "each call f() 300 times and sleep until the pool is terminate()d (SIGTERM), 3 rounds: "
      "every worker's calls are in the trace, none reported without its trace")
def _():
    return r'''
    import subprocess
    d = scratch_dir()
    script, out = os.path.join(d, "pools.py"), os.path.join(d, "t.json")
    with open(script, "w") as f:
        # Each worker busy in Python when terminated (cli-terminated-idle-fork-pool has
        # them idle in the pool's queue).
        f.write("import multiprocessing as mp, os, time\n"
                "import _giltracer_boot\n"
                "_giltracer_boot.SPOOL_EVERY = 3600  # only the child's end writes its trace\n"
                "def f(i):\n    return i * i\n"
                "def work(n):\n    [f(i) for i in range(300)]\n    started.put(os.getpid())\n"
                "    while True:\n        time.sleep(0.01)\n"
                "if __name__ == '__main__':\n"
                "    ctx = mp.get_context('fork')\n"
                "    for _ in range(3):\n"
                "        started = ctx.Queue()  # (the workers inherit it)\n"
                "        pool = ctx.Pool(3)\n"
                "        pool.map_async(work, range(3), chunksize=1)\n"
                "        pids = {started.get(timeout=60) for _ in range(3)}\n"
                "        print(*sorted(pids), flush=True)\n"
                "        pool.terminate()\n        pool.join()\n")
    p = subprocess.run([sys.executable, "-m", "giltracer", "-q", "--follow-children", "-o", out,
                        script], capture_output=True, text=True, timeout=240)
    if p.returncode != 0:
        problems.append(f"exit status {p.returncode}: {p.stderr[-300:]}")
    workers = {int(x) for line in p.stdout.splitlines()[:-1] for x in line.split()}
    if "without writing its trace" in p.stderr:
        problems.append("a terminated worker was reported without its trace: " + p.stderr[-300:])
    calls = calls_by_pid(out, "f")
    short = {pid: calls[pid] for pid in workers if calls[pid] != 300}
    if len(workers) != 9 or short:
        problems.append(f"workers without their calls in the trace: {short or workers}")
    report(workers=len(workers), traced_workers=len(calls), calls=sum(calls.values()))
    '''


@case("cli-terminated-idle-fork-pool", "the CLI with --follow-children; a fork Pool's workers "
      "map f() 300 times per task, then wait idle in the pool's queue when it is terminate()d "
      "(SIGTERM), 10 rounds: no hang (a SIGTERM landing between CPython's signal check and "
      "the wait is answered by the worker's spooler), every task's calls in the trace")
def _():
    return r'''
    import subprocess
    from collections import Counter
    d = scratch_dir()
    script, out = os.path.join(d, "pools.py"), os.path.join(d, "t.json")
    with open(script, "w") as f:
        f.write("import multiprocessing as mp, os, time\n"
                "def f(i):\n    return i * i\n"
                "def work(n):\n    [f(i) for i in range(300)]\n    return os.getpid()\n"
                "if __name__ == '__main__':\n"
                "    ctx = mp.get_context('fork')\n"
                "    for _ in range(10):\n"
                "        pool = ctx.Pool(3)\n"
                "        print(*pool.map(work, range(6), chunksize=1), flush=True)\n"
                "        time.sleep(0.05)  # (idle in get())\n"
                "        pool.terminate()\n        pool.join()\n")
    try:
        p = subprocess.run([sys.executable, "-m", "giltracer", "-q", "--follow-children", "-o",
                            out, script], capture_output=True, text=True, timeout=100)
    except subprocess.TimeoutExpired as e:  # (its processes: killed with the case's)
        problems.append("hung: a terminate()d pool never ended (100 s)")
        p = subprocess.CompletedProcess(e.cmd, 0, e.stdout or "", e.stderr or "")
        p.stdout = p.stdout if isinstance(p.stdout, str) else p.stdout.decode()
        p.stderr = p.stderr if isinstance(p.stderr, str) else p.stderr.decode()
    if p.returncode != 0:
        problems.append(f"exit status {p.returncode}: {p.stderr[-300:]}")
    tasks = Counter(int(x) for line in p.stdout.splitlines() for x in line.split() if x.isdigit())
    if "without writing its trace" in p.stderr:
        problems.append("a terminated worker was reported without its trace: " + p.stderr[-300:])
    calls = calls_by_pid(out, "f")
    short = {pid: (calls[pid], 300 * n) for pid, n in tasks.items() if calls[pid] != 300 * n}
    if sum(tasks.values()) != 60 or short:
        problems.append(f"tasks without their calls in the trace (pid: calls, expected): "
                        f"{short or dict(tasks)}")
    report(workers=len(tasks), traced_workers=len(calls), calls=sum(calls.values()))
    '''


@case("magic-awaiting-cells", "%%giltracer and %%gilprofile cells mixing IPython syntax (!cmd, "
      "%time) with a top-level await, 10 of each in one shell: every cell runs, traced")
def _():
    return r'''
    import asyncio
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "giltracer")
    shell.user_ns["ran"] = 0
    failed = []
    for i in range(10):
        for magic in ("giltracer", "gilprofile"):
            cell = (f"%%{magic} -q --no-sched --var t\n"
                    "!true\n"
                    "%time x = sum(range(1000))\n"
                    "import asyncio\n"
                    "await asyncio.sleep(0.001)\n"
                    "ran += 1\n")
            r = shell.run_cell(cell)
            if not r.success or asyncio.iscoroutine(r.result):
                failed.append(f"{magic} #{i}: {r.error_in_exec or r.error_before_exec or r.result!r}")
    if failed:
        problems.append("cells that did not run: " + "; ".join(failed[:3]))
    if shell.user_ns["ran"] != 20:
        problems.append(f"{shell.user_ns['ran']} of 20 cells ran their code")
    t = shell.user_ns.get("t")
    report(ran=shell.user_ns["ran"], last_threads=len(t.threads) if t is not None else None)
    '''


@case("pids-limit-sample-start", "a pids cgroup allowing 1 task while mode='sample' starts "
      "(its sampler thread cannot start), 5 times; the user's threading.setprofile hook is the "
      "user's after each failed start and after a later trace", pids_max=64)
def _():
    return r'''
    cgroup = os.environ["GT_STRESS_CGROUP"]
    def pids_max(v):
        with open(os.path.join(cgroup, "pids.max"), "w") as f:
            f.write(str(v))
    def users_hook(frame, event, arg):
        return None
    threading.setprofile(users_hook)
    errors = []
    for i in range(5):
        t = giltracer.trace(backend=BACKEND, mode="sample")
        pids_max(1)
        try:
            t.start()
            errors.append(None)
            t.stop()
        except Exception as e:
            errors.append(f"{type(e).__name__}: {e}")
        finally:
            pids_max("max")
        if threading.getprofile() is not users_hook:
            problems.append(f"round {i}: the user's thread hook is gone after the start: "
                            f"{threading.getprofile()!r}")
        with giltracer.trace(backend=BACKEND) as t2:
            th = threading.Thread(target=spin, args=(1000,))
            th.start()
            th.join()
        if threading.getprofile() is not users_hook:
            problems.append(f"round {i}: the user's thread hook is gone after a later trace")
    if all(e is None for e in errors):
        problems.append("the pids limit did not bite (every sampling start succeeded)")
    threading.setprofile(None)
    report(failed_starts=sum(e is not None for e in errors), error=next(filter(None, errors), None))
    '''


def _bpf_skip() -> Optional[str]:
    if os.geteuid() != 0:
        return "the bpf backend needs root (or CAP_BPF+CAP_PERFMON)"
    return None


for _base in ("fork-os-exit", "fork-sys-exit", "nested-sessions", "keyboard-interrupt",
              "tiny-max-events"):
    _c = next(c for c in CASES if c.name == _base)
    CASES.append(Case(_c.name + "[bpf]", _c.what + " (bpf backend)", _c.code, _c.timeout,
                      backend="bpf", skip=_bpf_skip))


@case("cycles-100[bpf]", "100 start/stop cycles with the bpf backend, RSS from cycle 10 to 100",
      backend="bpf", skip=_bpf_skip, timeout=300)
def _():
    return r'''
    rss = {}
    events = dropped = 0
    for i in range(100):
        with giltracer.trace(backend=BACKEND) as t:
            spin(2000)
        events += t.event_count
        dropped += t.dropped_events
        if i in (9, 99):
            rss[i + 1] = rss_kb()
    growth = rss[100] - rss[10]
    if growth > LEAK_KB and not UNDER_ASAN:
        problems.append(f"RSS grew {growth} KiB over 90 cycles")
    report(rss_kb=rss, rss_growth_kb=growth, backend=t.backend, events=events, dropped=dropped)
    '''.replace("LEAK_KB", str(LEAK_THRESHOLD_KB))


# ---- running ----------------------------------------------------------------------

PIDS_ROOT = "/sys/fs/cgroup/pids"


def pids_cgroup_available() -> Optional[str]:
    """None if a pids cgroup can be made here, else why not."""
    if os.geteuid() != 0:
        return "making a pids cgroup needs root"
    if not os.access(PIDS_ROOT, os.W_OK):
        return f"no writable cgroup-v1 pids hierarchy at {PIDS_ROOT}"
    return None


def make_pids_cgroup(limit: int) -> str:
    path = os.path.join(PIDS_ROOT, f"giltracer-stress-{os.getpid()}-{limit}")
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "pids.max"), "w") as f:
        f.write(str(limit))
    return path


def sanitizer_report(stderr: str) -> str:
    """The head of an ASan/UBSan report (what, where, the first frames), if any."""
    lines = stderr.splitlines()
    for i, ln in enumerate(lines):
        if "ERROR: AddressSanitizer" in ln or "runtime error:" in ln or "ERROR: LeakSanitizer" in ln:
            head = [ln]
            for nxt in lines[i + 1:]:
                if nxt.strip().startswith("#") or nxt.startswith(("READ", "WRITE", "freed by",
                                                                    "previously allocated")):
                    head.append(nxt)
                if len(head) >= 24:
                    break
            summary = [x for x in lines if x.startswith("SUMMARY:")]
            return "\n".join(head + summary[:1])
    return ""


def run_case(c: Case, python: str) -> Outcome:
    out = Outcome(c)
    reason = c.skip() if c.skip else None
    if reason is None and c.pids_max is not None:
        reason = pids_cgroup_available()
    if reason is None and c.backend == "bpf" and free_threaded(python):
        reason = "the bpf backend has no contention probe on a free-threaded build (it refuses)"
    if reason is None and c.pidns and os.geteuid() == 0 and not pid_namespaces_work():
        reason = "no private pid namespace here (unshare --pid --mount-proc fails, e.g. in a chroot)"
    if reason:
        out.status, out.notes = "SKIP", [reason]
        return out
    env = dict(os.environ, GT_STRESS_BACKEND=c.backend, PYTHONFAULTHANDLER="1")
    cgroup = make_pids_cgroup(c.pids_max) if c.pids_max is not None else None
    if cgroup:
        env["GT_STRESS_CGROUP"] = cgroup

    def enter_cgroup():
        if cgroup:
            with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))

    argv = [python, "-c", PRELUDE + c.code]
    if c.pidns and os.geteuid() == 0 and shutil.which("unshare"):
        argv = ["unshare", "--pid", "--fork", "--mount-proc"] + argv
        env["GT_STRESS_PIDNS"] = "1"
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=enter_cgroup, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=c.timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        out.status = "FAIL"
        out.notes.append(f"hung: killed after {c.timeout:.0f} s")
    out.seconds = time.monotonic() - t0
    if cgroup:
        try:
            os.rmdir(cgroup)
        except OSError:
            pass
    rc = proc.returncode
    out.exit = f"signal {signal.Signals(-rc).name}" if rc < 0 else f"exit {rc}"
    out.stderr_tail = sanitizer_report(stderr) or "\n".join(stderr.strip().splitlines()[-12:])
    lines = [ln for ln in stdout.splitlines() if ln.startswith("RESULT ")]
    if lines:
        out.result = json.loads(lines[-1][len("RESULT "):])
    if out.result.get("skipped"):
        out.status, out.notes = "SKIP", [out.result["skipped"]]
        return out
    if rc != 0:
        out.status = "FAIL"
        out.notes.append("crashed" if rc < 0 else "non-zero exit")
    if not lines:
        out.status = "FAIL"
        out.notes.append("no result printed")
    for p in out.result.get("problems", []):
        out.status = "FAIL"
        out.notes.append(p)
    return out


def fmt_counts(r: Dict) -> str:
    if "events" not in r:
        return ""
    return (f"{r.get('events', 0):,} / {r.get('dropped', 0):,} / {r.get('gil_dropped', 0):,}"
            f" / {r.get('sched_lost', 0):,}")


SHOWN = ("error", "inner_error", "child", "os_intervals_after_child", "held_pct", "rss_kb",
         "rss_growth_kb", "seconds_per_cycle", "threads_with_spans", "threads_with_os_states",
         "interrupted", "unwound_spans", "restored", "cprofile_still_works",
         "acquisitions", "second_error", "threads_started",
         "threads_failed", "backend", "sched", "warned", "refused_at_stop", "failed_starts",
         "monitoring_tool_after_stop", "stop_says", "recorded", "note", "cprofile_counted_after",
         "stop_active_returned", "idle_stop_active", "pid_max", "forced", "reused_tids",
         "threads_reusing", "thread_records", "exit_status", "seconds_to_exit", "page_chars",
         "stderr_tail", "runs", "setprofile_calls_seen", "workers", "traced_workers", "calls")


def free_threaded(python: str) -> bool:
    return subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_config_var("
                           "'Py_GIL_DISABLED'))"], capture_output=True, text=True
                          ).stdout.strip() == "1"


def pid_namespaces_work() -> bool:
    if not shutil.which("unshare"):
        return True  # (run_case then runs the case without one)
    return subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"],
                          capture_output=True).returncode == 0


def interpreter_version(python: str) -> str:
    return subprocess.run([python, "-c", "import sys; print(sys.version.split()[0])"],
                          capture_output=True, text=True).stdout.strip() or "?"


def markdown(runs: List[tuple]) -> str:
    lines = [
        "# giltracer stress report",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, uid {os.geteuid()}, "
        f"{os.cpu_count()} CPUs. Counts: call events / calls dropped / GIL events lost / "
        "scheduler records lost. A FAIL is a crash, a hang, a leak beyond "
        f"{LEAK_THRESHOLD_KB // 1024} MiB, silent loss, or a broken session.",
    ]
    everything: List[Outcome] = []
    for python, outcomes in runs:
        everything += outcomes
        lines += [
            "",
            f"## Python {interpreter_version(python)} ({python})",
            "",
            "| case | what was tried | result | counts | exit | time | facts and problems |",
            "|---|---|---|---|---|---|---|",
        ]
        for o in outcomes:
            facts = [f"{k}={json.dumps(o.result[k])}" for k in SHOWN if k in o.result
                     and o.result[k] not in (None, {}, [])]
            cell = "; ".join(o.notes + facts).replace("|", "\\|")
            lines.append(f"| {o.case.name} | {o.case.what} | **{o.status}** | "
                         f"{fmt_counts(o.result)} | {o.exit} | {o.seconds:.1f} s | {cell} |")
        fails = [o for o in outcomes if o.status == "FAIL"]
        if fails:
            lines += ["", "Last lines of stderr of the failures:", ""]
            for o in fails:
                lines += [f"* {o.case.name}:", "", "  ```"]
                lines += ["  " + ln for ln in (o.stderr_tail or "(empty)").splitlines()]
                lines += ["  ```"]
    n = {s: sum(o.status == s for o in everything) for s in ("PASS", "FAIL", "SKIP")}
    lines += ["", f"{n['PASS']} passed, {n['FAIL']} failed, {n['SKIP']} skipped."]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="build/stress", help="directory for report.md")
    ap.add_argument("--python", action="append",
                    help="interpreter with giltracer installed (repeat for several; "
                         "default: this one)")
    ap.add_argument("--only", nargs="*", help="run only these cases (names or prefixes)")
    ap.add_argument("--list", action="store_true", help="list the cases")
    args = ap.parse_args()
    if args.list:
        for c in CASES:
            print(f"{c.name:24} {c.what}")
        return 0
    cases = [c for c in CASES if not args.only or any(c.name.startswith(p) for p in args.only)]
    runs = []
    for python in args.python or [sys.executable]:
        print(f"stress: Python {interpreter_version(python)} ({python})", flush=True)
        outcomes = []
        for c in cases:
            print(f"stress:   {c.name} ...", end=" ", flush=True)
            o = run_case(c, python)
            print(f"{o.status} ({o.exit or '-'}, {o.seconds:.1f} s)", flush=True)
            outcomes.append(o)
        runs.append((python, outcomes))
    report = markdown(runs)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "report.md")
    with open(path, "w") as f:
        f.write(report)
    print()
    print(report)
    print(f"stress: report in {path}")
    return 1 if any(o.status == "FAIL" for _, outs in runs for o in outs) else 0


if __name__ == "__main__":
    sys.exit(main())
