"""The budget and child processes: a followed child's events past max_events
(the budget it shares with its parent), which it keeps in its own aggregates, reach the
parent's trace as aggregated (its spool carries them), not lost without a word."""

import textwrap

from conftest import run_script

SCRIPT = textwrap.dedent("""
    import json, subprocess, sys
    import giltracer

    CHILD = '''
    def f(i):
        return i
    for i in range(50_000):
        f(i)
    '''

    with giltracer.trace(follow_children=True, max_events=2000) as t:
        subprocess.run([sys.executable, "-c", CHILD], check=True)
    r = t.result
    print(json.dumps(dict(procs=len(t.processes), dropped=r.dropped_events,
                          aggregated=r.calls_aggregated)))
""")


def test_a_childs_events_past_max_events_are_kept_as_its_aggregates(tmp_path):
    facts, p = run_script(tmp_path, SCRIPT)
    assert facts["procs"] == 2, facts
    # 50,000 calls of f (a call and a return each) against 2,000 kept by both processes.
    assert facts["aggregated"] >= 98_000, facts
    assert facts["dropped"] == 0, facts
    assert "max_events" in p.stderr, p.stderr  # the budget notice says so
    assert "child process" in p.stderr, p.stderr  # ... and that the child shared it
