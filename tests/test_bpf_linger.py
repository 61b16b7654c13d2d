"""The bpf probe after a trace: it stays attached for a short linger (2 s, so that a
trace right after another reuses it and starts fast: attaching right after a detach
waits in the kernel behind it), then detaches, so that nothing costs after. Gated off,
an attached uprobe still traps on every GIL hand-off: GIL-churning code ran 4.7x slower
for the rest of the process (a Jupyter kernel) after one trace.

Root only (the bpf backend). Each test runs a fresh interpreter: the probe's state is
per process.
"""

import os
import subprocess
import sys
import textwrap
import time

import pytest

import giltracer
import giltracer._core
from conftest import needs_gil

_INFO = giltracer._core.build_info()

pytestmark = [needs_gil, pytest.mark.skipif(
    not _INFO["bpf_available"],
    reason=f"the bpf backend is not available here: {_INFO['bpf_why'] or 'unknown'} "
           "(run as root with a build that has libbpf)")]

PKG_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(giltracer.__file__)))
TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


def run_python(code, timeout=120, env_extra=None):
    """Run `code` in a fresh interpreter that imports the giltracer under test; returns
    (CompletedProcess, the monotonic time it ended)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([PKG_PARENT, TESTS_DIR, env.get("PYTHONPATH", "")])
    env.pop("GILTRACER_BPF_LINGER_MS", None)
    env.update(env_extra or {})
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                       capture_output=True, text=True, timeout=timeout)
    return p, time.monotonic()


def field(p, name):
    return p.stdout.split(name)[1].split()


# This process against a fresh one, untraced: 0.8-1.1 here. The cost this guards against
# (the probe left attached, gated off) is 4-5x.
AFTER_AT_MOST = 1.3

COST_AFTER = """
    import os, subprocess, sys, time
    import giltracer

    AFTER_AT_MOST = {AFTER_AT_MOST}
    CHURN = '''
    import os, time
    def churn(n=20000):  # each os.fstat drops and retakes the GIL
        t0 = time.process_time()
        for _ in range(n):
            os.fstat(0)
        return time.process_time() - t0
    def best(k=5):
        return min(churn() for _ in range(k))
    '''
    exec(CHURN)
    # A control: the same loop in a process never traced, asked to run right after each of
    # ours, so that the host's own speed (it drifts by a third over seconds on a shared VM)
    # cancels out of the ratios.
    control = subprocess.Popen(
        [sys.executable, "-c", CHURN + "import sys\\nfor _ in sys.stdin: print(best(), flush=True)"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def vs_control(rounds=5):  # the median of each round's ratio: a burst skews one round
        ratios = []
        for _ in range(rounds):
            ours = best()
            control.stdin.write("go\\n")
            control.stdin.flush()
            ratios.append(ours / float(control.stdout.readline()))
        return sorted(ratios)[len(ratios) // 2]

    def bpf_fds():  # the probe's links, programs and maps: open while it is attached
        n = 0
        for fd in os.listdir("/proc/self/fd"):
            try:
                n += os.readlink(f"/proc/self/fd/{fd}").startswith("anon_inode:bpf")
            except OSError:
                pass
        return n

    def link_ids(pid="self"):  # the bpf links a process holds, by the kernel's link id
        ids = set()
        try:
            fds = os.listdir(f"/proc/{pid}/fdinfo")
        except OSError:
            return ids
        for fd in fds:
            try:
                with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                    ids.update(line.split()[1] for line in f if line.startswith("link_id:"))
            except OSError:
                pass
        return ids

    def bpf_holders():  # the detach helper: another process holding this process's links
        # (not any process with bpf fds: the pytest process that runs this test may have
        # its own probe lingering, with its own helper)
        ours = link_ids()
        return [int(pid) for pid in filter(str.isdigit, os.listdir("/proc"))
                if int(pid) not in (os.getpid(), control.pid) and link_ids(pid) & ours]

    def alive(pid):  # not yet through its exit (where the kernel detaches the probes)
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] not in "ZX"
        except OSError:
            return False

    # Each figure is this process's time against the control's, run by turns: not against
    # the figure before the trace, which one burst of load on the control (a loaded CI
    # machine) skews for every figure after it (base 0.6 made "after" read 1.4-1.9x).
    base = vs_control()
    with giltracer.trace(backend="bpf", functions=False, sched=False) as t:
        during = vs_control()
    assert t.backend == "bpf", t.backend_reason
    # Looked at first: under ASan one round of vs_control() can outlast the 2 s linger.
    print("ATTACHED_FDS", bpf_fds())
    helpers = bpf_holders()
    print("HELPERS", len(helpers))
    within = vs_control(1)  # the probe lingers, still attached
    # Past the linger (2 s): the linger thread closes the probe's fds; the kernel detaches
    # the probes when the last holder of the links, the detach helper (bpfprobe.c), has
    # exited, ~0.1 s a probe and more on a loaded machine: a fresh-clone run measured
    # 1.25-2.5x while it was still exiting.
    deadline = time.monotonic() + 20
    time.sleep(2.0)
    while (bpf_fds() or any(map(alive, helpers))) and time.monotonic() < deadline:
        time.sleep(0.1)
    print("LEFT_FDS", bpf_fds() + sum(map(alive, helpers)))
    # Retry the measurement, not the bound: the machine can be loaded.
    tries = []
    for _ in range(8):
        tries.append(round(vs_control(), 2))
        if tries[-1] < AFTER_AT_MOST:
            break
        time.sleep(0.5)
    control.stdin.close()
    control.wait()
    print("RATIOS", during, within, min(tries), base)
    print("TRIES", tries)
"""


def test_no_cost_left_after_the_linger():
    """After a bpf trace and its linger the probe is detached (its fds closed), and
    GIL-churning untraced code runs as fast as in a process never traced (measured by
    turns with it)."""
    p, _ = run_python(COST_AFTER.replace("{AFTER_AT_MOST}", str(AFTER_AT_MOST)))
    assert p.returncode == 0, (p.stdout, p.stderr)
    during, within, after, before = map(float, field(p, "RATIOS")[:4])
    print(f"churn vs a process never traced: before the trace {before:.2f}x, during "
          f"{during:.2f}x, within the linger {within:.2f}x, after it {after:.2f}x")
    assert int(field(p, "ATTACHED_FDS")[0]) > 0, "no bpf fd while the probe lingers: no check"
    assert int(field(p, "LEFT_FDS")[0]) == 0, (
        f"the probe's fds or its detach helper still there 20 s after: {p.stdout}")
    if "libasan" in os.environ.get("LD_PRELOAD", ""):
        # make test-asan: PYTHONMALLOC=malloc under ASan makes the loop itself costly and
        # its time erratic (1.1-2x during, 0.6-1x after): the detach (above) is the check.
        return
    assert during > 2.0, f"the probe cost nothing while tracing ({during:.2f}x): {p.stdout}"
    assert after < AFTER_AT_MOST, (
        f"after the trace the GIL churn still ran {after:.2f}x slower: {p.stdout}")


BACK_TO_BACK = """
    import time
    import giltracer
    from workloads import run_threads, sleeper, spin_for

    def traced():
        with giltracer.trace(backend="bpf", functions=False) as t:
            run_threads([lambda: spin_for(0.05), lambda: sleeper(5, 0.005)], names=["a", "b"])
        s = {r.name: r for r in t.summary()}
        assert t.backend == "bpf", t.backend_reason
        assert s["a"].acquisitions > 0 and s["b"].acquisitions > 0, s
        # Only the traced threads: not the linger thread, nor the probe's drain thread.
        assert sorted(th.name for th in t.threads) == ["MainThread", "a", "b"], t.threads
        return t

    first = traced()
    second = traced()  # right after: within the linger
    time.sleep(3.5)    # past the linger and the detach
    third = traced()
    for t in (first, second, third):
        print("REASON", t.backend_reason)
"""


def test_back_to_back_reuses_then_a_later_trace_attaches_again():
    p, _ = run_python(BACK_TO_BACK)
    assert p.returncode == 0, (p.stdout, p.stderr)
    first, second, third = [line.split("REASON ", 1)[1] for line in p.stdout.splitlines()
                            if line.startswith("REASON ")]
    assert "attached for this trace" in first, first
    assert "stays attached 2.0 s after it" in first, first
    assert "reused: still attached from the previous trace" in second, second
    assert "attached for this trace" in third, third


EXIT_DURING_LINGER = """
    import sys, time
    import giltracer

    with giltracer.trace(backend="bpf", functions=False, sched=False) as t:
        sum(range(1000))
    assert t.backend == "bpf", t.backend_reason
    print("EXITING", time.monotonic(), flush=True)
    {tail}
"""


@pytest.mark.parametrize("linger_ms", ["2000", "600000"])
@pytest.mark.parametrize("tail", ["pass", "sys.exit(3)"])
def test_exit_during_the_linger_is_prompt_and_clean(linger_ms, tail):
    """The armed linger neither holds the exit (its thread waits on a condvar that the
    exit wakes) nor crashes it."""
    p, done = run_python(EXIT_DURING_LINGER.replace("{tail}", tail), timeout=60,
                         env_extra={"GILTRACER_BPF_LINGER_MS": linger_ms})
    assert p.returncode == (3 if "exit" in tail else 0), (p.stdout, p.stderr)
    assert p.stderr == "", p.stderr
    exiting = float(field(p, "EXITING")[0])
    assert done - exiting < 1.0, f"exit took {done - exiting:.2f} s"


FORK_DURING_LINGER = """
    import os, sys, time
    import giltracer
    from workloads import run_threads, spin_for

    def traced():
        with giltracer.trace(backend="bpf", functions=False) as t:
            run_threads([lambda: spin_for(0.05), lambda: spin_for(0.05)], names=["a", "b"])
        assert t.backend == "bpf", t.backend_reason
        s = {r.name: r for r in t.summary()}
        assert s["a"].acquisitions > 0 and s["b"].acquisitions > 0, s
        return t

    traced()
    for how in ("_exit", "exit"):  # a child's exit (with or without atexit) during the linger
        pid = os.fork()
        if pid == 0:
            with giltracer.trace(c_calls=False) as c:  # the parent's probe is not its own
                sum(range(1000))
            code = 0 if c.backend != "bpf" else 1
            if how == "_exit":
                os._exit(code)
            sys.exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, (how, status)
    # The children left the parent's probe alone: still attached (reused) and recording.
    print("REASON", traced().backend_reason)
"""


def test_a_forked_child_leaves_the_lingering_probe_alone():
    p, _ = run_python(FORK_DURING_LINGER, env_extra={"GILTRACER_BPF_LINGER_MS": "30000"})
    assert p.returncode == 0, (p.stdout, p.stderr)
    reason = p.stdout.split("REASON ", 1)[1]
    assert "reused: still attached from the previous trace" in reason, reason


FORKED_CHILD_KEEPS_NOTHING = """
    import os, sys, time
    import giltracer

    def probe_fds(pid):  # bpf objects and perf events a process holds
        found = []
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("anon_inode:bpf") or target == "anon_inode:[perf_event]":
                found.append(target)
        return found

    def pipe_inodes(pid):
        found = set()
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("pipe:"):
                found.add(target)
        return found

    before = pipe_inodes("self")
    with giltracer.trace(backend="bpf", functions=False, sched=False) as t:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # a long-lived child (a pool worker): waits for the parent's word
            os.close(w)
            os.read(r, 1)
            os._exit(0)
        os.close(r)
    assert t.backend == "bpf", t.backend_reason
    mine = probe_fds("self")
    # The child: none of the probe's fds, and not the detach helper's pipe, which would
    # keep the helper (and its duplicates of the links) alive as long as the child lives.
    child = probe_fds(pid)
    helper_pipes = pipe_inodes("self") - before - {os.readlink(f"/proc/self/fd/{w}")}
    print("PARENT", len(mine), "CHILD_FDS", len(child), "CHILD_KEPT",
          len(helper_pipes & pipe_inodes(pid)), "NEW_PIPES", len(helper_pipes))
    os.write(w, b"x")
    _, status = os.waitpid(pid, 0)
    print("CHILD_EXIT", os.waitstatus_to_exitcode(status))
"""


def test_a_forked_child_keeps_none_of_the_probes_fds():
    """A forked child (a pool worker) must not hold the parent's bpf links, perf events or
    the detach helper's pipe: each keeps the uprobes attached, system-wide, for as long
    as the child lives, after the parent has detached."""
    p, _ = run_python(FORKED_CHILD_KEEPS_NOTHING, env_extra={"GILTRACER_BPF_LINGER_MS": "30000"})
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert int(field(p, "PARENT")[0]) > 0, p.stdout  # the probe lingers: there is something to keep
    assert int(field(p, "NEW_PIPES")[0]) == 1, p.stdout
    assert field(p, "CHILD_FDS")[0] == "0", p.stdout
    assert field(p, "CHILD_KEPT")[0] == "0", p.stdout
    assert field(p, "CHILD_EXIT")[0] == "0", p.stdout
