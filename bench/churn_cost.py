"""Where the cost of a GIL-only session goes on churn2 (make bench-churn-cost): two threads
handing the GIL over at every call (`os.fstat`), the worst case for a probe that records
every GIL event exactly. Loops, each a churn2 run:

- untraced (u1, u2);
- untraced beside a Python thread that wakes every 5 ms (time.sleep(0.005) in a loop),
  i.e. takes the GIL 200 times a second as the sampler does at its default interval;
- sampling mode (mode="sample", its default 5 ms): the GIL probe, the OS states and the
  sampler, which takes the GIL to read the threads' stacks;
- the default GIL-only session (functions=False): the GIL probe and the OS states;
- the OS states alone (gil=False): per-thread perf context-switch events;
- the GIL probe alone (sched=False), the take recorded just after take_gil unlocks the
  GIL's mutex (the default), or at its signal of switch_cond, under that mutex
  (GILTRACER_TAKE_RECORD=signal): a waiter woken by the last drop needs the mutex at once;
- the GIL probe's floor (GILTRACER_HOOKS_FLOOR=1): every hook decodes as when recording,
  nothing is recorded: no clock read, no push.

Beside them, what a clock read costs here (bench/clock_read_cost.c, the recorders'
gt_ticks) and how many the GIL probe makes per loop (its GIL events, from its trace): the
floor plus those reads is what an exact record of every GIL event costs on this machine
before the contention it adds.

  python bench/churn_cost.py [--blocks N] [--out bench/results]

One process, shuffled blocks of the nine loops. A block's ratio is a traced loop's CPU time
over the mean of its untraced ones; the verdict is the median over the blocks with a 95 %
bootstrap interval; u2 / u1 (A/A) shows the noise left. Context switches (voluntary +
involuntary, the whole process) per loop beside. Writes
<out>/churn-cost-<python-version>.md and .json.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import workloads  # noqa: E402
from profile_bench import build  # noqa: E402
from run import machine_info  # noqa: E402
from sample_bench import median_ci  # noqa: E402

# name: (label, trace options or None, GILTRACER_TAKE_RECORD, GILTRACER_HOOKS_FLOOR)
LOOPS = {
    "u1": ("untraced (u1)", None, "", ""),
    "u2": ("untraced (u2): A/A = u2 / u1", None, "", ""),
    "ticker": ("untraced, beside a thread taking the GIL every 5 ms", None, "", ""),
    "sample": ("sampling mode (mode=\"sample\", every 5 ms): GIL probe + OS states + sampler",
               dict(mode="sample", backend="auto"), "unlock", "0"),
    "default": ("GIL-only session as a user gets it (functions=False): GIL probe + OS states",
                dict(functions=False, backend="hooks"), "unlock", "0"),
    "sched": ("OS states alone (gil=False)", dict(functions=False, gil=False), "unlock", "0"),
    "unlock": ("GIL probe alone (sched=False), take recorded after the unlock (default)",
               dict(functions=False, sched=False, backend="hooks"), "unlock", "0"),
    "signal": ("GIL probe alone, take recorded at the signal, under the mutex",
               dict(functions=False, sched=False, backend="hooks"), "signal", "0"),
    "floor": ("GIL probe's floor: the hooks decode, record nothing",
              dict(functions=False, sched=False, backend="hooks"), "unlock", "1"),
}
TRACED_GIL = ("sample", "default", "unlock", "signal", "floor")


def switches() -> int:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_nvcsw + ru.ru_nivcsw


def clock_read_ns():
    """(ns per gt_ticks() read, source) from bench/clock_read_cost.c, or (None, why)."""
    try:
        exe = build(os.path.join(ROOT, "build", "bench-clock"), "clock_read_cost")
        out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout.split()
    except (OSError, subprocess.CalledProcessError) as e:
        return None, f"not measured ({e})"
    return float(out[0]), out[1]


def loop(kind: str):
    """(CPU s, context switches, GIL events recorded, GIL takes) of one churn2 loop."""
    import giltracer
    _, options, take_record, floor = LOOPS[kind]
    t = None
    if options is not None:
        # Both are read at the session's start.
        os.environ["GILTRACER_TAKE_RECORD"] = take_record
        os.environ["GILTRACER_HOOKS_FLOOR"] = floor
        t = giltracer.trace(**options)
        t.start()
    stop, ticker = threading.Event(), None
    if kind == "ticker":
        def tick():
            while not stop.is_set():
                time.sleep(0.005)
        ticker = threading.Thread(target=tick, name="ticker")
        ticker.start()
    c0, s0 = time.process_time(), switches()
    workloads.churn2()
    cpu, sw = time.process_time() - c0, switches() - s0
    if ticker is not None:
        stop.set()
        ticker.join()
    events = takes = 0
    if t is not None:
        t.stop()
        if kind in TRACED_GIL:
            rows = t.summary(all_threads=True)
            takes = sum(r.acquisitions for r in rows)
            # A state change of a thread is one recorded event, i.e. one clock read.
            events = sum(len(t.gil_intervals(r.tid)) for r in rows)
    return cpu, sw, events, takes


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
    clock_ns, clock_src = clock_read_ns()
    workloads.churn2()  # warm-up
    rnd = random.Random(1)
    blocks = []
    for b in range(a.blocks):
        order = list(LOOPS)
        rnd.shuffle(order)
        blocks.append({k: loop(k) for k in order})
        print(f"block {b + 1}/{a.blocks}", file=sys.stderr, end="\r")
    for k in ("GILTRACER_TAKE_RECORD", "GILTRACER_HOOKS_FLOOR"):
        os.environ.pop(k, None)
    ver = platform.python_version()
    rows, verdict = [], {}
    for k, (label, *_) in LOOPS.items():
        ratios = [blk[k][0] / ((blk["u1"][0] + blk["u2"][0]) / 2) for blk in blocks] \
            if k != "u2" else [blk["u2"][0] / blk["u1"][0] for blk in blocks]
        med, lo, hi = median_ci(ratios)
        sw = statistics.median(blk[k][1] for blk in blocks)
        cpu = statistics.median(blk[k][0] for blk in blocks)
        events = statistics.median(blk[k][2] for blk in blocks)
        takes = statistics.median(blk[k][3] for blk in blocks)
        verdict[k] = dict(ratio=med, lo=lo, hi=hi, switches=sw, cpu=cpu, events=events, takes=takes)
        ratio = "1 (the base)" if k == "u1" else f"**{med:.3f}** [{lo:.3f}, {hi:.3f}]"
        counts = f"{events:,.0f} / {takes:,.0f}" if k in TRACED_GIL else ""
        rows.append(f"| {label} | {cpu:.3f} | {ratio} | {sw:,.0f} | {counts} |")
    v = verdict
    untraced = (v["u1"]["cpu"] + v["u2"]["cpu"]) / 2
    reads = v["unlock"]["events"]
    parts = [f"Parts of the default session: the GIL probe alone {v['unlock']['ratio']:.3f} "
             f"(its floor {v['floor']['ratio']:.3f}), the OS states alone {v['sched']['ratio']:.3f}; "
             f"their costs added: {v['unlock']['ratio'] + v['sched']['ratio'] - 1:.3f}, against "
             f"{v['default']['ratio']:.3f} measured together. Sampling {v['sample']['ratio']:.3f}; "
             f"a thread that only takes the GIL as often as the sampler does, untraced: "
             f"{v['ticker']['ratio']:.3f}."]
    if clock_ns is not None and reads:
        share = reads * clock_ns * 1e-9 / untraced
        per_take = reads / max(v["unlock"]["takes"], 1)
        parts.append(
            f"A clock read ({clock_src}) costs **{clock_ns:.1f} ns** here (best batch of "
            f"`clock_read_cost`); the GIL probe reads it {reads:,.0f} times per loop "
            f"({per_take:.1f} per take of the GIL): **{share * 100:.1f} %** of the untraced "
            f"loop's CPU time. Floor + reads = **{v['floor']['ratio'] + share:.3f}**: what an "
            "exact record of every GIL event costs here before the contention it adds.")
        v["clock"] = dict(ns=clock_ns, source=clock_src, reads=reads, share=share)
    else:
        parts.append(f"The clock read's cost: {clock_src}.")
    load = os.getloadavg()[0]
    cpu_model = machine_info().get("cpu", "?")
    lines = [f"# Where a GIL-only session's cost goes: churn2 (Python {ver})", "",
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs "
             f"({cpu_model}), load at end {load:.1f}; {a.blocks} blocks of {len(LOOPS)} churn2 "
             f"loops in shuffled order (two threads × {workloads.CHURN_ITERS:,} `os.fstat(0)`), "
             "one process. Ratio = median over the blocks of the loop's CPU time / the mean of "
             "its block's two untraced loops [95 % bootstrap interval]. Switches: the process's "
             "context switches in the loop, median. Events / takes: the GIL events its trace "
             "holds (each a clock read) and the takes of the GIL among them, median.", "",
             "| loop | CPU s (median) | ratio to untraced | context switches | events / takes |",
             "|---|---|---|---|---|", *rows, "", *(p + "\n" for p in parts),
             f"`python bench/churn_cost.py --blocks {a.blocks}`", ""]
    os.makedirs(a.out, exist_ok=True)
    base = os.path.join(a.out, f"churn-cost-{ver}")
    with open(base + ".md", "w") as f:
        f.write("\n".join(lines))
    with open(base + ".json", "w") as f:
        json.dump(dict(blocks=blocks, verdict=verdict, python=ver, cpu=cpu_model), f, indent=1)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
