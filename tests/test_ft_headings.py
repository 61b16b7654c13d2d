"""The profile text's headings say what they show: on a free-threaded trace (the park
probe's: 3.14t, or GILTRACER_TEST_PARK=1 on a GIL build, tests/test_park.py) running /
parked and no "GIL wait" / "GIL held" heading, in Trace.profile_text, %gilprofile and
`giltracer profile`; a GIL trace keeps its GIL headings."""
import os
import subprocess
import sys
import textwrap

import pytest

import giltracer
from conftest import FREE_THREADED, needs_gil

GIL_HEADINGS = ("GIL wait", "GIL held", "by GIL")
FT_HEADINGS = ("Top functions by time parked:", "Top functions by time running:")

WORK = textwrap.dedent("""
    import threading
    lock = threading.Lock()
    def spin(n):
        x = 0
        for i in range(n):
            x += i
        return x
    def body():
        for _ in range(40):
            with lock:
                spin(2000)
    def work():
        ts = [threading.Thread(target=body, name=f"app-{i}") for i in range(3)]
        for t in ts: t.start()
        for t in ts: t.join()
""")


@pytest.fixture
def park(monkeypatch):
    monkeypatch.setenv("GILTRACER_TEST_PARK", "1")


def work_ns():
    ns = {}
    exec(WORK, ns)
    return ns


def traced(sort="wait"):
    ns = work_ns()
    with giltracer.trace() as t:
        ns["work"]()
    return t, t.profile_text(top=3, sort=sort)


def headings(text):
    """The profile's own lines (title and table titles), before the thread table."""
    return [ln for ln in text.splitlines() if ln.startswith(("Top functions", "Contention",
                                                              "GIL profile"))]


@pytest.mark.parametrize("sort", ["wait", "held", "caused"])
def test_profile_text_says_running_and_parked(park, sort):
    t, text = traced(sort)
    assert t.free_threaded
    heads = headings(text)
    assert not [h for h in heads if any(g in h for g in GIL_HEADINGS)], heads
    assert heads[0].startswith("Contention profile of"), heads
    want = {"wait": FT_HEADINGS, "held": FT_HEADINGS[::-1],
            "caused": ("Top functions by parked time caused:", FT_HEADINGS[1])}[sort]
    assert [h for h in heads if h.startswith("Top functions")] == list(want), heads


@needs_gil
def test_gil_profile_text_keeps_its_headings():
    t, text = traced()
    assert not t.free_threaded
    heads = headings(text)
    assert heads[0].startswith("GIL profile of"), heads
    assert "Top functions by GIL wait:" in heads and "Top functions by GIL held:" in heads, heads


def test_gilprofile_magic_says_running_and_parked(park, ip, outputs):
    ip.run_cell(WORK)
    ip.run_cell_magic("gilprofile", "--no-sched", "work()")
    (bundle,) = outputs
    heads = headings(bundle["text/plain"])
    assert not [h for h in heads if any(g in h for g in GIL_HEADINGS)], heads
    assert FT_HEADINGS[0] in heads and FT_HEADINGS[1] in heads, heads


@pytest.mark.parametrize("park_env", [True, False])
def test_cli_profile_headings(tmp_path, park_env):
    if not park_env and FREE_THREADED:
        pytest.skip("free-threaded build: no GIL")
    script = tmp_path / "w.py"
    script.write_text(WORK + "work()\n")
    env = dict(os.environ)
    env.pop("GILTRACER_TEST_PARK", None)
    if park_env:
        env["GILTRACER_TEST_PARK"] = "1"
    p = subprocess.run([sys.executable, "-m", "giltracer", "profile", "--no-sched", str(script)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=240, env=env)
    assert p.returncode == 0, p.stderr
    heads = headings(p.stdout)
    if park_env:
        assert not [h for h in heads if any(g in h for g in GIL_HEADINGS)], heads
        assert FT_HEADINGS[0] in heads and FT_HEADINGS[1] in heads, heads
    else:
        assert "Top functions by GIL wait:" in heads and "Top functions by GIL held:" in heads

