"""Streaming spools: a followed child writes what it recorded so far to its
checkpoint every ~0.25 s, so a child killed by SIGKILL loses what it did after its last
checkpoint only (the note says when that was), and a child still running when the parent's
trace stops is merged up to its last write and stops tracing."""

import json
import random
import re
import subprocess
import sys
import sysconfig
import textwrap

import pytest

from conftest import run_script

# A checkpoint names the functions with the GIL held (no thread adds one meanwhile): a
# free-threaded build's child writes its trace at its end only (Session.spool writes no
# checkpoint there).
pytestmark = pytest.mark.skipif(bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
                                reason="no checkpoints in a free-threaded build")

SCRIPT = textwrap.dedent("""
    import json, subprocess, sys, time
    import giltracer

    CHILD = '''
    import os, signal, sys, time
    import _giltracer_boot as boot
    def f(i):  # (a few microseconds: the calls stay far below max_events)
        s = 0
        for j in range(100):
            s += j
        return s
    def compute(seconds):
        end = time.monotonic() + seconds
        s = 0
        while time.monotonic() < end:
            for i in range(100):
                s += f(i)
        return s
    if sys.argv[1] == "sigkill":
        compute(1.5)
        os.kill(os.getpid(), signal.SIGKILL)
    print("computing", flush=True)
    deadline = time.monotonic() + 30
    while boot._session is not None and time.monotonic() < deadline:  # until the
        compute(0.05)                                                  # trace stops
    compute(0.2)  # untraced now
    print("untraced" if boot._session is None else "still traced", flush=True)
    '''

    how = sys.argv[1]
    with giltracer.trace(follow_children=True) as t:
        if how == "sigkill":
            subprocess.run([sys.executable, "-c", CHILD, how])
        else:
            child = subprocess.Popen([sys.executable, "-c", CHILD, how],
                                     stdout=subprocess.PIPE, text=True)
            assert child.stdout.readline() == "computing\\n"
            time.sleep(2.0)
    after = None
    if how == "running":
        after = child.stdout.readline().strip()  # it stops tracing once the trace stops
        child.wait(timeout=60)
    procs = []
    for p in t.processes:
        spans = [(a, b) for tid in p.tids for a, b, name, _, _ in t.spans(tid)
                 if name == "f"]
        procs.append(dict(pid=p.pid, child=p.child, f_calls=len(spans),
                          f_first=min([a for a, _ in spans], default=0),
                          f_last=max([b for _, b in spans], default=0)))
    print(json.dumps(dict(procs=procs, note=t.result.tracer_note, after=after,
                          t0=t.result.t0_ns, t1=t.result.t1_ns)))
""")


def run(tmp_path, how):
    path = tmp_path / "script.py"
    path.write_text(SCRIPT)
    p = subprocess.run([sys.executable, str(path), how], capture_output=True, text=True,
                       timeout=240, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_a_child_killed_after_computing_shows_what_it_spooled(tmp_path):
    facts = run(tmp_path, "sigkill")
    children = [p for p in facts["procs"] if p["child"]]
    assert len(children) == 1, facts
    c = children[0]
    # It computed for 1.5 s then was killed: all but what followed its last checkpoint
    # (one every ~0.25 s) is in the parent's trace, and the note says when that was.
    assert c["f_calls"] > 1000, c
    assert c["f_last"] - c["f_first"] >= 1.0e9, c
    note = facts["note"]
    assert note and f"1 child process killed (e.g. by SIGKILL)" in note, note
    assert "(one every ~250 ms while it ran)" in note, note
    m = re.search(rf"\b{c['pid']} \(\+([0-9.]+) ms; up to ([0-9.]+) ms lost\)", note)
    assert m, note
    checkpoint = facts["t0"] + float(m.group(1)) * 1e6
    # (a checkpoint's time is taken before it reads the blocks: what was recorded by then
    # is in it, and maybe a little more)
    assert c["f_first"] + 1.0e9 <= checkpoint <= facts["t1"], (c, note)
    assert c["f_last"] - checkpoint < 50e6, (c, note)
    assert abs(float(m.group(2)) - (facts["t1"] - checkpoint) / 1e6) < 1, (facts, note)
    assert "ended without writing its trace" not in note, note


# A child killed (SIGKILL) at a random point of its life, 20 times: it keeps every call it
# had made by its last checkpoint, those of its blocks not yet full included (a child
# that made fewer than a block's worth kept nothing), and the note says when that was.
# The child counts its calls in memory it shares with the parent, which outlives it:
# log[0] the calls begun, log[1 + i] when call i returned (CLOCK_MONOTONIC, the trace's).
KILLED_SCRIPT = textwrap.dedent("""
    import json, mmap, multiprocessing as mp, os, random, re, signal, sys, time, warnings
    import giltracer

    warnings.simplefilter("ignore")  # (the note, every run)

    N = 1 << 17

    def f():
        s = 0
        for j in range(50):
            s += j
        return s

    def child(buf, pause):
        log = memoryview(buf).cast("q")
        for i in range(N - 1):
            log[0] = i + 1
            f()
            log[1 + i] = time.monotonic_ns()
            if i % pause == 0:
                time.sleep(0.001)
        time.sleep(60)

    if __name__ == "__main__":
        rng = random.Random(int(sys.argv[1]))
        ctx = mp.get_context("fork")
        runs = []
        for run in range(20):
            buf = mmap.mmap(-1, 8 * N)
            pause = rng.choice([1, 64])  # ~1000 calls a second (no block filled), or more
            with giltracer.trace(follow_children=True) as t:
                p = ctx.Process(target=child, args=(buf, pause))
                p.start()
                time.sleep(rng.uniform(0.05, 1.2))
                os.kill(p.pid, signal.SIGKILL)
                p.join()
            log = memoryview(buf).cast("q")
            made = log[0]
            done = [log[1 + i] for i in range(made) if log[1 + i]]
            spans = [s for pr in t.processes if pr.pid == p.pid for tid in pr.tids
                     for s in t.spans(tid) if s[2] == "f" and not s[4] & 2]  # (returned)
            note = t.result.tracer_note or ""
            m = re.search(rf"\\b{p.pid} \\(\\+([0-9.]+) ms; up to ([0-9.]+) ms lost\\)", note)
            ck = t.result.t0_ns + float(m.group(1)) * 1e6 if m else None
            runs.append(dict(pid=p.pid, pause=pause, made=made, recorded=len(spans),
                             # returned 1 ms before it at least: published by then
                             by_checkpoint=sum(1 for d in done if ck and d < ck - 1e6),
                             checkpoint=ck, lost_ms=float(m.group(2)) if m else None,
                             t1=t.result.t1_ns, note=note))
            log.release()
            buf.close()
        print(json.dumps(dict(runs=runs)))
""")


def test_a_child_killed_at_any_point_keeps_every_call_up_to_its_last_checkpoint(tmp_path):
    seed = random.randrange(1 << 30)
    facts, _ = run_script(tmp_path, KILLED_SCRIPT, str(seed), timeout=240)
    spooled = 0
    for r in facts["runs"]:
        assert r["recorded"] <= r["made"], (seed, r)
        if r["checkpoint"] is None:  # killed before its first checkpoint (~0.25 s)
            assert "ended without writing its trace" in r["note"], (seed, r)
            assert f"{r['pid']}" in r["note"] and r["recorded"] == 0, (seed, r)
            continue
        spooled += 1
        assert r["recorded"] >= r["by_checkpoint"], (seed, r)
        # The note's loss: from that checkpoint to the trace's stop.
        assert r["checkpoint"] <= r["t1"], (seed, r)
        assert abs(r["lost_ms"] - (r["t1"] - r["checkpoint"]) / 1e6) < 1, (seed, r)
    assert spooled >= 5, (seed, facts)  # (most runs live past a checkpoint)


def test_a_child_still_running_at_stop_is_merged_and_stops_tracing(tmp_path):
    facts = run(tmp_path, "running")
    children = [p for p in facts["procs"] if p["child"]]
    assert len(children) == 1, facts
    c = children[0]
    # It computed for the 2 s the parent waited: its checkpoints up to ~0.25 s before the
    # stop are merged.
    assert c["f_last"] - c["f_first"] >= 1.0e9, c
    assert c["f_last"] <= facts["t1"], c
    note = facts["note"]
    assert note and "1 child process still running when the trace stopped" in note, note
    assert "it stops tracing" in note and f"{c['pid']} (~" in note, note
    # ... and once the parent's folder is gone it stops tracing (its session ends).
    assert facts["after"] == "untraced", facts


# The spooler's own look (3.13+: once the main thread has not answered its pending look
# for 3 s) names the threads with Python (threading.enumerate), which may let the GIL go;
# the main thread, taking it, runs the pending look it was asked for. Here enumerate
# waits for the main thread: a look that held giltracer's lock around the naming left the
# main thread stuck on that lock with the GIL held, the child and its parent hung.
NAMING_CHILD = textwrap.dedent("""
    import threading
    import _giltracer_boot as boot
    in_names, go = threading.Event(), threading.Event()
    real = threading.enumerate
    def enumerate_waiting():
        if threading.get_native_id() == boot._spooler_tid and not in_names.is_set():
            in_names.set()
            go.wait(20)  # (for the main thread, once it got the GIL)
        return real()
    threading.enumerate = enumerate_waiting
    # (a blocking wait in C: the pending look stays pending until the spooler looks)
    seen = in_names.wait(30)
    go.set()
    print("named" if seen else "no look", flush=True)
""")

NAMING_SCRIPT = textwrap.dedent("""
    import json, subprocess, sys
    import giltracer
    with giltracer.trace(follow_children=True) as t:
        try:
            p = subprocess.run([sys.executable, "-c", sys.argv[1]], capture_output=True,
                               text=True, timeout=60)
            out = p.stdout.strip()
        except subprocess.TimeoutExpired:
            out = "hung"
    print(json.dumps(dict(out=out, note=t.result.tracer_note)))
""")


@pytest.mark.skipif(sys.version_info < (3, 13), reason="the main thread's pending look: 3.13+")
def test_a_childs_look_naming_its_threads_never_hangs_its_main_thread(tmp_path):
    facts, _ = run_script(tmp_path, NAMING_SCRIPT, NAMING_CHILD, timeout=180)
    assert facts["out"] == "named", facts
