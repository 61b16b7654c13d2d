"""Folding: a process pool of many short tasks does not make one half-empty
block per worker in the text table: idle worker processes fold into one line, like
background threads, and a busy one keeps its block."""

import sysconfig
import textwrap

from conftest import run_script

import pytest

# A free-threaded build's "held" column is the park probe's run time (no GIL): a worker's
# start-up alone may pass the threshold there.
pytestmark = pytest.mark.skipif(bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
                                reason="idle by GIL held time: a GIL build's")

# Six pool workers that each run a few tiny tasks (idle), then one busy worker; a script's
# end (what it prints) follows. The viewer's twin, tests/browser/test_children_fold_view.py,
# runs the same pool.
POOL = """
    import json, multiprocessing as mp, sys
    from concurrent.futures import ProcessPoolExecutor
    import giltracer

    def tiny(i):
        return i * i

    def busy(n):
        s = 0
        for i in range(n):
            s += i * i
        return s

    if __name__ == "__main__":
        ctx = mp.get_context("fork")
        with giltracer.trace(follow_children=True) as t:
            with ProcessPoolExecutor(6, mp_context=ctx) as ex:
                list(ex.map(tiny, range(64)))
            with ProcessPoolExecutor(1, mp_context=ctx) as ex:
                ex.submit(busy, 15_000_000).result()
"""

SCRIPT = textwrap.dedent(POOL + """
        held = {p.pid: sum(s.held_pct / 100 * s.wall_ns for s in t.summary(process=p.pid))
                for p in t.processes if p.child}
        print(json.dumps(dict(held=held, t0=t.result.t0_ns, t1=t.result.t1_ns,
                              text=t.summary_text())))
""")


def test_a_pool_of_short_tasks_folds_its_idle_workers_into_one_line(tmp_path):
    facts, _ = run_script(tmp_path, SCRIPT)
    text, held = facts["text"], facts["held"]
    assert len(held) == 7, held  # six pool workers and the busy one
    wall = facts["t1"] - facts["t0"]
    idle = [int(pid) for pid, h in held.items() if h < 0.02 * wall]
    busy = [int(pid) for pid, h in held.items() if h >= 0.02 * wall]
    # The busy worker, and maybe a pool worker or two: on a loaded machine a worker that
    # is runnable but not running holds its GIL all the while (a CI run: 71 ms of 1.9 s).
    most = max(held, key=held.get)
    assert int(most) in busy and 1 <= len(idle) and len(busy) <= 3, (held, wall)
    # One line for the idle ones, no block each; the busy worker keeps its block.
    line = [ln for ln in text.splitlines() if "idle worker process" in ln]
    assert len(line) == 1, text
    assert line[0].lstrip().startswith(f"{len(idle)} idle worker process"), line
    for pid in idle:
        assert f" pid {pid} (child process" not in text, text
        assert f" {pid}" in line[0] or "..." in line[0], line
    for pid in busy:  # each keeps its block
        assert f" pid {pid} (child process" in text, text
