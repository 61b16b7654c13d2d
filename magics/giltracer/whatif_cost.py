"""The free-threading cost model of the what-if prediction, measured, not guessed.

``FT_SINGLE_THREAD_FACTOR``: how much longer one thread's Python work takes on the
free-threaded build than on the same version with the GIL, on this project's bench
workloads. The what-if model multiplies a thread's running time by it (``t.what_if(
ft_factor=...)`` overrides it).

How it was measured (``python bench/ft_cost.py``, inside the sid chroot of ``make pythons``;
result in bench/results/ft-cost-3.14.10.md and .json): CPython 3.14.7t (built from source
with ``--disable-gil`` by ``make pythons-ft``) against Debian sid's 3.14.10 with the GIL, on
a 2-CPU machine; untraced, one thread; the workloads of bench/workloads.py that run in one
thread (fib, method, builtins, mixed, churn1) and the what-if bench's CPU-bound loop (spin).
Each of 5 rounds runs every workload in a fresh process of each interpreter, back to back;
a workload's time is the best of 3 batches of about 0.15 s, per call, in thread CPU time
(the machine was shared: preemption must not count). Per round, the geometric mean over
the workloads of the ratios 3.14t / 3.14; the factor is the median of the 5 rounds, with
their range as the interval: 1.351 [1.345, 1.587] (per workload 1.24 for Python calls up to
1.57 for method calls; the what-if bench's loop 1.41), measured 2026-11-27.

The factor depends on the CPU: on the host this VM ran on the day before (a faster one),
the same bench gave 1.248 [1.201, 1.310] and 1.226 [1.135, 1.260] (spin 1.17). On another
machine, measure it there (``bench/ft_cost.py`` with both interpreters) and pass it as
``t.what_if(ft_factor=...)``.

It includes the difference of the two builds (Debian's packaging of 3.14 against a plain
``./configure --disable-gil`` of 3.14t), which is what a user comparing these two
interpreters here sees.
"""

FT_SINGLE_THREAD_FACTOR = 1.35
"""3.14t / 3.14 single-thread time ratio: measured 1.351, interval [1.345, 1.587] (above)."""

FT_SINGLE_THREAD_FACTOR_INTERVAL = (1.34, 1.59)

FT_HANDOFF_US = 36.0
"""A hand-off's cost without the GIL, us: the wall time from one thread's wake call to the
woken thread running, on 3.14t here (``t.what_if(handoff_us=...)`` overrides it). The model
adds it to each hand-off a thread waits on in the re-schedule.

How it was measured (``python bench/handoff_cost.py --rounds 21``, inside the sid chroot, on
the quiet machine; result in bench/results/handoff-cost-3.14.10.md and .json): a ping-pong
of two threads pinned to the two CPUs through a queue.Queue pair, a threading.Event pair and
a threading.Condition, nothing else to do, so every pass wakes a sleeping thread; untraced;
a hand-off is a round trip's wall time / 2, over 2000 round trips, per primitive the median
of 21 rounds (a fresh process each), the cost the median over the three primitives: 36.1 us.
The rounds spread from 12 to 76 us (bimodal: about 12 or 30-45, from one process to the
next, pinned or not); 3.14 with the GIL: 22-25. Not fitted to the what-if validation bench.
"""

TRACER_EVENT_NS = {
    ("sys.monitoring", "c_calls"): 85.0,
    ("sys.monitoring", "functions"): 65.0,
    ("setprofile", "c_calls"): 128.0,
    ("setprofile", "functions"): 203.0,
}
"""The tracer's own cost per call event (a call's start or its end), ns, by the tracing API
(sys.monitoring on 3.12+, PyEval_SetProfile before) and whether C calls were traced (the
default) or only Python functions (``c_calls=False``). The what-if model removes it from
the work it re-schedules (the held time the trace measured includes it), so that the
prediction is of the untraced cell (``t.what_if(event_ns=...)`` overrides it).

How it was measured (``python bench/tracer_event_cost.py --rounds 5``; results in
bench/results/tracer-event-cost-3.14.10.md and -3.11.7.md, with .json): on the workloads
fib, method, builtins and mixed of bench/workloads.py, per workload the best of 3 batches of
about 0.1 s in CPU time, traced (backend hooks, one session per batch) minus untraced, over
the call events the batch recorded, the batch split between two threads sharing the GIL
(the setting a what-if is made in; in one thread an event costs about 10 % less); the
median of 5 rounds (fresh processes) per workload, the cost the median over the workloads.
Measured 2026-11-27 on the host the free-threading factor above was measured on: 3.14.10
(sid chroot): 85 [76, 92] ns with C calls, 65 [57, 108] without; 3.11.7 (the repo's venv):
128 [107, 216] and 203 [147, 349]. Not fitted to the what-if validation bench.

The host's speed moves it most: the same VM on the faster host of the day before measured
23 and 15 ns (3.14), 60 and 82 (3.11), in one thread. ``t.what_if(event_ns="measure")`` or
``GILTRACER_EVENT_NS=measure`` measure it where it is used (giltracer.calibrate). A
workload's own cost can differ too: NumPy methods called from Python cost about 75 ns an
event in one thread here and 120 in two sharing the GIL (the tracer's stores also slow the
code between events: caches), which the generic workloads do not capture.
"""
