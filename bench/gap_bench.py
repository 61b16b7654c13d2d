#!/usr/bin/env python3
"""Stalls of a traced thread: does giltracer ever stop the program it traces?

    python bench/gap_bench.py [--procs 4] [--sessions 3] [--calls 2400000]
                              [--configs defaults,hooks,sched-off] [--out bench/results/gaps-<version>]

Every process (fresh, `--procs` of each configuration, interleaved in a shuffled order)
runs `--sessions` traced sessions one after the other; each session is a tight loop of
`--calls` calls of an empty function. From `t.spans(tid)` it takes, for each pair of
consecutive calls, the gap between the end of one and the start of the next, and from
`t.os_intervals(tid)` the part of that gap the thread spent ON CPU (the gap minus its
overlap with "preempted" and "blocked" intervals: a preemption by another process is not
giltracer's doing). A gap whose on-CPU part exceeds 0.2 ms is a stall. Without OS states
(sched=False) the whole gap counts. It also counts calls of the empty function that took
over 0.2 ms on CPU (a stall inside the call instead of between calls), and the time the
thread was *blocked* inside gaps (nothing in the loop blocks: that would be giltracer's).

Configurations: `untraced` = the same loop without giltracer, timing itself (a clock read
per call; a gap without a context switch of the thread, per getrusage, is a stall of the
machine itself: on a VM the hypervisor's), `defaults` = giltracer.trace() (backend auto: bpf when privileged),
`hooks` = trace(backend="hooks") (OS states from perf_event context switches),
`sched-off` = trace(sched=False) (control), `hooks-sched-off` = the hooks without OS states.
Without OS states a preemption by other load counts as a stall: on a busy machine the
sched-off rows are an upper bound.
Prints one table per configuration (session 1 vs later sessions) and writes
<out>.md and <out>.json. It measures; it never fails.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import random
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
STALL_NS = 200_000  # 0.2 ms
CONFIGS = {
    "untraced": None,  # the machine's own floor: no giltracer at all
    "defaults": {},
    "hooks": {"backend": "hooks"},
    "sched-off": {"sched": False},
    "hooks-sched-off": {"backend": "hooks", "sched": False},
}
DEFAULT_CONFIGS = ("untraced", "defaults", "hooks", "sched-off")


# ------------------------------------------------------------------ worker side
def empty():
    pass


def tight_loop(n: int) -> None:
    for _ in range(n):
        empty()


def steal_ms() -> float:
    """The machine's steal time so far (all CPUs): time the hypervisor ran something
    else while a vCPU was runnable. A thread stalled by it looks on CPU to the guest."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        return int(fields[8]) * 1000 / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def untraced_loop(n: int) -> dict:
    """The same loop without giltracer, timed by itself: a gap between two clock reads
    over 0.2 ms with no context switch of the thread meanwhile (getrusage) is a stall of
    the machine (hypervisor, interrupts), not of any tracer."""
    import resource

    now = time.perf_counter_ns  # CLOCK_MONOTONIC
    usage, who = resource.getrusage, resource.RUSAGE_THREAD

    def switches() -> int:
        r = usage(who)
        return r.ru_nvcsw + r.ru_nivcsw

    stalls = []
    largest_raw = 0
    s0 = switches()
    prev = now()
    for _ in range(n):
        empty()
        t = now()
        if t - prev > STALL_NS:
            largest_raw = max(largest_raw, t - prev)
            s1 = switches()
            if s1 == s0:
                stalls.append(t - prev)
            s0 = s1
            t = now()
        prev = t
    return {"calls": n, "gaps": n - 1, "stalls": len(stalls), "in_call": 0,
            "stall_ns": sum(stalls), "largest_ns": max(stalls, default=0),
            "largest_raw_ns": largest_raw, "blocked_ns": 0, "have_os": True}


def off_cpu_overlap(off: list, a: int, b: int, state: str | None = None) -> int:
    """ns of [a, b) covered by the sorted, disjoint off-CPU intervals `off`
    ((start, end, state)); only those of `state` when given."""
    import bisect

    i = bisect.bisect_right(off, (a,)) - 1
    if i < 0:
        i = 0
    total = 0
    while i < len(off) and off[i][0] < b:
        s, e, st = off[i]
        if (state is None or st == state) and e > a:
            total += min(e, b) - max(s, a)
        i += 1
    return total


def analyse(t, tid: int) -> dict:
    spans = [(s, e) for s, e, name, _d, _f in t.spans(tid) if name == "empty"]
    spans.sort()
    os_iv = t.os_intervals(tid)
    have_os = bool(os_iv)
    off = sorted((a, b, st) for a, b, st in os_iv if st != "on-cpu")
    gaps = stalls = in_call = 0
    stall_ns = largest = blocked_ns = 0
    largest_raw = 0
    prev_end = None
    for s, e in spans:
        if e - s > STALL_NS:
            on = (e - s) - (off_cpu_overlap(off, s, e) if have_os else 0)
            if on > STALL_NS:
                in_call += 1
                stall_ns += on
                largest = max(largest, on)
        if prev_end is not None:
            g = s - prev_end
            gaps += 1
            largest_raw = max(largest_raw, g)
            if g > STALL_NS:
                on = g - (off_cpu_overlap(off, prev_end, s) if have_os else 0)
                if have_os:
                    blocked_ns += off_cpu_overlap(off, prev_end, s, "blocked")
                if on > STALL_NS:
                    stalls += 1
                    stall_ns += on
                    largest = max(largest, on)
        prev_end = e
    return {
        "calls": len(spans),
        "gaps": gaps,
        "stalls": stalls,          # gaps with > 0.2 ms on CPU
        "in_call": in_call,        # empty() calls with > 0.2 ms on CPU
        "stall_ns": stall_ns,      # on-CPU time of both kinds
        "largest_ns": largest,
        "largest_raw_ns": largest_raw,  # largest gap, off-CPU time included
        "blocked_ns": blocked_ns,  # blocked (not preempted) time inside gaps
        "have_os": have_os,
    }


def worker(config: str, calls: int, sessions: int) -> None:
    opts = CONFIGS[config]
    tid = threading.get_native_id()
    out = []
    if opts is None:
        for k in range(1, sessions + 1):
            t0, st0 = time.perf_counter_ns(), steal_ms()
            row = untraced_loop(calls)
            row.update(session=k, wall_ns=time.perf_counter_ns() - t0, backend="untraced",
                       steal_ms=steal_ms() - st0,
                       sched_status="context-switch counts (getrusage)", dropped={})
            out.append(row)
        print(json.dumps({"config": config, "pid": os.getpid(), "sessions": out}), flush=True)
        return
    import giltracer

    for k in range(1, sessions + 1):
        t0, st0 = time.perf_counter_ns(), steal_ms()
        with giltracer.trace(**opts) as t:
            tight_loop(calls)
        wall, steal = time.perf_counter_ns() - t0, steal_ms() - st0
        row = analyse(t, tid)
        row.update(session=k, wall_ns=wall, steal_ms=steal, duration_ns=t.duration_ns, backend=t.backend,
                   sched_status=t.sched_status, dropped=t.dropped)
        out.append(row)
        del t
    print(json.dumps({"config": config, "pid": os.getpid(), "sessions": out}), flush=True)


# ------------------------------------------------------------------ driver side
def run_one(config: str, calls: int, sessions: int) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", config,
           "--calls", str(calls), "--sessions", str(sessions)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        return {"config": config, "error": (p.stderr or p.stdout)[-2000:]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def summarise(procs: list) -> dict:
    """Per session number: totals and extremes over the processes."""
    by_session = {}
    for p in procs:
        for r in p.get("sessions", []):
            by_session.setdefault(r["session"], []).append(r)
    rows = {}
    for k, rs in sorted(by_session.items()):
        rows[k] = {
            "n": len(rs),
            "stalls": [r["stalls"] + r["in_call"] for r in rs],
            "stall_ms": [r["stall_ns"] / 1e6 for r in rs],
            "largest_ms": max(r["largest_ns"] for r in rs) / 1e6,
            "largest_raw_ms": max(r["largest_raw_ns"] for r in rs) / 1e6,
            "blocked_ms": max(r["blocked_ns"] for r in rs) / 1e6,
            "wall_ms": sorted(r["wall_ns"] / 1e6 for r in rs),
            "steal_ms": max(r.get("steal_ms", float("nan")) for r in rs),
            "have_os": all(r["have_os"] for r in rs),
        }
    return rows


def fmt_range(xs, f="{:.0f}"):
    lo, hi = min(xs), max(xs)
    return f.format(lo) if lo == hi else f"{f.format(lo)}–{f.format(hi)}"


def report(results: dict, args, started: str) -> str:
    lines = [
        "# Stalls of a traced thread",
        "",
        f"{started} · Python {platform.python_version()} · {platform.machine()} · "
        f"kernel {platform.release()} · {os.cpu_count()} CPUs · "
        f"{args.procs} fresh processes per configuration × {args.sessions} sessions × "
        f"{args.calls:,} calls of an empty function",
        "",
        "A stall: a gap between two consecutive calls (or one call) with more than 0.2 ms "
        "ON CPU (off-CPU time from the trace's OS states is subtracted; without OS states the "
        "whole gap counts). Ranges are over the processes; largest = the largest over all of "
        "them. `largest raw` includes off-CPU time (preemption by other load). `blocked` = the "
        "most time one session spent blocked inside gaps. `untraced` is the machine's own "
        "floor (no giltracer; on-CPU told by getrusage's context-switch counts). `steal` = "
        "the most hypervisor steal time (all vCPUs) during one session: a vCPU stopped by the "
        "host stalls whatever runs on it, and the guest still calls it on CPU.",
        "",
        "| config | backend / OS states | session | stalls > 0.2 ms | stall time (ms) | largest (ms) "
        "| largest raw (ms) | blocked (ms) | steal (ms) | wall (ms) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for config, procs in results.items():
        errors = [p["error"] for p in procs if "error" in p]
        ok = [p for p in procs if "error" not in p]
        first = ok[0]["sessions"][0] if ok else {}
        what = f"{first.get('backend', '?')} / {first.get('sched_status', '?')}"
        for k, r in summarise(ok).items():
            lines.append(
                f"| {config} | {what} | {k} | {fmt_range(r['stalls'])} | "
                f"{fmt_range(r['stall_ms'], '{:.2f}')} | {r['largest_ms']:.2f} | "
                f"{r['largest_raw_ms']:.2f} | {r['blocked_ms']:.2f} | {r['steal_ms']:.0f} | "
                f"{fmt_range(r['wall_ms'], '{:.0f}')} |")
        for e in errors:
            lines.append(f"\n{config}: a process failed:\n```\n{e.strip()}\n```")
    verdict = []
    for config, procs in results.items():
        ok = [p for p in procs if "error" not in p]
        n = sum(r["stalls"] + r["in_call"] for p in ok for r in p["sessions"])
        verdict.append(f"{config}: {n} stall(s) in {sum(len(p['sessions']) for p in ok)} sessions")
    lines += ["", "Total: " + "; ".join(verdict) + "."]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--sessions", type=int, default=3)
    ap.add_argument("--calls", type=int, default=2_400_000)
    ap.add_argument("--configs", default=",".join(DEFAULT_CONFIGS))
    ap.add_argument("--out", default=os.path.join(HERE, "results", f"gaps-{platform.python_version()}"))
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.calls, args.sessions)
        return
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    for c in configs:
        if c not in CONFIGS:
            ap.error(f"unknown configuration {c!r} (known: {', '.join(CONFIGS)})")
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    rnd = random.Random(args.seed)
    results = {c: [] for c in configs}
    for i in range(args.procs):
        order = configs[:]
        rnd.shuffle(order)
        for c in order:
            r = run_one(c, args.calls, args.sessions)
            results[c].append(r)
            tag = "error" if "error" in r else " ".join(
                f"s{s['session']}:{s['stalls'] + s['in_call']}/{s['largest_ns'] / 1e6:.2f}ms"
                for s in r["sessions"])
            print(f"[{i + 1}/{args.procs}] {c:16s} {tag}", file=sys.stderr, flush=True)
    text = report(results, args, started)
    print(text)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out + ".md", "w") as f:
        f.write(text)
    with open(args.out + ".json", "w") as f:
        json.dump({"started": started, "python": platform.python_version(),
                   "calls": args.calls, "sessions": args.sessions, "results": results}, f,
                  indent=1)


if __name__ == "__main__":
    main()
