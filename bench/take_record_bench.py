"""Where the hooks record a take of the GIL (make bench-take-record): at take_gil's signal
of switch_cond, under the GIL's mutex (GILTRACER_TAKE_RECORD=signal), or just after that
mutex is unlocked (the default). churn2, two threads handing the GIL over at every call,
is where the difference shows: a waiter woken by the last drop needs the mutex at once.

  python bench/take_record_bench.py [--blocks N] [--out bench/results]

One process, shuffled blocks of four churn2 loops: two untraced (u1, u2), one GIL-only
trace per placement (functions=False, sched=False: the GIL probe alone). A block's ratio
is its traced loop's CPU time over the mean of its untraced ones; the verdict is the
median over the blocks with a 95 % bootstrap interval; u2 / u1 (A/A) shows the noise
left. Context switches (voluntary + involuntary, the whole process) per loop beside.
Writes <out>/take-record-<python-version>.md and .json.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import workloads  # noqa: E402
from sample_bench import median_ci  # noqa: E402

LOOPS = ("u1", "u2", "signal", "unlock")


def switches() -> int:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_nvcsw + ru.ru_nivcsw


def loop(kind: str):
    import giltracer
    t = None
    if kind in ("signal", "unlock"):
        os.environ["GILTRACER_TAKE_RECORD"] = kind  # read at the session's start
        t = giltracer.trace(functions=False, sched=False, backend="hooks")
        t.start()
    c0, s0 = time.process_time(), switches()
    workloads.churn2()
    cpu, sw = time.process_time() - c0, switches() - s0
    if t is not None:
        t.stop()
    return cpu, sw


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=40)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    a = ap.parse_args()
    import giltracer._core as core
    info = core.probe_info()
    if not info["slots_patched"] or info["take_record"] != "unlock":
        print(f"the hooks cannot record at the unlock here: {info}", file=sys.stderr)
        return 1
    workloads.churn2()  # warm-up
    rnd = random.Random(1)
    blocks = []
    for b in range(a.blocks):
        order = list(LOOPS)
        rnd.shuffle(order)
        blocks.append({k: loop(k) for k in order})
        print(f"block {b + 1}/{a.blocks}", file=sys.stderr, end="\r")
    os.environ.pop("GILTRACER_TAKE_RECORD", None)
    ver = platform.python_version()
    rows, verdict = [], {}
    for k in LOOPS:
        ratios = [blk[k][0] / ((blk["u1"][0] + blk["u2"][0]) / 2) for blk in blocks] \
            if k != "u2" else [blk["u2"][0] / blk["u1"][0] for blk in blocks]
        med, lo, hi = median_ci(ratios)
        sw = statistics.median(blk[k][1] for blk in blocks)
        cpu = statistics.median(blk[k][0] for blk in blocks)
        verdict[k] = dict(ratio=med, lo=lo, hi=hi, switches=sw, cpu=cpu)
        label = {"u1": "untraced (u1)", "u2": "untraced (u2): A/A = u2 / u1",
                 "signal": "take recorded at the signal, under the mutex",
                 "unlock": "take recorded after the unlock (default)"}[k]
        ratio = "1 (the base)" if k == "u1" else f"**{med:.3f}** [{lo:.3f}, {hi:.3f}]"
        rows.append(f"| {label} | {cpu:.3f} | {ratio} | {sw:,.0f} |")
    load = os.getloadavg()[0]
    lines = [f"# Where the hooks record a take: churn2, GIL probe alone (Python {ver})", "",
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, "
             f"load at end {load:.1f}; {a.blocks} blocks of four churn2 loops in shuffled order "
             f"(two threads × {workloads.CHURN_ITERS:,} `os.fstat(0)`), one process. Ratio = "
             "median over the blocks of the loop's CPU time / the mean of its block's two "
             "untraced loops [95 % bootstrap interval]. Switches: the process's context "
             "switches in the loop, median.", "",
             "| loop | CPU s (median) | ratio to untraced | context switches |",
             "|---|---|---|---|", *rows, "",
             f"`python bench/take_record_bench.py --blocks {a.blocks}`", ""]
    os.makedirs(a.out, exist_ok=True)
    base = os.path.join(a.out, f"take-record-{ver}")
    with open(base + ".md", "w") as f:
        f.write("\n".join(lines))
    with open(base + ".json", "w") as f:
        json.dump(dict(blocks=blocks, verdict=verdict, python=ver), f, indent=1)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
