"""The free-threading cost model of the what-if prediction: the single-thread slowdown of a free-threaded
build (3.14t) against the same version with the GIL (3.14), on the bench's single-thread
workloads (bench/workloads.py: fib, method, builtins, mixed, churn1, and _spin: the
what-if bench's CPU-bound loop).

Untraced. Each round runs every workload in a fresh process of each interpreter (per
workload: a batch of calls of about 0.15 s, the best of 3 batches, per call, in the
thread's CPU time: on a shared machine, time preempted by other load would otherwise blur
the ratio),
interpreters alternating within the round (so load on the machine hits both alike); per
workload: the median of the rounds' times on each, and the ratio 3.14t / 3.14 of the
medians, with an interval: the lowest and highest ratio of one round's times. The factor:
per round, the geometric mean over the workloads of that round's ratios; their median over
the rounds, with their range as the interval.

    python bench/ft_cost.py --gil /usr/bin/python3.14 --ft /opt/python3.14t/bin/python3.14t \
        [--rounds 5] [--out bench/results]
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = ("fib", "method", "builtins", "mixed", "churn1", "spin")


def worker():
    """In the measured interpreter: each workload once (after one warm-up), times in s."""
    sys.path.insert(0, HERE)
    import workloads as w
    runs = {name: w.WORKLOADS[name] for name in WORKLOADS if name in w.WORKLOADS}
    runs["spin"] = (lambda: w._spin(w.CPU_ITERS), None)
    out = {}
    for name, (fn, setup) in runs.items():
        if setup:
            setup()
        t0 = time.perf_counter()
        fn()  # warm-up; sizes the batch to about 0.15 s
        reps = max(1, round(0.15 / max(time.perf_counter() - t0, 1e-6)))
        best = float("inf")
        for _ in range(3):  # best of 3 batches: the least disturbed by other load
            t0 = time.thread_time()  # CPU time: preemption by other load is not counted
            for _ in range(reps):
                fn()
            best = min(best, (time.thread_time() - t0) / reps)
        out[name] = best
    worker_result(out)


def worker_result(times):
    """What a worker process prints: its times, its version, whether it ran with the GIL."""
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    print(json.dumps({"times": times, "version": sys.version.split()[0], "gil": gil}))


def run(interp, script):
    r = subprocess.run([interp, os.path.abspath(script), "--worker"], capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def parse_args():
    """The options of a GIL-vs-free-threaded cost bench (this one and handoff_cost.py)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--gil", default="/usr/bin/python3.14")
    ap.add_argument("--ft", default="/opt/python3.14t/bin/python3.14t")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out")
    return ap.parse_args()


def alternating_rounds(script, a):
    """`a.rounds` rounds, each a fresh `script --worker` process on each interpreter, their
    order alternating (so load on the machine hits both alike). Returns ({"gil": [times of
    each round], "ft": [...]}, {side: (version, ran with the GIL)})."""
    rounds = {"gil": [], "ft": []}
    info = {}
    for k in range(a.rounds):
        for side in (("gil", "ft") if k % 2 == 0 else ("ft", "gil")):
            r = run(a.gil if side == "gil" else a.ft, script)
            rounds[side].append(r["times"])
            info[side] = (r["version"], r["gil"])
        print(f"round {k + 1}/{a.rounds} done", file=sys.stderr)
    assert info["gil"][1] and not info["ft"][1], info
    return rounds, info


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def main():
    a = parse_args()
    if a.worker:
        return worker()
    rounds, info = alternating_rounds(__file__, a)
    rows, ratios = [], []
    for name in WORKLOADS:
        g = [r[name] for r in rounds["gil"]]
        f = [r[name] for r in rounds["ft"]]
        per = sorted(fi / gi for fi, gi in zip(f, g))
        ratio = statistics.median(f) / statistics.median(g)
        ratios.append(ratio)
        rows.append((name, statistics.median(g), min(g), max(g), statistics.median(f), min(f), max(f), ratio, per[0], per[-1]))
    # per round: the geometric mean over workloads of that round's ratios (the two
    # interpreters ran back to back); the factor is their median, the interval their range
    per_round = sorted(geomean([rounds["ft"][k][n] / rounds["gil"][k][n] for n in WORKLOADS]) for k in range(a.rounds))
    factor, lo, hi = statistics.median(per_round), per_round[0], per_round[-1]
    lines = [f"# Free-threading single-thread cost: {info['ft'][0]}t vs {info['gil'][0]} (GIL)", "",
             f"- untraced, one thread; {a.rounds} rounds, each a fresh process per interpreter (per workload: "
             f"best of 3 batches of about 0.15 s, per call, thread CPU time), "
             f"interpreters alternating; medians, [min, max] over rounds; CPUs: {os.cpu_count()}; "
             f"load at end: {os.getloadavg()[0]:.1f}",
             "- ratio = median 3.14t / median 3.14; its interval: lowest and highest ratio of one round", "",
             "| workload | 3.14 s (median [min, max]) | 3.14t s (median [min, max]) | ratio | interval |",
             "|---|---|---|---|---|"]
    for n, gm, gl, gh, fm, fl, fh, r, rl, rh in rows:
        lines.append(f"| {n} | {gm:.4f} [{gl:.4f}, {gh:.4f}] | {fm:.4f} [{fl:.4f}, {fh:.4f}] | {r:.3f} | [{rl:.3f}, {rh:.3f}] |")
    lines += ["", f"Geometric mean of the workloads' ratios: {geomean(ratios):.3f}.",
              f"FT_SINGLE_THREAD_FACTOR (median over rounds of each round's geometric mean of ratios, "
              f"[min, max] over rounds): **{factor:.3f}** [{lo:.3f}, {hi:.3f}]"]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        base = os.path.join(a.out, f"ft-cost-{info['gil'][0]}")
        with open(base + ".md", "w") as fh:
            fh.write(text)
        with open(base + ".json", "w") as fh:
            json.dump({"gil": info["gil"][0], "ft": info["ft"][0], "rounds": rounds,
                       "factor": factor, "interval": [lo, hi], "per_round": per_round,
                       "workloads": {r[0]: {"ratio": r[7], "interval": [r[8], r[9]]} for r in rows}}, fh, indent=1)


if __name__ == "__main__":
    main()
