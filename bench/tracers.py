"""The tracers under comparison, behind one small interface.

``make(name)`` returns an object with ``start()`` and ``stop() -> dict``. The object
is built once per process (before the warm-up rep); ``start()``/``stop()`` run once
per rep, right around the timed workload call. ``stop()`` returns facts about the
rep (event counts, GIL acquisitions) and leaves no trace data behind, so reps do
not accumulate memory.
"""

from __future__ import annotations

import sys
import threading

# Big enough for every workload here (builtins: 6 M events, threads2: 4 M), so no
# configuration drops anything; giltracer allocates its 64 KiB blocks on demand.
GT_MAX_EVENTS = 20_000_000
# viztracer keeps one entry per call (call + return = 2 hook events); its buffer is
# calloc'ed at construction, so untouched entries cost no memory.
VIZ_ALL_ENTRIES = 10_000_000

# The floor's pre-faulted arrays, per workload: (records per thread, arrays). Sized
# above each workload's events per thread (builtins: 6 M on the main thread;
# threads2: 2 M in each of two threads, plus the main thread's few).
FLOOR_SIZES = {
    "fib": (600_000, 1),
    "method": (2_200_000, 1),
    "builtins": (6_500_000, 1),
    "threads2": (2_200_000, 3),
    "mixed": (400_000, 1),
}
FLOOR_DEFAULT_SIZE = (1_000_000, 1)

# name -> (column label, short description)
TRACERS = {
    "none": ("untraced", "no tracer"),
    "noop": ("no-op C hook", "bench/hooks.c: PyEval_SetProfile(noop) + threading.setprofile bootstrap"),
    "floor": ("floor", "bench/hooks.c: the minimal recording hook (rdtsc, code reference, 24-byte store per "
              "event; 3.12+: sys.monitoring C callbacks for giltracer's events)"),
    "cprofile": ("cProfile", "cProfile.Profile().enable()/disable()"),
    "viztracer": ("viztracer", "VizTracer(verbose=0) defaults (tracer_entries=1e6 ring buffer)"),
    "viztracer_all": ("viztracer (all)", f"VizTracer(verbose=0, tracer_entries={VIZ_ALL_ENTRIES:.0e}): keeps every call"),
    "giltracer": ("giltracer", "giltracer.trace(backend='hooks'): functions + C calls, GIL probe, sched"),
    "giltracer_fn": ("giltracer fn-only", "giltracer.trace(gil=False, sched=False): the function tracer alone"),
    "giltracer_noc": ("giltracer c_calls=False", "giltracer.trace(c_calls=False): the defaults without C calls"),
    # GIL probe configurations (functions off)
    "gil_hooks": ("GIL hooks", "giltracer.trace(functions=False, sched=False, backend='hooks')"),
    "gil_hooks_sched": ("GIL hooks+sched", "giltracer.trace(functions=False, sched=True, backend='hooks')"),
    "gil_bpf": ("GIL bpf", "giltracer.trace(functions=False, sched=False, backend='bpf')"),
    # control: a giltracer session with every probe off (same imports, same start/stop)
    "gil_off": ("giltracer, all off", "giltracer.trace(functions=False, gil=False, sched=False)"),
}


class _None:
    def start(self):
        pass

    def stop(self):
        return {}


class _Noop:
    def __init__(self):
        import hooks

        self.mod = hooks.load()

    def start(self):
        threading.setprofile(self.mod.noop_bootstrap)
        self.mod.noop_install()

    def stop(self):
        self.mod.noop_uninstall()
        threading.setprofile(None)
        return {}


class _Floor:
    """The minimal recording hook. Its arrays are made and pre-faulted here, once per
    process, and reused by every rep; stop() releases the references they hold."""

    def __init__(self, workload=None):
        import hooks

        self.mod = hooks.load()
        self.mod.floor_prepare(*FLOOR_SIZES.get(workload, FLOOR_DEFAULT_SIZE))
        # before 3.12 new threads get the hook from threading's profile bootstrap
        self.bootstrap = getattr(self.mod, "floor_bootstrap", None)

    def start(self):
        if self.bootstrap is not None:
            threading.setprofile(self.bootstrap)
        self.mod.floor_start()

    def stop(self):
        stats = self.mod.floor_stop()
        if self.bootstrap is not None:
            threading.setprofile(None)
        return {"events": stats["events"], "dropped": stats["dropped"] + stats["lost"]}


class _CProfile:
    def __init__(self):
        import cProfile

        self.cls = cProfile.Profile
        self.prof = None

    def start(self):
        self.prof = self.cls()
        self.prof.enable()

    def stop(self):
        self.prof.disable()
        self.prof = None
        return {}


class _Viz:
    def __init__(self, entries=None):
        from viztracer import VizTracer

        kw = {"verbose": 0}
        if entries:
            kw["tracer_entries"] = entries
        # One tracer per process, reused across reps (its buffer is faulted in by the
        # warm-up rep, as giltracer's recycled blocks are).
        self.viz = VizTracer(**kw)
        # Before 3.12 viztracer installs its hooks when it is *constructed* (its profile
        # function on this thread and threading.setprofile for new threads) and removes
        # the thread hook only when it is freed; start()/stop() toggle recording and this
        # thread's hook. Keep its thread hook and put it in place only between start()
        # and stop(), so that nothing of it runs outside the traced reps (the paired
        # untraced reps of threads2 would otherwise start hooked threads).
        self.thread_hook = threading.getprofile() if hasattr(threading, "getprofile") else None
        threading.setprofile(None)
        sys.setprofile(None)

    def start(self):
        if self.thread_hook is not None:
            threading.setprofile(self.thread_hook)
        self.viz.start()

    def stop(self):
        self.viz.stop()
        if self.thread_hook is not None:
            threading.setprofile(None)
        self.viz.clear()
        return {}


class _Gil:
    def __init__(self, **options):
        import giltracer

        self.giltracer = giltracer
        self.options = dict(max_events=GT_MAX_EVENTS, backend="hooks")
        self.options.update(options)
        self.t = None

    def start(self):
        self.t = self.giltracer.trace(**self.options)
        self.t.start()

    def stop(self):
        t = self.t
        t.stop()
        info = {"events": t.event_count, "dropped": t.dropped_events, "backend": t.backend}
        if self.options.get("gil", True):
            rows = t.summary()
            info["acquisitions"] = sum(r.acquisitions for r in rows)
            info["threads"] = [(r.name, r.acquisitions, round(r.held_pct, 1), round(r.wait_pct, 1))
                               for r in rows]
            info["sched_status"] = t.sched_status
            info["backend_reason"] = t.backend_reason
        self.t = None
        return info


def make(name: str, workload: str | None = None):
    """The tracer `name`; `workload` sizes what is allocated up front (the floor)."""
    if name == "none":
        return _None()
    if name == "noop":
        return _Noop()
    if name == "floor":
        return _Floor(workload)
    if name == "cprofile":
        return _CProfile()
    if name == "viztracer":
        return _Viz()
    if name == "viztracer_all":
        return _Viz(VIZ_ALL_ENTRIES)
    if name == "giltracer":
        return _Gil()
    if name == "giltracer_fn":
        return _Gil(gil=False, sched=False)
    if name == "giltracer_noc":
        return _Gil(c_calls=False)
    if name == "gil_hooks":
        return _Gil(functions=False, sched=False, backend="hooks")
    if name == "gil_hooks_sched":
        return _Gil(functions=False, sched=True, backend="hooks")
    if name == "gil_bpf":
        return _Gil(functions=False, sched=False, backend="bpf")
    if name == "gil_off":
        return _Gil(functions=False, gil=False, sched=False)
    raise KeyError(f"unknown tracer {name!r}; known: {', '.join(TRACERS)}")


def have_viztracer() -> bool:
    try:
        import viztracer  # noqa: F401
    except ImportError:
        return False
    return True


def bpf_status():
    """(available, why) for giltracer's bpf backend."""
    try:
        from giltracer import _core
    except ImportError as e:  # pragma: no cover
        return False, f"giltracer not importable: {e}"
    info = _core.build_info()
    return bool(info.get("bpf_available")), str(info.get("bpf_why") or "")


if __name__ == "__main__":  # pragma: no cover
    for k, (label, desc) in TRACERS.items():
        print(f"{k:16} {label:18} {desc}")
    sys.exit(0)
