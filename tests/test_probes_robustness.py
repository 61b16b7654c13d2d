"""The probes and the session lifecycle where they are easy to get wrong: fork inside a
trace, a refused nested start, a poller that cannot start, the GIL hooks racing stop, the
free-threaded refusal, calibration retries, bpf options per session, finalizers at
release, drop-request decoding.

Whatever may crash or hang runs in a fresh interpreter (run_python), so a failure is
a failed test, not a dead test run.
"""

import ctypes
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import time

import pytest

import giltracer
import giltracer._core
from conftest import FREE_THREADED, NO_BPF_FT, needs_gil
from workloads import cpu_pair, gil_shares

PKG_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(giltracer.__file__)))
TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
_INFO = giltracer._core.build_info()


def run_python(code, *args, timeout=90, env_extra=None, preload=None):
    """Run `code` in a fresh interpreter; returns the CompletedProcess. A hang is a
    failure: it is reported with what the child printed."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([PKG_PARENT, TESTS_DIR, env.get("PYTHONPATH", "")])
    env.update(env_extra or {})
    if preload:
        # First, so that it sees our calls before a sanitizer's interceptors do (whose
        # runtime then is not first: allowed explicitly).
        env["LD_PRELOAD"] = ":".join(p for p in (preload, env.get("LD_PRELOAD", "")) if p)
        if "asan" in env["LD_PRELOAD"]:
            env["ASAN_OPTIONS"] = ":".join(
                p for p in (env.get("ASAN_OPTIONS", ""), "verify_asan_link_order=0") if p)
    try:
        return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the child hung for {timeout} s: stdout={e.stdout!r} stderr={e.stderr!r}")


def build_shim(tmp_path, source):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        pytest.skip("no C compiler to build the LD_PRELOAD shim")
    src = tmp_path / "shim.c"
    src.write_text(textwrap.dedent(source))
    out = tmp_path / "shim.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(out), str(src), "-ldl"], check=True)
    return str(out)


def by_name(t):
    return {s.name: s for s in t.summary()}


def sched_works():
    with giltracer.trace(backend="hooks", functions=False) as t:
        pass
    return t.sched_status.startswith("perf_event")


# -- fork inside a trace ---------------------------------------------------------

FORK_IN_TRACE = """
    import os, sys, threading, time, warnings
    warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
    import giltracer

    mode, backend = sys.argv[1], sys.argv[2]
    options = {} if backend == "default" else {"backend": backend}
    stop = threading.Event()

    def napper():  # blocks and wakes every 2 ms: a steady stream of context switches
        while not stop.is_set():
            time.sleep(0.002)

    th = threading.Thread(target=napper, name="napper")
    with giltracer.trace(**options) as t:
        th.start()
        time.sleep(0.1)
        pid = os.fork()
        if pid == 0:
            if mode == "sys_exit":
                sys.exit(0)  # unwinds through the with block: the child stops the session
            if mode == "os_exit":
                os._exit(0)
            # mode == "with_end": the child leaves the block normally
        else:
            _, status = os.waitpid(pid, 0)
            after_child = time.monotonic_ns()
            time.sleep(0.3)
            stop.set()
            th.join()
    if pid == 0:
        sys.exit(0)  # the child ends normally, at the end of the script
    tid = {r.name: r.tid for r in t.summary()}["napper"]
    later = [iv for iv in t.os_intervals(tid) if iv[0] > after_child]
    print("STATUS", status, "SCHED", t.sched_status)
    print("LATER", len(later))
"""


@pytest.mark.parametrize("backend", ["hooks", "default"])
@pytest.mark.parametrize("mode", ["sys_exit", "os_exit", "with_end"])
def test_fork_inside_a_trace(mode, backend):
    """The child leaves the parent's session alone (no segfault on its perf rings) and
    the parent's OS states go on after the fork. ("default" is bpf as root.)"""
    if backend == "hooks" and not sched_works():
        pytest.skip("perf_event context switches are not available here")
    p = run_python(FORK_IN_TRACE, mode, backend)
    assert p.returncode == 0, (p.stdout, p.stderr)
    status = int(p.stdout.split("STATUS")[1].split()[0])
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, (
        f"child: {'signal %d' % os.WTERMSIG(status) if os.WIFSIGNALED(status) else status}",
        p.stderr)
    if backend == "hooks":
        assert "SCHED perf_event" in p.stdout, p.stdout  # the parent's OS states ...
    later = int(p.stdout.split("LATER")[1])  # ... go on after the fork:
    # 0.3 s of 2 ms naps: ~150 wake-ups; at least a few must be there.
    assert later >= 10, p.stdout


# -- a refused nested start ------------------------------------------------------

@needs_gil  # the outer session is checked by its GIL shares
@pytest.mark.parametrize("backend", ["hooks", "default"])
def test_refused_nested_start_leaves_the_outer_session_intact(backend):
    """("default" is bpf as root: the refused start used to stop the bpf probe too.)"""
    options = {} if backend == "default" else {"backend": backend}

    with giltracer.trace(c_calls=False, **options) as outer:
        with pytest.raises(RuntimeError, match="one session at a time"):
            with giltracer.trace(c_calls=False, **options):
                pass
        threads = cpu_pair(0.6)
    assert outer.gil_known, outer.backend_reason
    s = by_name(outer)
    # A disabled probe shows the workers 100 % released (no GIL events): while both spin,
    # each must be seen holding and waiting, the two adding up to nearly all the time.
    window = (max(th.spin_ns[0] for th in threads), min(th.spin_ns[1] for th in threads))
    for th in threads:
        share = gil_shares(outer, th.native_id, window)
        assert s[th.name].acquisitions >= 5, s[th.name]
        assert share["held"] + share["wait"] >= 90, (share, s[th.name])
        assert share["held"] >= 10 and share["wait"] >= 10, (share, s[th.name])


def test_nested_start_raises_before_touching_anything():
    """The refusal does not depend on the backend: a raw nested Session.start()."""
    with giltracer.trace(backend="hooks", functions=False) as outer:
        inner = giltracer._core.Session(own_dir=os.path.dirname(giltracer.__file__),
                                        backend="hooks", functions=False)
        with pytest.raises(RuntimeError, match="one session at a time"):
            inner.start([])
        del inner
        cpu_pair(0.3)
    assert sum(r.acquisitions for r in outer.summary()) >= 4  # the outer probe kept recording


def test_an_interrupted_stop_still_finishes_the_session(monkeypatch):
    """A session is the active one until it is finished: an exception while the trace
    names its threads (a KeyboardInterrupt, say) must not leave it unfinished, or every
    later trace of the process would be refused."""
    import giltracer.api as api

    def interrupted(_threads):
        raise KeyboardInterrupt

    monkeypatch.setattr(api, "_thread_names", interrupted)
    with pytest.raises(KeyboardInterrupt):
        with giltracer.trace(backend="hooks", functions=False) as t:
            pass
    monkeypatch.undo()
    assert t.duration_ns > 0  # finished all the same
    with giltracer.trace(backend="hooks", functions=False) as again:  # not refused
        cpu_pair(0.1)
    assert sum(r.acquisitions for r in again.summary()) > 0


# -- the sched poller thread cannot start ----------------------------------------

FAIL_OUR_THREADS = r"""
    #define _GNU_SOURCE
    #include <dlfcn.h>
    #include <errno.h>
    #include <pthread.h>
    #include <string.h>

    /* pthread_create fails with EAGAIN (as under a pids limit) for threads whose start
     * routine lives in giltracer's extension (the scheduler poller); others start. Matched
     * by the extension's own file name: the interpreter's path may contain "giltracer" too
     * (a venv in /tmp/giltracer-matrix), and a static python starts its threads from there. */
    typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    int pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
    {
        static create_fn real;
        Dl_info info;
        if (!real)
            real = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
        if (dladdr((void *)fn, &info) && info.dli_fname && strstr(info.dli_fname, "giltracer/_core."))
            return EAGAIN;
        return real(t, a, fn, arg);
    }
"""

POLLER_FAILS = """
    import threading
    import giltracer

    def work():
        sum(i * i for i in range(20000))

    for _ in range(3):
        with giltracer.trace(backend="hooks") as t:
            threads = [threading.Thread(target=work) for _ in range(8)]  # new threads
            for th in threads:
                th.start()
            for th in threads:
                th.join()
        print("SCHED", t.sched_status)
        print("THREADS", len(t.threads), "GIL", t.gil_known)
"""


def test_sched_poller_cannot_start(tmp_path):
    if not sched_works():
        pytest.skip("perf_event context switches are not available here")
    shim = build_shim(tmp_path, FAIL_OUR_THREADS)
    # Freed memory is overwritten: a use of the freed probe cannot go unnoticed.
    p = run_python(POLLER_FAILS, preload=shim, timeout=60, env_extra={"MALLOC_PERTURB_": "165"})
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("SCHED")]
    assert len(lines) == 3, p.stdout
    for ln in lines:
        assert "unavailable" in ln and "poller" in ln and "Resource temporarily unavailable" in ln, ln
    assert "THREADS 9 GIL True" in p.stdout, p.stdout


# -- GIL hooks racing stop/finish -------------------------------------------------

SLOW_PERF_OPEN = r"""
    #define _GNU_SOURCE
    #include <dlfcn.h>
    #include <stdarg.h>
    #include <sys/syscall.h>
    #include <time.h>

    /* Widen the race: every perf_event_open (a new thread's registration, inside its
     * first GIL hook) takes 30 ms longer. */
    typedef long (*syscall_fn)(long, ...);
    long syscall(long nr, ...)
    {
        static syscall_fn real;
        va_list ap;
        long a[6];
        if (!real)
            real = (syscall_fn)dlsym(RTLD_NEXT, "syscall");
        va_start(ap, nr);
        for (int i = 0; i < 6; i++)
            a[i] = va_arg(ap, long);
        va_end(ap);
        if (nr == SYS_perf_event_open) {
            struct timespec ts = {0, 30000000};
            nanosleep(&ts, NULL);
        }
        return real(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
    }
"""

RACE_REGISTRATION = """
    import _thread, os, threading, time
    import giltracer

    done = []
    def churn():  # its first GIL take registers it: in the hook, perf_event_open
        f = os.fstat
        for _ in range(200):
            f(0)
        done.append(1)

    for i in range(6):
        with giltracer.trace(backend="hooks", functions=False) as t:
            for _ in range(3):
                _thread.start_new_thread(churn, ())  # does not wait for the thread
        # the threads registered while the session stopped and was freed
    while len(done) < 18:
        time.sleep(0.01)
    print("OK", t.sched_status)
"""


def test_registration_in_a_gil_hook_racing_stop(tmp_path):
    """New threads register (perf_event_open, mmap) inside their first GIL hook; stop
    must wait for that, not free the scheduler state under it."""
    if not sched_works():
        pytest.skip("perf_event context switches are not available here")
    shim = build_shim(tmp_path, SLOW_PERF_OPEN)
    p = run_python(RACE_REGISTRATION, preload=shim, timeout=120,
                   env_extra={"MALLOC_PERTURB_": "165"})
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr[-3000:])
    assert "OK perf_event" in p.stdout, p.stdout


STRESS = """
    import os, sys, threading, time
    import giltracer

    stop = threading.Event()
    made = [0]

    def churn():  # GIL churn: every os.fstat drops and re-takes the GIL
        f = os.fstat
        for _ in range(300):
            f(0)

    def spawner():  # short-lived threads, across session boundaries
        while not stop.is_set():
            batch = [threading.Thread(target=churn) for _ in range(4)]
            for th in batch:
                th.start()
            for th in batch:
                th.join()
            made[0] += len(batch)

    spawners = [threading.Thread(target=spawner) for _ in range(2)]
    for th in spawners:
        th.start()
    cycles = int(sys.argv[1])
    sessions = i = 0
    deadline = time.monotonic() + 120
    try:  # an error in a session must end the run with its traceback, not hang it
        # At least `cycles` sessions, and on until the spawners made 200 threads: how
        # many they make per session depends on the machine's load (ASan, other jobs).
        while i < cycles or (made[0] < 200 and time.monotonic() < deadline):
            with giltracer.trace(backend="hooks", functions=bool(i % 2)) as t:
                time.sleep(0.002 * (i % 3))
            sessions += t.gil_known
            i += 1
    finally:
        stop.set()
        for th in spawners:
            th.join()
    print("SESSIONS", sessions, "THREADS", made[0], "RUNS", i)
"""


def test_stress_threads_and_sessions():
    """Many short-lived threads trading the GIL while sessions start and stop over and
    over (run it under ASan: make test-asan): nothing crashes, hangs or leaks a hook."""
    cycles = 150
    p = run_python(STRESS, str(cycles), timeout=240)
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr[-3000:])
    sessions, threads, runs = (int(x) for x in p.stdout.split()[1::2])
    assert sessions == runs >= cycles, p.stdout
    assert threads > 100, p.stdout


# -- free-threaded builds ----------------------------------------------------------

def test_build_info_says_whether_the_build_is_free_threaded():
    free_threaded = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    assert _INFO["free_threaded"] is free_threaded
    with giltracer.trace(functions=False) as t:
        pass
    assert t.duration_ns > 0


# -- calibration is retried ------------------------------------------------------

CALIBRATION = """
    import giltracer
    from workloads import cpu_pair
    for i in range(int(__import__("sys").argv[1])):
        try:
            with giltracer.trace(backend="hooks", functions=False) as t:
                cpu_pair(0.1)
            print("RUN", t.backend, sum(r.acquisitions for r in t.summary()) > 0)
        except RuntimeError as e:
            print("REFUSED", e)
"""


@needs_gil  # the hooks calibrate the GIL; a free-threaded build's park probe needs none
def test_one_failed_calibration_is_retried_later():
    p = run_python(CALIBRATION, "2", env_extra={"GILTRACER_TEST_FAIL_CALIBRATIONS": "1"})
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("REFUSED") and "forced failure" in lines[0], lines
    assert "a later session tries again" in lines[0], lines
    assert lines[1] == "RUN hooks True", lines


@needs_gil
def test_calibration_retries_are_bounded():
    p = run_python(CALIBRATION, "10", env_extra={"GILTRACER_TEST_FAIL_CALIBRATIONS": "100"})
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 10 and all(ln.startswith("REFUSED") for ln in lines), lines
    # Eight attempts, then the last explanation stays.
    assert all("a later session tries again" in ln for ln in lines[:7]), lines
    assert all("gave up after repeated failures" in ln for ln in lines[7:]), lines


CALIBRATION_AUTO = """
    import giltracer
    from workloads import cpu_pair
    for backend in ("auto", "auto", "bpf"):  # a full trace: auto takes bpf as root
        with giltracer.trace(backend=backend, c_calls=False) as t:
            cpu_pair(0.1)
        print("RUN", t.backend, sum(r.acquisitions for r in t.summary()) > 0, t.backend_reason)
"""


@needs_gil
@pytest.mark.skipif(not _INFO["bpf_available"] or os.geteuid() != 0,
                    reason="the bpf probe needs root and a build with it")
def test_a_failed_calibration_does_not_cost_the_bpf_probe_for_good():
    """The bpf probe learns the GIL's address from the hooks' calibration: one failure
    used to mark the bpf probe tried for the rest of the process (auto then ran the
    hooks, backend='bpf' raised)."""
    p = run_python(CALIBRATION_AUTO, env_extra={"GILTRACER_TEST_FAIL_CALIBRATIONS": "1"})
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 3, (lines, p.stderr)
    # The failed session: no probe could run, and it says why (once: one try per session).
    assert lines[0].startswith("RUN none False") and "forced failure" in lines[0], lines
    assert lines[0].count("forced failure") <= 2, lines  # bpf's why quotes the hooks' why
    assert lines[1].startswith("RUN bpf True"), lines
    assert lines[2].startswith("RUN bpf True"), lines


CALIBRATION_AUTO_REASONS = """
    import giltracer
    for i in range(9):
        with giltracer.trace(backend="auto", c_calls=False) as t:
            pass
        print("RUN", t.backend, t.backend_reason)
"""


@needs_gil
def test_one_calibration_try_per_session_whoever_asks():
    """auto as root asks twice per session (the bpf probe, then the hooks' fallback):
    still one calibration try per session, so the bound of 8 means 8 sessions."""
    p = run_python(CALIBRATION_AUTO_REASONS, env_extra={"GILTRACER_TEST_FAIL_CALIBRATIONS": "100"})
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 9, lines
    # auto does not raise: it runs without a GIL probe and says why.
    assert all(ln.startswith("RUN none") for ln in lines), lines
    assert all("a later session tries again" in ln for ln in lines[:7]), lines
    assert all("gave up after repeated failures" in ln for ln in lines[7:]), lines


STOPPED_NOT_FINISHED = """
    import os, sys, threading
    import giltracer, giltracer._core
    from workloads import cpu_pair

    backend = sys.argv[1]
    opts = dict(own_dir=os.path.dirname(giltracer.__file__), functions=False)
    first = giltracer._core.Session(backend=backend, follow_children=backend == "bpf", **opts)
    first.start([(th.ident, th.native_id) for th in threading.enumerate()])
    cpu_pair(0.2)
    first.stop()
    second = giltracer._core.Session(backend=backend, **opts)  # without follow_children
    try:
        second.start([])
        print("SECOND STARTED")
    except RuntimeError as e:
        print("SECOND REFUSED", e)
    r = first.finish({}, "first")
    print("FIRST", r.backend, sum(row["acquisitions"] for row in r.summary()) >= 4)
    third = giltracer._core.Session(backend=backend, **opts)  # after finish: fine
    third.start([])
    cpu_pair(0.1)
    third.stop()
    print("THIRD", third.finish({}, "third").backend)
"""


@pytest.mark.parametrize("backend", ["hooks", "bpf"])
def test_a_stopped_session_keeps_its_probes_until_it_is_finished(backend):
    """A session stopped but not yet finished still owns the registry's records and
    (bpf) the probe object: a second start is refused before it chooses a backend (which
    used to reload a follow_children probe under the stopped session's feet)."""
    if backend == "bpf" and FREE_THREADED:
        pytest.skip(NO_BPF_FT)
    if backend == "bpf" and (not _INFO["bpf_available"] or os.geteuid() != 0):
        pytest.skip("the bpf probe needs root and a build with it")
    p = run_python(STOPPED_NOT_FINISHED, backend)
    assert p.returncode == 0, (p.stdout, p.stderr)
    lines = p.stdout.splitlines()
    assert lines[0].startswith("SECOND REFUSED") and "not finished" in lines[0], lines
    assert lines[1] == f"FIRST {backend} True", lines
    assert lines[2] == f"THIRD {backend}", lines


# -- finalizers at release ----------------------------------------------

FINALIZER_AT_RELEASE = """
    import os, threading, weakref
    import giltracer, giltracer._core

    ran = []
    def on_code_gone(_):  # runs while the registry is released
        with giltracer.trace(backend="hooks", functions=False) as t:
            pass
        ran.append(t.duration_ns > 0)

    s = giltracer._core.Session(own_dir=os.path.dirname(giltracer.__file__), backend="hooks")
    s.start([(th.ident, th.native_id) for th in threading.enumerate()])
    ns = {}
    exec("def fresh():\\n    return 1\\n", ns)  # a code object only the tracer keeps
    ns["fresh"]()
    ref = weakref.ref(ns["fresh"].__code__, on_code_gone)
    ns.clear()  # the function goes (no cycle through its globals left)
    s.stop()
    del s  # never finished: releasing drops the tracer's references
    print("FINALIZER", ran, ref() is None)
"""


@pytest.mark.skipif(FREE_THREADED, reason="free-threaded build: code objects are freed by the "
                    "garbage collector (deferred reference counting), not when the tracer drops "
                    "its reference, so no finalizer runs at the release")
def test_finalizer_that_starts_a_session_at_release():
    """Releasing the registry drops Python references; a finalizer that runs then may
    start a session (it takes the registry lock): no deadlock."""
    p = run_python(FINALIZER_AT_RELEASE, timeout=60)
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert "FINALIZER [True] True" in p.stdout, p.stdout


# -- bpf options per session, forked children ----------------------------------

needs_bpf = pytest.mark.skipif(
    FREE_THREADED or not _INFO["bpf_available"],
    reason=NO_BPF_FT if FREE_THREADED else
    f"the bpf backend is not available here: {_INFO['bpf_why'] or 'unknown'}")


def _libc_function_site(name):
    """(path, file offset) of libc's `name` as this process uses it."""
    libc = ctypes.CDLL(None)
    addr = ctypes.cast(getattr(libc, name), ctypes.c_void_p).value
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            if lo <= addr < hi and len(parts) >= 6:
                return parts[5], addr - lo + int(parts[2], 16)
    pytest.skip(f"{name} is not in a mapped file")


def _code_in_process(pid, path, offset, n=32):
    """n bytes of `path` at file `offset` as mapped in process `pid` (None if not)."""
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) < 6 or parts[5] != path:
                continue
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            off = int(parts[2], 16)
            if off <= offset and offset + n <= off + (hi - lo):
                with open(f"/proc/{pid}/mem", "rb") as m:
                    m.seek(lo + offset - off)
                    return m.read(n)
    return None


class _Bystander:
    """A process that is no descendant of the traced one: a uprobe shows in its libc
    code (the kernel writes the breakpoint) only when the probe is system-wide."""

    def __init__(self):
        self.path, self.offset = _libc_function_site("pthread_cond_signal")
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            self.clean = f.read(32)
        self.proc = subprocess.Popen(["sleep", "60"])
        deadline = time.monotonic() + 10
        while _code_in_process(self.proc.pid, self.path, self.offset) is None:
            assert time.monotonic() < deadline, "the bystander never mapped libc"
            time.sleep(0.01)

    def probed(self):
        return _code_in_process(self.proc.pid, self.path, self.offset) != self.clean

    def probed_for(self, seconds):
        """False as soon as one look finds no probe within `seconds`: other test runs on
        this machine may attach system-wide probes for a moment, ours must go away."""
        deadline = time.monotonic() + seconds
        while self.probed():
            if time.monotonic() > deadline:
                return True
            time.sleep(0.05)
        return False

    def close(self):
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def bystander():
    b = _Bystander()
    yield b
    b.close()


FOLLOW_THEN_NOT = """
    import sys, time
    import giltracer
    with giltracer.trace(backend="bpf", follow_children=True, functions=False) as t:
        print("IN-FOLLOW", flush=True)
        sys.stdin.readline()
    print("AFTER-FOLLOW", t.backend, flush=True)
    sys.stdin.readline()
    with giltracer.trace(backend="bpf", functions=False) as t:
        print("IN-PLAIN", flush=True)
        sys.stdin.readline()
    print("DONE", t.backend, flush=True)
"""


@needs_bpf
def test_follow_children_probes_go_with_their_session(bystander):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([PKG_PARENT, TESTS_DIR, env.get("PYTHONPATH", "")])
    p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(FOLLOW_THEN_NOT)], env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        def step(expect):
            line = p.stdout.readline()
            assert line.startswith(expect), line
            return line

        step("IN-FOLLOW")
        assert bystander.probed(), "follow_children: the uprobes should be system-wide"
        p.stdin.write("\n")
        p.stdin.flush()
        assert "bpf" in step("AFTER-FOLLOW")
        assert not bystander.probed_for(15), "system-wide uprobes left after the session"
        p.stdin.write("\n")
        p.stdin.flush()
        step("IN-PLAIN")  # a session without follow_children: not system-wide either
        assert not bystander.probed_for(15), "follow_children stuck to a later session"
        p.stdin.write("\n")
        p.stdin.flush()
        assert "bpf" in step("DONE")
        assert p.wait(timeout=30) == 0
    finally:
        p.kill()
        p.wait()


FORKED_CHILD_AUTO = """
    import os, warnings
    warnings.simplefilter("ignore", DeprecationWarning)
    import giltracer
    from workloads import cpu_pair

    with giltracer.trace(backend="bpf", functions=False) as t:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                with giltracer.trace(c_calls=False) as c:  # backend="auto", a full trace
                    cpu_pair(0.1)
                ok = c.backend == "hooks" and sum(r.acquisitions for r in c.summary()) > 0
                print("CHILD", c.backend, ok, c.backend_reason, flush=True)
                code = 0 if ok else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        cpu_pair(0.1)
    print("STATUS", status, t.backend, sum(r.acquisitions for r in t.summary()) > 0)
"""


@needs_bpf
def test_forked_child_auto_falls_back_to_the_hooks():
    p = run_python(FORKED_CHILD_AUTO)
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert "CHILD hooks True" in p.stdout, (p.stdout, p.stderr)
    assert "parent process" in p.stdout  # the reason says why not bpf
    assert "STATUS 0 bpf True" in p.stdout, p.stdout


CHILD_SESSION_OUTLIVES_PARENT_COPY = """
    import os, warnings
    warnings.simplefilter("ignore", DeprecationWarning)
    import giltracer
    from workloads import cpu_pair

    with giltracer.trace(backend="hooks") as a:
        pid = os.fork()
        if pid == 0:
            b = giltracer.trace(backend="hooks", c_calls=False).start()  # the child's own
        # the child leaves the parent's block (its copy of the session) while b records
    if pid == 0:
        code = 1
        try:
            cpu_pair(0.2)
            b.stop()
            acq = sum(r.acquisitions for r in b.summary())
            print("CHILD", b.event_count > 0, acq > 0, a.event_count, flush=True)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    print("STATUS", status, a.event_count > 0)
"""


def test_leaving_the_parents_session_in_a_child_spares_the_childs_own():
    """In a forked child the parent's session is a copy: stopping it must not stop a
    session the child started itself (same registry, tracer and hooks)."""
    p = run_python(CHILD_SESSION_OUTLIVES_PARENT_COPY)
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert "STATUS 0 True" in p.stdout, (p.stdout, p.stderr)
    assert "CHILD True True 0" in p.stdout, (p.stdout, p.stderr)  # the copy finished empty


RAW_SESSION_FORK = """
    import os, sys, threading, warnings
    warnings.simplefilter("ignore", DeprecationWarning)
    import giltracer._core  # the core alone: the API's module is never used here

    def hooked():
        if sys.version_info >= (3, 12):
            return "giltracer" in [sys.monitoring.get_tool(i) for i in range(6)]
        return sys.getprofile() is not None

    s = giltracer._core.Session(own_dir=os.path.dirname(giltracer.__file__), backend="hooks",
                                sched=False)
    s.start([(th.ident, th.native_id) for th in threading.enumerate()])
    before = hooked()
    pid = os.fork()
    if pid == 0:
        os._exit(3 if hooked() else 0)
    _, status = os.waitpid(pid, 0)
    s.stop()
    print("PARENT", before, "CHILD", os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") else status >> 8)
"""


def test_a_raw_session_forked_child_drops_the_parents_hooks():
    """The fork handler is the core's own (registered when it is imported), not the
    API's: a child forked under a raw Session runs without the parent's tracer."""
    p = run_python(RAW_SESSION_FORK)
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert p.stdout.split() == ["PARENT", "True", "CHILD", "0"], p.stdout


STOPPED_COPY_IN_CHILD = """
    import os, threading, warnings
    warnings.simplefilter("ignore", DeprecationWarning)
    import giltracer, giltracer._core
    from workloads import cpu_pair

    s = giltracer._core.Session(own_dir=os.path.dirname(giltracer.__file__), backend="hooks")
    s.start([(th.ident, th.native_id) for th in threading.enumerate()])
    cpu_pair(0.05)
    s.stop()  # stopped, not finished: its records are still in the registry
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            b = giltracer.trace(backend="hooks").start()  # the child's own session
            r = s.finish({}, "copy")  # the parent's copy: must not release b's records
            del s
            cpu_pair(0.2)
            b.stop()
            acq = sum(x.acquisitions for x in b.summary())
            print("CHILD", r.event_count, b.event_count > 0, acq > 0, flush=True)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    r = s.finish({}, "parent")
    print("STATUS", status, r.event_count > 0)
"""


def test_a_forked_copy_of_a_stopped_session_leaves_the_childs_records_alone():
    """A session stopped (not finished) at fork: finishing or freeing its copy in the child
    used to release the registry, which is the child's own session's by then."""
    p = run_python(STOPPED_COPY_IN_CHILD)
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert "CHILD 0 True True" in p.stdout, (p.stdout, p.stderr)
    assert "STATUS 0 True" in p.stdout, p.stdout
