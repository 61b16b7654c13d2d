"""The child processes of giltracer.calibrate: this file's source is run as
``python [-S] -c <source> MODE ...`` (not as giltracer's module: the tracer leaves its own
files out, and an interpreter without giltracer, the free-threaded build a factor is
measured against, runs it too); it imports giltracer only in the mode that traces. The
last line printed is the JSON report.

    event-ns C_CALLS   the tracer's cost per call event: each workload traced and not
                       (C_CALLS "1": with C calls), in two threads sharing the GIL
    speed REPS BATCH_S the workloads' times untraced in one thread (REPS: JSON, the calls
                       per batch by workload; those missing are sized to BATCH_S seconds)

bench/tracer_event_cost.py imports ``batch`` from here.
"""
import json
import sys
import sysconfig
import threading
import time
from typing import Any, Callable, Dict, List, Tuple

# The event cost's batches run in two threads sharing the GIL, the setting a what-if is
# made in (an event costs ~10 % more there than in one thread: bench/tracer_event_cost.py),
# long enough that the GIL switches between them (its interval is 5 ms).
EVENT_BATCH_S, BATCHES, EVENT_THREADS = 0.01, 3, 2


def fib(n: int) -> int:
    return n if n < 2 else fib(n - 1) + fib(n - 2)


class Counter:  # a method call per step, as bench/workloads.py's method
    __slots__ = ("n",)

    n: int

    def tick(self, k: int) -> None:
        self.n += k


def calls_python() -> None:
    fib(15)


def calls_methods() -> None:
    c = Counter()
    c.n = 0
    for _ in range(2000):
        c.tick(1)


def calls_c(probe: Tuple[int, ...] = (1, 2, 3, 4)) -> None:
    out: List[int] = []
    n = 0
    for i in range(2000):
        n += len(probe)
        if isinstance(i, int):
            out.append(i)


def spin() -> None:
    x = 0
    for i in range(20000):
        x += i ^ 3


def batch(fn: Callable[[], None], reps: int, threads: int = 1) -> float:
    """CPU s of `reps` calls of fn in each of `threads` threads: the thread's CPU time for
    one, the process's for more (nothing else may run in the process meanwhile)."""
    if threads == 1:
        t0 = time.thread_time()
        for _ in range(reps):
            fn()
        return time.thread_time() - t0

    def loop() -> None:
        for _ in range(reps):
            fn()
    ts = [threading.Thread(target=loop) for _ in range(threads)]
    c0 = time.process_time()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return time.process_time() - c0


def reps_for(fn: Callable[[], None], seconds: float) -> int:
    """Calls of fn (warmed up) that take about `seconds` of thread CPU time."""
    fn()
    t0 = time.thread_time()
    fn()
    return max(1, round(seconds / max(time.thread_time() - t0, 1e-6)))


def event_ns(c_calls: bool) -> Dict[str, Any]:
    import giltracer
    costs: List[float] = []
    for fn in (calls_python, calls_methods, calls_c):
        reps = reps_for(fn, EVENT_BATCH_S)
        with giltracer.trace(backend="hooks", c_calls=c_calls, sched=False):
            fn()  # the tracer's warm-up
        untraced: List[float] = []
        traced: List[float] = []
        events = 0
        for _ in range(BATCHES):
            untraced.append(batch(fn, reps, EVENT_THREADS))
            with giltracer.trace(backend="hooks", c_calls=c_calls, sched=False,
                                 max_events=50_000_000) as t:
                traced.append(batch(fn, reps, EVENT_THREADS))
            events = max(events, t.event_count)
        if events:
            costs.append(max(0.0, (min(traced) - min(untraced)) / events * 1e9))
    each = list(costs)
    costs.sort()
    return {"event_ns": costs[len(costs) // 2] if costs else None, "each": each}


def speed(reps: Dict[str, int], batch_s: float) -> Dict[str, Any]:
    times: Dict[str, float] = {}
    for fn in (calls_python, calls_methods, calls_c, spin):
        n = reps.get(fn.__name__)
        if n is None:
            n = reps[fn.__name__] = reps_for(fn, batch_s)
        else:
            fn()
        times[fn.__name__] = min(batch(fn, n) for _ in range(BATCHES))
    return {"version": "%d.%d" % sys.version_info[:2],
            "free_threaded": bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
            "gil_enabled": getattr(sys, "_is_gil_enabled", lambda: True)(),
            "reps": reps, "times": times}


if __name__ == "__main__":
    if sys.argv[1] == "event-ns":
        report = event_ns(sys.argv[2] == "1")
    else:
        report = speed(json.loads(sys.argv[2]), float(sys.argv[3]))
    print(json.dumps(report))
