"""The tracer's own cost per call event measured on this machine, now, for the what-if
model, which removes it from the traced work so as to predict the untraced cell.

The default is a constant measured on the bench host (``whatif_cost.TRACER_EVENT_NS``). It is
off wherever the host's speed differs: on the same VM the cost went from 23 to 64 ns an
event (3.14; 60 to about 100 on 3.11) when the VM was moved to a slower host, and the
prediction then kept the difference as work. ``t.what_if(event_ns="measure")``, or
``GILTRACER_EVENT_NS=measure`` for every default (the profile text, the viewer's What-if
tab), measures it here instead: in a child process of this interpreter (nothing of this
process changes: no session, no ``giltracer.last()``), the workloads of
``bench/tracer_event_cost.py`` in miniature (Python calls, method calls, C calls), each the
best of 3 batches of about 10 ms in each of two threads sharing the GIL (the setting of a
what-if, and of the table's constant), in the process's CPU time, untraced and traced with
the trace's call options; (traced - untraced) / the batch's call events; the median over
the three. About 1.5 s, once per interpreter and call options in a process; kept 10 minutes
in the user's cache folder (``$XDG_CACHE_HOME/giltracer``, else ``~/.cache/giltracer``),
keyed by interpreter, build and boot, so that short processes (the CLI) measure once. On a noisy
shared host one measurement can be off by a third (the host's own speed moves that much
between seconds); where the child cannot run, the table's constant is used and the what-if
text says so.

``parallel_speed(cpus)``, for ``t.what_if(parallel_speed="measure")`` (or
``GILTRACER_PARALLEL_SPEED=measure``): how fast each CPU runs with all of them busy, against
one alone. The trace measured the threads' work one at a time (the GIL let one run); CPUs
that share a core (SMT siblings) or a host give less together than N times one (on this
project's 2-CPU VM: about 0.5-1.2 from one second to the next, 0.9 typical). Processes
spinning in the same window, alone and together; cached like the event cost.
"""
from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

from . import env as variables

CACHE_SECONDS = 600.0
TIMEOUT_SECONDS = 30.0

_cache: Dict[Tuple[object, object], Tuple[float, str]] = {}

_WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_calibrate_worker.py")


def _run_worker(python: str, *args: str, flags: Tuple[str, ...] = (),
                with_giltracer: bool = False) -> Optional[Dict[str, Any]]:
    """The report (the last line's JSON object) of _calibrate_worker.py's source run by
    `python` with `args`, or None where it could not run. `with_giltracer`: the child
    imports this very package, wherever it was imported from."""
    env = dict(os.environ)
    env.pop("GILTRACER_CHILD", None)  # not a child of a session that follows children
    if with_giltracer:
        pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_parent, env.get("PYTHONPATH")) if p)
    try:
        with open(_WORKER, encoding="utf-8") as f:
            source = f.read()
        r = subprocess.run([python, *flags, "-c", source, *args], env=env,
                           capture_output=True, text=True, timeout=TIMEOUT_SECONDS)
        if r.returncode != 0:
            return None
        out = json.loads(r.stdout.strip().splitlines()[-1])
        return out if isinstance(out, dict) else None
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


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


def _boot_id() -> str:
    """This boot's id (a cached measurement is of this boot only), or "" where unknown."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return ""


def _cache_key(c_calls: bool) -> str:
    from . import _core
    return "|".join((sys.executable, sys.version, getattr(_core, "__file__", ""), _boot_id(),
                     "c_calls" if c_calls else "functions"))


def _read_cached(key: str, field: str = "event_ns") -> Optional[float]:
    try:
        with open(_cache_file(), encoding="utf-8") as f:
            entry = json.load(f).get(key)
        if entry and 0 <= time.time() - float(entry["at"]) <= CACHE_SECONDS:
            return float(entry[field])
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        pass
    return None


def _write_cached(key: str, value: float, field: str = "event_ns") -> None:
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
        entries[key] = {field: value, "at": now}
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(entries, f)
        os.replace(tmp, path)
    except (OSError, ValueError, TypeError):
        pass  # no cache: the next process measures again


def _measure(c_calls: bool) -> Optional[float]:
    """The child's measurement, ns per call event, or None (it could not run)."""
    out = _run_worker(sys.executable, "event-ns", "1" if c_calls else "0", with_giltracer=True)
    ns = out.get("event_ns") if out else None
    return float(ns) if isinstance(ns, (int, float)) else None


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


# ---------------------------------------------------------------- parallel speed
_SPINNER = r"""
import sys, time
start, end = float(sys.argv[1]), float(sys.argv[2])
while time.monotonic() < start:
    time.sleep(0.001)
n = x = 0
while time.monotonic() < end:
    for i in range(1000):
        x += i ^ 3
    n += 1
print(n)
"""
def _cgroup_quota_cpus(cgroup_root: str, proc_self_cgroup: str) -> Optional[float]:
    """The CPU time this process's cgroups allow, in CPUs (quota / period, the smallest
    along the path to the root), or None without a limit or where it cannot be read.
    cgroup v2 (``cpu.max``: "max 100000" or "200000 100000") and v1 (``cpu.cfs_quota_us``,
    -1 without a limit, over ``cpu.cfs_period_us``)."""
    try:
        with open(proc_self_cgroup, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    limits: List[float] = []
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if controllers == "":
            bases, read = [cgroup_root], _cpu_max_v2
        elif "cpu" in controllers.split(","):
            bases = [os.path.join(cgroup_root, controllers), os.path.join(cgroup_root, "cpu")]
            read = _cfs_v1
        else:
            continue
        for base in bases:
            # In a container the path is the host's; the folder mounted is then the
            # container's own cgroup: read from the deepest part of the path that exists.
            parts = [p for p in path.strip("/").split("/") if p]
            while parts and not os.path.isdir(os.path.join(base, *parts)):
                parts.pop(0)
            if not os.path.isdir(base):
                continue
            for depth in range(len(parts), -1, -1):
                cpus = read(os.path.join(base, *parts[:depth]))
                if cpus is not None:
                    limits.append(cpus)
            break
    return min(limits) if limits else None


def _cpu_max_v2(folder: str) -> Optional[float]:
    try:
        with open(os.path.join(folder, "cpu.max"), encoding="utf-8") as f:
            quota, period = (f.read().split() + ["100000"])[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError, ZeroDivisionError):
        return None


def _cfs_v1(folder: str) -> Optional[float]:
    try:
        with open(os.path.join(folder, "cpu.cfs_quota_us"), encoding="utf-8") as f:
            quota = int(f.read())
        with open(os.path.join(folder, "cpu.cfs_period_us"), encoding="utf-8") as f:
            period = int(f.read())
        return None if quota <= 0 else quota / period
    except (OSError, ValueError, ZeroDivisionError):
        return None


def usable_cpus(cgroup_root: str = "/sys/fs/cgroup",
                proc_self_cgroup: str = "/proc/self/cgroup") -> int:
    """The CPUs this process may run on at once: its affinity mask, capped by its cgroups'
    CPU quota (rounded up: a quota of 1.5 CPUs still runs two threads at once), as a
    container or ``taskset`` sets it; ``os.cpu_count()`` counts the machine's instead."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    quota = _cgroup_quota_cpus(cgroup_root, proc_self_cgroup)
    if quota is not None:
        cpus = min(cpus, max(1, math.ceil(quota - 1e-9)))
    return max(1, cpus)


PARALLEL_WINDOW_S = 0.2
PARALLEL_ROUNDS = 3


def _spin_together(k: int, window: float) -> Optional[List[int]]:
    """Loops done by each of `k` processes spinning in the same window (monotonic clock,
    shared by the processes), or None where they could not run."""
    start = time.monotonic() + 0.15 + 0.02 * k  # their start-up falls before the window
    procs: List["subprocess.Popen[str]"] = []
    try:
        for _ in range(k):
            procs.append(subprocess.Popen(
                [sys.executable, "-S", "-c", _SPINNER, repr(start), repr(start + window)],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))
        counts = [int(p.communicate(timeout=TIMEOUT_SECONDS)[0].strip()) for p in procs]
        return counts if all(c > 0 for c in counts) else None
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def measure_parallel_speed(cpus: int, rounds: int = PARALLEL_ROUNDS,
                           window: float = PARALLEL_WINDOW_S) -> Optional[Tuple[float, List[float]]]:
    """Each CPU's speed with `cpus` CPU-bound processes at once, against one process alone:
    per round, one alone, `cpus` together, one alone again (in windows of `window` s), the
    mean of the together ones' loops over the mean of the two alone; the median of the
    rounds, clamped to (0.05, 1], with the rounds' own values. None where it cannot run."""
    each = []
    for _ in range(rounds):
        a = _spin_together(1, window)
        both = _spin_together(cpus, window)
        b = _spin_together(1, window)
        if not a or not both or not b:
            return None
        each.append(sum(both) / len(both) / ((a[0] + b[0]) / 2))
    return min(1.0, max(0.05, statistics.median(each))), each


def parallel_speed(cpus: int) -> Tuple[float, str]:
    """Each CPU's speed with all `cpus` busy, against one alone, here and now (the what-if
    model's ``parallel_speed``), and how it was had: measured now (this process, or the
    cache of the last 10 minutes: about 3.5 s of `cpus` spinning processes), or 1.0 where
    that failed. On a shared host one measurement moves by a third between seconds: the
    median of 3 rounds."""
    if cpus <= 1:
        return 1.0, "one CPU"
    key = ("parallel_speed", cpus)
    if key in _cache:
        return _cache[key]
    ck = f"parallel_speed|{cpus}|{_boot_id()}"
    v = _read_cached(ck, "parallel_speed")
    if v is not None:
        got = (v, "measured on this machine")
    else:
        m = measure_parallel_speed(cpus)
        if m is not None:
            _write_cached(ck, m[0], "parallel_speed")
            got = (m[0], "measured on this machine")
        else:
            got = (1.0, "measuring it here failed: CPUs taken as independent")
    _cache[key] = got
    return got


# ---------------------------------------------------------------- free-threading factor
FT_BATCH_S = 0.02
FT_ROUNDS = 3
_ft_cache: Dict[str, Tuple[Optional[float], str]] = {}  # by interpreter, failures too


def _ft_run(python: str, reps: Dict[str, int]) -> Optional[Dict[str, Any]]:
    """The worker's speed report run by `python` (None where it could not run)."""
    out = _run_worker(python, "speed", json.dumps(reps), repr(FT_BATCH_S), flags=("-S",))
    return out if out and isinstance(out.get("times"), dict) else None


def find_ft_python() -> Tuple[Optional[str], str]:
    """The free-threaded interpreter of this Python version (path, ""), or (None, why not):
    ``GILTRACER_FT_PYTHON`` names it, else ``python3.Nt`` on PATH or beside this
    interpreter."""
    want = "python%d.%dt" % sys.version_info[:2]
    env = (variables.get("GILTRACER_FT_PYTHON") or "").strip()
    if env:
        return env, ""
    import shutil
    dirs = [os.path.dirname(sys.executable), os.path.join(sys.base_prefix, "bin")]
    found = shutil.which(want) or next(
        (p for p in (os.path.join(d, want) for d in dirs) if os.access(p, os.X_OK)), None)
    if found:
        return found, ""
    return None, (f"no free-threaded {want} on PATH or beside {sys.executable} "
                  f"(GILTRACER_FT_PYTHON names one)")


def measure_ft_factor(ft_python: str, rounds: int = FT_ROUNDS) -> Tuple[Optional[float], str]:
    """The free-threaded interpreter's single-thread time over this one's on the worker's
    workloads: per round, this interpreter then `ft_python` (the same calls), the geometric
    mean of the workloads' ratios; the median of the rounds. (factor, "") or (None, why)."""
    ratios: List[float] = []
    mine = "%d.%d" % sys.version_info[:2]
    for _ in range(rounds):
        gil = _ft_run(sys.executable, {})
        if gil is None:
            return None, f"{sys.executable} could not run the measurement"
        ft = _ft_run(ft_python, gil["reps"])
        if ft is None:
            return None, f"{ft_python} could not run the measurement"
        if not ft.get("free_threaded") or ft.get("gil_enabled"):
            return None, f"{ft_python} is not a free-threaded build running without the GIL"
        if ft.get("version") != mine:
            return None, f"{ft_python} is Python {ft.get('version')}, not {mine}"
        logs = [math.log(ft["times"][k] / gil["times"][k]) for k in gil["times"]
                if gil["times"][k] > 0 and ft["times"].get(k, 0) > 0]
        if not logs:
            return None, "the measurement timed nothing"
        ratios.append(math.exp(sum(logs) / len(logs)))
    return statistics.median(ratios), ""


def ft_factor() -> Tuple[Optional[float], str]:
    """Free-threading's single-thread cost factor measured here and now against this
    Python's free-threaded build (see find_ft_python), and how it was had: (factor,
    "measured on this machine against <path>") from this process's or the last 10 minutes'
    cache (about 2 s otherwise), or (None, why it could not be measured)."""
    python, why = find_ft_python()
    if python is None:
        return None, why
    if python in _ft_cache:
        return _ft_cache[python]
    ck = f"ft_factor|{sys.executable}|{sys.version}|{python}|{_boot_id()}"
    v = _read_cached(ck, "ft_factor")
    if v is None:
        v, why = measure_ft_factor(python)
        if v is not None:
            _write_cached(ck, v, "ft_factor")
    got = (v, f"measured on this machine against {python}") if v is not None else (None, why)
    _ft_cache[python] = got
    return got
