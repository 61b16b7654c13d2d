#!/usr/bin/env python3
"""giltracer benchmark suite: one command, one report.

    python bench/run.py [--quick] [--rounds N] [--reps N] [--out bench/results]
                        [--only overhead,save,gil]

Runs, with the interpreter that runs this script:
  1. tracer overhead: workloads x tracers, every cell in a fresh process, rounds
     interleaved in a shuffled order, medians over all samples;
  2. save speed and size: giltracer's .json and .html writers, viztracer's save;
  3. GIL probe costs: GIL churn per release/re-acquire cycle, two CPU-bound threads,
     bpf vs hooks side by side when the bpf backend is available.
Writes bench/results/<python-version>.md and .json and prints the same tables.
See bench/README.md for what each number means and how noisy it is.

It installs nothing. viztracer is optional: without it the viztracer columns are
skipped with a note (pip install viztracer).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import sysconfig
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import tracers as T  # noqa: E402
import workloads as W  # noqa: E402

WORKER = os.path.join(HERE, "worker.py")

# Targets (set for CPython 3.11; the floor and first-session ones apply on every version).
TARGET_VS_NOOP = 1.15        # giltracer slowdown <= 1.15 x the no-op C hook's
TARGET_OVH_VS_FLOOR = 1.10   # giltracer overhead <= 1.10 x the floor's
TARGET_OVH_VS_VIZALL = 0.8   # giltracer overhead <= 0.8 x viztracer (all)'s
TARGET_NOC_VS_GT = 1.0       # c_calls=False never slower than the defaults
TARGET_FIRST = 1.1           # first session <= 1.1 x the later ones
TARGET_SAVE_NS = 300         # ns per event for t.save("x.json")
TARGET_SAVE_BYTES = 60       # bytes per event in the .json file
TARGET_SAVE_PEAK = 64        # peak extra memory during save, bytes per event
TARGET_GIL_CYCLE_NS = 300    # ns added per GIL release/re-acquire cycle
TARGET_CPU2 = 1.03           # two CPU-bound threads, functions off
TARGET_PY = (3, 11)

OVERHEAD_TRACERS = ("none", "noop", "floor", "cprofile", "viztracer", "viztracer_all", "giltracer",
                    "giltracer_noc", "giltracer_fn")
# --quick keeps what the verdicts need (time budget)
QUICK_SKIP = ("cprofile", "viztracer", "giltracer_fn")
GIL_TRACERS = ("none", "gil_off", "gil_hooks", "gil_hooks_sched", "gil_bpf")
SAVE_WORKLOADS = ("fib", "method", "builtins")


# ------------------------------------------------------------------ statistics
def median(xs):
    return statistics.median(xs) if xs else float("nan")


def quantile(xs, q):
    """Linear-interpolated quantile (q in [0, 1])."""
    if not xs:
        return float("nan")
    s = sorted(xs)
    pos = q * (len(s) - 1)
    i = int(pos)
    j = min(i + 1, len(s) - 1)
    return s[i] + (s[j] - s[i]) * (pos - i)


def ratio_ci(num, den, n=2000, seed=7):
    """Bootstrap 95 % interval of median(num) / median(den)."""
    if len(num) < 2 or len(den) < 2:
        return (float("nan"), float("nan"))
    rnd = random.Random(seed)
    rs = []
    for _ in range(n):
        a = statistics.median(rnd.choices(num, k=len(num)))
        b = statistics.median(rnd.choices(den, k=len(den)))
        rs.append(a / b)
    rs.sort()
    return rs[int(0.025 * n)], rs[int(0.975 * n) - 1]


def overhead_ratio_ci(num, den, base, n=2000, seed=11):
    """Bootstrap 95 % interval of (median(num)/median(base) - 1) / (median(den)/median(base) - 1):
    one tracer's overhead over another's, all three samples resampled."""
    if min(len(num), len(den), len(base)) < 2:
        return (float("nan"), float("nan"))
    rnd = random.Random(seed)
    rs = []
    for _ in range(n):
        b = statistics.median(rnd.choices(base, k=len(base)))
        a = statistics.median(rnd.choices(num, k=len(num))) / b - 1
        d = statistics.median(rnd.choices(den, k=len(den))) / b - 1
        rs.append(a / d if d > 0 else float("inf"))
    rs.sort()
    return rs[int(0.025 * n)], rs[int(0.975 * n) - 1]


def median_ci(xs, n=2000, seed=13):
    """Bootstrap 95 % interval of median(xs)."""
    if len(xs) < 2:
        return (float("nan"), float("nan"))
    rnd = random.Random(seed)
    ms = sorted(statistics.median(rnd.choices(xs, k=len(xs))) for _ in range(n))
    return ms[int(0.025 * n)], ms[int(0.975 * n) - 1]


def fmt_ratio(x):
    return "n/a" if x != x else f"{x:.2f}×"


def fmt_ci(lo, hi):
    return "" if lo != lo else f"[{lo:.2f}–{hi:.2f}]"


def fmt_ms(ns):
    return "n/a" if ns != ns else f"{ns / 1e6:.1f}"


def fmt_int(x):
    return "n/a" if x is None else f"{int(x):,}"


def verdict(ok, lo=None, hi=None, target=None, smaller_is_better=True):
    """PASS/FAIL on the point estimate; '(noise)' when the 95 % interval straddles the target."""
    if ok is None:
        return "n/a"
    v = "PASS" if ok else "FAIL"
    if target is not None and lo is not None and lo == lo and lo <= target <= hi:
        v += " (within noise)"
    return v


def md_table(header, rows, align=None):
    align = align or ["l"] + ["r"] * (len(header) - 1)
    sep = ["---:" if a == "r" else "---" for a in align]
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join(sep) + " |"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


# ------------------------------------------------------------------- processes
def run_worker(args, timeout=600):
    env = dict(os.environ, PYTHONHASHSEED="0")
    t0 = time.monotonic()
    try:
        p = subprocess.run([sys.executable, WORKER] + args, capture_output=True, text=True,
                           timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout} s"}, time.monotonic() - t0
    if p.returncode != 0:
        lines = [ln for ln in (p.stderr or "").strip().splitlines() if ln.strip()]
        return {"error": f"exit {p.returncode}: " + (lines[-1] if lines else "(no output)")}, time.monotonic() - t0
    try:
        out = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": "no JSON from worker: " + p.stdout[-300:] + p.stderr[-300:]}, time.monotonic() - t0
    warn = [ln for ln in p.stderr.splitlines() if "Warning" in ln or "warning" in ln]
    if warn:
        out["stderr"] = warn[-3:]
    return out, time.monotonic() - t0


def run_interleaved(label, configs, rounds, reps, quick, log, paired=False):
    """configs: list of (workload, tracer). Returns {(w, t): {"times": [...], "cpu": [...],
    "infos": [...], "errors": [...]}}."""
    cells = {c: {"times": [], "cpu": [], "infos": [], "errors": [], "base_times": [], "base_cpu": [],
                 "first_times": [], "first_cpu": [], "proc_times": [], "proc_cpu": []}
             for c in configs}
    for r in range(rounds):
        order = list(configs)
        random.Random(1000 + r).shuffle(order)
        t0 = time.monotonic()
        for wl, tr in order:
            args = ["time", wl, tr, "--reps", str(reps)] + (["--quick"] if quick else [])
            if paired and tr != "none":
                args.append("--paired")
            out, _ = run_worker(args)
            cell = cells[(wl, tr)]
            if "error" in out:
                cell["errors"].append(out["error"])
                continue
            cell["times"] += out["times_ns"]
            cell["cpu"] += out["cpu_ns"]
            cell["infos"] += out["infos"]
            cell["base_times"] += out.get("base_times_ns", [])
            cell["base_cpu"] += out.get("base_cpu_ns", [])
            if "first_cpu_ns" in out:  # the process's first session, and its later ones
                cell["first_times"].append(out["first_time_ns"])
                cell["first_cpu"].append(out["first_cpu_ns"])
                cell["proc_times"].append(out["times_ns"])
                cell["proc_cpu"].append(out["cpu_ns"])
            if out.get("stderr"):
                cell.setdefault("stderr", []).extend(out["stderr"])
        log(f"  {label}: round {r + 1}/{rounds} done in {time.monotonic() - t0:.1f} s")
    return cells


# ------------------------------------------------------------------- sections
def section_overhead(a, env, log):
    tracers = [t for t in OVERHEAD_TRACERS if t in env["tracers_ok"]]
    if a.quick:
        tracers = [t for t in tracers if t not in QUICK_SKIP]
    configs = [(w, t) for w in W.OVERHEAD_WORKLOADS for t in tracers]
    log(f"[overhead] {len(configs)} cells x {a.rounds} rounds x {a.reps} reps")
    cells = run_interleaved("overhead", configs, a.rounds, a.reps, a.quick, log, paired=True)
    res = {"tracers": tracers, "workloads": list(W.OVERHEAD_WORKLOADS), "cells": {}}
    for (w, t), c in cells.items():
        ev = [i.get("events") for i in c["infos"] if i.get("events") is not None]
        dr = [i.get("dropped") for i in c["infos"] if i.get("dropped") is not None]
        res["cells"][f"{w}/{t}"] = {
            "times_ns": c["times"], "cpu_ns": c["cpu"],
            "base_times_ns": c["base_times"], "base_cpu_ns": c["base_cpu"],
            "first_times_ns": c["first_times"], "first_cpu_ns": c["first_cpu"],
            "proc_times_ns": c["proc_times"], "proc_cpu_ns": c["proc_cpu"],
            "events": int(median(ev)) if ev else None, "dropped": max(dr) if dr else None,
            "errors": c["errors"], "stderr": c.get("stderr", [])[:3],
        }
    return res


SAMPLES = {"cpu": "cpu_ns", "wall": "times_ns"}
FIRSTS = {"cpu": ("first_cpu_ns", "proc_cpu_ns"), "wall": ("first_times_ns", "proc_times_ns")}
RESIDUAL_LIMIT = 1.25  # untraced-after-a-session / untraced-in-a-fresh-process above this: no pairs
BASES = {"cpu": "base_cpu_ns", "wall": "base_times_ns"}


def pair_ratios(cell, clock):
    """traced / untraced of the same rep pair (same process, back to back)."""
    if not cell:
        return []
    t, b = cell.get(SAMPLES[clock]) or [], cell.get(BASES[clock]) or []
    return [x / y for x, y in zip(t, b) if y] if len(t) == len(b) else []


def first_ratios(cell, clock):
    """Per process: its first session / the median of its later ones."""
    fk, pk = FIRSTS[clock]
    if not cell:
        return []
    return [f / median(p) for f, p in zip(cell.get(fk) or [], cell.get(pk) or []) if p]


def first_session(ratios):
    if not ratios:
        return None
    return {"ratio": median(ratios), "ci": median_ci(ratios), "n": len(ratios)}


def analyse_overhead(res, clock):
    """Slowdowns and comparisons on one clock ("cpu" or "wall")."""
    key = SAMPLES[clock]
    cells = res["cells"]
    out = {}
    for w in res["workloads"]:
        base = cells.get(f"{w}/none")
        if not base or not base[key]:
            continue
        bmed = median(base[key])
        events = next((cells[f"{w}/{t}"]["events"] for t in ("giltracer", "giltracer_fn")
                       if f"{w}/{t}" in cells and cells[f"{w}/{t}"]["events"]), None)
        row = {"untraced_ms": bmed / 1e6, "events": events, "tracers": {}}
        for t in res["tracers"]:
            c = cells.get(f"{w}/{t}")
            if t == "none" or not c or not c[key]:
                continue
            med = median(c[key])
            lo, hi = ratio_ci(c[key], base[key])
            add = (med - bmed) / events if events else None
            pr = pair_ratios(c, clock)
            row["tracers"][t] = {"ratio": med / bmed, "ci": (lo, hi), "ns_per_event": add, "ms": med / 1e6,
                                 "paired": median(pr) if pr else None}

        def cmp(x, y):
            cx, cy = cells.get(f"{w}/{x}"), cells.get(f"{w}/{y}")
            if not cx or not cy or not cx[key] or not cy[key]:
                return None
            lo, hi = ratio_ci(cx[key], cy[key])
            px, py = pair_ratios(cx, clock), pair_ratios(cy, clock)
            return {"ratio": median(cx[key]) / median(cy[key]), "ci": (lo, hi),
                    "p10": quantile(cx[key], 0.1) / quantile(cy[key], 0.1),
                    "paired": median(px) / median(py) if px and py else None}

        def ovh(x, y):
            """x's overhead (slowdown - 1) over y's."""
            cx, cy = cells.get(f"{w}/{x}"), cells.get(f"{w}/{y}")
            if not cx or not cy or not cx[key] or not cy[key]:
                return None
            ox, oy = median(cx[key]) / bmed - 1, median(cy[key]) / bmed - 1
            p10b = quantile(base[key], 0.1)
            px, py = pair_ratios(cx, clock), pair_ratios(cy, clock)
            qx, qy = quantile(cx[key], 0.1) / p10b - 1, quantile(cy[key], 0.1) / p10b - 1
            return {"ratio": ox / oy if oy > 0 else float("nan"), "ci": overhead_ratio_ci(cx[key], cy[key], base[key]),
                    "p10": qx / qy if qy > 0 else float("nan"),
                    "paired": (median(px) - 1) / (median(py) - 1) if px and py and median(py) > 1 else None,
                    "overheads": (ox, oy)}

        row["gt_ovh_vs_floor"] = ovh("giltracer", "floor")
        row["gt_ovh_vs_vizall"] = ovh("giltracer", "viztracer_all")
        row["noc_vs_gt"] = cmp("giltracer_noc", "giltracer")
        row["first"] = {t: first_session(first_ratios(cells.get(f"{w}/{t}"), clock))
                        for t in ("giltracer", "floor")}
        row["first_ratios"] = {t: first_ratios(cells.get(f"{w}/{t}"), clock) for t in ("giltracer", "floor")}
        fl = cells.get(f"{w}/floor")
        row["floor_events"] = fl["events"] if fl else None
        row["floor_dropped"] = fl["dropped"] if fl else None
        row["gt_vs_noop"] = cmp("giltracer", "noop")
        row["gtfn_vs_noop"] = cmp("giltracer_fn", "noop")
        row["gt_vs_viz"] = cmp("giltracer", "viztracer")
        row["gt_vs_vizall"] = cmp("giltracer", "viztracer_all")
        gt = cells.get(f"{w}/giltracer")
        row["gt_dropped"] = gt["dropped"] if gt else None
        out[w] = row
    return out


def section_save(a, env, log):
    jobs = []
    rounds = 1 if a.quick else 3
    for r in range(rounds):
        for w in SAVE_WORKLOADS:
            for fmt in ("json", "html"):
                jobs.append((w, "giltracer", fmt))
    if "viztracer" in env["tracers_ok"]:
        # viztracer's save takes seconds per million calls: once per workload (quick: fib).
        for w in (("fib",) if a.quick else SAVE_WORKLOADS):
            jobs.append((w, "viztracer", "json"))
    log(f"[save] {len(jobs)} processes")
    # interleave: giltracer jobs are already round-major; shuffle within the run
    random.Random(5).shuffle(jobs)
    results = {}
    t0 = time.monotonic()
    for w, tr, fmt in jobs:
        out, dt = run_worker(["save", w, tr, fmt, "--reps", "3" if tr == "giltracer" else "1"])
        results.setdefault(f"{w}/{tr}/{fmt}", []).append(out)
    log(f"  save: done in {time.monotonic() - t0:.1f} s")
    return results


def analyse_save(results):
    out = {}
    for key, runs in results.items():
        ok = [r for r in runs if "error" not in r]
        errs = [r["error"] for r in runs if "error" in r]
        if not ok:
            out[key] = {"errors": errs}
            continue
        ev = median([r["events"] for r in ok])
        save = median([x for r in ok for x in r["save_ns"]])
        first = median([r["save_ns"][0] for r in ok])
        peak = median([r["hwm_after"] - r["rss_before"] for r in ok])
        size = median([r["bytes"] for r in ok])
        d = {"events": int(ev), "save_ms": save / 1e6, "save_first_ms": first / 1e6,
             "ns_per_event": save / ev, "bytes": int(size), "bytes_per_event": size / ev,
             "peak_extra": int(peak), "peak_per_event": peak / ev,
             "hwm_reset": all(r.get("hwm_reset") for r in ok), "runs": len(ok), "errors": errs,
             "traced_ms": median([r["traced_ns"] for r in ok]) / 1e6}
        if "stop_ns" in ok[0]:
            d["stop_ns_per_event"] = median([r["stop_ns"] for r in ok]) / ev
        if "parse_ns" in ok[0]:
            d["parse_ms"] = median([r["parse_ns"] for r in ok]) / 1e6
            d["write_ms"] = median([r["write_ns"][0] for r in ok]) / 1e6
            d["json_lib"] = ok[0].get("json_lib")
            d["entries"] = ok[0].get("entries")
            d["overflow"] = ok[0].get("overflow")
        out[key] = d
    return out


def section_gil(a, env, log):
    tracers = ["none", "gil_off", "gil_hooks", "gil_hooks_sched"]
    if env["bpf"][0]:
        tracers.append("gil_bpf")
    # bpf only on the churn workloads (per-GIL-cycle cost, bpf vs hooks)
    configs = [(w, t) for w in W.GIL_WORKLOADS for t in tracers if not (t == "gil_bpf" and w == "cpu2")]
    log(f"[gil] {len(configs)} cells x {a.gil_rounds} rounds x {a.reps} reps")
    cells = run_interleaved("gil", configs, a.gil_rounds, a.reps, a.quick, log, paired=True)
    res = {"tracers": tracers, "cells": {}}
    for (w, t), c in cells.items():
        acq = [i.get("acquisitions") for i in c["infos"] if i.get("acquisitions") is not None]
        res["cells"][f"{w}/{t}"] = {
            "times_ns": c["times"], "cpu_ns": c["cpu"], "acquisitions": int(median(acq)) if acq else None,
            "base_times_ns": c["base_times"], "base_cpu_ns": c["base_cpu"],
            "rep_acquisitions": [i.get("acquisitions") for i in c["infos"]],
            "threads": (c["infos"][0].get("threads") if c["infos"] else None),
            "backend_reason": (c["infos"][0].get("backend_reason") if c["infos"] else None),
            "sched_status": (c["infos"][0].get("sched_status") if c["infos"] else None),
            "errors": c["errors"],
        }
    return res


def analyse_gil(res, clock):
    key = SAMPLES[clock]
    cells = res["cells"]
    out = {}
    for w in W.GIL_WORKLOADS:
        base = cells.get(f"{w}/none")
        if not base or not base[key]:
            continue
        bmed = median(base[key])
        ctl = cells.get(f"{w}/gil_off")
        cmed = median(ctl[key]) if ctl and ctl[key] else None
        row = {"untraced_ms": bmed / 1e6, "tracers": {}}
        for t in res["tracers"]:
            c = cells.get(f"{w}/{t}")
            if t == "none" or not c or not c[key]:
                continue
            cyc = c["acquisitions"]
            med = median(c[key])
            lo, hi = ratio_ci(c[key], base[key])
            d = {"ratio": med / bmed, "ci": (lo, hi), "cycles": cyc,
                 "ns_per_cycle": (med - bmed) / cyc if cyc else None, "ms": med / 1e6,
                 "ratio_ctl": None, "ci_ctl": (float("nan"), float("nan")), "ns_per_cycle_ctl": None,
                 "paired": None, "paired_ns_per_cycle": None, "paired_vs_ctl": None}
            pr = pair_ratios(c, clock)
            # The paired untraced reps run after the previous rep's session ended: if they are
            # much slower than untraced processes, the probe keeps costing after stop() (the
            # bpf backend keeps its uprobes attached) and the pairs are no baseline.
            d["residual"] = median(c[BASES[clock]]) / bmed if c.get(BASES[clock]) else None
            if d["residual"] is not None and d["residual"] > RESIDUAL_LIMIT:
                pr = []
            if pr:
                d["paired"] = median(pr)
                acqs = c.get("rep_acquisitions") or []
                tb = list(zip(c[key], c[BASES[clock]], acqs))
                per = [(x - y) / n for x, y, n in tb if n]
                d["paired_ns_per_cycle"] = median(per) if per else None
                cp = pair_ratios(ctl, clock) if ctl else []
                if cp and t != "gil_off":
                    d["paired_vs_ctl"] = d["paired"] / median(cp)
            if cmed and t != "gil_off":
                d["ratio_ctl"] = med / cmed
                d["ci_ctl"] = ratio_ci(c[key], ctl[key])
                d["ns_per_cycle_ctl"] = (med - cmed) / cyc if cyc else None
            row["tracers"][t] = d
        out[w] = row
    return out


# --------------------------------------------------------------------- report
def machine_info():
    info = {"nproc": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        info["loadavg"] = open("/proc/loadavg").read().split()[:3]
    except OSError:
        pass
    info["kernel"] = platform.release()
    return info


def _check_rows(A, B, w, prim, other):
    """Rows of the overhead checks table for workload w (A: primary clock, B: other)."""
    rows = []
    x, y = A[w], B.get(w, {})

    def val(d):
        return f"{d['ratio']:.3f} {fmt_ci(*d['ci'])}" if d else "n/a"

    def p10(d):
        return f"{d['p10']:.3f}" if d else "n/a"

    def prd(d):
        return f"{d['paired']:.3f}" if d and d.get("paired") is not None else "n/a"

    def oth(k):
        d = y.get(k)
        return f"{d['ratio']:.3f}" if d else "n/a"

    def ovh_val(d):
        ox, oy = d["overheads"]
        return f"{d['ratio']:.3f} {fmt_ci(*d['ci'])} ({ox:.2f} / {oy:.2f})"

    for k, label, target in (("gt_ovh_vs_floor", "giltracer overhead / floor overhead", TARGET_OVH_VS_FLOOR),
                             ("gt_ovh_vs_vizall", "giltracer overhead / viztracer (all) overhead",
                              TARGET_OVH_VS_VIZALL)):
        g = x.get(k)
        if g:
            ok = g["ratio"] <= target if g["ratio"] == g["ratio"] else None
            rows.append([w, label, ovh_val(g), prd(g), p10(g), oth(k), f"≤ {target}",
                         verdict(ok, *g["ci"], target)])
    g = x.get("noc_vs_gt")
    if g:
        rows.append([w, "giltracer c_calls=False / giltracer (time): not slower than default", val(g), prd(g),
                     p10(g), oth("noc_vs_gt"), f"≤ {TARGET_NOC_VS_GT:.2f}",
                     verdict(g["ratio"] <= TARGET_NOC_VS_GT, *g["ci"], TARGET_NOC_VS_GT)])
    g = x["gt_vs_noop"]
    if g:
        rows.append([w, "giltracer / no-op hook", val(g), prd(g), p10(g), oth("gt_vs_noop"), f"≤ {TARGET_VS_NOOP}",
                     verdict(g["ratio"] <= TARGET_VS_NOOP, *g["ci"], TARGET_VS_NOOP)])
    g = x["gt_vs_viz"]
    if g:
        rows.append([w, "giltracer / viztracer", val(g), prd(g), p10(g), oth("gt_vs_viz"), "< 1",
                     verdict(g["ratio"] < 1, *g["ci"], 1.0)])
    g = x["gt_vs_vizall"]
    if g:
        rows.append([w, "giltracer / viztracer (all)", val(g), prd(g), p10(g), oth("gt_vs_vizall"), "(info)", "—"])
    g = x["gtfn_vs_noop"]
    if g:
        rows.append([w, "giltracer fn-only / no-op hook", val(g), prd(g), p10(g), oth("gtfn_vs_noop"), "(info)", "—"])
    d = x["gt_dropped"]
    rows.append([w, "giltracer dropped events", fmt_int(d), "", "", "", "0", verdict(d == 0) if d is not None else "n/a"])
    return rows


def _first_session_lines(A, B, wls, prim, other):
    """The first session of a process vs its later ones."""
    if not any((A[w].get("first") or {}).get("giltracer") for w in wls):
        return []
    L = ["### First session", "",
         "Per process: the first traced rep (the warm-up, left out of the tables above; it follows one "
         "untraced rep, so the workload itself is warm) / the median of the later traced reps of the same "
         "process. Median over processes [bootstrap 95 %]; \"all\" pools every workload's processes.", ""]

    def cell(d):
        return f"{d['ratio']:.3f} {fmt_ci(*d['ci'])} (n={d['n']})" if d else "n/a"

    rows = []
    pooled = {"giltracer": [], "floor": []}
    pooled_other = {"giltracer": [], "floor": []}
    for w in wls:
        f, g = A[w].get("first") or {}, (B.get(w) or {}).get("first") or {}
        for t in pooled:
            pooled[t] += (A[w].get("first_ratios") or {}).get(t) or []
            pooled_other[t] += ((B.get(w) or {}).get("first_ratios") or {}).get(t) or []
        d = f.get("giltracer")
        rows.append([w, cell(d), cell(g.get("giltracer")), cell(f.get("floor")), f"≤ {TARGET_FIRST}",
                     verdict(d["ratio"] <= TARGET_FIRST, *d["ci"], TARGET_FIRST) if d else "n/a"])
    d = first_session(pooled["giltracer"])
    rows.append(["**all**", cell(d), cell(first_session(pooled_other["giltracer"])),
                 cell(first_session(pooled["floor"])), f"≤ {TARGET_FIRST}",
                 verdict(d["ratio"] <= TARGET_FIRST, *d["ci"], TARGET_FIRST) if d else "n/a"])
    L.append(md_table(["workload", f"giltracer first / later, {prim}", f"giltracer, {other}",
                       f"floor first / later, {prim} (context)", "target", "verdict"], rows,
                      ["l", "r", "r", "r", "r", "l"]))
    L.append("")
    return L


def _floor_targets_summary(A, wls, prim):
    """One line per workload: the floor and first-session targets' verdicts side by side."""
    rows = []
    for w in wls:
        x = A[w]
        r = [w]
        for k, target in (("gt_ovh_vs_floor", TARGET_OVH_VS_FLOOR), ("gt_ovh_vs_vizall", TARGET_OVH_VS_VIZALL),
                          ("noc_vs_gt", TARGET_NOC_VS_GT)):
            g = x.get(k)
            if not g or g["ratio"] != g["ratio"]:
                r.append("n/a")
                continue
            r.append(f"{g['ratio']:.2f} {fmt_ci(*g['ci'])} {verdict(g['ratio'] <= target, *g['ci'], target)}")
        d = (x.get("first") or {}).get("giltracer")
        r.append(f"{d['ratio']:.2f} {fmt_ci(*d['ci'])} {verdict(d['ratio'] <= TARGET_FIRST, *d['ci'], TARGET_FIRST)}"
                 if d else "n/a")
        rows.append(r)
    if not rows:
        return []
    return ["### Floor targets at a glance", "",
            f"{prim} time; the rows above give the details (paired and p10 figures, the other clock).", "",
            md_table(["workload", f"giltracer overhead / floor overhead (≤ {TARGET_OVH_VS_FLOOR})",
                      f"giltracer overhead / viztracer (all) overhead (≤ {TARGET_OVH_VS_VIZALL})",
                      f"c_calls=False / defaults, time (≤ {TARGET_NOC_VS_GT:.2f})",
                      f"first session / later (≤ {TARGET_FIRST})"], rows, ["l", "r", "r", "r", "r"]), ""]


def report(env, data, a):
    L = []
    is_target = sys.version_info[:2] == TARGET_PY
    tgt_note = "" if is_target else f" (the targets are set for {TARGET_PY[0]}.{TARGET_PY[1]}; informational here)"
    prim, other = a.clock, ("wall" if a.clock == "cpu" else "cpu")
    clock_name = {"cpu": "process CPU time (all threads)", "wall": "wall-clock time"}
    L.append(f"# giltracer benchmarks — Python {platform.python_version()}")
    L.append("")
    shared = "shared" if sysconfig.get_config_var("Py_ENABLE_SHARED") else "static"
    L.append(f"- interpreter: `{sys.executable}` ({platform.python_implementation()} "
             f"{sys.version.split()[0]}, {shared} libpython)")
    L.append(f"- giltracer {env['giltracer_version']} ({env['giltracer_path']}): build {env['build_info']}; "
             f"source tree of bench/: {env.get('source_rev', 'unknown')}")
    L.append(f"- viztracer: {env['viztracer_version'] or 'not installed (pip install viztracer) — columns skipped'}")
    L.append(f"- no-op hook and floor (bench/hooks.c): {env['noop_status']}")
    m = env["machine"]
    L.append(f"- machine: {m.get('nproc')} CPUs ({m.get('cpu', '?')}), kernel {m.get('kernel')}, "
             f"load average at start {' '.join(m.get('loadavg', []))}, at end {' '.join(env.get('load_end', []))}")
    L.append(f"- {env['date']}; {'--quick' if a.quick else 'full run'}: {a.rounds} interleaved rounds "
             f"(GIL: {a.gil_rounds}) × {a.reps} timed reps per process; took {env.get('elapsed_s', 0):.0f} s"
             + (f"; sections not re-run this time: {'; '.join(env['reused'])}" if env.get("reused") else ""))
    L.append(f"- verdicts use **{clock_name[prim]}**; the {clock_name[other]} figures are shown next to them. "
             "CPU time leaves out the time a process waits for a CPU that other processes hold, which on a "
             "busy shared machine dominates wall-time noise; on an idle machine the two agree for "
             "single-threaded workloads.")
    L.append("- every cell: a fresh process, 1 warm-up rep, then timed reps of the workload call only; medians "
             "over all samples; [a–b] = bootstrap 95 % interval of the ratio. Shared 2-vCPU machine: ratio "
             "differences under ~10 % are noise; a verdict whose interval straddles the target says so.")
    L.append("")

    ov = data.get("overhead")
    if ov:
        A = data["overhead_analysis"][prim]
        B = data["overhead_analysis"][other]
        tr = [t for t in ov["tracers"] if t != "none"]
        wls = [w for w in ov["workloads"] if w in A]
        L.append("## 1. Tracer overhead")
        L.append("")
        rows = [[f"untraced median, {prim} (ms)"] + [f"{A[w]['untraced_ms']:.1f}" for w in wls],
                [f"untraced median, {other} (ms)"] + [f"{B[w]['untraced_ms']:.1f}" if w in B else "n/a" for w in wls],
                ["call events per run (giltracer)"] + [fmt_int(A[w]["events"]) for w in wls],
                ["giltracer dropped events"] + [fmt_int(A[w]["gt_dropped"]) for w in wls]]
        if any(A[w].get("floor_events") for w in wls):
            rows += [["records per run (floor)"] + [fmt_int(A[w].get("floor_events")) for w in wls],
                     ["floor dropped records"] + [fmt_int(A[w].get("floor_dropped")) for w in wls]]
        L.append(md_table(["workload"] + wls, rows))
        L.append("")
        for clk, X, with_ns in ((prim, A, True), (other, B, True)):
            L.append(f"Slowdown vs untraced, {clock_name[clk]}, and (ns added per call event):")
            L.append("")
            rows = []
            for t in tr:
                r = [T.TRACERS[t][0]]
                for w in wls:
                    x = X.get(w, {}).get("tracers", {}).get(t)
                    if not x:
                        r.append("n/a")
                        continue
                    ns = x["ns_per_event"]
                    r.append(f"{fmt_ratio(x['ratio'])} ({ns:.0f})" if (ns is not None and with_ns)
                             else fmt_ratio(x["ratio"]))
                rows.append(r)
            L.append(md_table(["tracer"] + wls, rows))
            L.append("")
        L.append(f"Slowdown vs the paired untraced rep (same process, just before), {clock_name[prim]}:")
        L.append("")
        rows = []
        for t in tr:
            r = [T.TRACERS[t][0]]
            for w in wls:
                x = A.get(w, {}).get("tracers", {}).get(t)
                r.append(fmt_ratio(x["paired"]) if x and x.get("paired") is not None else "n/a")
            rows.append(r)
        L.append(md_table(["tracer"] + wls, rows))
        L.append("")
        notes = []
        if "cprofile" in tr and sys.version_info < (3, 12):
            notes.append("cProfile before 3.12 profiles only the thread that enabled it: its threads2 cell does "
                         "not trace the two workers.")
        if sys.version_info >= (3, 12):
            notes.append("3.12+: giltracer uses sys.monitoring; the no-op hook is the legacy PyEval_SetProfile, "
                         "which the interpreter runs on top of sys.monitoring (so it is not the floor of "
                         "sys.monitoring itself); cProfile uses sys.monitoring and sees every thread.")
        if "viztracer" in tr:
            notes.append("viztracer (defaults) keeps a 1e6-entry ring buffer (1 entry per call, = 2 events): on "
                         "builtins and threads2 it overwrites old entries; viztracer (all) has "
                         f"tracer_entries={T.VIZ_ALL_ENTRIES:.0e} and keeps everything.")
        notes.append(f"giltracer: defaults (functions + C calls, GIL probe, sched), backend='hooks', "
                     f"max_events={T.GT_MAX_EVENTS:,} so nothing is dropped; fn-only = gil=False, sched=False; "
                     "c_calls=False = the defaults without C calls.")
        if "floor" in tr:
            notes.append("floor = the minimal recording hook (bench/hooks.c): per event one rdtsc, a strong "
                         "reference to the code object (C events: the PyMethodDef*, tagged) and a 24-byte store "
                         "into a pre-faulted per-thread array; "
                         + ("sys.monitoring C callbacks for the events giltracer registers (PY_START/RESUME/"
                            "THROW, PY_RETURN/YIELD, PY_UNWIND, CALL, C_RETURN, C_RAISE)."
                            if sys.version_info >= (3, 12) else
                            "PyEval_SetProfile, the array found through the hook's obj argument."))
        for n in notes:
            L.append(f"- {n}")
        L.append("")
        ov_note = "" if is_target else (f" (the floor and first-session targets apply on every version; the no-op hook "
                                        f"and viztracer-defaults rows are set for {TARGET_PY[0]}.{TARGET_PY[1]}: "
                                        "informational here)")
        L.append(f"Checks{ov_note}:")
        L.append("")
        rows = []
        for w in wls:
            rows += _check_rows(A, B, w, prim, other)
        L.append(md_table(["workload", "check", f"{prim} median ratio [95 %]", f"{prim} paired",
                           f"{prim} p10 ratio", f"{other} median ratio", "target", "verdict"], rows,
                          ["l", "l", "r", "r", "r", "r", "r", "l"]))
        L.append("")
        L.append("*overhead* = slowdown − 1; \"A overhead / B overhead\" shows (A's / B's overhead) next to "
                 "the ratio; its interval resamples A, B and the untraced samples. ")
        L.append("")
        L.append("Verdicts use the median ratio. *paired*: every traced rep is preceded by an untraced rep "
                 "in the same process; paired = median(traced/untraced of each pair) of one tracer over the "
                 "other's, which cancels slow periods of the host that last longer than a rep. *p10 ratio* = "
                 "ratio of the 10th percentiles (the undisturbed periods). When these disagree with the "
                 "median, the host's slow periods hit the cells unevenly: re-run, or add --rounds.")
        errs = [(k, c["errors"]) for k, c in ov["cells"].items() if c["errors"]]
        if errs:
            L.append("")
            L.append("Errors: " + "; ".join(f"{k}: {e[0]}" for k, e in errs))
        L.append("")
        L.extend(_first_session_lines(A, B, wls, prim, other))
        L.extend(_floor_targets_summary(A, wls, prim))

    sv = data.get("save_analysis")
    if sv:
        L.append("## 2. Save speed and size")
        L.append("")
        L.append("One traced run of the workload (giltracer defaults, hooks), then `t.save()` timed (wall; "
                 "median over 3 saves × processes). Peak extra = VmHWM after − VmRSS before the first save, "
                 "VmHWM reset through /proc/self/clear_refs right before it. Per event = per call event "
                 "(t.event_count; viztracer: 2 per entry). viztracer: `parse()` + `save()` of the same "
                 "workload (tracer_entries large enough), one process per workload.")
        L.append("")
        rows = []
        for w in SAVE_WORKLOADS:
            for tr, fmt, label in (("giltracer", "json", "giltracer .json"), ("giltracer", "html", "giltracer .html"),
                                   ("viztracer", "json", "viztracer .json")):
                d = sv.get(f"{w}/{tr}/{fmt}")
                if not d:
                    continue
                if "events" not in d:
                    rows.append([w, label, "error: " + d["errors"][0][:80]] + [""] * 7)
                    continue
                extra = ""
                if tr == "viztracer":
                    extra = f"parse {d['parse_ms']:.0f} ms + write {d['write_ms']:.0f} ms ({d['json_lib']})"
                elif "stop_ns_per_event" in d:
                    extra = f"stop() {d['stop_ns_per_event']:.0f} ns/event"
                rows.append([w, label, fmt_int(d["events"]), f"{d['save_ms']:.1f}", f"{d['ns_per_event']:.0f}",
                             f"{d['bytes'] / 1e6:.1f}", f"{d['bytes_per_event']:.1f}",
                             f"{d['peak_extra'] / 1e6:.2f}", f"{d['peak_per_event']:.1f}", extra])
        L.append(md_table(["workload", "output", "events", "save ms", "ns/event", "MB", "B/event",
                           "peak extra MB", "peak B/event", "notes"], rows,
                          ["l", "l", "r", "r", "r", "r", "r", "r", "r", "l"]))
        L.append("")
        L.append(f"Checks{tgt_note}; the targets are for .json, .html is for information:")
        L.append("")
        rows = []
        for w in SAVE_WORKLOADS:
            for fmt in ("json", "html"):
                d = sv.get(f"{w}/giltracer/{fmt}")
                if not d or "events" not in d:
                    continue
                j = fmt == "json"
                tag = "" if j else " (info)"
                peak_ok = (verdict(d["peak_per_event"] <= TARGET_SAVE_PEAK) if d["hwm_reset"]
                           else "n/a (clear_refs refused)")
                rows.append([w, f".{fmt} ns/event{tag}", f"{d['ns_per_event']:.0f}", f"≤ {TARGET_SAVE_NS}",
                             verdict(d["ns_per_event"] <= TARGET_SAVE_NS) if j else "—"])
                rows.append([w, f".{fmt} bytes/event{tag}", f"{d['bytes_per_event']:.1f}", f"≤ {TARGET_SAVE_BYTES}",
                             verdict(d["bytes_per_event"] <= TARGET_SAVE_BYTES) if j else "—"])
                rows.append([w, f".{fmt} peak extra bytes/event{tag}", f"{d['peak_per_event']:.1f}",
                             f"≤ {TARGET_SAVE_PEAK}", peak_ok if j else "—"])
        L.append(md_table(["workload", "check", "value", "target", "verdict"], rows, ["l", "l", "r", "r", "l"]))
        L.append("")

    gl = data.get("gil")
    if gl:
        G = data["gil_analysis"][prim]
        H = data["gil_analysis"][other]
        L.append("## 3. GIL probe costs")
        L.append("")
        L.append(f"churn2: two threads × {W.CHURN_ITERS:,} `os.fstat(0)` (each call releases and re-acquires "
                 f"the GIL); churn1: the same in one thread (no contention); cpu2: two threads × "
                 f"{W.CPU_ITERS:,} iterations of a pure-Python loop. Functions off in every traced cell. "
                 "Cycles = GIL acquisitions counted by the probe (all threads, median). "
                 "Added ns/cycle = (median traced − median untraced) / cycles. \"all off\" is a control: "
                 "giltracer imported and a session started with functions, GIL probe and sched all off, so "
                 "\"vs all off\" isolates the probe from what importing giltracer and starting a session "
                 "do to the process (memory layout, extra objects for the GC).")
        L.append("")
        rows = []
        for w in W.GIL_WORKLOADS:
            if w not in G:
                continue
            x, y = G[w], H.get(w, {"tracers": {}, "untraced_ms": float("nan")})
            rows.append([w, "untraced", f"{x['untraced_ms']:.1f}", "1.00×", "", "", "", "", "", "",
                         f"{y['untraced_ms']:.1f}", "", ""])
            for t in gl["tracers"]:
                p, o = x["tracers"].get(t), y["tracers"].get(t)
                if not p:
                    continue

                def npc(d):
                    # per-cycle cost only means something where every cycle is a release/re-acquire
                    if not d or d["ns_per_cycle"] is None or not w.startswith("churn"):
                        return ""
                    return f"{d['ns_per_cycle']:.0f}"

                def ppc(d):
                    if not d or d.get("paired_ns_per_cycle") is None or not w.startswith("churn"):
                        return ""
                    return f"{d['paired_ns_per_cycle']:.0f}"

                def pr(d):
                    return fmt_ratio(d["paired"]) if d and d.get("paired") is not None else ""

                def vs_ctl(d):
                    return fmt_ratio(d["paired_vs_ctl"]) if d and d.get("paired_vs_ctl") is not None else ""

                def resid(d):
                    if not d or d.get("residual") is None:
                        return ""
                    r = fmt_ratio(d["residual"])
                    return f"**{r}**" if d["residual"] > RESIDUAL_LIMIT else r

                rows.append([w, T.TRACERS[t][0], f"{p['ms']:.1f}", f"{fmt_ratio(p['ratio'])} {fmt_ci(*p['ci'])}",
                             pr(p), fmt_int(p["cycles"]), npc(p), ppc(p), vs_ctl(p), resid(p),
                             f"{o['ms']:.1f}" if o else "", pr(o), ppc(o)])
        L.append(md_table(["workload", "probe", f"{prim} ms", "median slowdown [95 %]", "paired slowdown",
                           "cycles", "added ns/cycle (medians)", "added ns/cycle (paired)",
                           "paired vs all off", "untraced after stop()", f"{other} ms", f"{other} paired",
                           f"{other} paired ns/cycle"],
                          rows, ["l", "l", "r", "r", "r", "r", "r", "r", "r", "r", "r", "r", "r"]))
        L.append("")
        L.append("*paired*: every traced rep is preceded by an untraced rep in the same process; paired "
                 "slowdown = median of traced/untraced per pair, paired ns/cycle = median of (traced − "
                 "untraced) / that rep's cycles. The GIL workloads' contention regime drifts over minutes on "
                 "this machine (churn2 moved between ~400 and ~600 ms untraced within one run), which the "
                 "pairs cancel and the medians of separate processes do not; the GIL verdicts use the "
                 "paired figures. *paired vs all off* = paired slowdown / the control's paired slowdown. "
                 "*untraced after stop()* = the paired untraced reps (which run after the previous rep's "
                 f"session has ended) over untraced processes: above {RESIDUAL_LIMIT} (bold) the probe keeps "
                 "costing after the session ended, the pairs are no baseline and that row's paired "
                 "columns are left empty (use the medians).")
        L.append("")
        if not data["env"]["bpf"][0]:
            L.append(f"bpf backend skipped: {data['env']['bpf'][1]}")
            L.append("")
        else:
            bad = [c["errors"][0] for k, c in gl["cells"].items() if k.endswith("/gil_bpf") and c["errors"]
                   and not c["times_ns"]]
            if bad:
                L.append(f"bpf backend failed (build says available): {bad[0]}")
                L.append("")
        L.append(f"Checks{tgt_note}:")
        L.append("")
        rows = []

        def both(w, t):
            return G.get(w, {}).get("tracers", {}).get(t), H.get(w, {}).get("tracers", {}).get(t)

        def ns(d, k):
            return f"{d[k]:.0f}" if d and d.get(k) is not None else "n/a"

        def rt(d, k):
            return f"{d[k]:.3f}" if d and d.get(k) is not None else "n/a"

        p, o = both("churn2", "gil_hooks")
        if p:
            v = p.get("paired_ns_per_cycle")
            rows.append(["churn2", "hooks: added ns per GIL cycle (paired)", ns(p, "paired_ns_per_cycle"),
                         ns(p, "ns_per_cycle"), ns(o, "paired_ns_per_cycle"), f"≤ {TARGET_GIL_CYCLE_NS}",
                         verdict(v <= TARGET_GIL_CYCLE_NS) if v is not None else "n/a"])
        p, o = both("churn1", "gil_hooks")
        if p:
            rows.append(["churn1", "hooks: added ns per GIL cycle, no contention (info)",
                         ns(p, "paired_ns_per_cycle"), ns(p, "ns_per_cycle"), ns(o, "paired_ns_per_cycle"),
                         f"≤ {TARGET_GIL_CYCLE_NS}", "—"])
        p, o = both("churn2", "gil_hooks_sched")
        if p:
            rows.append(["churn2", "hooks + sched: added ns per GIL cycle (info)", ns(p, "paired_ns_per_cycle"),
                         ns(p, "ns_per_cycle"), ns(o, "paired_ns_per_cycle"), "", "—"])
        p, o = both("cpu2", "gil_hooks")
        if p:
            v = p.get("paired")
            rows.append(["cpu2", "hooks, functions off: slowdown (paired)", rt(p, "paired"),
                         f"{p['ratio']:.3f} {fmt_ci(*p['ci'])}", rt(o, "paired"), f"≤ {TARGET_CPU2}",
                         verdict(v <= TARGET_CPU2) if v is not None else "n/a"])
            rows.append(["cpu2", "hooks, functions off: paired slowdown vs all-off control (info)",
                         rt(p, "paired_vs_ctl"), "", rt(o, "paired_vs_ctl"), f"≤ {TARGET_CPU2}", "—"])
        p, o = both("cpu2", "gil_hooks_sched")
        if p:
            rows.append(["cpu2", "hooks + sched, functions off: slowdown (info)", rt(p, "paired"),
                         f"{p['ratio']:.3f} {fmt_ci(*p['ci'])}", rt(o, "paired"), "", "—"])
        for w in ("churn2", "churn1"):
            y = G.get(w, {}).get("tracers", {})
            if "gil_bpf" in y and "gil_hooks" in y:
                bp, hk = y["gil_bpf"], y["gil_hooks"]
                rows.append([w, "bpf vs hooks: added ns per GIL cycle",
                             f"{ns(bp, 'paired_ns_per_cycle')} vs {ns(hk, 'paired_ns_per_cycle')}",
                             f"{ns(bp, 'ns_per_cycle')} vs {ns(hk, 'ns_per_cycle')}", "", "(info)", "—"])
                if bp.get("residual") is not None and bp["residual"] > RESIDUAL_LIMIT:
                    rows.append([w, "bpf: untraced code after the session ended, vs a fresh process (info)",
                                 fmt_ratio(bp["residual"]), "", "", "≈ 1.00×", "—"])
        L.append(md_table(["workload", "check", f"{prim} paired", f"{prim} medians", f"{other} paired",
                           "target", "verdict"], rows, ["l", "l", "r", "r", "r", "r", "l"]))
        errs = [(k, c["errors"]) for k, c in gl["cells"].items() if c["errors"]]
        if errs:
            L.append("")
            L.append("Errors: " + "; ".join(f"{k}: {e[0]}" for k, e in errs))
        L.append("")
    return "\n".join(L)


# ------------------------------------------------------------------------ main
def environment(log):
    env = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "machine": machine_info()}
    try:
        import giltracer
        from giltracer import _core
    except ImportError as e:
        sys.exit(f"giltracer is not importable with {sys.executable}: {e}\n"
                 "build it first: `make bench` (or pip install --no-build-isolation .)")
    env["giltracer_version"] = getattr(giltracer, "__version__", "?")
    env["giltracer_path"] = os.path.dirname(giltracer.__file__)
    env["build_info"] = _core.build_info()
    env["bpf"] = T.bpf_status()
    try:  # the tree bench/ lives in (what `make bench` built giltracer from)
        rev = subprocess.run(["git", "-C", HERE, "describe", "--always", "--dirty", "--exclude", "*"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        rev = ""
    env["source_rev"] = rev or "unknown"
    ok = ["none", "cprofile", "giltracer", "giltracer_fn", "giltracer_noc", "gil_hooks", "gil_hooks_sched", "gil_bpf"]
    try:
        import hooks

        env["noop_status"] = f"built with the running interpreter's headers ({hooks.build()})"
        problems = hooks.self_check()
        if problems:
            raise RuntimeError("floor self-check failed: " + "; ".join(problems))
        env["noop_status"] += "; floor self-check passed"
        ok += ["noop", "floor"]
    except Exception as e:  # noqa: BLE001 - report and skip the columns
        env["noop_status"] = f"could not be built, no-op hook and floor skipped: {e}"
        log(f"warning: {env['noop_status']}")
    if T.have_viztracer():
        import viztracer

        env["viztracer_version"] = getattr(viztracer, "__version__", "?")
        ok += ["viztracer", "viztracer_all"]
    else:
        env["viztracer_version"] = None
        log("note: viztracer is not installed; its columns are skipped. To include them: "
            f"{sys.executable} -m pip install viztracer")
    env["tracers_ok"] = ok
    return env


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer rounds and reps, fewer columns (≤ 3 minutes)")
    ap.add_argument("--self-check", action="store_true",
                    help="only check the floor hook (bench/hooks.c) against known event counts and references")
    ap.add_argument("--rounds", type=int, help="interleaved rounds (processes per cell; full 6, quick 2)")
    ap.add_argument("--gil-rounds", type=int, help="interleaved rounds for the GIL tables (default: --rounds, at most 4)")
    ap.add_argument("--reps", type=int, help="timed reps per process (full 3, quick 2)")
    ap.add_argument("--out", default=os.path.join(HERE, "results"), help="report directory (bench/results)")
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                    help="clock the verdicts use (default: process CPU time; both are reported)")
    ap.add_argument("--only", default="overhead,save,gil", help="comma list of sections: overhead,save,gil")
    a = ap.parse_args(argv)
    if a.self_check:
        import hooks

        problems = hooks.self_check()
        for p in problems:
            print("FAIL:", p)
        print("floor hook self-check:", "FAIL" if problems else "PASS")
        return 1 if problems else 0
    # Many short processes rather than few long ones: on a shared VM a whole process can
    # land in a slow period (samples of one process move together), so the number of
    # processes per cell is what makes the medians stable.
    a.rounds = a.rounds or (2 if a.quick else 6)
    # the GIL cells are fewer but longer (the bpf ones cost seconds): fewer rounds keep a
    # full run under ~10 minutes
    a.gil_rounds = a.gil_rounds or (a.rounds if a.quick else min(a.rounds, 4))
    a.reps = a.reps or (2 if a.quick else 3)
    only = set(a.only.split(","))
    if a.quick:
        W.scale(True)

    def log(msg):
        print(msg, flush=True)

    t0 = time.monotonic()
    env = environment(log)
    log(f"giltracer benchmarks with {sys.executable} (Python {platform.python_version()}), "
        f"build {env['build_info']}")
    data = {"env": env, "args": vars(a)}
    if "overhead" in only:
        data["overhead"] = section_overhead(a, env, log)
        data["overhead_analysis"] = {c: analyse_overhead(data["overhead"], c) for c in SAMPLES}
    if "save" in only:
        data["save"] = section_save(a, env, log)
        data["save_analysis"] = analyse_save(data["save"])
    if "gil" in only:
        data["gil"] = section_gil(a, env, log)
        data["gil_analysis"] = {c: analyse_gil(data["gil"], c) for c in SAMPLES}
    env["elapsed_s"] = time.monotonic() - t0
    env["load_end"] = machine_info().get("loadavg", [])
    os.makedirs(a.out, exist_ok=True)
    tag = platform.python_version() + ("t" if sysconfig.get_config_var("Py_GIL_DISABLED") else "")
    if a.quick:
        tag += "-quick"
    md = os.path.join(a.out, f"{tag}.md")
    js = os.path.join(a.out, f"{tag}.json")
    # --only runs some sections: keep the others from the previous report of this
    # interpreter (same file), re-analysed with this code, and say so in the header.
    missing = [k for k in ("overhead", "save", "gil") if k not in only]
    if missing and os.path.exists(js):
        try:
            with open(js) as f:
                old = json.load(f)
        except (OSError, ValueError):
            old = {}
        for k in missing:
            if k in old:
                data[k] = old[k]
                env.setdefault("reused", []).append(f"{k} from the run of {old.get('env', {}).get('date', '?')}")
        if "overhead" in missing and "overhead" in data:
            data["overhead_analysis"] = {c: analyse_overhead(data["overhead"], c) for c in SAMPLES}
        if "save" in missing and "save" in data:
            data["save_analysis"] = analyse_save(data["save"])
        if "gil" in missing and "gil" in data:
            data["gil_analysis"] = {c: analyse_gil(data["gil"], c) for c in SAMPLES}
    text = report(env, data, a)
    with open(md, "w") as f:
        f.write(text + "\n")
    with open(js, "w") as f:
        json.dump(data, f, indent=1, default=str)
    print()
    print(text)
    print(f"\nwrote {md} and {js} ({env['elapsed_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
