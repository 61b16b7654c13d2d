"""Validation of the what-if prediction: "would free-threading help?"

Each workload is traced on 3.14 with the GIL (giltracer.trace, hooks backend) and the
prediction of its wall time without the GIL on this machine's CPUs is read from
``t.what_if()``; the same workload runs untraced on the free-threaded 3.14t, where its wall
time is measured. Medians of 9 runs with [min, max]; error = predicted / measured 3.14t - 1.
(9, not 5: 3.14t's time varies from one process to the next, cpu-1 0.19-0.33 s in one run of
5, and a median of 5 could land in the slow cluster.)
Target: |error| <= 25 % on every workload, <= 15 % on the median.

Fresh processes of either interpreter run the same loop at one of a few speeds here and
keep it, so each process first times a fixed loop (process_speed); the report shows, as
information beside the verdict, the error the two processes' speeds alone make per pair
and how the paired errors of the CPU-bound workloads follow it.

Workloads: CPU-bound threads 1, 2, 3, 4 (a pure-Python loop); mixed CPU + I/O (sleeps); a
producer/consumer queue; threads with a shared lock; a NumPy-heavy thread pool (skipped, with
the reason printed, where NumPy cannot be imported).

    python bench/what_if_bench.py --gil PY3.14 --ft PY3.14t [--runs 9] [--out bench/results]
    (`make bench-what-if` runs it in the sid chroot; the 3.14 side needs giltracer installed)

"""

import argparse
import json
import os
import queue
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# NumPy's BLAS would start its own threads: one thread each, so the Python threads are
# what the GIL (or its absence) schedules, on both interpreters alike.
for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

SPIN = 4_000_000  # a thread's CPU-bound work: about 0.2-0.3 s on 3.14 here


def spin(n):
    x = 0
    for i in range(n):
        x += i ^ 3
    return x


def run_threads(targets):
    ts = [threading.Thread(target=f, name=name) for name, f in targets]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def cpu(k):
    def w():
        run_threads([(f"cpu-{i}", lambda: spin(SPIN)) for i in range(k)])
    return w


def mixed_io():
    """Two threads, each 10 times: CPU work, then a 15 ms sleep (I/O stand-in)."""
    def one():
        for _ in range(10):
            spin(SPIN // 20)
            time.sleep(0.015)
    run_threads([("io-0", one), ("io-1", one)])


def producer_consumer():
    """A producer computes 200 items and queues them; a consumer computes on each."""
    q = queue.Queue(maxsize=8)

    def producer():
        for i in range(200):
            spin(SPIN // 200)
            q.put(i)
        q.put(None)

    def consumer():
        while q.get() is not None:
            spin(SPIN // 200)
    run_threads([("producer", producer), ("consumer", consumer)])


def shared_lock():
    """Four threads: 200 times, work outside, then a shorter piece under a shared lock."""
    lock = threading.Lock()

    def one():
        for _ in range(200):
            spin(SPIN // 800)
            with lock:
                spin(SPIN // 2400)
    run_threads([(f"locker-{i}", one) for i in range(4)])


def numpy_pool():
    """A pool of 4 threads, 512 tasks: small NumPy operations driven from Python (the GIL
    held) around a matrix product (the GIL released inside). (512, not 32: 32 tasks took
    12 ms, where the pool's start-up and the timer spread the runs by +-25 % alone.)"""
    import numpy as np
    from concurrent.futures import ThreadPoolExecutor
    rng = np.random.default_rng(1)
    mats = [rng.random((160, 160)) for _ in range(4)]

    def task(i):
        a = mats[i % 4]
        s = 0.0
        for j in range(300):
            s += float(a[j % 160, :8].sum())
        return s + float((a @ a).sum())
    with ThreadPoolExecutor(4, thread_name_prefix="np") as ex:
        list(ex.map(task, range(512)))


def numpy_missing():
    try:
        import numpy  # noqa: F401
    except ImportError as e:
        return f"NumPy cannot be imported here ({e}): pip install numpy into this interpreter"
    return None


WORKLOADS = {
    "cpu-1": cpu(1), "cpu-2": cpu(2), "cpu-3": cpu(3), "cpu-4": cpu(4),
    "mixed-io": mixed_io, "queue": producer_consumer, "lock": shared_lock, "numpy-pool": numpy_pool,
}


def timed(fn, cpu=None):
    """Wall time of fn() in s; with a list `cpu`, appends the process's CPU time (all
    threads, user + system) meanwhile: CPU / wall is the parallelism the machine gave."""
    c0, t0 = os.times(), time.perf_counter()
    fn()
    t1, c1 = time.perf_counter(), os.times()
    if cpu is not None:
        cpu.append((c1.user - c0.user) + (c1.system - c0.system))
    return t1 - t0


PROBE = 300_000  # the process-speed probe's loop: about 15-25 ms here


def process_speed():
    """This process's speed on a fixed loop (thread CPU s, best of 3). Fresh processes of
    one interpreter run the same loop at one of a few speeds here (up to 1.5x apart) and
    keep it: the probe says which one each run got."""
    best = None
    for _ in range(3):
        t0 = time.thread_time()
        spin(PROBE)
        d = time.thread_time() - t0
        best = d if best is None else min(best, d)
    return best


def stats(xs):
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "runs": xs}


def cpus():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def warmed_up(names, out):
    """(name, workload) of each name, run once first; a workload that cannot run here is
    noted as skipped in out["workloads"] instead."""
    for name in names:
        if name == "numpy-pool" and numpy_missing():
            out["workloads"][name] = {"skipped": numpy_missing()}
            continue
        fn = WORKLOADS[name]
        fn()  # warm-up
        yield name, fn


# ---------------------------------------------------------------- the 3.14t side
def side_ft(names, runs):
    import sysconfig
    out = {"python": sys.version.split()[0], "free_threaded": bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
           "gil_enabled": getattr(sys, "_is_gil_enabled", lambda: True)(), "cpus": cpus(), "workloads": {}}
    for name, fn in warmed_up(names, out):
        cpu_s, probe = [], [process_speed()]
        out["workloads"][name] = {"wall": [timed(fn, cpu_s) for _ in range(runs)], "cpu": cpu_s,
                                  "probe": probe}
    return out


# ---------------------------------------------------------------- the 3.14 side
def prediction(t, n_cpus, factor, event_ns=None, parallel_speed=None):
    """``t.what_if()``: the model's predicted wall time and the tracer's cost it removed (s),
    and the free-threading factor it used."""
    kw = {} if factor is None else {"ft_factor": factor}
    if event_ns is not None:
        kw["event_ns"] = event_ns
    if parallel_speed is not None:
        kw["parallel_speed"] = parallel_speed
    w = t.what_if(cpus=n_cpus, **kw)
    return w.predicted_wall_s, w.tracer_s, w.ft_factor


def side_gil(names, runs, factor, trace_opts, event_ns=None, traced_first=False,
             parallel_speed=None):
    """traced_first: the traced runs before the untraced ones (when this side runs after the
    3.14t one, so that the traced run and the 3.14t run it is paired with stay adjacent)."""
    import giltracer
    n_cpus = cpus()
    out = {"python": sys.version.split()[0], "giltracer": getattr(giltracer, "__version__", "?"), "cpus": n_cpus,
           "ft_factor": factor, "event_ns": event_ns, "trace_opts": trace_opts,
           "parallel_speed": parallel_speed, "workloads": {}}
    for name, fn in warmed_up(names, out):
        cpu_s, probe = [], [process_speed()]
        traced, preds, tracer, threads, independent, factors = [], [], [], None, [], []

        def run_traced():
            nonlocal threads
            for _ in range(runs):
                with giltracer.trace(backend="hooks", **trace_opts) as t:
                    traced.append(timed(fn))
                threads = [{"tid": s.tid, "name": s.name, "wall_s": s.wall_ns / 1e9, "held_s": s.held_ns / 1e9,
                            "wait_s": s.wait_ns / 1e9, "released_s": s.released_ns / 1e9} for s in t.summary()]
                p, c, f = prediction(t, n_cpus, factor, event_ns, parallel_speed)
                preds.append(p)
                tracer.append(c)
                factors.append(f)
                independent.append(prediction(t, n_cpus, factor, event_ns, 1.0)[0])

        if traced_first:
            run_traced()
        untraced = [timed(fn, cpu_s) for _ in range(runs)]
        if not traced_first:
            run_traced()
        out["workloads"][name] = {"untraced": untraced, "cpu": cpu_s, "traced": traced, "threads": threads,
                                  "predicted": preds, "tracer": tracer, "independent": independent,
                                  "probe": probe, "ft_factor_used": factors}
    return out


# ---------------------------------------------------------------- the driver
def run_side(interp, side, args, k, name, second):
    """One round's run of workload `name` on one side, in a fresh process; `second`: this
    side runs after the other one in this round."""
    cmd = [interp, os.path.abspath(__file__), "--side", side, "--runs", "1", "--only", name]
    if args.ft_factor is not None:
        cmd += ["--ft-factor", str(args.ft_factor)]
    if side == "gil":
        cmd += ["--trace-opts", args.trace_opts]
        if args.event_ns is not None:
            cmd += ["--event-ns", str(args.event_ns)]
        if args.parallel_speed_value is not None:
            cmd += ["--parallel-speed", repr(args.parallel_speed_value)]
        if second:
            cmd += ["--traced-first"]
    env = None
    if side == "gil" and args.ft_factor == "measure":  # measured against the --ft interpreter
        env = dict(os.environ, GILTRACER_FT_PYTHON=args.ft)
    print(f"what_if_bench: round {k + 1}/{args.runs}, {name}, {side} side on {interp} ...", file=sys.stderr, flush=True)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=env)
    if r.returncode:
        sys.exit(f"what_if_bench: the {side} side failed (exit {r.returncode})")
    return json.loads(r.stdout)


def merge_runs(acc, r):
    """One round's side output added to the rounds before: lists of runs concatenated,
    the last round's other fields kept."""
    if acc is None:
        return r
    for name, w in r["workloads"].items():
        old = acc["workloads"].get(name, {})
        for key, v in w.items():
            if isinstance(v, list) and key != "threads" and isinstance(old.get(key), list):
                old[key] = old[key] + v
            else:
                old[key] = v
        acc["workloads"][name] = old
    return acc


def finish(side):
    """Lists of runs -> stats (median, min, max, runs)."""
    for w in side["workloads"].values():
        for key in ("wall", "cpu", "untraced", "traced", "predicted", "tracer", "independent", "probe",
                    "ft_factor_used"):
            if key in w:
                w[key] = stats(w[key])
    return side


def fmt(st):
    return f"{st['median']:.3f} [{st['min']:.3f}, {st['max']:.3f}]"


def quartiles(es):
    """Relative errors as "median % [first, third quartile]"."""
    es = sorted(100 * e for e in es)
    q = statistics.quantiles(es, n=4)
    return f"{statistics.median(es):+.0f} % [{q[0]:+.0f}, {q[2]:+.0f}]"


def paired(pred, meas):
    """The errors of the rounds' own pairs (a traced run and the 3.14t run beside it):
    median [quartiles], in %."""
    if len(pred) != len(meas) or len(pred) < 2:
        return "-"
    return quartiles([p / m - 1 for p, m in zip(pred, meas)])


def speed_errors(w, f, factor):
    """Per pair, the error the two processes' own speeds alone would make on pure Python
    work: factor x (the 3.14 process's probe / the 3.14t process's) - 1; None without the
    probes of every run."""
    g, t = w.get("probe", {}).get("runs", []), f.get("probe", {}).get("runs", [])
    n = len(w["predicted"]["runs"])
    if len(g) != n or len(t) != n or n < 2:
        return None
    return [factor * a / b - 1 for a, b in zip(g, t)]


def factor_used(gil):
    """The free-threading factor the predictions used (the median over the runs)."""
    used = [w["ft_factor_used"]["median"] for w in gil["workloads"].values() if w.get("ft_factor_used")]
    if used:
        return statistics.median(used)
    from giltracer import whatif_cost
    return gil["ft_factor"] if isinstance(gil["ft_factor"], float) else whatif_cost.FT_SINGLE_THREAD_FACTOR


def factor_text(gil):
    if gil["ft_factor"] == "measure":
        runs = [x for w in gil["workloads"].values() if w.get("ft_factor_used") for x in w["ft_factor_used"]["runs"]]
        spread = f"{min(runs):.2f}-{max(runs):.2f}" if runs else "?"
        return (f"measured (`ft_factor=\"measure\"` against the 3.14t, giltracer.calibrate, kept 10 minutes): "
                f"median {factor_used(gil):.2f}, {spread} over the runs")
    if gil["ft_factor"] is not None:
        return f"{gil['ft_factor']}"
    return f"the model default ({factor_used(gil):.2f})"


def report(gil, ft, runs, load0=None):
    lines = [f"# What-if validation: 3.14 traced ({gil['python']}, GIL) -> predicted vs measured 3.14t ({ft['python']})", "",
             f"- {runs} runs per cell, wall s: median [min, max]; CPUs: {gil['cpus']}; "
             f"load at start: {'?' if load0 is None else f'{load0:.1f}'}, at end: {os.getloadavg()[0]:.1f}; "
             f"ft_factor: {factor_text(gil)}",
             "- predicted: `t.what_if(cpus=N)` on each traced run (median); error = predicted / measured 3.14t - 1",
             "- tracer: the tracer's own cost the prediction removed from the traced work (CPU s, median; "
             "`t.what_if().tracer_s`: call events x the cost per event: "
             + (f"`event_ns={gil.get('event_ns')!r}`" if gil.get("event_ns") is not None
                else "`whatif_cost.TRACER_EVENT_NS`") + ")",
             "- 3.14t CPU / wall: the process's CPU time over its wall time (median run): the parallelism "
             "the machine gave it (other load on a shared machine lowers it; the model assumes the CPUs free)",
             "- each round runs each workload once per interpreter, back to back in fresh processes (which goes "
             "first alternates); paired error: the rounds' own errors (predicted / the 3.14t run beside it - 1), "
             "median [quartiles]: the host's speed drifts over seconds, which a pair mostly cancels",
             f"- traced with `giltracer.trace(backend=\"hooks\", **{gil['trace_opts']})`; 3.14 untraced wall for reference", ""]
    ps = gil.get("parallel_speed")
    pm = gil.get("parallel_speed_measured") or {}

    def rounds(m):
        return "not measured" if not m else (f"{m[0]:.2f} (rounds: " + ", ".join(f"{x:.2f}" for x in m[1]) + ")")
    lines[-1:-1] = [f"- parallel speed (each CPU's speed with all {gil['cpus']} busy, against one alone; "
              f"`t.what_if(parallel_speed=...)`): {'the model default' if ps is None else f'{ps:.2f}'}; "
              f"measured before the rounds: {rounds(pm.get('before'))}; after them: {rounds(pm.get('after'))}. "
              "'CPUs independent': the same prediction with parallel_speed=1.0"]
    factor = factor_used(gil)
    lines[-1:-1] = [
        "- process speeds (info): before its workload each process times a fixed loop (`spin("
        f"{PROBE})`, thread CPU, best of 3); a pair's 'speed error' is ft_factor x the 3.14 process's "
        "time / the 3.14t process's - 1: the error its two processes' own speeds alone make on "
        "pure Python work (fresh processes of either interpreter keep one of a few speeds here), "
        "median [quartiles]; the line under the table correlates it with the paired error"]
    head = ("| workload | 3.14 wall | 3.14 traced wall | 3.14t wall | 3.14t CPU / wall | tracer | predicted | error "
            "| paired error | CPUs independent: predicted, paired error | speed error |")
    lines += [head, "|" + "---|" * (head.count("|") - 1)]
    errs, cpu_pairs = [], []
    for name, w in gil["workloads"].items():
        f = ft["workloads"].get(name, {})
        if "skipped" in w or "skipped" in f:
            lines.append(f"| {name} | skipped: {w.get('skipped') or f.get('skipped')} |")
            continue
        if "wall" not in f:
            lines.append(f"| {name} | not run on 3.14t |")
            continue
        meas = f["wall"]["median"]
        par = f["cpu"]["median"] / meas
        tr = f"{w['tracer']['median']:.3f}" if "tracer" in w else "-"
        row = f"| {name} | {fmt(w['untraced'])} | {fmt(w['traced'])} | {fmt(f['wall'])} | {par:.2f} | {tr} | "
        e = w["predicted"]["median"] / meas - 1
        errs.append(abs(e))
        row += f"{fmt(w['predicted'])} | {100 * e:+.0f} % | {paired(w['predicted']['runs'], f['wall']['runs'])} |"
        if "independent" in w:
            row += (f" {w['independent']['median']:.3f}, "
                    f"{paired(w['independent']['runs'], f['wall']['runs'])} |")
        else:
            row += " - |"
        se = speed_errors(w, f, factor)
        row += f" {quartiles(se)} |" if se else " - |"
        if se and name.startswith("cpu-"):
            cpu_pairs += [(p / m - 1, s) for p, m, s in zip(w["predicted"]["runs"], f["wall"]["runs"], se)]
        lines.append(row)
    lines.append("")
    if len(cpu_pairs) >= 3:
        pe, sp = zip(*cpu_pairs)
        try:
            r = f"{statistics.correlation(pe, sp):.2f}"
        except (AttributeError, statistics.StatisticsError):  # before 3.10, or constant
            r = "n/a"
        lines += [f"CPU-bound workloads (cpu-1..4, {len(cpu_pairs)} pairs): correlation of the paired "
                  f"error with the speed error r = {r}; the paired error with the two processes' "
                  f"speeds factored out ((1 + paired) / (1 + speed) - 1): "
                  f"{quartiles([(1 + a) / (1 + b) - 1 for a, b in cpu_pairs])}.", ""]
    one = ft["workloads"].get("cpu-1", {})
    loaded = "wall" in one and one["cpu"]["median"] / one["wall"]["median"] < 0.8
    if loaded:
        lines += [f"WARNING: the machine was loaded: one CPU-bound thread on 3.14t got "
                  f"{one['cpu']['median'] / one['wall']['median']:.2f} of a CPU (CPU / wall of cpu-1). The "
                  f"prediction assumes {gil['cpus']} free CPUs, so this run validates nothing; run it "
                  "again on a quiet machine.", ""]
    verdict = None
    if errs:
        worst, med = max(errs), statistics.median(errs)
        verdict = None if loaded else worst <= 0.25 and med <= 0.15
        lines.append(f"Model: worst |error| {100 * worst:.0f} % (target <= 25 %), median {100 * med:.0f} % "
                     f"(target <= 15 %): {'INCONCLUSIVE (loaded machine)' if loaded else 'PASS' if verdict else 'FAIL'}")
    lines.append("")
    lines.append("Per-thread GIL time of the last traced run (s: held / wait / released):")
    lines.append("")
    for name, w in gil["workloads"].items():
        if w.get("threads"):
            parts = [f"{r['name']} {r['held_s']:.3f}/{r['wait_s']:.3f}/{r['released_s']:.3f}" for r in w["threads"]]
            lines.append(f"- {name}: " + ", ".join(parts))
    return "\n".join(lines) + "\n", verdict


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gil", help="3.14 with the GIL and giltracer installed")
    ap.add_argument("--ft", help="the free-threaded 3.14t (NumPy for the numpy-pool workload)")
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--only", type=lambda s: s.split(","), default=list(WORKLOADS))
    ap.add_argument("--ft-factor", type=lambda v: v if v == "measure" else float(v), default=None,
                    help='t.what_if(ft_factor=...): a number, or "measure" (against the --ft '
                         "interpreter, giltracer.calibrate); default: the model's own "
                         "(whatif_cost.FT_SINGLE_THREAD_FACTOR)")
    ap.add_argument("--event-ns", type=lambda v: v if v == "measure" else float(v), default=None,
                    help='t.what_if(event_ns=...): "measure" (on this machine now) or ns; default: the table\'s')
    ap.add_argument("--trace-opts", default="{}", help='more giltracer.trace options, JSON: \'{"c_calls": false}\'')
    ap.add_argument("--parallel-speed", default="measure",
                    help='t.what_if(parallel_speed=...): a number in (0, 1], or "measure" (default: '
                         "measured here before the rounds and after them, giltracer.calibrate; the "
                         "prediction uses the median of the rounds before)")
    ap.add_argument("--parallel-rounds", type=int, default=9, help="rounds of that measurement")
    ap.add_argument("--side", choices=("gil", "ft"))
    ap.add_argument("--traced-first", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out")
    ap.add_argument("--tag", help="results/what-if-<version>-<tag>.md (and .json) instead of what-if-<version>")
    ap.add_argument("--strict", action="store_true", help="exit 1 when the model misses the target")
    a = ap.parse_args()
    unknown = [n for n in a.only if n not in WORKLOADS]
    if unknown:
        ap.error(f"unknown workloads {unknown}; known: {', '.join(WORKLOADS)}")
    if a.side == "ft":
        print(json.dumps(side_ft(a.only, a.runs)))
        return 0
    if a.side == "gil":
        print(json.dumps(side_gil(a.only, a.runs, a.ft_factor, json.loads(a.trace_opts), a.event_ns,
                                  a.traced_first, None if a.parallel_speed == "measure" else float(a.parallel_speed))))
        return 0
    if not a.gil or not a.ft:
        ap.error("--gil and --ft are needed (or --side)")
    # Each round runs each workload once on each interpreter, the two runs back to back in
    # fresh processes (which goes first alternates by round), so that the host's speed, which
    # drifts by up to 1.6x over seconds here, is nearly the same for the traced run and the
    # 3.14t run it is paired with.
    gil = ft = None
    load0 = os.getloadavg()[0]
    speed_before = speed_after = None
    if a.parallel_speed == "measure":
        from giltracer import calibrate
        print(f"what_if_bench: measuring the CPUs' speed together ({a.parallel_rounds} rounds) ...",
              file=sys.stderr, flush=True)
        speed_before = calibrate.measure_parallel_speed(cpus(), rounds=a.parallel_rounds)
        if speed_before is None:
            sys.exit("what_if_bench: the CPUs' speed together could not be measured (see giltracer.calibrate)")
        a.parallel_speed_value = speed_before[0]
    else:
        a.parallel_speed_value = float(a.parallel_speed)
    for k in range(a.runs):
        for name in a.only:
            order = ("gil", "ft") if k % 2 == 0 else ("ft", "gil")
            for i, side in enumerate(order):
                r = run_side(a.gil if side == "gil" else a.ft, side, a, k, name, second=i == 1)
                if side == "gil":
                    gil = merge_runs(gil, r)
                else:
                    ft = merge_runs(ft, r)
    if not ft["free_threaded"] or ft["gil_enabled"]:
        sys.exit(f"what_if_bench: {a.ft} is not a free-threaded build running without the GIL")
    for name, w in ft["workloads"].items():
        if "skipped" in w:
            print(f"what_if_bench: {name} skipped on 3.14t: {w['skipped']}", file=sys.stderr)
    if a.parallel_speed == "measure":
        speed_after = calibrate.measure_parallel_speed(cpus(), rounds=a.parallel_rounds)
    gil["parallel_speed_measured"] = {"before": speed_before, "after": speed_after}
    text, verdict = report(finish(gil), finish(ft), a.runs, load0)
    print(text)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        base = os.path.join(a.out, f"what-if-{gil['python']}" + (f"-{a.tag}" if a.tag else ""))
        with open(base + ".md", "w") as fh:
            fh.write(text)
        with open(base + ".json", "w") as fh:
            json.dump({"gil": gil, "ft": ft}, fh, indent=1)
    return 1 if a.strict and verdict is False else 0


if __name__ == "__main__":
    sys.exit(main())
