"""The tracer's own cost per call event (the what-if model removes it from the
traced work: ``giltracer.whatif_cost.TRACER_EVENT_NS``).

A call event is a call's start or its end (a span has two). On the workloads of
bench/workloads.py that run in one thread (fib, method, builtins, mixed: Python calls, C
calls, and a json/re mix), each round in a fresh process: per workload, a batch of calls of
about 0.1 s untraced and the same batch inside ``giltracer.trace(backend="hooks", **opts)``
(one session per batch, the session's start and stop outside the timing), each the best of
3 batches in CPU time (preemption by other load is not counted); the cost is (traced -
untraced) / the call events the batch recorded. Two settings: the batch in one thread
(thread CPU time), and the same batch in each of two threads that share the GIL (the
process's CPU time), which is the setting a what-if prediction is made in: there an event
costs more (each GIL switch brings a thread back to caches the other filled; measured
below). Per option set (the defaults: functions and C calls; ``c_calls=False``) and
setting: per workload the median over the rounds, and the cost the median over the
workloads, with the range of the workloads' medians.

    python bench/tracer_event_cost.py [--rounds 5] [--out bench/results]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = ("fib", "method", "builtins", "mixed")
OPTION_SETS = {"c_calls": {}, "functions": {"c_calls": False}}
MIN_EVENTS = 10_000  # fewer in a batch: nothing to measure
THREADS = {"1 thread": 1, "2 threads": 2}  # the settings: threads sharing the GIL


def worker():
    """One round: per option set, setting and workload, ns per call event."""
    sys.path.insert(0, HERE)
    import giltracer
    import workloads as w
    from giltracer._calibrate_worker import batch  # the CPU time of calls in 1 or more threads
    out = {}
    for name in WORKLOADS:
        fn, setup = w.WORKLOADS[name]
        if setup:
            setup()
        t0 = time.perf_counter()
        fn()  # warm-up; sizes the batch to about 0.1 s
        reps = max(1, round(0.1 / max(time.perf_counter() - t0, 1e-6)))
        for kind, opts in OPTION_SETS.items():
            with giltracer.trace(backend="hooks", sched=False, max_events=50_000_000, **opts):
                fn()  # the tracer's warm-up
            for setting, threads in THREADS.items():
                n = max(1, reps // threads)
                untraced, traced, events = [], [], 0
                for _ in range(3):
                    untraced.append(batch(fn, n, threads))
                    with giltracer.trace(backend="hooks", sched=False, max_events=50_000_000,
                                         **opts) as t:
                        traced.append(batch(fn, n, threads))
                    events = t.event_count
                out.setdefault(setting, {}).setdefault(kind, {})[name] = {
                    "untraced_s": min(untraced), "traced_s": min(traced), "events": events,
                    "event_ns": (min(traced) - min(untraced)) * 1e9 / max(events, 1)}
    print(json.dumps({"python": sys.version.split()[0], "rounds": out}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out")
    ap.add_argument("--worker", action="store_true")
    a = ap.parse_args()
    if a.worker:
        worker()
        return 0
    rounds, version = [], "?"
    for k in range(a.rounds):
        print(f"tracer_event_cost: round {k + 1}/{a.rounds} ...", file=sys.stderr, flush=True)
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker"],
                           stdout=subprocess.PIPE, text=True, check=True)
        res = json.loads(r.stdout)
        version = res["python"]
        rounds.append(res["rounds"])
    api = "sys.monitoring" if sys.version_info >= (3, 12) else "setprofile"
    lines = [f"# The tracer's cost per call event ({api}, Python {version})", "",
             f"- {a.rounds} rounds (fresh processes); per workload the best of 3 batches of about "
             "0.1 s, CPU time, traced (backend hooks) minus untraced, over the call events "
             "recorded (2 per call); ns per event: median over the rounds [min, max]",
             "- 1 thread: the batch in one thread; 2 threads: half of it in each of two threads "
             "sharing the GIL (the what-if's setting; `whatif_cost.TRACER_EVENT_NS` takes this)",
             f"- load at end: {os.getloadavg()[0]:.1f}", ""]
    result = {"python": version, "api": api, "rounds": rounds, "cost": {}}
    head = "| setting | options | " + " | ".join(WORKLOADS) + " | cost (median of workloads) |"
    lines += [head, "|" + "---|" * (len(WORKLOADS) + 3)]
    for setting in THREADS:
        for kind in OPTION_SETS:
            meds, cells = [], []
            for name in WORKLOADS:
                xs = [r[setting][kind][name]["event_ns"] for r in rounds
                      if r[setting][kind][name]["events"] >= MIN_EVENTS]
                if not xs:  # (builtins without C calls: no call to trace)
                    cells.append("-")
                    continue
                meds.append(statistics.median(xs))
                cells.append(f"{meds[-1]:.0f} [{min(xs):.0f}, {max(xs):.0f}]")
            cost = statistics.median(meds)
            result["cost"].setdefault(setting, {})[kind] = {"event_ns": cost,
                                                            "range": [min(meds), max(meds)]}
            lines.append(f"| {setting} | {kind} | " + " | ".join(cells)
                         + f" | {cost:.0f} [{min(meds):.0f}, {max(meds):.0f}] |")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        base = os.path.join(a.out, f"tracer-event-cost-{version}")
        with open(base + ".md", "w") as fh:
            fh.write(text)
        with open(base + ".json", "w") as fh:
            json.dump(result, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
