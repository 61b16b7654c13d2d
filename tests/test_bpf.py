"""The eBPF GIL probe (backend="bpf"): what is specific to it. The ground-truth checks
run for both backends in test_gil.py; here: how take_gil was found, off-CPU reasons,
the cross-check against the hooks on the same run, lost events, children, privileges.

Needs root (or CAP_BPF+CAP_PERFMON, and CAP_SYS_ADMIN on kernels that require it for
uprobes) and a build with libbpf: skipped as a whole otherwise. Nothing here assumes
that the interpreter has symbols: on Debian's stripped /usr/bin/python3.11, take_gil is
found by the PyEval_RestoreThread heuristic (the address fallback) and every test must
pass the same way.

The bpf object stays attached ~2 s after a session, for the next one to reuse, then
detaches (test_bpf_linger.py; a session with other follow_children reloads it; a
follow_children one is detached at its end); the tests that need a fresh process
(children, privileges, exit time) run one.
"""

import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

import giltracer
import giltracer._core
from conftest import needs_gil
from workloads import run_threads, sleeper, spin_for, spin_on_cpu, traced_cpu_pair

_INFO = giltracer._core.build_info()

pytestmark = [needs_gil, pytest.mark.skipif(
    not _INFO["bpf_available"],
    reason=f"the bpf backend is not available here: {_INFO['bpf_why'] or 'unknown'} "
           "(run as root with a build that has libbpf)")]

BACKEND = "bpf"
# How take_gil can be found (the reason names one): a symbol (pyenv), the debug file,
# a hint, the PyEval_RestoreThread heuristic (stripped Debian python3.11), or calibration
# (stripped 3.13+ without -dbg: test_take_gil_ways.py).
TAKE_GIL_HOWS = ("symbol", "debug file", "hint", "PyEval_RestoreThread heuristic", "calibration")
PKG_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(giltracer.__file__)))
TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


def by_name(t):
    return {s.name: s for s in t.summary()}


def holds(t, tid):
    return [(a, b) for a, b, s in t.gil_intervals(tid) if s == "held"]


def fstat_churn(n=50_000):
    """GIL churn: every os.fstat releases and re-takes the GIL."""
    f = os.fstat
    for _ in range(n):
        f(0)


def run_python(code, timeout=60, prefix=(), env_extra=None):
    """Run `code` in a fresh interpreter (this one) that imports the giltracer under
    test; returns (CompletedProcess, wall seconds)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([PKG_PARENT, TESTS_DIR, env.get("PYTHONPATH", "")])
    env.update(env_extra or {})
    t0 = time.monotonic()
    p = subprocess.run([*prefix, sys.executable, "-c", textwrap.dedent(code)], env=env,
                       capture_output=True, text=True, timeout=timeout)
    return p, time.monotonic() - t0


# -- the hooks' ground truth, with backend="bpf" ----------------------------------------

@pytest.fixture(scope="module")
def two_cpu_threads():
    t, _ = traced_cpu_pair(0.6, backend=BACKEND, c_calls=False)
    return t


def test_backend_says_what_ran_and_how_take_gil_was_found(two_cpu_threads):
    t = two_cpu_threads
    assert t.backend == "bpf"
    assert t.backend_reason.startswith("bpf")
    assert any(f"found by {how}" in t.backend_reason for how in TAKE_GIL_HOWS), t.backend_reason
    assert t.gil_known
    assert "bpf" in t.sched_status


# -- off-CPU reasons ---------------------------------------------------------------------

def test_off_cpu_reasons_preempted_and_blocked():
    """A sleeper is blocked; two CPU-bound threads pinned to the SAME cpu preempt each
    other: the waiter can only run (and ask for the GIL) when the holder, which never
    blocks while spinning, is preempted."""
    with giltracer.trace(backend=BACKEND, functions=False) as t:
        run_threads([sleeper, lambda: spin_on_cpu(0, 0.3), lambda: spin_on_cpu(0, 0.3)],
                    names=["napper", "same-1", "same-2"])
    s = by_name(t)
    states = {name: {st for _, _, st in t.os_intervals(s[name].tid)}
              for name in ("napper", "same-1", "same-2")}
    assert "blocked" in states["napper"], states
    assert "preempted" in states["same-1"] | states["same-2"], states
    every = set().union(*states.values())
    assert {"on-cpu", "preempted", "blocked"} <= every, states


# -- cross-check: hooks and bpf on the same run ----------------------------------------

def compare(t):
    hooks = {s.tid: s for s in t.summary()}
    check = t.crosscheck()
    assert check is not None
    bpf = {s.tid: s for s in check}
    assert set(hooks) == set(bpf)
    return hooks, bpf


def test_crosscheck_two_cpu_threads_agree():
    t, _ = traced_cpu_pair(0.6, crosscheck=True, functions=False)
    assert t.backend == "hooks" and "bpf" in t.backend_reason
    hooks, bpf = compare(t)
    names = {s.name: tid for tid, s in hooks.items()}
    for tid, h in hooks.items():
        b = bpf[tid]
        # 1 % of ~50 acquisitions is less than one: one is the floor.
        assert abs(h.acquisitions - b.acquisitions) <= max(1, 0.01 * h.acquisitions), (h, b)
        assert abs(h.held_pct - b.held_pct) <= 3, (h, b)
        assert abs(h.wait_pct - b.wait_pct) <= 3, (h, b)
    for name in ("cpu-a", "cpu-b"):
        assert hooks[names[name]].acquisitions >= 5


def test_crosscheck_churn_acquisitions_agree():
    with giltracer.trace(crosscheck=True, functions=False) as t:
        run_threads([fstat_churn, fstat_churn], names=["f1", "f2"])
    hooks, bpf = compare(t)
    for name in ("f1", "f2"):
        h = next(s for s in hooks.values() if s.name == name)
        b = bpf[h.tid]
        assert h.acquisitions >= 50_000, h
        assert abs(h.acquisitions - b.acquisitions) <= 0.01 * h.acquisitions, (h, b)


def test_churn_loses_no_events_at_default_settings():
    with giltracer.trace(backend=BACKEND) as t:
        run_threads([fstat_churn, fstat_churn], names=["f1", "f2"])
    assert t.backend == "bpf"
    assert t.result.gil_dropped == 0
    s = by_name(t)
    assert s["f1"].acquisitions >= 50_000 and s["f2"].acquisitions >= 50_000


# -- choice of backend, privileges -----------------------------------------------------

def test_auto_picks_bpf_when_permitted_and_says_why():
    with giltracer.trace(c_calls=False) as t:  # a full trace: functions recorded
        spin_for(0.01)
    assert t.backend == "bpf"
    assert "permitted" in t.backend_reason, t.backend_reason
    assert any(f"found by {how}" in t.backend_reason for how in TAKE_GIL_HOWS)


def test_auto_gil_only_takes_the_hooks_even_when_bpf_is_permitted():
    """functions=False is asked for its low cost: the uprobes' ~3 us per GIL hand-off made
    GIL-churning code ~5x slower, the hooks' ~0.1 us a few per cent. The reason says so
    and names the way to the bpf probe; backend='bpf' still gets it."""
    with giltracer.trace(functions=False) as t:
        run_threads([lambda: spin_for(0.1), lambda: spin_for(0.1)], names=["a", "b"])
    assert t.backend == "hooks", t.backend_reason
    assert "GIL-only trace (functions=False) keeps its cost low" in t.backend_reason
    assert "backend='bpf' to use that" in t.backend_reason
    s = by_name(t)
    assert s["a"].acquisitions > 0 and s["b"].acquisitions > 0, s
    with giltracer.trace(backend="bpf", functions=False) as t:
        spin_for(0.01)
    assert t.backend == "bpf" and t.backend_reason.startswith("bpf: requested"), t.backend_reason


UNPRIVILEGED = """
    import giltracer, giltracer._core
    info = giltracer._core.build_info()
    assert not info["bpf_available"], info
    print("BUILD_INFO:", info["bpf_why"])
    try:
        with giltracer.trace(backend="bpf", functions=False):
            pass
    except PermissionError as e:
        print("ERROR:", e)
    else:
        print("NO ERROR")
    with giltracer.trace(c_calls=False) as t:  # a full trace: auto would take bpf if it could
        pass
    print("AUTO:", t.backend, "|", t.backend_reason)
"""


def _unprivileged_prefix():
    """How to run this interpreter and this build without privileges: as `nobody` when
    that user can import the giltracer under test (the suite run from a world-readable
    venv, e.g. Debian's python3.11 in CI), else as uid 0 with every capability dropped
    (pyenv's interpreters live under /root, which nobody cannot enter); the probe
    checks capabilities, not the uid."""
    setpriv = shutil.which("setpriv")
    if not setpriv:
        return None, "setpriv is not installed"
    nobody = (setpriv, "--reuid=65534", "--regid=65534", "--clear-groups")
    p, _ = run_python("import giltracer._core", timeout=30, prefix=nobody,
                      env_extra={"HOME": "/tmp"})
    if p.returncode == 0:
        return nobody, "user nobody"
    nocaps = (setpriv, "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all")
    p, _ = run_python("import giltracer._core", timeout=30, prefix=nocaps)
    if p.returncode == 0:
        return nocaps, "uid 0 without capabilities"
    return None, f"cannot run this build unprivileged: {p.stderr.strip()[-300:]}"


def test_unprivileged_bpf_is_refused_with_the_capability_named():
    prefix, how = _unprivileged_prefix()
    if prefix is None:
        pytest.skip(how)
    p, _ = run_python(UNPRIVILEGED, timeout=60, prefix=prefix, env_extra={"HOME": "/tmp"})
    assert p.returncode == 0, (how, p.stdout, p.stderr)
    out = dict(line.split(": ", 1) for line in p.stdout.splitlines() if ": " in line)
    assert "ERROR" in out, (how, p.stdout)  # a PermissionError, with its message
    for cap in ("CAP_BPF", "CAP_PERFMON", "CAP_SYS_ADMIN"):
        assert cap in out["BUILD_INFO"] and cap in out["ERROR"], (how, out)
    auto_backend, auto_reason = out["AUTO"].split(" | ", 1)
    assert auto_backend == "hooks" and "CAP_BPF" in auto_reason, (how, out)


# -- follow_children: one GIL per child process ----------------------------------------

FOLLOW_CHILDREN = """
    import multiprocessing, os, sys, warnings
    import giltracer
    from workloads import spin_for

    warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(2)

    def work(seconds):
        barrier.wait()  # both workers run a task at once: each child computes
        return spin_for(seconds)

    with giltracer.trace(backend="bpf", follow_children=True, functions=False) as t:
        with ctx.Pool(2) as pool:
            pool.map(work, [0.15, 0.15], chunksize=1)
    assert t.backend == "bpf", t.backend_reason
    acq = {s.tid: s.acquisitions for s in t.summary()}
    me = os.getpid()
    for th in t.threads:
        if th.pid != me:
            print("CHILD", th.pid, th.tid, acq.get(th.tid, 0))
    print("PARENT", me, sum(acq[th.tid] for th in t.threads if th.pid == me))
"""


def test_follow_children_shows_one_gil_per_child_process():
    p, _ = run_python(FOLLOW_CHILDREN, timeout=60)
    assert p.returncode == 0, (p.stdout, p.stderr)
    children = {}
    for line in p.stdout.splitlines():
        if line.startswith("CHILD"):
            _, pid, tid, acq = line.split()
            children.setdefault(int(pid), []).append(int(acq))
    assert len(children) >= 2, p.stdout
    for pid, acqs in children.items():
        assert sum(acqs) > 0, (pid, p.stdout)


# -- attach once, sessions in a row, prompt exit ---------------------------------------

THREE_SESSIONS = """
    import os, time
    import giltracer
    from workloads import run_threads, sleeper, spin_for

    traces = []
    for i in range(3):  # back to back: each starts right after the previous stops
        with giltracer.trace(backend="bpf", functions=False) as t:
            run_threads([lambda: spin_for(0.05), lambda: sleeper(5, 0.005)], names=["a", "b"])
        traces.append(t)
    for t in traces:
        s = {r.name: r for r in t.summary()}
        assert t.backend == "bpf" and s["a"].acquisitions > 0 and s["b"].acquisitions > 0, s
        assert t.result.gil_dropped == 0
        # Only the traced threads: not the probe's own drain thread (nor the previous
        # session's, whose exit can still be switching out when the next one starts).
        assert sorted(th.name for th in t.threads) == ["MainThread", "a", "b"], t.threads
    print("EXITING", time.monotonic())
"""


def test_three_sessions_in_a_row_and_prompt_exit():
    p, wall = run_python(THREE_SESSIONS, timeout=30)
    done = time.monotonic()
    assert p.returncode == 0, (p.stdout, p.stderr)
    exiting = float(p.stdout.split("EXITING")[1])
    # Detaching uprobes in the exiting process would add ~0.1 s per probe (RCU); the
    # probe hands its links to a helper so that exit does not wait for that.
    assert done - exiting < 1.0, f"exit took {done - exiting:.2f} s"
    assert wall < 6.0, f"three sessions and exit took {wall:.2f} s"


FORKED_CHILD = """
    import os, threading
    import giltracer
    from workloads import cpu_pair

    with giltracer.trace(backend="bpf", functions=False) as t:
        pid = os.fork()
        if pid == 0:  # the parent's probe is not the child's to start or stop
            try:
                with giltracer.trace(backend="bpf", functions=False):
                    pass
            except BaseException as e:
                pass
            os._exit(0)
        os.waitpid(pid, 0)
        cpu_pair(0.1)
    s = {r.name: r.acquisitions for r in t.summary()}
    print("ACQ", s["cpu-a"], s["cpu-b"])
"""


def test_forked_child_leaves_the_parents_probe_alone():
    p, _ = run_python(FORKED_CHILD, timeout=30)
    assert p.returncode == 0, (p.stdout, p.stderr)
    a, b = map(int, p.stdout.split("ACQ")[1].split())
    assert a > 0 and b > 0, p.stdout


def _empty():
    pass


def test_block_refiller_is_not_a_traced_thread():
    """The registry's helper thread (it maps event blocks ahead of the traced threads
    so that they never stall) runs no Python: the bpf probe, which sees every thread's context switches,
    must not list it. Enough events that it wakes up (switches) during the trace."""
    helper = {}

    def note_helper():
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/comm") as f:
                    if f.read().strip() == "gt-blocks":
                        helper["tid"] = int(tid)
            except OSError:
                pass

    with giltracer.trace(backend=BACKEND) as t:
        note_helper()
        for _ in range(400_000):  # ~800k events: ~200 blocks
            _empty()
    assert "tid" in helper, "no gt-blocks thread during the trace"
    assert helper["tid"] not in {th.tid for th in t.threads}, t.threads
