"""The GIL-split profile: ground truth on known workloads, the API, the CLI."""

import hashlib
import re
import subprocess
import sys
import threading
import time

import pytest

import giltracer
import giltracer._core
import pagedata
from conftest import needs_gil
from workloads import pin_to_own_cpu, run_threads

pytestmark = needs_gil  # the profile splits time by GIL state

_INFO = giltracer._core.build_info()
BACKENDS = [
    "hooks",
    pytest.param("bpf", marks=pytest.mark.skipif(
        not _INFO["bpf_available"], reason=f"bpf backend unavailable: {_INFO['bpf_why']}")),
]
BIG = bytes(64 << 20)  # hashed with the GIL released (allocated once, outside the traces)


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def fib_for(index, seconds, barrier):
    """Recursive CPU work on its own CPU, started together with its peer (a barrier)."""
    pin_to_own_cpu(index)
    barrier.wait()
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        fib(14)


def nap_and_hash():
    time.sleep(0.25)
    time.sleep(0.25)
    hashlib.sha256(BIG).hexdigest()


def fib_nodes(root):
    """The outermost fib nodes (called by fib_for): each holds its whole recursion."""
    return [c for n in root.find("fib_for") for c in n.children if c.name == "fib"]


def waiting_share(root):
    nodes = fib_nodes(root)
    total = sum(n.total_ns for n in nodes)
    return sum(n.states["waiting"] for n in nodes) / total if total else 0.0


def released_share(root, match):
    nodes = [n for n in root.walk() if match(n.name)]
    total = sum(n.total_ns for n in nodes)
    return sum(n.states["released"] for n in nodes) / total if total else 0.0


def traced_workload(backend):
    barrier = threading.Barrier(2)
    with giltracer.trace(backend=backend) as t:
        run_threads([lambda: fib_for(0, 0.6, barrier), lambda: fib_for(1, 0.6, barrier),
                     nap_and_hash], names=["fib-a", "fib-b", "napper"])
    return t


@pytest.fixture(scope="module", params=BACKENDS)
def workload(request):
    # A loaded machine can starve one CPU-bound thread for a while, and the GIL itself
    # is unfair: a thread back from time.sleep can lose the hand-off to the fib threads
    # several switch intervals in a row (on a quiet machine 1 run in 4 waits over 10 % of
    # its sleep: 50-140 ms; the same with the build before 8-byte records). Measure again
    # (up to eight times) rather than widen what the tests accept.
    for _ in range(8):
        t = traced_workload(request.param)
        root = t.profile()
        if (0.35 <= waiting_share(root) <= 0.65
                and released_share(root, lambda name: name == "time.sleep") >= 0.9
                and released_share(root, lambda name: "sha256" in name) >= 0.8):
            break
    return t


def test_recursive_function_waits_about_half(workload):
    root = workload.profile()
    nodes = fib_nodes(root)
    assert nodes and sum(n.calls for n in nodes) > 100
    assert 0.35 <= waiting_share(root) <= 0.65, [(n.total_ns, n.states) for n in nodes]
    for thread in ("fib-a", "fib-b"):  # and per thread
        assert fib_nodes(workload.profile(thread))


def test_sleep_is_released(workload):
    (sleep,) = [n for n in workload.profile("napper").walk() if n.name == "time.sleep"]
    assert sleep.calls == 2 and sleep.is_c
    assert sleep.states["released"] >= 0.9 * sleep.total_ns, sleep.states


def test_sha256_of_64mb_is_released(workload):
    nodes = [n for n in workload.profile("napper").walk() if "sha256" in n.name and n.is_c]
    assert nodes, [n.name for n in workload.profile("napper").walk()]
    longest = max(nodes, key=lambda n: n.total_ns)
    assert longest.total_ns > 10e6  # 64 MB take a while
    assert longest.states["released"] >= 0.8 * longest.total_ns, longest.states


def check_tree(node):
    assert sum(node.states.values()) == node.total_ns
    assert sum(node.self_states.values()) == node.self_ns
    assert node.total_ns == node.self_ns + sum(c.total_ns for c in node.children)
    for state, ns in node.states.items():
        assert ns == node.self_states[state] + sum(c.states[state] for c in node.children)
    for c in node.children:
        check_tree(c)


def test_states_add_up_in_every_node(workload):
    trees = [workload.profile()] + [workload.profile(t.tid) for t in workload.threads]
    for root in trees:
        for node in root.walk():  # within 1 % (they are exact: every slice has one state)
            assert abs(sum(node.states.values()) - node.total_ns) <= 0.01 * node.total_ns
        check_tree(root)
    merged = trees[0]  # the cell's threads: background ones are left out of the merged tree
    cell = [workload.profile(t.tid) for t in workload.threads if not t.background]
    assert merged.total_ns == sum(t.total_ns for t in cell)
    assert workload.profile(all_threads=True).total_ns == sum(t.total_ns for t in trees[1:])
    by_name = {s.name: s for s in workload.summary(all_threads=True)}
    for t in workload.threads:  # a thread's root is its traced life, split like its summary
        root = workload.profile(t.tid)
        s = by_name[t.name]
        assert root.total_ns == s.wall_ns
        assert root.states["waiting"] == s.wait_ns
        assert root.states["released"] == s.released_ns
        assert root.states["running"] + root.states["held_off_cpu"] == s.held_ns


def test_function_rows(workload):
    rows = workload.functions(sort="total")
    assert [r.total_ns for r in rows] == sorted((r.total_ns for r in rows), reverse=True)
    by_self = workload.functions()  # the default: as the viewer's Top functions
    assert [r.self_ns for r in by_self] == sorted((r.self_ns for r in by_self), reverse=True)
    fib_row = next(r for r in rows if r.name == "fib")
    # recursion counted once: the row's total is the outermost calls' total
    assert fib_row.total_ns == sum(n.total_ns for n in fib_nodes(workload.profile()))
    assert fib_row.calls > sum(n.calls for n in fib_nodes(workload.profile()))
    caused = sum(b.wait_ns for b in workload.blame() if b.function == "fib")
    assert fib_row.gil_wait_caused_ns == caused > 0
    by_wait = workload.functions(sort="wait")
    assert by_wait[0].self_states["waiting"] >= by_wait[1].self_states["waiting"]
    a = workload.functions("fib-a")
    assert sum(r.gil_wait_caused_ns for r in a) <= sum(r.gil_wait_caused_ns for r in rows)
    with pytest.raises(ValueError, match="sort"):
        workload.functions(sort="bogus")
    with pytest.raises(KeyError):
        workload.profile(thread="no-such-thread")


def test_profile_text(workload):
    text = workload.profile_text(top=3, sort="caused")
    assert "Top functions by GIL wait caused:" in text and "Top functions by GIL held:" in text
    assert re.search(r"^  fib +\S+:\d+ +\d+", text, re.M)
    assert "Top GIL waits" in text and "fib-a" in text  # the blame rows and thread table


def test_html_opens_on_profile_tab_and_carries_the_tree(workload, tmp_path):
    page = (tmp_path / "p.html")
    workload.save(page, tab="profile")
    html = page.read_text(encoding="utf-8")
    payload = pagedata.payload(html)
    assert payload["view"] == "profile"
    for th in payload["threads"]:
        prof = th["profile"]
        assert prof["parent"][0] == -1 and len(prof["func"]) == len(prof["run"])
        total = sum(prof[k][i] for k in ("run", "hoff", "wait", "rel", "unk")
                    for i in range(len(prof["func"])))
        assert total == th["summary"]["wall_ns"]  # pruned nodes fold into their parents
    assert pagedata.profile_bytes(html) <= 0.05 * len(html)  # the profile adds at most 5 % to the page
    workload.save(tmp_path / "t.html")
    assert "view" not in pagedata.data((tmp_path / "t.html").read_text(encoding="utf-8"))
    with pytest.raises(ValueError, match="tab"):
        workload.save(tmp_path / "x.html", tab="flame")


def test_no_gil_probe_means_unknown_state():
    with giltracer.trace(gil=False) as t:
        fib(12)
    root = t.profile()
    assert root.states["unknown"] == root.total_ns > 0
    (node,) = [n for n in root.find("fib") if n.calls == 1]
    assert node.states["unknown"] == node.total_ns


# ---------------------------------------------------------------- the CLI
def run_cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "giltracer", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120)


SCRIPT = """
import threading, time
def spin():
    t = time.perf_counter() + 0.2
    while time.perf_counter() < t:
        pass
ts = [threading.Thread(target=spin, name=f"s{i}") for i in range(2)]
for t in ts: t.start()
for t in ts: t.join()
time.sleep(0.05)
"""


def test_cli_profile_prints_profile_and_writes_profile_tab(tmp_path):
    script = tmp_path / "spinner.py"
    script.write_text(SCRIPT)
    p = run_cli("profile", "--top", "3", "--no-sched", str(script), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "Top functions by GIL wait:" in p.stdout and "Top functions by GIL held:" in p.stdout
    assert re.search(r"^  spin +spinner\.py:3", p.stdout, re.M), p.stdout
    out = tmp_path / "spinner.giltracer.html"
    assert f"wrote {out.name}" in p.stderr
    assert pagedata.data(out.read_text(encoding="utf-8"))["view"] == "profile"


def test_cli_profile_module_and_options(tmp_path):
    (tmp_path / "spinmod.py").write_text(SCRIPT)
    p = run_cli("profile", "-q", "--sort", "held", "-o", "m.html", "-m", "spinmod", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "m.html" and (tmp_path / "m.html").exists()
    p = run_cli("profile", "--sort", "bogus", "x.py", cwd=tmp_path)
    assert p.returncode == 2 and "--sort" in p.stderr and "caused" in p.stderr
    p = run_cli("profile", "--top", "0", "spinmod.py", cwd=tmp_path)
    assert p.returncode == 2 and "--top must be a positive number" in p.stderr
    p = run_cli("-o", "plain.html", "spinmod.py", cwd=tmp_path)  # the plain command is unchanged
    assert p.returncode == 0 and "Top functions" not in p.stdout + p.stderr
    assert "view" not in pagedata.data((tmp_path / "plain.html").read_text(encoding="utf-8"))
