"""A followed child's exit (follow_children=True): its spooler thread is gone before the
interpreter finalizes. A daemon thread still waiting for the GIL then can leave a drop
request and exit inside take_gil; the main thread, at its next check (a finalizer's
Python code), drops the GIL and waits for a switch that never comes: the child hangs at
exit, and the parent joining it (a pool's shutdown) with it. Seen once on 3.9 in CI: the
pool test's spawn worker stuck in drop_gil (ceval_gil.h, COND_WAIT on switch_cond) under
_PyImport_Cleanup's collection, its only thread left."""

import json
import textwrap

import pytest

from conftest import FREE_THREADED, run_script

pytestmark = pytest.mark.skipif(FREE_THREADED, reason="no spooler: no checkpoints there")

# Runs in the child. Its check runs right after giltracer's exit handler (atexit runs
# the last registered first: the handler is registered again, after the check), then the
# interpreter finalizes.
CHILD = textwrap.dedent("""
    import atexit, os, sys
    import _giltracer_boot as boot

    def check(out=sys.argv[1], tid=boot._spooler_tid):
        alive = bool(tid) and os.path.exists("/proc/self/task/%d" % tid)
        with open(out, "w") as f:
            f.write("alive" if alive else "gone")

    handlers = [f for f in (getattr(boot, "_end_at_exit", None), boot.end) if f]
    for f in handlers:
        atexit.unregister(f)
    atexit.register(check)
    for f in handlers:
        atexit.register(f)
    s = 0
    for i in range(200_000):  # (a little work, so the spooler has checkpointed)
        s += i
    print("traced" if boot._session is not None and boot._spooler_tid else "untraced")
""")

SCRIPT = textwrap.dedent("""
    import json, os, subprocess, sys
    import giltracer
    here = os.path.dirname(os.path.abspath(__file__))
    outs, lines = [], []
    with giltracer.trace(follow_children=True) as t:
        for k in range(int(sys.argv[1])):
            out = os.path.join(here, "state.%d" % k)
            p = subprocess.run([sys.executable, os.path.join(here, "child.py"), out],
                               capture_output=True, text=True, timeout=60)
            lines.append(p.stdout.strip())
            outs.append(open(out).read() if os.path.exists(out) else None)
    print(json.dumps(dict(outs=outs, lines=lines, children=len(t.processes) - 1)))
""")


def test_a_followed_childs_spooler_is_gone_before_the_interpreter_finalizes(tmp_path):
    (tmp_path / "child.py").write_text(CHILD)
    n = 3
    facts, _ = run_script(tmp_path, SCRIPT, str(n))
    assert facts["lines"] == ["traced"] * n, facts
    assert facts["children"] == n, facts
    # Before the fix the spooler was often still alive there (waiting for the GIL).
    assert facts["outs"] == ["gone"] * n, facts
