"""Trace.what_if(): the cell re-scheduled without the GIL (core/analyze/whatif.c) on real
traces, its text, the payload's "what_if" and the profile outputs' section."""

import json
import math
import os
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import giltracer
import giltracer.calibrate
import giltracer.whatif_policy
from conftest import needs_gil
from workloads import spin, traced_producer_consumer

pytestmark = needs_gil


def cpu_bound_pair(n=1_000_000):
    """Two threads, each a fixed amount of pure-Python work, started together. Not pinned
    to CPUs: a thread that pins itself holds the GIL while it migrates (200 ms seen under
    load), which would be work of its own here."""
    barrier = threading.Barrier(2)

    def work(index):
        barrier.wait()
        spin(n)

    threads = [threading.Thread(target=work, args=(i,), name=f"cpu-{i}") for i in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()


def work_ns(t, name):
    """A thread's work as the model counts it: held time not preempted by the OS."""
    r = {x.name: x for x in t.summary()}[name]
    return r.held_ns - min(r.preempted_ns or 0, r.held_ns)


@pytest.fixture(scope="module")
def cpu_trace():
    # The same work in both threads should give the same held time; a run where one of
    # them held the GIL much longer for it (under ASan in CI: 752 against 426 ms) was
    # disturbed, and is measured again (up to 3 runs).
    for _ in range(3):
        with giltracer.trace() as t:
            cpu_bound_pair()
        a, b = work_ns(t, "cpu-0"), work_ns(t, "cpu-1")
        if max(a, b) <= 1.25 * min(a, b):
            break
    return t


# Other processes' load on a shared machine adds time when no traced thread gets a CPU
# at all (seen at load 13 on 2 CPUs: 720 ms measured where the replay with the GIL gives
# 306 ms), which the model, spreading the CPU share it measured evenly, leaves out. So the
# ranges hold against the model's own replay with the GIL (the same work and CPU share)
# always, and against the measured wall only on a quiet machine (load under the CPUs).
def quiet():
    return os.getloadavg()[0] < (os.cpu_count() or 1)


def test_two_cpu_bound_threads_on_two_cpus_nearly_double(cpu_trace):
    w = cpu_trace.what_if(cpus=2, ft_factor=1.0)
    # One at a time (the GIL) against side by side on two CPUs: (a + b) / max(a, b) of the
    # two threads' work, 2 when they did the same. (Measured, not assumed: on pyenv 3.9 one
    # of them held the GIL 70 ms for the work the other did in 40, 2 runs of 8.)
    a, b = work_ns(cpu_trace, "cpu-0"), work_ns(cpu_trace, "cpu-1")
    expected = (a + b) / max(a, b)
    assert 1.3 <= expected, (a, b)
    assert 0.85 * expected <= w.gil_replay_wall_s / w.predicted_wall_s <= 1.15 * expected, (expected, str(w))
    assert w.cpus == 2 and w.ft_factor == 1.0
    assert math.isclose(w.speedup, w.measured_wall_s / w.predicted_wall_s, rel_tol=1e-9)
    assert w.speedup >= 1.3, str(w)
    if quiet():
        assert 0.8 * expected <= w.speedup <= 1.25 * expected, (expected, str(w))
        # The model replaying the trace with the GIL comes back near the measured wall.
        assert 0.8 <= w.gil_replay_wall_s / w.measured_wall_s <= 1.25, str(w)
    names = {th.name for th in w.threads}
    assert {"cpu-0", "cpu-1"} <= names
    # spin caused nearly all the wait and releasing it alone gets nearly the whole gain.
    assert w.functions and w.functions[0].name == "spin"
    assert w.functions[0].release_speedup >= 0.8 * w.speedup


def test_two_cpu_bound_threads_on_one_cpu_no_gain(cpu_trace):
    w = cpu_trace.what_if(cpus=1, ft_factor=1.0)
    assert 0.9 <= w.gil_replay_wall_s / w.predicted_wall_s <= 1.1, str(w)
    assert w.speedup >= 0.8, str(w)
    if quiet():
        assert w.speedup <= 1.25, str(w)


def test_ft_factor_slows_the_prediction(cpu_trace):
    w1 = cpu_trace.what_if(cpus=2, ft_factor=1.0)
    w2 = cpu_trace.what_if(cpus=2, ft_factor=1.5)
    assert w2.ft_factor == 1.5
    assert 1.3 <= w2.predicted_wall_s / w1.predicted_wall_s <= 1.5


def test_sleeping_pool_is_already_parallel():
    with giltracer.trace() as t:
        with ThreadPoolExecutor(4) as ex:
            list(ex.map(time.sleep, [0.2] * 4))
    w = t.what_if(cpus=2, ft_factor=1.0)
    assert 0.9 <= w.speedup <= 1.1, str(w)
    assert w.predicted_wall_s >= 0.2


def test_producer_consumer_bounded_by_the_producer():
    t = traced_producer_consumer(20, 50_000, 10_000)
    w = t.what_if(cpus=2, ft_factor=1.0)
    # Two starts, two joins, and the gets that blocked (not every one does).
    assert w.handoffs >= 5, str(w)
    # The consumer cannot run ahead of the producer: the cell takes at least the producer's
    # work, near its share of the work done one thread at a time (the GIL replay). The share
    # is the traced one, not the 5/6 of the spins: the consumer's gets and the tracer's cost
    # in them add to its held time (pyenv 3.9, CI: producer 41, consumer 18 ms held). Work
    # is held time not preempted by the OS, as the model counts it (beside busy loops the
    # producer, preempted while holding the GIL, held 93 % of the time).
    work = {r.name: work_ns(t, r.name) for r in t.summary()}
    share = work["producer"] / sum(work.values())
    assert 0.9 * share <= w.predicted_wall_s / w.gil_replay_wall_s <= 1.05, (share, str(w))
    assert w.predicted_wall_s <= 0.97 * w.gil_replay_wall_s, str(w)  # the consumer overlaps
    producer = next(th for th in w.threads if th.name == "producer")
    assert w.predicted_wall_s >= producer.predicted_s
    assert w.predicted_wall_s <= 1.05 * w.measured_wall_s, str(w)


@pytest.mark.parametrize("kwargs, message", [
    ({"cpus": 0}, "cpus must be an integer >= 1"),
    ({"cpus": -2}, "cpus must be an integer >= 1"),
    ({"cpus": 1.5}, "cpus must be an integer >= 1"),
    ({"cpus": True}, "cpus must be an integer >= 1"),
    ({"ft_factor": 0}, "ft_factor must be a finite number > 0"),
    ({"ft_factor": float("nan")}, "ft_factor must be a finite number > 0"),
    ({"ft_factor": float("inf")}, "ft_factor must be a finite number > 0"),
    ({"ft_factor": "1.2"}, "ft_factor must be a finite number > 0"),
    ({"top": -1}, "top must be an integer >= 0"),
    ({"parallel_speed": 0}, "parallel_speed must be a number in (0, 1]"),
    ({"parallel_speed": 1.2}, "parallel_speed must be a number in (0, 1]"),
    ({"parallel_speed": float("nan")}, "parallel_speed must be a number in (0, 1]"),
    ({"parallel_speed": "fast"}, "parallel_speed must be a number in (0, 1]"),
    ({"parallel_speed": True}, "parallel_speed must be a number in (0, 1]"),
])
def test_bad_arguments_say_what_is_expected(cpu_trace, kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        cpu_trace.what_if(**kwargs)


def test_defaults_are_this_machines_cpus(cpu_trace):
    w = cpu_trace.what_if()
    assert w.cpus == giltracer.calibrate.usable_cpus() <= (os.cpu_count() or 1)
    assert w.ft_factor > 0


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 CPUs to pin to fewer")
def test_defaults_are_the_cpus_the_process_may_use_not_the_machines():
    # `taskset -c 0 python ...` (or a container's cpuset) gives the process one CPU of two:
    # the prediction is for the CPUs it may run on.
    code = """if True:
        import json, os, threading, giltracer
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        with giltracer.trace(sched=False) as t:
            ths = [threading.Thread(target=sum, args=(range(200_000),)) for _ in range(2)]
            [th.start() for th in ths]
            [th.join() for th in ths]
        print(json.dumps([t.what_if().cpus, json.loads(t.result.payload())["what_if"]["cpus"]]))
    """
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[-1]) == [1, 1]


def _cgroup_files(root, files):
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)


@pytest.mark.parametrize("proc_cgroup, files, expected", [
    # cgroup v2: the smallest quota on the path counts (in CPUs; usable_cpus rounds up)
    ("0::/user.slice/job\n", {"cpu.max": "max 100000\n", "user.slice/cpu.max": "150000 100000\n",
                               "user.slice/job/cpu.max": "max 100000\n"}, 1.5),
    ("0::/job\n", {"job/cpu.max": "100000 100000\n"}, 1),
    ("0::/job\n", {"job/cpu.max": "50000 100000\n"}, 0.5),
    ("0::/job\n", {"job/cpu.max": "max 100000\n"}, None),
    # in a container: the host's path, the container's own cgroup mounted as the root
    ("0::/kubepods/pod1/ctr\n", {"cpu.max": "100000 100000\n"}, 1),
    # cgroup v1: cpu.cfs_quota_us (-1: none) over cpu.cfs_period_us
    ("4:memory:/x\n2:cpu,cpuacct:/job\n", {"cpu,cpuacct/job/cpu.cfs_quota_us": "100000\n",
                                              "cpu,cpuacct/job/cpu.cfs_period_us": "100000\n"}, 1),
    ("2:cpu,cpuacct:/job\n", {"cpu,cpuacct/job/cpu.cfs_quota_us": "-1\n",
                               "cpu,cpuacct/job/cpu.cfs_period_us": "100000\n"}, None),
    ("1:cpu:/\n", {}, None),  # no files: no limit known
])
def test_a_cgroup_cpu_quota_caps_the_cpus(tmp_path, proc_cgroup, files, expected):
    root = tmp_path / "cgroup"
    root.mkdir()
    _cgroup_files(root, files)
    (tmp_path / "self-cgroup").write_text(proc_cgroup)
    args = (str(root), str(tmp_path / "self-cgroup"))
    assert giltracer.calibrate._cgroup_quota_cpus(*args) == expected
    affinity = len(os.sched_getaffinity(0))
    assert giltracer.calibrate.usable_cpus(*args) == (
        affinity if expected is None else min(affinity, math.ceil(expected)))


def test_text_structure(cpu_trace):
    w = cpu_trace.what_if(cpus=2, ft_factor=1.0)
    lines = str(w).splitlines()
    assert lines[0] == "What if there were no GIL (2 CPUs, free-threading cost 1.00x):"
    assert re.fullmatch(r"  cell: \d+\.\d ms measured, \d+\.\d ms predicted, speed-up \d+\.\d\dx",
                        lines[1]), lines[1]
    assert lines[2].split() == ["thread", "measured", "predicted", "GIL", "wait"]
    k = 3 + len(w.threads)
    for th, line in zip(w.threads, lines[3:k]):
        assert line.startswith("  " + th.name)
        assert len(re.findall(r"\d+\.\d", line[26:])) == 3, line
    assert lines[k].startswith("  Functions by GIL wait caused (ms)")
    assert lines[k + 1].split() == ["function", "location", "caused", "saving", "if", "released"]
    rows = lines[k + 2:k + 2 + len(w.functions)]
    assert rows[0].startswith("  spin ") and re.search(r"\(\d+\.\d\dx\)$", rows[0])
    rest = lines[k + 2 + len(w.functions):]
    assert rest[0] == "  Assumptions:"
    assert rest[1:-3] == [f"  - {a}" for a in w.assumptions]
    assert rest[-3] == "  - Free-threading's single-thread cost (1.00x): given."
    assert rest[-2] == (f"  - The tracer's cost per call event ({w.event_ns:.0f} ns): "
                        f"{w.event_ns_source}.")
    assert rest[-1] == ("  - Each CPU's speed with all busy (1.00 of one alone): "
                        "assumed (CPUs as fast together as alone).")
    assert len(w.assumptions) == 6
    assert "2 CPUs" in w.assumptions[1] and "1.00x" in w.assumptions[0]
    assert w.assumptions[1].endswith("each as fast as one alone.")


def test_payload_has_the_what_if_contract(cpu_trace):
    p = json.loads(cpu_trace.result.payload())["what_if"]
    assert set(p) == {"cpus", "ft_factor", "parallel_speed", "measured_wall_s",
                      "predicted_wall_s", "speedup", "threads", "functions", "assumptions"}
    assert p["parallel_speed"] == 1.0  # the default: CPUs as fast together as alone
    assert p["cpus"] == giltracer.calibrate.usable_cpus()
    assert p["ft_factor"] == pytest.approx(giltracer.whatif_policy.ft_factor_for()[0], abs=1e-6)
    assert set(p["threads"][0]) == {"tid", "name", "measured_s", "predicted_s", "gil_wait_s"}
    assert set(p["functions"][0]) >= {"name", "file", "line", "gil_wait_caused_s",
                                      "release_predicted_wall_s", "release_speedup"}
    w = cpu_trace.what_if(cpus=p["cpus"])
    assert p["predicted_wall_s"] == pytest.approx(w.predicted_wall_s, abs=2e-6)
    assert p["speedup"] == pytest.approx(w.speedup, rel=1e-4)
    assert [th["tid"] for th in p["threads"]] == [th.tid for th in w.threads]
    assert p["functions"][0]["name"] == w.functions[0].name == "spin"
    assert p["assumptions"] == list(w.assumptions)


def test_profile_text_ends_with_the_what_if_section(cpu_trace):
    text = cpu_trace.profile_text()
    head = f"What if there were no GIL ({os.cpu_count() or 1} CPUs"
    assert head in text
    lines = text.rstrip().splitlines()
    if (os.cpu_count() or 1) > 1:  # the CPUs' speed together, last
        assert lines.pop().startswith("  - Each CPU's speed with all busy (1.00 of one alone)")
    assert lines[-3].startswith("  - Work is CPU time")
    assert lines[-2].startswith("  - Free-threading's single-thread cost (")
    assert lines[-1].startswith("  - The tracer's cost per call event (")


def test_cli_profile_prints_the_what_if_section(tmp_path):
    script = tmp_path / "two.py"
    script.write_text(
        "import threading\n"
        "def spin(n):\n"
        "    x = 0\n"
        "    for i in range(n):\n"
        "        x += i\n"
        "ts = [threading.Thread(target=spin, args=(300000,)) for _ in range(2)]\n"
        "[t.start() for t in ts]\n"
        "[t.join() for t in ts]\n")
    p = subprocess.run([sys.executable, "-m", "giltracer", "profile", str(script)],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)  # (its page)
    assert p.returncode == 0, p.stderr
    assert "What if there were no GIL (" in p.stdout
    assert "  Assumptions:" in p.stdout


def test_without_gil_data_what_if_says_why():
    with giltracer.trace(gil=False) as t:
        spin(10_000)
    assert not t.result.gil_known
    with pytest.raises(ValueError, match="what_if needs GIL data"):
        t.what_if()
    assert json.loads(t.result.payload())["what_if"] is None
    assert "What if there were no GIL" not in t.profile_text()
