"""One benchmark configuration, run in a fresh process; prints one JSON object.

  python bench/worker.py time WORKLOAD TRACER [--reps N] [--quick]
      One warm-up rep, then N timed reps. Each rep: tracer.start(), then only the
      workload call is timed (perf_counter_ns), then tracer.stop() (merge, facts)
      outside the timed region. Nothing is saved. The warm-up rep, the process's
      first session, is left out of the samples and reported on its own (first_*).

  python bench/worker.py save WORKLOAD giltracer|viztracer FORMAT [--reps N]
      Trace the workload once (everything kept), then time save() to FORMAT
      (json or html; viztracer: json, i.e. parse + write). The first save also
      measures peak extra memory: VmHWM is reset through /proc/self/clear_refs
      right before it, and extra = VmHWM after - VmRSS before.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import tracers  # noqa: E402
import workloads  # noqa: E402


def _status():
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                k, v = line.split(":", 1)
                out[k] = int(v.split()[0]) * 1024
    return out


def _reset_hwm() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _timed(fn):
    gc.collect()
    c0 = time.process_time_ns()
    t0 = time.perf_counter_ns()
    fn()
    t1 = time.perf_counter_ns()
    c1 = time.process_time_ns()
    return t1 - t0, c1 - c0


def cmd_time(a) -> dict:
    workloads.scale(a.quick)
    fn, setup = workloads.WORKLOADS[a.workload]
    if setup:
        setup()
    tr = tracers.make(a.tracer, a.workload)
    out = {"times_ns": [], "cpu_ns": [], "infos": []}
    if a.paired:
        out.update(base_times_ns=[], base_cpu_ns=[])
    for rep in range(1 + a.reps):
        if a.paired:
            # an untraced rep of the same workload in the same process right before the
            # traced one: a baseline that shares the machine's state of the moment
            bw, bc = _timed(fn)
        gc.collect()
        tr.start()
        c0 = time.process_time_ns()
        t0 = time.perf_counter_ns()
        fn()
        t1 = time.perf_counter_ns()
        c1 = time.process_time_ns()
        info = tr.stop()
        if rep:  # rep 0 is the warm-up
            out["times_ns"].append(t1 - t0)
            out["cpu_ns"].append(c1 - c0)
            out["infos"].append(info)
            if a.paired:
                out["base_times_ns"].append(bw)
                out["base_cpu_ns"].append(bc)
        else:  # the first session of this process (after one untraced rep when paired)
            out["first_time_ns"] = t1 - t0
            out["first_cpu_ns"] = c1 - c0
    return out


def _save_giltracer(fn, fmt, reps, path):
    import giltracer

    t = giltracer.trace(backend="hooks", max_events=tracers.GT_MAX_EVENTS)
    t.start()
    t0 = time.perf_counter_ns()
    fn()
    t1 = time.perf_counter_ns()
    s0 = time.perf_counter_ns()
    t.stop()
    s1 = time.perf_counter_ns()
    res = {"events": t.event_count, "dropped": t.dropped_events,
           "traced_ns": t1 - t0, "stop_ns": s1 - s0}
    gc.collect()
    before = _status()
    res["hwm_reset"] = _reset_hwm()
    w0 = time.perf_counter_ns()
    t.save(path)
    w1 = time.perf_counter_ns()
    after = _status()
    res.update(rss_before=before["VmRSS"], hwm_after=after["VmHWM"], rss_after=after["VmRSS"],
               bytes=os.path.getsize(path), save_ns=[w1 - w0])
    for _ in range(reps - 1):
        os.unlink(path)
        w0 = time.perf_counter_ns()
        t.save(path)
        res["save_ns"].append(time.perf_counter_ns() - w0)
    return res


def _save_viztracer(fn, fmt, reps, path):
    from viztracer import VizTracer
    import viztracer.report_builder as rb

    viz = VizTracer(verbose=0, tracer_entries=tracers.VIZ_ALL_ENTRIES)
    viz.start()
    t0 = time.perf_counter_ns()
    fn()
    t1 = time.perf_counter_ns()
    viz.stop()
    res = {"traced_ns": t1 - t0, "json_lib": getattr(getattr(rb, "json", None), "__name__", "?")}
    gc.collect()
    before = _status()
    res["hwm_reset"] = _reset_hwm()
    p0 = time.perf_counter_ns()
    entries = viz.parse()
    p1 = time.perf_counter_ns()
    viz.save(path)
    p2 = time.perf_counter_ns()
    after = _status()
    res.update(entries=entries, events=2 * entries, overflow=entries >= tracers.VIZ_ALL_ENTRIES,
               rss_before=before["VmRSS"], hwm_after=after["VmHWM"], rss_after=after["VmRSS"],
               bytes=os.path.getsize(path), parse_ns=p1 - p0, write_ns=[p2 - p1],
               save_ns=[p2 - p0])
    # Later reps time the write only (parse() results are cached by viztracer); the
    # reported save time is the first rep's parse + write.
    return res


def cmd_save(a) -> dict:
    fn, setup = workloads.WORKLOADS[a.workload]
    if setup:
        setup()
    d = tempfile.mkdtemp(prefix="gt-bench-save-")
    try:
        path = os.path.join(d, "trace." + a.format)
        if a.tracer == "giltracer":
            return _save_giltracer(fn, a.format, a.reps, path)
        if a.tracer == "viztracer":
            return _save_viztracer(fn, a.format, a.reps, path)
        raise SystemExit(f"unknown tracer {a.tracer}")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("time")
    p.add_argument("workload", choices=sorted(workloads.WORKLOADS))
    p.add_argument("tracer", choices=sorted(tracers.TRACERS))
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--paired", action="store_true",
                   help="before each traced rep, time one untraced rep in the same process")
    p = sub.add_parser("save")
    p.add_argument("workload", choices=sorted(workloads.WORKLOADS))
    p.add_argument("tracer", choices=("giltracer", "viztracer"))
    p.add_argument("format", choices=("json", "html"))
    p.add_argument("--reps", type=int, default=3)
    a = ap.parse_args(argv)
    out = cmd_time(a) if a.cmd == "time" else cmd_save(a)
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
