"""The what-if model's hand-off cost: the wall time of one hand-off between two
threads on the free-threaded build, measured on this machine.

A ping-pong: two threads pass a token back and forth through a primitive (queue.Queue of
size 1 each way, threading.Event pairs, a threading.Condition), nothing else to do, so every
pass is a hand-off to a thread that is asleep in the wait: the waker's wake call, the
kernel's wake-up of the idle CPU (on a VM, the hypervisor's too), the woken thread's return
from the wait. The two threads are pinned to two CPUs (both sides run at once without the
GIL). The cost of one hand-off is the wall time of a round trip over 2.

Untraced. Each round runs every primitive in a fresh process of each interpreter (per
primitive: 2000 round trips after 200 to warm up), interpreters alternating; per primitive
the median over the rounds; the cost is the median over the primitives of the 3.14t medians.
The 3.14 (GIL) numbers are printed beside for reference only.

    python bench/handoff_cost.py --gil /usr/bin/python3.14 --ft /opt/python3.14t/bin/python3.14t \
        [--rounds 5] [--out bench/results]
"""

import json
import os
import queue
import statistics
import sys
import threading
import time

from ft_cost import alternating_rounds, parse_args, worker_result  # (the same folder)

TRIPS, WARM = 2000, 200


def pp_queue(n):
    a, b = queue.Queue(1), queue.Queue(1)

    def peer():
        for _ in range(n):
            b.put(a.get())
    return peer, lambda: (a.put(1), b.get())


def pp_event(n):
    a, b = threading.Event(), threading.Event()

    def peer():
        for _ in range(n):
            a.wait()
            a.clear()
            b.set()

    def one():
        a.set()
        b.wait()
        b.clear()
    return peer, one


def pp_condition(n):
    c = threading.Condition()
    turn = [0]

    def peer():
        for _ in range(n):
            with c:
                c.wait_for(lambda: turn[0] == 1)
                turn[0] = 0
                c.notify()

    def one():
        with c:
            turn[0] = 1
            c.notify()
            c.wait_for(lambda: turn[0] == 0)
    return peer, one


PRIMS = {"queue": pp_queue, "event": pp_event, "condition": pp_condition}


def pinned(cpu, fn):
    """fn run by a thread pinned to `cpu` (Linux: the calling thread's affinity)."""
    def run():
        os.sched_setaffinity(0, {cpu})
        fn()
    return run


def trips(make, n):
    """Wall s per round trip of n round trips (after WARM). The two threads on two CPUs:
    without the GIL the two sides of a hand-off run at once, so the woken thread's CPU is
    the other one, idle while it waited (unpinned, the kernel often runs both on one CPU,
    a cheaper local switch: 12 us against 50-60 here, from one run to the next)."""
    peer, one = make(n + WARM)
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) >= 2:
        os.sched_setaffinity(0, {cpus[0]})
        peer = pinned(cpus[1], peer)
    t = threading.Thread(target=peer)
    t.start()
    for _ in range(WARM):
        one()
    t0 = time.perf_counter()
    for _ in range(n):
        one()
    dt = time.perf_counter() - t0
    t.join()
    os.sched_setaffinity(0, cpus)
    return dt / n


def worker():
    worker_result({name: trips(make, TRIPS) for name, make in PRIMS.items()})


def main():
    a = parse_args()
    if a.worker:
        return worker()
    load0 = os.getloadavg()[0]
    rounds, info = alternating_rounds(__file__, a)
    lines = [f"# Hand-off cost: {info['ft'][0]}t vs {info['gil'][0]} (GIL), a two-thread ping-pong", "",
             f"- untraced; {a.rounds} rounds, a fresh process per interpreter each, interpreters alternating; "
             f"the two threads pinned to two CPUs; per primitive {TRIPS} round trips after {WARM}; one hand-off = round trip / 2; "
             f"median [min, max] over rounds, us; CPUs: {os.cpu_count()}; load at start {load0:.1f}, "
             f"at end {os.getloadavg()[0]:.1f}", "",
             "| primitive | 3.14 hand-off us | 3.14t hand-off us |", "|---|---|---|"]
    med = {}
    for name in PRIMS:
        g = [r[name] / 2 * 1e6 for r in rounds["gil"]]
        f = [r[name] / 2 * 1e6 for r in rounds["ft"]]
        med[name] = statistics.median(f)
        lines.append(f"| {name} | {statistics.median(g):.1f} [{min(g):.1f}, {max(g):.1f}] | "
                     f"{med[name]:.1f} [{min(f):.1f}, {max(f):.1f}] |")
    cost = statistics.median(med.values())
    lines += ["", f"FT_HANDOFF_US (median over the primitives of the 3.14t medians): **{cost:.1f}**"]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        base = os.path.join(a.out, f"handoff-cost-{info['gil'][0]}")
        with open(base + ".md", "w") as fh:
            fh.write(text)
        with open(base + ".json", "w") as fh:
            json.dump({"gil": info["gil"][0], "ft": info["ft"][0], "rounds": rounds, "handoff_us": cost}, fh, indent=1)


if __name__ == "__main__":
    main()
