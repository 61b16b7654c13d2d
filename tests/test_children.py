"""Child processes (follow_children=True): a ProcessPoolExecutor's workers under
every start method, a subprocess running sys.executable, and children that end by
os._exit, SIGTERM or SIGKILL each show in the parent's trace, on its clock, grouped by
process (t.processes, t.summary(process=...)), from the API, the CLI and a real kernel."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import _giltracer_boot
import giltracer
from conftest import FREE_THREADED, run_script

N = 3_000_000  # CPU-bound: each task a few tenths of a second

# Prepended to the scripts and cells below, which report it per thread.
HELD_IN_WORK = textwrap.dedent("""\
    def held_in_work(t, tid):  # the share of its time in work() with the GIL held
        works = [(a, b) for a, b, name, _, _ in t.spans(tid) if name == "work"]
        # from the barrier's end to work's (its wait: "wait" before 3.11, no co_qualname)
        waits = [b for a, b, name, _, _ in t.spans(tid) if name in ("Barrier.wait", "wait")]
        works = [(max([a] + [w for w in waits if a <= w <= b]), b) for a, b in works]
        # ("running" on a free-threaded build: not parked, the stand-in for holding)
        held = [(a, b) for a, b, state in t.gil_intervals(tid) if state in ("held", "running")]
        total = sum(b - a for a, b in works)
        inside = sum(max(0, min(b, d) - max(a, c)) for a, b in works for c, d in held)
        return 100.0 * inside / total if total else 0.0
""")

POOL_SCRIPT = HELD_IN_WORK + textwrap.dedent(f"""
    import json, multiprocessing as mp, sys
    from concurrent.futures import ProcessPoolExecutor
    import giltracer

    barrier = None

    def init(b):
        global barrier
        barrier = b

    def work(n):
        if barrier is not None:  # one task per worker: each waits for the other three
            barrier.wait()
        s = 0
        for i in range(n):
            s += i * i
        return s

    if __name__ == "__main__":
        method = sys.argv[1]
        ctx = mp.get_context(method)
        with giltracer.trace(follow_children=True) as t:
            with ProcessPoolExecutor(4, mp_context=ctx, initializer=init,
                                     initargs=(ctx.Barrier(4),)) as ex:
                list(ex.map(work, [{N}] * 4))

        procs = [dict(pid=p.pid, child=p.child, command=p.command, tids=list(p.tids),
                      start=p.start_ns, end=p.end_ns) for p in t.processes]
        background = {{th["tid"] for th in t.result.threads() if th["background"]}}
        waits_on_fg = {{}}  # a thread's GIL wait behind threads the traced code started
        for b in t.blame(all_threads=True):
            if b.holder not in background:
                waits_on_fg[b.waiter] = waits_on_fg.get(b.waiter, 0) + b.wait_ns
        rows = {{p.pid: [dict(tid=s.tid, name=s.name, held=s.held_pct, wait=s.wait_pct,
                              wait_on_fg=100 * waits_on_fg.get(s.tid, 0) / max(s.wall_ns, 1),
                              held_in_work=held_in_work(t, s.tid),
                              released=s.released_pct, wall=s.wall_ns)
                         for s in t.summary(process=p.pid)] for p in t.processes}}
        names = {{p.pid: sorted({{sp[2] for tid in p.tids for sp in t.spans(tid)}})
                  for p in t.processes}}

        print(json.dumps(dict(procs=procs, rows={{str(k): v for k, v in rows.items()}},
                              names={{str(k): v for k, v in names.items()}},
                              t0=t.result.t0_ns, t1=t.result.t1_ns, note=t.result.tracer_note,
                              text=t.summary_text(),
                              payload=json.loads(t.result.payload())["meta"].get("processes"),
                              every=[s.name for s in t.summary(all_threads=True)],
                              own=[[s.pid, s.name] for s in t.tool_threads],
                              own_note=t.tool_note)))
""")


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_a_process_pool_shows_four_children_holding_their_own_gil(tmp_path, method):
    facts, _ = run_script(tmp_path, POOL_SCRIPT, method)
    procs = facts["procs"]
    parent, children = procs[0], procs[1:]
    assert not parent["child"] and parent["pid"] != 0
    assert len(children) == 4, procs
    assert all(c["child"] for c in children)
    # A thread belongs to one process: no child shows a copy of a parent's thread (before
    # 3.11 a forked child's MainThread kept the parent's native id in threading).
    tids = [tid for p in procs for tid in p["tids"]]
    assert len(tids) == len(set(tids)), procs
    for c in children:
        # One clock: each child's life lies within the parent's session.
        assert facts["t0"] <= c["start"] <= c["end"] <= facts["t1"], c
        main = facts["rows"][str(c["pid"])][0]
        # Each worker holds its own process's GIL all the time it computes (on a 2-core
        # machine four CPU-bound workers are preempted, but they keep their GIL: held) and
        # never waits for it; the rest of its life it waits for work, the GIL released.
        # Almost never: giltracer's own spooler thread in the child (a background thread)
        # takes the GIL every ~0.25 s to stream the trace (1.08 % in a CI run on 3.11, 2.15 %
        # beside busy loops, where the OS preempts the spooler while it holds the GIL); behind
        # anything else the worker waits < 1 %.
        assert main["held_in_work"] >= 95, (method, main)
        assert main["wait_on_fg"] < 1, (method, main)
        assert main["wait"] < 5, (method, main)
        assert "work" in facts["names"][str(c["pid"])], facts["names"]
        # The text table has a block per process; the viewer's payload names each child.
        assert f" pid {c['pid']} (child process: " in facts["text"], facts["text"]
    assert [p["pid"] for p in facts["payload"]] == [c["pid"] for c in children]
    # Each child's spooler is giltracer's own: in no view, its cost the note's.
    assert "giltracer spool" not in facts["every"], facts["every"]
    assert {name for _, name in facts["own"]} <= {"giltracer spool"}, facts["own"]
    assert {pid for pid, _ in facts["own"]} <= {c["pid"] for c in children}, facts["own"]
    if facts["own"]:
        assert facts["own_note"].startswith("giltracer's own threads (giltracer spool) ")
    assert f" pid {parent['pid']} (the traced process)" in facts["text"]
    # The parent waits for its workers: its main thread holds its GIL little of the time.
    # (A free-threaded build has no GIL to release: the wait is parked or a blocking read.)
    own = [r for r in facts["rows"][str(parent["pid"])] if r["name"] == "MainThread"][0]
    if not FREE_THREADED:
        assert own["released"] >= 80, own
    assert facts["note"] is None
    assert "work" not in facts["names"][str(parent["pid"])]


SUB = textwrap.dedent(f"""
    import json, os, subprocess, sys
    import giltracer
    child = os.path.join(os.path.dirname(os.path.abspath(__file__)), "child.py")
    with giltracer.trace(follow_children=True) as t:
        subprocess.run([sys.executable, child] + sys.argv[1:], check=False)
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    print(json.dumps(dict(procs=[[p.pid, p.child, p.command, list(p.tids)] for p in t.processes],
                          names={{p.pid: sorted({{s[2] for tid in p.tids for s in t.spans(tid)}})
                                 for p in t.processes}},
                          note=t.result.tracer_note, events=t.event_count)))
""")

CHILD = textwrap.dedent("""
    import os, signal, sys
    def child_work():
        return sum(i * i for i in range(200_000))
    child_work()
    how = sys.argv[1] if len(sys.argv) > 1 else "normal"
    if how == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    if how == "sigterm":
        os.kill(os.getpid(), signal.SIGTERM)
    if how == "os_exit":
        os._exit(3)
""")


@pytest.mark.parametrize("how", ["normal", "os_exit", "sigterm"])
def test_subprocess_running_this_python_is_followed(tmp_path, how):
    (tmp_path / "child.py").write_text(CHILD)
    facts, _ = run_script(tmp_path, SUB, how)
    procs = facts["procs"]
    assert len(procs) == 3, procs  # the parent, child.py and `-c pass`
    by_cmd = {p[2]: p for p in procs[1:]}
    script = next(c for c in by_cmd if c.endswith(f"child.py {how}"))
    assert "child_work" in facts["names"][str(by_cmd[script][0])]
    assert facts["note"] is None


def test_a_child_killed_by_sigkill_leaves_the_trace_intact_with_a_note(tmp_path):
    (tmp_path / "child.py").write_text(CHILD)
    facts, _ = run_script(tmp_path, SUB, "sigkill")
    procs = facts["procs"]
    # The killed child (~50 ms here) has no trace, unless it lived past its first checkpoint
    # (~0.25 s, tests/test_children_streaming.py): seen under ASan, where it runs slowly.
    killed = [p for p in procs if p[2].endswith("child.py sigkill")]
    assert len(procs) == 2 + len(killed) and len(killed) <= 1, procs  # + parent, `-c pass`
    assert "run" in facts["names"][str(procs[0][0])]  # the parent's subprocess.run calls
    note = facts["note"]
    if killed:
        assert note and "1 child process killed (e.g. by SIGKILL)" in note, note
    else:
        assert note and "ended without writing its trace" in note and "SIGKILL" in note, note


def test_without_follow_children_no_child_is_traced(tmp_path):
    (tmp_path / "child.py").write_text(CHILD)
    facts, _ = run_script(tmp_path, SUB.replace("follow_children=True", "follow_children=False"))
    assert len(facts["procs"]) == 1
    assert "GILTRACER_CHILD" not in os.environ


def test_the_session_folder_is_private_and_removed(tmp_path, monkeypatch):
    seen = {}
    real = giltracer._child.Children.collect

    def collect(self):
        seen["mode"] = os.stat(self.folder).st_mode & 0o777
        seen["token"] = self.token
        seen["env"] = os.environ.get("GILTRACER_CHILD")
        return real(self)

    monkeypatch.setattr(giltracer._child.Children, "collect", collect)
    with giltracer.trace(follow_children=True, functions=False) as t:
        prefix, options = _giltracer_boot.decode(os.environ["GILTRACER_CHILD"])
        folder = os.path.dirname(prefix)
    assert seen["mode"] == 0o700
    assert len(seen["token"]) == 32 and seen["token"] in prefix
    assert options == dict(c_calls=True, exclude=None, functions=False, gil=True, include=None,
                           max_depth=0, max_events=giltracer.api.DEFAULT_MAX_EVENTS, sched=True)
    assert seen["env"] is None  # no child started after stop joins
    assert not os.path.exists(folder)
    assert [p.pid for p in t.processes] == [os.getpid()]


PLANT = textwrap.dedent("""
    import json, os, subprocess, sys
    import giltracer
    with giltracer.trace(follow_children=True) as t:
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        prefix = os.environ["GILTRACER_CHILD"].split("\x1f")[0]
        folder = os.path.dirname(prefix)
        spools = sorted(n for n in os.listdir(folder) if n.endswith(".spool"))
        # the first: moved away and replaced by a link to it; the second: renamed (no token)
        os.rename(os.path.join(folder, spools[0]), os.path.join(folder, "x" + spools[0]))
        os.symlink(os.path.join(folder, "x" + spools[0]), os.path.join(folder, spools[0]))
        os.rename(os.path.join(folder, spools[1]), os.path.join(folder, "x" + spools[1]))
    print(json.dumps(dict(procs=[p.pid for p in t.processes], note=t.result.tracer_note)))
""")


def test_a_spool_is_read_only_under_the_token_and_never_through_a_link(tmp_path):
    facts, _ = run_script(tmp_path, PLANT)
    assert facts["procs"] == facts["procs"][:1], facts
    note = facts["note"]
    assert "1 child process trace could not be read" in note, note  # the link
    assert "1 child process (pid" in note, note  # the renamed one: as if killed


def test_the_startup_hook_imports_nothing_and_costs_under_a_millisecond():
    env = {k: v for k, v in os.environ.items() if k != "GILTRACER_CHILD"}
    p = subprocess.run([sys.executable, "-X", "importtime", "-c", "pass"], capture_output=True,
                       text=True, env=env, check=True)
    assert "giltracer" not in p.stderr
    pth = [os.path.join(d, "giltracer_children.pth") for d in sys.path
           if os.path.exists(os.path.join(d, "giltracer_children.pth"))]
    assert pth, "the package installs its start-up hook"
    line = open(pth[0]).read().strip()
    code = compile(line, pth[0], "exec")
    saved = os.environ.pop("GILTRACER_CHILD", None)
    try:
        n = 10_000
        t0 = time.perf_counter()
        for _ in range(n):
            exec(code, {})
        per_run = (time.perf_counter() - t0) / n
    finally:
        if saved is not None:
            os.environ["GILTRACER_CHILD"] = saved
    assert per_run < 1e-3, per_run


def test_cli_follow_children_writes_one_chrome_process_per_process(tmp_path):
    script = tmp_path / "pool.py"
    script.write_text(POOL_SCRIPT.split('if __name__ == "__main__":')[0] + textwrap.dedent(f"""
        if __name__ == "__main__":
            ctx = mp.get_context("spawn")
            with ProcessPoolExecutor(2, mp_context=ctx, initializer=init,
                                     initargs=(ctx.Barrier(2),)) as ex:
                list(ex.map(work, [{N // 4}] * 2))
    """))
    out = tmp_path / "t.json"
    p = subprocess.run([sys.executable, "-m", "giltracer", "--follow-children", "-o", str(out),
                        str(script)], capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    events = json.load(open(out))["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    work_pids = {e["pid"] for e in events if e.get("ph") == "X" and e.get("name", "").startswith("work")}
    assert len(work_pids) == 2, (work_pids, names)
    assert all(pid in names for pid in work_pids)


# -- a real kernel: %%giltracer follows the cell's processes by default ---------------

KERNEL_CELLS = [
    "%load_ext giltracer",
    HELD_IN_WORK + textwrap.dedent(f"""\
        import json, multiprocessing as mp, os, subprocess, sys
        from concurrent.futures import ProcessPoolExecutor
        def work(n):
            s = 0
            for i in range(n):
                s += i * i
            return s
        def facts(t):
            own = os.getpid()
            return dict(own=own, procs=[[p.pid, p.child, p.command] for p in t.processes],
                        held={{p.pid: max(held_in_work(t, tid) for tid in p.tids)
                               for p in t.processes if p.child}},
                        text=t.summary_text(), note=t.result.tracer_note)"""),
    textwrap.dedent(f"""\
        %%giltracer --var t -q
        with ProcessPoolExecutor(4, mp_context=mp.get_context("fork")) as ex:
            total = sum(ex.map(work, [{N}] * 4))
        subprocess.run([sys.executable, "-c", "sum(i for i in range(100000))"], check=True)"""),
    "print(json.dumps(facts(t)))",
    textwrap.dedent("""\
        %%giltracer --var u -q --no-follow-children
        subprocess.run([sys.executable, "-c", "pass"], check=True)"""),
    "print(json.dumps(facts(u)))",
]


@pytest.fixture(scope="module")
def kernel_notebook(tmp_path_factory):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in KERNEL_CELLS]
    work = tmp_path_factory.mktemp("kernel-children")
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(work)}}).execute()
    return nb


def printed(cell):
    return json.loads("".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stdout"))


def test_a_kernel_cell_follows_its_process_pool_and_subprocess(kernel_notebook):
    facts = printed(kernel_notebook.cells[3])
    procs = facts["procs"]
    assert procs[0][0] == facts["own"] and not procs[0][1]
    children = procs[1:]
    assert len(children) == 5, procs  # four pool workers and the subprocess
    assert sum("-c sum(i for i" in c[2] for c in children) == 1, children
    workers = [c[0] for c in children if "-c sum(i for i" not in c[2]]
    # Each worker holds its own GIL all the time it computes (see the pool test).
    assert all(facts["held"][str(pid)] >= 95 for pid in workers), facts["held"]
    assert facts["note"] is None
    # One block per process in the text table.
    for pid in workers:
        assert f"pid {pid}" in facts["text"], facts["text"]


def test_a_kernel_cell_with_no_follow_children_traces_only_the_kernel(kernel_notebook):
    facts = printed(kernel_notebook.cells[5])
    assert [p[0] for p in facts["procs"]] == [facts["own"]]


OWN = textwrap.dedent("""
    import json, multiprocessing as mp
    import giltracer

    def own_trace(n):  # a worker that traces itself, as lesson code may
        with giltracer.trace(functions=False) as own:
            sum(range(n))
        return len(own.threads)

    if __name__ == "__main__":
        with giltracer.trace(follow_children=True) as t:
            with mp.get_context("fork").Pool(1) as pool:
                counts = pool.map(own_trace, [100_000])
        print(json.dumps(dict(counts=counts, procs=[p.pid for p in t.processes])))
""")


def test_a_followed_child_may_start_its_own_trace(tmp_path):
    """Its session from birth yields (what it recorded goes to the parent)."""
    facts, _ = run_script(tmp_path, OWN)
    assert facts["counts"] == [1]
    assert len(facts["procs"]) == 2, facts


PROFILED = textwrap.dedent("""
    import cProfile, json, multiprocessing as mp, pstats, subprocess, sys
    import giltracer

    def leaf(n):
        return n + 1

    def profiled():  # the child's own profiler, started after its session began at birth
        pr = cProfile.Profile()
        pr.enable()
        for i in range(100):
            leaf(i)
        pr.disable()
        counts = [v[1] for k, v in pstats.Stats(pr).stats.items() if k[2] == "leaf"]
        sys.exit(0 if counts == [100] else 5)

    if __name__ == "__main__":
        codes = {}
        with giltracer.trace(follow_children=True) as t:
            for method in ("fork", "spawn"):
                p = mp.get_context(method).Process(target=profiled)
                p.start()
                p.join()
                codes[method] = p.exitcode
            codes["subprocess"] = subprocess.run(
                [sys.executable, "-c", "import cProfile; cProfile.run('sum(range(99))')"],
                stdout=subprocess.DEVNULL).returncode
        names = sorted({s[2] for p in t.processes if p.child for tid in p.tids
                        for s in t.spans(tid)})
        print(json.dumps(dict(codes=codes, children=sum(p.child for p in t.processes),
                              leaf="leaf" in names, note=t.result.tracer_note)))
""")


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring's tool ids are 3.12+")
def test_a_followed_child_can_run_its_own_cprofile(tmp_path):
    # The child's session, begun before its code runs, takes no tool id a profiler asks
    # for: cProfile (sys.monitoring.PROFILER_ID) works in the child, and is traced.
    facts, _ = run_script(tmp_path, PROFILED)
    assert facts["codes"] == {"fork": 0, "spawn": 0, "subprocess": 0}, facts
    assert facts["children"] == 3, facts
    assert facts["leaf"], facts
    assert facts["note"] is None, facts


FAILED_START = textwrap.dedent("""
    import json, os, subprocess, sys
    import giltracer
    with giltracer.trace(follow_children=True) as t:
        # A child whose session cannot start (an option its core refuses): it runs untraced
        # and says why.
        bad = os.environ["GILTRACER_CHILD"] + "\\x1f" + "no_such_option=I1"
        p = subprocess.run([sys.executable, "-c", "print('ran')"], check=True,
                           env=dict(os.environ, GILTRACER_CHILD=bad), capture_output=True, text=True)
    print(json.dumps(dict(out=p.stdout, pid_note=t.result.tracer_note,
                          procs=[q.pid for q in t.processes])))
""")


def test_a_child_whose_session_did_not_start_is_reported_so_not_as_killed(tmp_path):
    facts, _ = run_script(tmp_path, FAILED_START)
    assert facts["out"] == "ran\n"  # it ran, untraced
    note = facts["pid_note"]
    assert "1 child process could not be traced (its session did not start" in note, note
    assert "no_such_option" in note, note  # why
    assert "killed" not in note, note
    assert len(facts["procs"]) == 1  # the parent only


def _follow_env(prefix):
    options = dict(functions=False, gil=True, sched=False)
    return dict(os.environ, GILTRACER_CHILD=_giltracer_boot.encode(prefix, options))


@pytest.mark.parametrize("how", ["link", "shared"])
def test_a_child_writes_only_into_a_private_folder_of_its_user_reached_through_no_link(
        tmp_path, how):
    # The variable is inherited (e.g. by a privileged process through `sudo -E`): a folder
    # reached through a link, or one others may write to, must not take the child's files.
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    if how == "link":
        (tmp_path / "link").symlink_to(real)
        prefix = str(tmp_path / "link" / "token-")
    else:
        real.chmod(0o777)
        prefix = str(real / "token-")
    p = subprocess.run([sys.executable, "-c", "print('ran')"], env=_follow_env(prefix),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout == "ran\n", p.stderr
    assert os.listdir(real) == []


def test_a_private_folder_reached_directly_is_followed(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    p = subprocess.run([sys.executable, "-c", "print('ran')"],
                       env=_follow_env(str(real / "token-")), capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert sorted(n.rsplit(".", 1)[1] for n in os.listdir(real)) == ["born", "spool"]


OUTLIVES = textwrap.dedent("""
    import json, os, subprocess, sys, time
    import giltracer
    child = ("import os, sys, time\\n"
             "sys.stdin.readline()\\n"  # the parent's trace has stopped
             "end = time.monotonic() + 20\\n"
             "while 'GILTRACER_CHILD' in os.environ and time.monotonic() < end:\\n"
             "    time.sleep(0.05)\\n"
             "print('GILTRACER_CHILD' in os.environ, flush=True)\\n")
    with giltracer.trace(follow_children=True, functions=False) as t:
        p = subprocess.Popen([sys.executable, "-c", child], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
        time.sleep(0.5)  # born and tracing
    out, _ = p.communicate("stopped\\n", timeout=60)
    print(json.dumps(dict(still_set=out.strip())))
""")


@pytest.mark.skipif(FREE_THREADED, reason="a free-threaded child writes no checkpoints, where it "
                    "learns that its parent's trace stopped (Session.spool)")
def test_a_child_that_outlives_the_trace_stops_passing_the_variable_on(tmp_path):
    # Once the parent's trace has stopped (its folder is gone), what the child starts from
    # then on is not followed: the variable leaves its environment.
    facts, _ = run_script(tmp_path, OUTLIVES)
    assert facts["still_set"] == "False", facts


def test_the_session_folder_goes_even_while_a_late_child_writes_into_it(tmp_path):
    import threading

    left = []
    for _ in range(20):
        folder = tempfile_folder(tmp_path)
        stop = threading.Event()

        def late_child():  # keeps creating files, as a child still writing its spool would
            i = 0
            while not stop.is_set():
                try:
                    with open(os.path.join(folder, f"x{i}"), "w"):
                        pass
                except OSError:
                    pass
                i += 1

        th = threading.Thread(target=late_child)
        th.start()
        time.sleep(0.005)
        giltracer._child.remove_folder(folder)
        stop.set()
        th.join()
        left += [f for f in (folder, folder + ".gone") if os.path.exists(f)]
    assert not left, left


def tempfile_folder(tmp_path):
    import tempfile

    return tempfile.mkdtemp(dir=tmp_path)


SIGTERM_WHILE_BUSY = textwrap.dedent("""
    import json, os, signal, sys
    import _giltracer_boot as boot
    import giltracer
    boot.SPOOL_EVERY = 3600  # no checkpoint: only the child's end writes its trace

    def f(i):
        return i * i

    def kill_me():  # a SIGTERM (Pool.terminate()) arriving in the middle of it
        os.kill(os.getpid(), signal.SIGTERM)

    if __name__ == "__main__":
        when = sys.argv[1]
        if when == "start":  # while the child starts its session (in the fork hook)
            real_spooler = boot._start_spooler
            boot._start_spooler = lambda s: (kill_me(), real_spooler(s))[1]
        real_names = boot._names
        with giltracer.trace(follow_children=True) as t:
            pid = os.fork()
            if pid == 0:
                [f(i) for i in range(300)]
                if when == "end":  # while it ends its session, leaving through os._exit
                    boot._names = lambda: (kill_me(), real_names())[1]
                os._exit(0)
            _, status = os.waitpid(pid, 0)
        calls = sum(1 for th in t.threads if th.pid == pid for s in t.spans(th.tid)
                    if s[2].split()[0] == "f")
        print(json.dumps(dict(note=t.result.tracer_note, status=status, pid=pid, calls=calls,
                              procs=[p.pid for p in t.processes])))
""")


@pytest.mark.parametrize("when", ["start", "end"])
def test_a_sigterm_while_a_child_starts_or_ends_its_session_waits_for_it(tmp_path, when):
    # Pool.terminate() right after map() reaches workers still starting their session, or
    # leaving through os._exit while ending it: the signal waits for that (it lost the
    # worker's trace, or hung it in a nested end()), then the child dies of it.
    facts, _ = run_script(tmp_path, SIGTERM_WHILE_BUSY, when)
    assert os.WIFSIGNALED(facts["status"]) and os.WTERMSIG(facts["status"]) == signal.SIGTERM, facts
    assert facts["note"] is None, facts["note"]
    assert facts["pid"] in facts["procs"], facts
    # Killed while starting: before its first call. While ending: after all of them.
    assert facts["calls"] == (0 if when == "start" else 300), facts



# The child's main thread waits in C where no signal interrupts it and never comes back to
# check for one: a second lock of a plain mutex it holds. As a pool worker idle in get()
# is when Pool.terminate()'s SIGTERM lands between CPython's check for signals and its
# wait: the Python handler never runs.
STUCK = textwrap.dedent("""
    import ctypes

    def stuck():
        libc = ctypes.CDLL(None, use_errno=True)
        mutex = ctypes.create_string_buffer(64)  # zeroed: PTHREAD_MUTEX_INITIALIZER
        libc.pthread_mutex_lock(mutex)
        libc.pthread_mutex_lock(mutex)
""")

# The parent's end of it: SIGTERM to the stuck child, then up to 20 s for it to die.
TERMINATE = textwrap.dedent("""
    import os, signal, time

    def terminate(pid):
        os.kill(pid, signal.SIGTERM)
        for _ in range(2000):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return status
            time.sleep(0.01)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        return "hung"
""")


def run_stuck(tmp_path, body):
    (tmp_path / "stuck.py").write_text(STUCK + TERMINATE)
    return run_script(tmp_path, body)[0]


SIGTERM_UNANSWERED = textwrap.dedent("""
    import json, os, time
    import giltracer
    from stuck import stuck, terminate

    def f(i):
        return i * i

    if __name__ == "__main__":
        ready_r, ready_w = os.pipe()
        with giltracer.trace(follow_children=True) as t:
            pid = os.fork()
            if pid == 0:
                [f(i) for i in range(300)]
                os.write(ready_w, b"x")
                stuck()
                os._exit(0)
            os.read(ready_r, 1)
            time.sleep(0.2)  # (in its lock)
            status = terminate(pid)
        calls = sum(1 for th in t.threads if th.pid == pid for s in t.spans(th.tid)
                    if s[2].split()[0] == "f")
        print(json.dumps(dict(note=t.result.tracer_note, status=status, pid=pid, calls=calls,
                              procs=[p.pid for p in t.processes])))
""")


def test_a_sigterm_the_childs_main_thread_never_answers_still_ends_it_with_its_trace(tmp_path):
    # Its spooler's thread notes the signal (core/support/termwatch.h) and, the main thread
    # silent 0.1 s on, ends the session and dies of SIGTERM itself. Before: the child hung
    # (here until the test's SIGKILL; a terminate()d pool's worker, and the pool, forever).
    facts = run_stuck(tmp_path, SIGTERM_UNANSWERED)
    assert facts["status"] != "hung", facts
    assert os.WIFSIGNALED(facts["status"]) and os.WTERMSIG(facts["status"]) == signal.SIGTERM, facts
    assert facts["note"] is None, facts["note"]
    assert facts["pid"] in facts["procs"], facts
    assert facts["calls"] == 300, facts


SIGTERM_AFTER_THE_TRACE = textwrap.dedent("""
    import json, os, time
    import giltracer
    from stuck import stuck, terminate

    if __name__ == "__main__":
        ready_r, ready_w = os.pipe()
        with giltracer.trace(follow_children=True) as t:
            pid = os.fork()
            if pid == 0:
                os.write(ready_w, b"x")
                stuck()
                os._exit(0)
            os.read(ready_r, 1)
        time.sleep(1.0)  # its session ends: the trace's folder is gone
        print(json.dumps(dict(status=terminate(pid))))
""")


def test_a_child_that_outlives_the_trace_dies_of_sigterm_as_untraced(tmp_path):
    # The parent's trace is over, the child runs on untraced: its SIGTERM has the default
    # disposition again (no Python handler its main thread might never run). Before: it
    # hung in its wait, as above, with no session left to answer for it.
    facts = run_stuck(tmp_path, SIGTERM_AFTER_THE_TRACE)
    assert facts["status"] != "hung", facts
    assert os.WIFSIGNALED(facts["status"]) and os.WTERMSIG(facts["status"]) == signal.SIGTERM, facts
