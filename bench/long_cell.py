#!/usr/bin/env python3
"""A long cell, past the event budget: N s of 4 threads making Python calls and dropping the GIL now
and then, traced with the default options, against the same work untraced and traced
with functions=False. Each run in a fresh process.

    python bench/long_cell.py [--seconds 60] [--threads 4] [--out bench/results]

Reports (bench/results/long-cell-<python>.md and .json): calls made, wall time traced /
untraced, the process's RSS growth (peak while tracing and saving, and kept after the
trace is saved and dropped), the page's size and save time, each thread's GIL table
against the functions=False run (largest difference, percentage points), and each
thread's Profile root against its traced wall time (and any 'unknown' blame)."""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import sysconfig
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def status(key: str) -> int:
    """A /proc/self/status figure in bytes (VmRSS, VmHWM)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


# -- the workload ----------------------------------------------------------------------------

def leaf(i):
    return i & 7


def middle(i):
    return leaf(i) + leaf(i + 1)


def top(n):
    s = 0
    for i in range(n):
        s += middle(i)
        if i % 20000 == 0:
            # The GIL dropped now and then (a C call that releases it). Not a fixed sleep:
            # a sleep's length does not grow with the tracer's overhead while the work
            # does, so a traced run would differ in kind from the GIL-only run it is
            # compared with (0.5 ms sleeps moved 'released' by 10-14 points).
            time.sleep(0)
    return s


def run_threads(n_threads, per_thread):
    import threading
    ths = [threading.Thread(target=top, args=(per_thread,), name=f"worker-{k}") for k in range(n_threads)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()


def child(mode: str, n_threads: int, per_thread: int, page: str) -> dict:
    import gc
    rss0 = status("VmRSS")
    out = {"mode": mode}
    if mode == "untraced":
        w0 = time.perf_counter()
        run_threads(n_threads, per_thread)
        out["wall_s"] = time.perf_counter() - w0
        return out
    import warnings

    import giltracer
    warnings.simplefilter("ignore")
    kw = {"functions": False} if mode == "no-functions" else {}
    w0 = time.perf_counter()
    with giltracer.trace(**kw) as t:
        run_threads(n_threads, per_thread)
    out["wall_s"] = time.perf_counter() - w0
    r = t.result
    out["events"] = t.event_count
    out["calls_aggregated"] = getattr(r, "calls_aggregated", 0)  # (0 before the budget aggregated calls)
    out["gil_aggregated"] = getattr(r, "gil_aggregated", 0)
    out["dropped"] = t.dropped
    rows = {s.name: s for s in t.summary() if s.name.startswith("worker-")}
    out["table"] = {n: {"held": s.held_pct, "wait": s.wait_pct, "released": s.released_pct,
                        "wall_ns": s.wall_ns} for n, s in rows.items()}
    if mode == "default":
        out["profile_root_vs_wall"] = {n: t.profile(n).total_ns / max(1, s.wall_ns)
                                       for n, s in rows.items()}
        calls = {}
        for f in t.functions():
            if f.name in ("leaf", "middle", "top"):
                calls[f.name] = f.calls
        out["calls_counted"] = calls
        out["unknown_blame_ns"] = sum(b.wait_ns for b in t.blame() if b.function and "unknown" in b.function)
        out["blame_ns"] = sum(b.wait_ns for b in t.blame())
        s0 = time.perf_counter()
        t.save(page)
        out["save_s"] = time.perf_counter() - s0
        out["page_bytes"] = os.path.getsize(page)
    out["rss_peak_growth"] = status("VmHWM") - rss0
    del t, r, rows
    gc.collect()
    out["rss_kept"] = status("VmRSS") - rss0
    return out


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def open_seconds(page: str):
    """Seconds from navigation to the page's first drawn frame in headless Chromium (the
    payload benchmark's measure), or None without chromium."""
    sys.path.insert(0, HERE)
    import payload_bench
    if not payload_bench.chromium():
        return None
    painted, _longest, _errors = payload_bench.first_paint(page, payload_bench.READY_GT, 120)
    return painted


def spawn(mode, n_threads, per_thread, page):
    p = subprocess.run([sys.executable, __file__, "--child", mode, "--threads", str(n_threads),
                        "--per-thread", str(per_thread), "--page", page],
                       capture_output=True, text=True, timeout=3600)
    if p.returncode:
        raise SystemExit(f"{mode} run failed:\n{p.stderr}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60.0, help="untraced length of the cell")
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--per-thread", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--page", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.child, a.threads, a.per_thread, a.page)))
        return
    # Calibrate: iterations per thread for --seconds untraced. A first short probe sizes a
    # second one of ~2 s (a 0.1 s probe alone, warm-up included, was off by 30 %).
    probe = 200_000
    cal = spawn("untraced", a.threads, probe, "")
    probe = max(probe, int(probe * 2.0 / cal["wall_s"]))
    cal = spawn("untraced", a.threads, probe, "")
    per_thread = int(probe * a.seconds / cal["wall_s"])
    page = os.path.join(tempfile.mkdtemp(prefix="gt-long-"), "long.html")
    runs = {m: spawn(m, a.threads, per_thread, page) for m in ("untraced", "default", "no-functions")}
    d, nf, un = runs["default"], runs["no-functions"], runs["untraced"]
    # The tracer's overhead on the same workload today: a cell short enough (1/20 of the
    # length, at least 1 s) that the default budget holds all of it.
    short_pt = max(per_thread // 20, int(probe * 1.0 / cal["wall_s"]))
    short_page = page + ".short.html"
    runs["short-untraced"] = spawn("untraced", a.threads, short_pt, "")
    runs["short-default"] = spawn("default", a.threads, short_pt, short_page)
    short_ratio = runs["short-default"]["wall_s"] / runs["short-untraced"]["wall_s"]
    long_ratio = d["wall_s"] / un["wall_s"]
    opened = open_seconds(page)
    diff = max(abs(d["table"][n][k] - nf["table"][n][k])
               for n in d["table"] for k in ("held", "wait", "released"))
    calls = a.threads * per_thread * 3  # top's loop: middle + 2 leaf calls per iteration
    ver = sysconfig.get_python_version()
    L = [f"# Long cell: {a.seconds:g} s untraced, {a.threads} threads (Python {platform.python_version()})",
         "", f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, "
         f"load {os.getloadavg()[0]:.1f}; one run each (fresh processes).", "",
         "| figure | value |", "|---|---|",
         f"| Python calls made | {calls:,} |",
         f"| call events on the timeline / in the call trees | {d['events']:,} / {d['calls_aggregated']:,} |",
         f"| calls counted by Top functions (leaf, middle, top) | {d['calls_counted']} |",
         f"| wall untraced / default / functions=False | {un['wall_s']:.1f} s / {d['wall_s']:.1f} s "
         f"({d['wall_s'] / un['wall_s']:.2f}x) / {nf['wall_s']:.1f} s ({nf['wall_s'] / un['wall_s']:.2f}x) |",
         f"| overhead of the long cell / of a short one ({runs['short-untraced']['wall_s']:.1f} s untraced) | "
         f"{long_ratio:.2f}x / {short_ratio:.2f}x: {verdict(long_ratio <= short_ratio * 1.1)} (target: at most the short one's, 10 % noise) |",
         f"| RSS growth, peak while tracing and saving (default) | {d['rss_peak_growth'] / 2**20:.0f} MB: {verdict(d['rss_peak_growth'] <= 300 * 2**20)} (target 300 MB) |",
         f"| RSS kept after saving and dropping the trace (default) | {d['rss_kept'] / 2**20:.0f} MB |",
         f"| page size / save time | {d['page_bytes'] / 2**20:.1f} MB: {verdict(d['page_bytes'] <= 10 * 2**20)} (target 10 MB) / {d['save_s']:.1f} s |",
         f"| page opened (headless Chromium, first frame drawn) | "
         + (f"{opened:.2f} s: {verdict(opened <= 2.0)} (target 2 s) |" if opened is not None else "not measured (no chromium) |"),
         f"| GIL table vs functions=False: largest difference | {diff:.2f} points: {verdict(diff <= 2.0)} (target 2) |",
         f"| Profile root / thread wall | {', '.join(f'{v:.4f}' for v in d['profile_root_vs_wall'].values())} |",
         f"| blame 'unknown' (after the call budget) / all blame | {d['unknown_blame_ns'] / 1e6:.0f} ms / "
         f"{d['blame_ns'] / 1e6:.0f} ms |",
         f"| events dropped (default) | {d['dropped']} |", "",
         "GIL tables (held / wait / released %):", "",
         "| thread | default | functions=False |", "|---|---|---|"]
    for n in sorted(d["table"]):
        x, y = d["table"][n], nf["table"][n]
        L.append(f"| {n} | {x['held']:.1f} / {x['wait']:.1f} / {x['released']:.1f} | "
                 f"{y['held']:.1f} / {y['wait']:.1f} / {y['released']:.1f} |")
    text = "\n".join(L) + "\n"
    print(text)
    os.makedirs(a.out, exist_ok=True)
    stem = os.path.join(a.out, f"long-cell-{ver}-{a.seconds:g}s")
    with open(stem + ".md", "w") as f:
        f.write(text)
    with open(stem + ".json", "w") as f:
        json.dump({"seconds": a.seconds, "threads": a.threads, "per_thread": per_thread, "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
