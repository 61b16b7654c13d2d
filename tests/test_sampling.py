"""Sampling mode (mode="sample", --sample [INTERVAL]): no per-call hook; a sampler thread
reads every thread's stack at an interval, the GIL probe stays exact, the GIL-split
profile, Top functions and blame come from the samples, and the sampler's own GIL use is
reported, not mixed into the user's threads."""

import json
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import giltracer
from giltracer import cli, options
from conftest import FREE_THREADED, needs_gil

SAMPLER = "giltracer sampler"


def hot_spin(seconds):
    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:
        for i in range(2000):
            x += i
    return x


def nap(seconds):
    time.sleep(seconds)


def held(states):
    return states["running"] + states["held_off_cpu"]


@pytest.fixture(scope="module")
def sampled():
    """Two CPU-bound threads and a sleeping one, sampled at the default interval."""
    threads = [threading.Thread(target=hot_spin, args=(0.8,), name=f"hot{i}") for i in range(2)]
    threads.append(threading.Thread(target=nap, args=(0.8,), name="napper"))
    seen = {}
    with giltracer.trace(mode="sample", backend="hooks") as t:
        seen["profile"] = sys.getprofile()
        if sys.version_info >= (3, 12):
            seen["tool"] = [sys.monitoring.get_tool(i) for i in range(6)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    return t, seen


def test_no_per_call_hook_runs(sampled):
    t, seen = sampled
    assert seen["profile"] is None
    assert "giltracer" not in seen.get("tool", [])
    assert t.mode == "sample"


@needs_gil  # one GIL shared by two runnable threads
def test_two_cpu_bound_threads_split_about_half_held_half_waiting(sampled):
    t, _ = sampled
    for name in ("hot0", "hot1"):
        node = t.profile(name).find("hot_spin")[0]
        s = node.states
        share = held(s) / (held(s) + s["waiting"])
        # One GIL, two runnable threads: each holds it about half the time it wants it.
        assert 0.25 <= share <= 0.75, (name, s)
        assert node.total_ns >= 0.5 * 0.8e9, (name, node.total_ns)


def test_sleep_shows_as_released(sampled):
    t, _ = sampled
    node = t.profile("napper").find("nap")[0]
    if FREE_THREADED:  # no GIL to release: the nap is not parked (off CPU where known)
        napped = node.states["running"] + node.states["held_off_cpu"]
    else:
        napped = node.states["released"]
    assert napped >= 0.8 * node.total_ns, node.states


def test_the_hot_function_tops_top_functions(sampled):
    t, _ = sampled
    rows = t.functions(sort="self")
    assert rows[0].name == "hot_spin", [r.name for r in rows[:5]]
    by_held = sorted(rows, key=lambda r: held(r.self_states), reverse=True)
    assert by_held[0].name == "hot_spin"


@needs_gil  # the spinners wait for each other only for the GIL
def test_blame_names_the_sampled_function(sampled):
    t, _ = sampled
    tids = {s.tid for s in t.summary() if s.name in ("hot0", "hot1")}
    between_hot = [b for b in t.blame() if {b.waiter, b.holder} == tids]
    assert between_hot and between_hot[0].function == "hot_spin", t.blame()[:3]


@pytest.mark.skipif(FREE_THREADED, reason="free-threaded build: each sample stops the world "
                    "(other threads' frames cannot be read while they run), so the sampler's "
                    "time is a stop-the-world's, not a GIL hold: its bound is the GIL's")
def test_the_samplers_gil_use_is_reported_not_the_users(sampled):
    t, _ = sampled
    st = t.result.sampler
    assert st["interval_ns"] == 5_000_000
    assert st["samples"] >= 20, st  # 160 ticks in 0.8 s; waits for the GIL skip some
    assert 0 < st["held_ns"] <= 0.05 * t.duration_ns, st  # its own hold: a walk of the stacks
    assert st["samples"] + st["skipped"] + st["failed"] >= 100, st
    assert t.result.sampling.startswith("sampled every 5 ms, ")
    assert "the sampler held the GIL" in t.result.sampling
    # giltracer's own thread: in no view, its GIL time (measured by the probe) in the note.
    assert SAMPLER not in [s.name for s in t.summary(all_threads=True)]
    assert st["tid"] not in {x for b in t.blame(all_threads=True) for x in (b.waiter, b.holder)}
    (row,) = [s for s in t.tool_threads if s.name == SAMPLER]
    assert row.tid == st["tid"] and row.held_ns > 0
    assert t.tool_note.startswith(f"giltracer's own threads ({SAMPLER}) held the GIL")
    text = t.summary_text(all_threads=True)
    assert "Sampling: sampled every 5 ms" in text
    assert [ln for ln in text.splitlines() if SAMPLER in ln] == ["Note: " + t.tool_note], text
    assert "Sampled, not traced: sampled every 5 ms" in t.profile_text()
    assert json.loads(t.result.payload())["meta"]["sampling"] == t.result.sampling


def test_a_traced_run_says_nothing_of_sampling():
    with giltracer.trace(backend="hooks") as t:
        hot_spin(0.01)
    assert t.result.sampling is None and t.result.sampler is None
    assert "Sampling" not in t.summary_text()


@pytest.mark.parametrize("text, ns", [("5ms", 5_000_000), ("500us", 500_000), ("2", 2_000_000),
                                      ("0.01s", 10_000_000), (0.002, 2_000_000)])
def test_intervals(text, ns):
    assert options.parse_interval(text) == ns


@pytest.mark.parametrize("value, message", [("5 parsecs", "e.g. --sample 5ms"),
                                            ("10us", "between 50us and 10s"),
                                            ("11s", "between 50us and 10s")])
def test_bad_intervals_say_the_fix(value, message):
    with pytest.raises(ValueError, match=message):
        giltracer.trace(mode="sample", sample_interval=value)


def test_bad_mode():
    with pytest.raises(ValueError, match="mode must be one of trace, sample"):
        giltracer.trace(mode="samples")
    with pytest.raises(ValueError, match="sample_interval is for mode='sample'"):
        giltracer.trace(sample_interval="2ms")


def test_the_interval_is_taken_only_when_it_is_one():
    assert cli.split_argv(["--sample", "x.py", "2ms"]) == (["--sample", "x.py"], ["2ms"])
    assert cli.split_argv(["--sample", "2ms", "x.py", "a"]) == (["--sample", "2ms", "x.py"], ["a"])
    assert options.with_optional_values(["--sample", "x.py"], options.COMMANDS) == [
        "--sample=5ms", "x.py"]
    from giltracer import magics

    assert magics.split_statement("--sample f(1)") == ("--sample", "f(1)")
    assert magics.split_statement("--sample 2ms --top 3 f(1)") == ("--sample 2ms --top 3", "f(1)")


SCRIPT = textwrap.dedent("""
    import threading, time
    def hot_spin():
        end = time.perf_counter() + 0.4
        x = 0
        while time.perf_counter() < end:
            x += 1
    ts = [threading.Thread(target=hot_spin) for _ in range(2)]
    [t.start() for t in ts]
    [t.join() for t in ts]
""")


def run_cli(tmp_path, *args):
    script = tmp_path / "work.py"
    script.write_text(SCRIPT)
    return subprocess.run([sys.executable, "-m", "giltracer", *args, str(script)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)


def test_cli_sample(tmp_path):
    out = tmp_path / "t.txt"
    r = run_cli(tmp_path, "--backend", "hooks", "--sample", "2ms", "-o", str(out))
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert "Sampling: sampled every 2 ms" in text
    assert "in hot_spin (work.py:" in text  # blame from the samples


def test_cli_profile_sample_default_interval(tmp_path):
    script = tmp_path / "work.py"
    script.write_text(SCRIPT)
    r = subprocess.run([sys.executable, "-m", "giltracer", "profile", "--backend", "hooks",
                        "--sample", str(script)], capture_output=True, text=True, cwd=tmp_path,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "Sampled, not traced: sampled every 5 ms" in r.stdout
    assert "hot_spin" in r.stdout


def test_cli_bad_interval_is_a_usage_error(tmp_path):
    r = run_cli(tmp_path, "--sample=5parsecs")
    assert r.returncode == 2
    assert "--sample 5parsecs: give an interval with a unit, e.g. --sample 5ms" in r.stderr


def test_magics_sample_and_bad_interval(ip, outputs):
    from IPython.core.error import UsageError

    ip.run_cell("import threading, time\n"
                "def spin_cell():\n"
                "    end = time.perf_counter() + 0.3\n"
                "    while time.perf_counter() < end: pass\n")
    ip.run_cell_magic("giltracer", "--sample 2ms --var sampled_cell --backend hooks",
                      "ts = [threading.Thread(target=spin_cell) for _ in range(2)]\n"
                      "[t.start() for t in ts]\n[t.join() for t in ts]\n")
    t = ip.user_ns["sampled_cell"]
    assert t.result.sampler["interval_ns"] == 2_000_000
    assert "Sampling: sampled every 2 ms" in outputs[-1]["text/plain"]
    ip.run_line_magic("gilprofile", "--sample --backend hooks spin_cell()")
    assert "Sampled, not traced: sampled every 5 ms" in outputs[-1]["text/plain"]
    with pytest.raises(UsageError, match="e.g. --sample 5ms"):
        ip.run_cell_magic("giltracer", "--sample=fast", "pass")


nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")


def test_kernel_cell_sampled(tmp_path):
    pytest.importorskip("ipykernel")
    cells = [
        "%load_ext giltracer",
        "import json, threading, time\n"
        "def spin_k():\n"
        "    end = time.perf_counter() + 0.5\n"
        "    while time.perf_counter() < end: pass",
        "%%giltracer --sample --var t --backend hooks\n"
        "ts = [threading.Thread(target=spin_k, name=f'k{i}') for i in range(2)]\n"
        "[x.start() for x in ts]\n[x.join() for x in ts]",
        "print(json.dumps({'names': [s.name for s in t.summary()],\n"
        "                  'sampler': t.result.sampler,\n"
        "                  'top': [r.name for r in t.functions(sort='self')[:3]]}))",
    ]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    shown = "".join(o["data"].get("text/plain", "") for o in nb.cells[2].outputs
                    if o.get("output_type") == "display_data")
    assert "Sampling: sampled every 5 ms" in shown
    facts = json.loads("".join(o.get("text", "") for o in nb.cells[3].outputs
                               if o.get("name") == "stdout"))
    assert {"k0", "k1"} <= set(facts["names"]) and SAMPLER not in facts["names"]
    assert facts["sampler"]["samples"] > 0
    assert facts["top"][0] == "spin_k", facts


@needs_gil
def test_auto_samples_with_the_hooks_even_as_root():
    """Sampling is asked for its low cost: the bpf probe's uprobes (~3 us per GIL hand-off,
    5x on GIL-churning code) would undo it, so auto takes the hooks and says why."""
    with giltracer.trace(mode="sample") as t:
        hot_spin(0.05)
    assert t.backend == "hooks", t.backend_reason
    assert "sampling mode keeps its cost low" in t.backend_reason, t.backend_reason



FAILED_START = textwrap.dedent("""
    import resource, threading
    import giltracer

    def users_hook(frame, event, arg):
        pass

    threading.setprofile(users_hook)
    soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    resource.setrlimit(resource.RLIMIT_NPROC, (1, hard))  # no thread can be made
    try:
        giltracer.trace(mode="sample", backend="hooks").start()
    except RuntimeError as e:
        print("start failed:", e)
    else:
        print("started")
    print("hook after the failed start:", threading._profile_hook is users_hook)
    resource.setrlimit(resource.RLIMIT_NPROC, (soft, hard))
    with giltracer.trace(mode="sample", backend="hooks") as t:
        threading.Thread(target=lambda: None).start()
    print("hook after a later trace:", threading._profile_hook is users_hook,
          threading.getprofile() is users_hook)
""")


@pytest.mark.skipif(os.geteuid() == 0 and not os.path.exists("/usr/bin/setpriv"),
                    reason="as root, RLIMIT_NPROC needs setpriv to an unprivileged user")
def test_a_failed_sampler_start_leaves_the_users_thread_hook():
    # The sampler's thread cannot be made (RLIMIT_NPROC: only an unprivileged user is
    # held to it): the start fails, and the program's threading.setprofile hook stays,
    # then and after a later trace.
    as_user = []
    if os.geteuid() == 0:
        as_user = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    env = dict(os.environ, HOME="/", PYTHONDONTWRITEBYTECODE="1")
    if subprocess.run([*as_user, sys.executable, "-c", "import giltracer"], env=env, cwd="/",
                      capture_output=True, timeout=120).returncode:
        pytest.skip("this interpreter cannot run as user nobody (e.g. installed under /root)")
    cmd = [*as_user, sys.executable, "-c", FAILED_START]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, cwd="/")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("start failed:"), r.stdout
    assert "Resource temporarily unavailable" in lines[0], r.stdout
    assert lines[1:] == ["hook after the failed start: True",
                         "hook after a later trace: True True"], r.stdout
