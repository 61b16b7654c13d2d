"""Folding child processes in the viewer, in headless Chromium: a pool of many
short tasks does not make one half-empty group of lanes per worker: the idle worker
processes (each held its GIL under 2 % of the trace, the text table's rule) fold into the
one expandable row with the background threads, and a busy worker keeps its lanes."""

import json
import os
import shutil
import sysconfig
import tempfile
import textwrap

import pytest

from conftest import run_script
from test_children_folding import POOL
from test_profile_tab import CHROMIUM, Page

pytestmark = [
    pytest.mark.skipif(not CHROMIUM, reason="no chromium (apt-get install chromium)"),
    # A free-threaded build's "held" is the park probe's run time (no GIL): a worker's
    # start-up alone may pass the threshold there.
    pytest.mark.skipif(bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
                       reason="idle by GIL held time: a GIL build's"),
]

SCRIPT = textwrap.dedent(POOL + """
        held = {p.pid: sum(s.held_ns for s in t.summary(process=p.pid, all_threads=True))
                for p in t.processes if p.child}
        tids = {p.pid: list(p.tids) for p in t.processes if p.child}
        path = t.save(sys.argv[1])
        print(json.dumps(dict(held=held, tids=tids, wall=t.result.t1_ns - t.result.t0_ns,
                              path=path)))
""")


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fold")
    facts, _ = run_script(tmp, SCRIPT, str(tmp / "pool.html"))
    d = tempfile.mkdtemp(prefix="giltracer-fold-")
    p = Page("file://" + facts["path"], os.path.join(d, "chromium"))
    yield facts, p
    p.close()
    shutil.rmtree(d, ignore_errors=True)


def test_idle_worker_processes_fold_into_one_row(page):
    facts, p = page
    held, wall = facts["held"], facts["wall"]
    idle = sorted(int(pid) for pid, h in held.items() if h < 0.02 * wall)
    busy = [int(pid) for pid, h in held.items() if h >= 0.02 * wall]
    # The busy worker, and maybe a pool worker or two: on a loaded machine a worker that
    # is runnable but not running holds its GIL all the while (tests/test_children_folding.py).
    most = int(max(held, key=held.get))
    assert len(held) == 7 and most in busy and len(busy) <= 3 and idle, (held, wall)
    lanes = {ln["tid"]: ln for ln in p.js("gtViewer.lanes()")}
    # Every lane of an idle worker is folded out of sight; the busy worker's main lane is shown.
    for pid in idle:
        for tid in facts["tids"][str(pid)]:
            assert lanes[tid]["idle"] and lanes[tid]["hidden"], (pid, lanes[tid])
    assert not lanes[most]["idle"] and not lanes[most]["hidden"], lanes[most]
    # One row says how many and which: no group of lanes each.
    row = p.js("document.getElementById('gt-idlerow').textContent")
    assert f"{len(idle)} idle worker process" in row, row
    for pid in idle[:8]:
        assert str(pid) in row, (pid, row)
    assert not p.errors, p.errors


def test_the_row_unfolds_them(page):
    facts, p = page
    idle = {tid for pid, h in facts["held"].items() if h < 0.02 * facts["wall"]
            for tid in facts["tids"][pid]}
    p.js("document.getElementById('gt-idlerow').click()")
    lanes = [ln for ln in p.js("gtViewer.lanes()") if ln["tid"] in idle]
    assert lanes and all(not ln["hidden"] for ln in lanes), lanes
    p.js("document.getElementById('gt-idlerow').click()")
    assert all(ln["hidden"] for ln in p.js("gtViewer.lanes()") if ln["tid"] in idle)
    assert not p.errors, p.errors
