"""Thread scaling with and without the tracer: a free-threaded build (3.14t)
beside one with the GIL.

Each of 1, 2 and 4 threads runs the same CPU-bound, call-heavy work (recursive fib: one
Python call per step). Throughput = total calls / wall time of the threads' work (the
trace's start, stop and merge are outside the timing). Scaling k = throughput with k
threads / throughput with 1 thread, untraced and traced; the check: traced scaling 1 -> 2
threads within 10 % of untraced scaling (a tracer that serialises threads, e.g. on a
global lock, loses it). Rounds interleave the cells; medians over rounds.

    python bench/ft_scaling.py [--rounds 7] [--fib 22] [--out DIR]
"""

import argparse
import os
import statistics
import sys
import sysconfig
import threading
import time

import giltracer

THREADS = (1, 2, 4)


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def calls_of(n):
    return 1 if n < 2 else 1 + calls_of(n - 1) + calls_of(n - 2)


def run_threads(k, n, reps):
    barrier = threading.Barrier(k + 1)
    done = threading.Barrier(k + 1)

    def work():
        barrier.wait()
        for _ in range(reps):
            fib(n)
        done.wait()

    threads = [threading.Thread(target=work) for _ in range(k)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter_ns()
    done.wait()
    dt = time.perf_counter_ns() - t0
    for t in threads:
        t.join()
    return dt


def cell(k, n, reps, traced):
    if not traced:
        return run_threads(k, n, reps)
    with giltracer.trace(c_calls=False, max_events=None) as t:
        dt = run_threads(k, n, reps)
    assert t.duration_ns > 0
    return dt


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--fib", type=int, default=22)
    p.add_argument("--reps", type=int, default=3, help="fib() calls per thread per cell")
    p.add_argument("--out", default=None, help="directory for ft-scaling-<version>.md")
    a = p.parse_args(argv)
    ft = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    gil_on = sys._is_gil_enabled() if hasattr(sys, "_is_gil_enabled") else True
    per_thread_calls = calls_of(a.fib) * a.reps
    cells = [(k, traced) for k in THREADS for traced in (False, True)]
    times = {c: [] for c in cells}
    cell(1, 10, 1, True)  # warm-up: import and first session
    for r in range(a.rounds):
        order = cells if r % 2 == 0 else cells[::-1]
        for k, traced in order:
            times[(k, traced)].append(cell(k, a.fib, a.reps, traced))
    thr = {c: (c[0] * per_thread_calls) / (statistics.median(v) / 1e9) for c, v in times.items()}
    version = sys.version.split()[0] + ("t" if ft else "")
    lines = [f"# Thread scaling, traced and untraced: CPython {version}"
             f" ({'free-threaded' if ft else 'with the GIL'}; GIL {'on' if gil_on else 'off'})", "",
             f"- work per thread: {a.reps} x fib({a.fib}) = {per_thread_calls:,} Python calls; "
             f"{a.rounds} rounds, cells interleaved, medians; CPUs: {os.cpu_count()}; "
             f"load at end: {os.getloadavg()[0]:.1f}",
             "- traced: `giltracer.trace(c_calls=False, max_events=None)` (the default backend: as root bpf with the GIL, no GIL probe on 3.14t; every call recorded)",
             "", "| threads | untraced Mcalls/s | traced Mcalls/s | traced cost | untraced scaling | traced scaling |",
             "|---|---|---|---|---|---|"]
    for k in THREADS:
        u, t = thr[(k, False)], thr[(k, True)]
        lines.append(f"| {k} | {u / 1e6:.2f} | {t / 1e6:.2f} | {u / t:.2f}x | "
                     f"{u / thr[(1, False)]:.2f} | {t / thr[(1, True)]:.2f} |")
    su = thr[(2, False)] / thr[(1, False)]
    st = thr[(2, True)] / thr[(1, True)]
    ok = abs(st / su - 1) <= 0.10
    lines += ["", f"Traced scaling 1 -> 2 threads {st:.2f} vs untraced {su:.2f}: "
              f"{st / su:.2f} of it ({'within' if ok else 'NOT within'} 10 %)."]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, f"ft-scaling-{version}.md"), "w") as f:
            f.write(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
