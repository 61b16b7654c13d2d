"""The tracer's own cost per call event measured on this machine, now, for the what-if
model (issue 20), which removes it from the traced work so as to predict the untraced cell.

The default is a constant measured on the bench host (``whatif_cost.TRACER_EVENT_NS``). It is
off wherever the host's speed differs: on the same VM the cost went from 23 to 64 ns an
event (3.14; 60 to about 100 on 3.11) when the VM was moved to a slower host, and the
prediction then kept the difference as work. ``t.what_if(event_ns="measure")``, or
``GILTRACER_EVENT_NS=measure`` for every default (the profile text, the viewer's What-if
tab), measures it here instead: in a child process of this interpreter (nothing of this
process changes: no session, no ``giltracer.last()``), the workloads of
``bench/tracer_event_cost.py`` in miniature (Python calls, method calls, C calls), each the
best of 3 batches of about 5 ms in thread CPU time, untraced and traced with the trace's call
options; (traced - untraced) / the batch's call events; the median over the three. About
0.5 s, once per interpreter and call options in a process; kept 10 minutes in the user's
cache folder (``$XDG_CACHE_HOME/giltracer``, else ``~/.cache/giltracer``), keyed by
interpreter, build and boot, so that short processes (the CLI) measure once. On a noisy
shared host one measurement can be off by a third (the host's own speed moves that much
between seconds); where the child cannot run, the table's constant is used and the what-if
text says so.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Dict, Optional, Tuple

CACHE_SECONDS = 600.0
TIMEOUT_SECONDS = 30.0

_cache: Dict[Tuple[str, bool], Tuple[float, str]] = {}

_WORKER = r"""
import json, sys, time
import giltracer

c_calls = sys.argv[1] == "1"
BATCH_S, BATCHES = 0.005, 3


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


class Counter:  # a method call per step, as bench/workloads.py's method
    __slots__ = ("n",)

    def tick(self, k):
        self.n += k


def calls_python():
    fib(15)


def calls_methods():
    c = Counter()
    c.n = 0
    for _ in range(2000):
        c.tick(1)


def calls_c(probe=(1, 2, 3, 4)):
    out = []
    n = 0
    for i in range(2000):
        n += len(probe)
        if isinstance(i, int):
            out.append(i)


def batch(fn, reps):
    t0 = time.thread_time()
    for _ in range(reps):
        fn()
    return time.thread_time() - t0


costs = []
for fn in (calls_python, calls_methods, calls_c):
    fn()
    t0 = time.thread_time()
    fn()
    reps = max(1, round(BATCH_S / max(time.thread_time() - t0, 1e-6)))
    with giltracer.trace(backend="hooks", c_calls=c_calls, sched=False):
        fn()  # the tracer's warm-up
    untraced, traced, events = [], [], 0
    for _ in range(BATCHES):
        untraced.append(batch(fn, reps))
        with giltracer.trace(backend="hooks", c_calls=c_calls, sched=False,
                             max_events=50_000_000) as t:
            traced.append(batch(fn, reps))
        events = max(events, t.event_count)
    if events:
        costs.append(max(0.0, (min(traced) - min(untraced)) / events * 1e9))
each = list(costs)
costs.sort()
print(json.dumps({"event_ns": costs[len(costs) // 2] if costs else None, "each": each}))
"""


def _tracing_api() -> str:
    return "sys.monitoring" if sys.version_info >= (3, 12) else "setprofile"


def table_ns(c_calls: bool) -> Optional[float]:
    """The cost measured on the bench host (``whatif_cost.TRACER_EVENT_NS``) for this
    interpreter's tracing API and call options, or None where it has none."""
    try:
        from . import whatif_cost
    except ImportError:
        return None
    ns = getattr(whatif_cost, "TRACER_EVENT_NS", {}).get(
        (_tracing_api(), "c_calls" if c_calls else "functions"))
    return float(ns) if ns is not None else None


def _cache_file() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "giltracer", "event-ns.json")


def _cache_key(c_calls: bool) -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            boot = f.read().strip()
    except OSError:
        boot = ""
    from . import _core
    return "|".join((sys.executable, sys.version, getattr(_core, "__file__", ""), boot,
                     "c_calls" if c_calls else "functions"))


def _read_cached(key: str) -> Optional[float]:
    try:
        with open(_cache_file(), encoding="utf-8") as f:
            entry = json.load(f).get(key)
        if entry and 0 <= time.time() - float(entry["at"]) <= CACHE_SECONDS:
            return float(entry["event_ns"])
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        pass
    return None


def _write_cached(key: str, ns: float) -> None:
    path = _cache_file()
    try:
        try:
            with open(path, encoding="utf-8") as f:
                entries = json.load(f)
            if not isinstance(entries, dict):
                entries = {}
        except (OSError, ValueError):
            entries = {}
        now = time.time()
        entries = {k: v for k, v in entries.items()
                   if isinstance(v, dict) and now - float(v.get("at", 0)) <= CACHE_SECONDS}
        entries[key] = {"event_ns": ns, "at": now}
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(entries, f)
        os.replace(tmp, path)
    except (OSError, ValueError, TypeError):
        pass  # no cache: the next process measures again


def _measure(c_calls: bool) -> Optional[float]:
    """The child's measurement, ns per call event, or None (it could not run)."""
    env = dict(os.environ)
    # The child imports this very package, wherever it was imported from.
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_parent, env.get("PYTHONPATH")) if p)
    env.pop("GILTRACER_CHILD", None)  # not a child of a session that follows children
    try:
        r = subprocess.run([sys.executable, "-c", _WORKER, "1" if c_calls else "0"], env=env,
                           capture_output=True, text=True, timeout=TIMEOUT_SECONDS)
        if r.returncode != 0:
            return None
        ns = json.loads(r.stdout.strip().splitlines()[-1])["event_ns"]
        return float(ns) if ns is not None else None
    except (OSError, subprocess.SubprocessError, ValueError, KeyError, IndexError, TypeError):
        return None


def event_ns(c_calls: bool = True) -> Tuple[float, str]:
    """The tracer's cost per call event here and now, ns, and how it was had: measured now
    (this process, or the cache of the last 10 minutes) or, where that failed, the table's
    constant (0 where there is none)."""
    key = (_tracing_api(), bool(c_calls))
    if key in _cache:
        return _cache[key]
    ck = _cache_key(c_calls)
    ns = _read_cached(ck)
    if ns is not None:
        got = (ns, "measured on this machine")
    else:
        ns = _measure(c_calls)
        if ns is not None:
            _write_cached(ck, ns)
            got = (ns, "measured on this machine")
        else:
            got = (table_ns(c_calls) or 0.0, "the bench host's (measuring here failed)")
    _cache[key] = got
    return got
