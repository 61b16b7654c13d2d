"""One budget across processes: the parent and its followed children draw
max_events from one shared counter in the session folder, so a pool's events kept stay
within the budget however many workers it has; past it each child keeps its aggregates
(GIL and OS totals, its call tree) and carries them to the parent, whose summary and
Profile cover the children's whole runs."""

import textwrap

from conftest import needs_gil, run_script

BUDGET = 20_000

SCRIPT = textwrap.dedent("""
    import json, multiprocessing as mp, os, sys, time
    from concurrent.futures import ProcessPoolExecutor
    import giltracer

    def step(i):
        return i * i

    def busy(n):
        w0 = time.perf_counter()
        s = 0
        for i in range(n):
            s += step(i)
            if i % 100 == 0:
                os.stat(".")  # lets go of the GIL: GIL events past the budget as well
        return os.getpid(), n, time.perf_counter() - w0

    if __name__ == "__main__":
        ctx = mp.get_context(sys.argv[1])
        with giltracer.trace(follow_children=True, max_events=int(sys.argv[2])) as t:
            with ProcessPoolExecutor(4, mp_context=ctx) as ex:
                done = list(ex.map(busy, [300_000] * 8))
        per = {}
        for pid, n, wall in done:
            c = per.setdefault(pid, dict(calls=0, busy=0.0))
            c["calls"] += n
            c["busy"] += wall
        kids = {}
        for p in t.processes:
            if p.pid not in per:
                continue
            rows = t.summary(process=p.pid)
            main = [r for r in rows if r.held_ns == max(x.held_ns for x in rows)][0]
            prof = t.profile(thread=main.tid)
            kids[p.pid] = dict(per[p.pid], held=main.held_ns / 1e9, life=main.wall_ns / 1e9,
                               step_calls=sum(n.calls for n in prof.find("step")))
        r = t.result
        print(json.dumps(dict(kids=kids, kept=r.event_count, aggregated=r.calls_aggregated,
                              gil_aggregated=r.gil_aggregated,
                              dropped=r.dropped_events, notice=t.budget_notice() or "")))
""")


def check(tmp_path, method):
    facts, _ = run_script(tmp_path, SCRIPT, method, str(BUDGET))
    kids = facts["kids"]
    assert len(kids) >= 2, facts  # a pool of 4 ran 8 tasks: most workers took some
    assert sum(k["calls"] for k in kids.values()) == 8 * 300_000, facts
    # The call events kept by all five processes together: within the one budget. No
    # slack: every grant comes out of the shared counter (a grant unused is not kept).
    assert facts["kept"] <= BUDGET, facts
    assert facts["aggregated"] >= 2 * 8 * 300_000 - BUDGET, facts
    for pid, k in kids.items():
        # The child's call tree past the budget counts every call it made...
        assert k["step_calls"] == k["calls"], (pid, k)
        # ... and its GIL account covers its whole run: a CPU-bound worker holds its GIL
        # while its tasks run (preempted or not: this machine is shared), but for the
        # moments of os.stat, most of them past the budget.
        assert 0.6 * k["busy"] <= k["held"] <= k["life"], (pid, k)
    assert facts["gil_aggregated"] > 0, facts
    assert "child process" in facts["notice"], facts["notice"]


@needs_gil
def test_a_fork_pool_shares_one_budget_and_carries_its_aggregates(tmp_path):
    check(tmp_path, "fork")


@needs_gil
def test_a_spawn_pool_shares_one_budget_and_carries_its_aggregates(tmp_path):
    check(tmp_path, "spawn")
