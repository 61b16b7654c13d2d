"""Child processes: what following them costs.

    python bench/children_bench.py            # writes results/children-<python-version>.md + .json

* start-up cost per child: the median time from starting a child that does nothing to
  having reaped it, inside a trace without ``follow_children`` and inside one with it,
  for ``spawn`` (``subprocess.run([sys.executable, "-c", "pass"])``: a new interpreter, the
  ``.pth`` hook starts its session) and ``fork`` (``os.fork()`` + ``os._exit(0)``: the fork
  hook starts its session, ``os._exit`` writes its spool); the difference is the added cost.
* the start-up hook without the token: the cost of its line per interpreter start.
* merge time: 8 children each making 1M Python calls (fork, traced), the parent's stop
  (its own merge, reading the 8 spools and merging all processes) timed.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
import multiprocessing as mp

import giltracer

HERE = os.path.dirname(os.path.abspath(__file__))
REPS = int(os.environ.get("GT_CHILD_REPS", "30"))


def spawn_once() -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - t0


def fork_once() -> float:
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return time.perf_counter() - t0


def startup(kind: str) -> dict:
    once = spawn_once if kind == "spawn" else fork_once
    out = {}
    for follow in (False, True):  # interleaved rounds: the load drifts
        out[follow] = []
    for _ in range(REPS):
        for follow in (False, True):
            with giltracer.trace(follow_children=follow, functions=False, sched=False,
                                 backend="hooks"):
                out[follow].append(once())
    plain, followed = statistics.median(out[False]), statistics.median(out[True])
    return dict(kind=kind, reps=REPS, plain_ms=plain * 1e3, followed_ms=followed * 1e3,
                added_ms=(followed - plain) * 1e3)


def hook_line_cost() -> float:
    import site

    path = next(os.path.join(d, "giltracer_children.pth") for d in site.getsitepackages() + [site.getusersitepackages()]
                if os.path.exists(os.path.join(d, "giltracer_children.pth")))
    code = compile(open(path).read(), path, "exec")
    saved = os.environ.pop("GILTRACER_CHILD", None)
    n = 100_000
    t0 = time.perf_counter()
    for _ in range(n):
        exec(code, {})
    if saved is not None:
        os.environ["GILTRACER_CHILD"] = saved
    return (time.perf_counter() - t0) / n * 1e9


def calls(n: int) -> int:
    def f() -> None:
        pass
    for _ in range(n):
        f()
    return n


def merge_time(children: int = 8, n: int = 1_000_000) -> dict:
    t = giltracer.trace(follow_children=True, c_calls=False, sched=False, backend="hooks",
                        max_events=10 * n)
    t.start()
    t_run = time.perf_counter()
    with ProcessPoolExecutor(children, mp_context=mp.get_context("fork")) as ex:
        list(ex.map(calls, [n] * children))
    ran = time.perf_counter() - t_run
    t0 = time.perf_counter()
    t.stop()
    stop = time.perf_counter() - t0
    procs = t.processes
    return dict(children=len(procs) - 1, calls_per_child=n, events=t.event_count,
                stop_s=stop, run_s=ran, threads=len(t.threads))


def main() -> None:
    v = ".".join(map(str, sys.version_info[:3]))
    rows = [startup("spawn"), startup("fork")]
    hook_ns = hook_line_cost()
    merge = merge_time()
    res = dict(python=v, startup=rows, hook_line_ns=hook_ns, merge=merge,
               when=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), cpus=os.cpu_count(),
               load=os.getloadavg()[0])
    lines = [f"# Child processes: cost of following them (Python {v})", "",
             f"{res['when']}, {res['cpus']} CPUs, load {res['load']:.1f}; medians of {REPS} children each "
             "(interleaved), the trace with functions=False, sched=False, backend=hooks.", "",
             "| start method | child alone (ms) | followed (ms) | added per child (ms) |",
             "|---|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['kind']} | {r['plain_ms']:.2f} | {r['followed_ms']:.2f} | {r['added_ms']:.2f} |")
    lines += ["", f"Start-up hook without the token (every interpreter start): {hook_ns:.0f} ns per start.",
              "", f"Merge: {merge['children']} children x {merge['calls_per_child']:,} calls "
              f"({merge['events']:,} call events in all, {merge['threads']} threads): the parent's stop "
              f"(its merge, reading the spools, merging all processes) took {merge['stop_s']:.2f} s "
              f"(the pool ran {merge['run_s']:.2f} s).", ""]
    text = "\n".join(lines)
    print(text)
    out = os.path.join(HERE, "results", f"children-{v}")
    with open(out + ".md", "w") as f:
        f.write(text)
    with open(out + ".json", "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
