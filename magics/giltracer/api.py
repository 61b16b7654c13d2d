"""The Python API: ``with giltracer.trace(...) as t: ...``, the running trace.

The C core does the work; this module validates options, hands the session the
thread list it needs, names threads at the end and turns results into the rows of
rows.py; render.py and picture.py draw them, whatif_policy.py picks the what-if
model's settings.
"""

from __future__ import annotations

import gc
import inspect
import json
import os
import re
import sysconfig
import tempfile
import threading
import time
import warnings
import weakref
from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple,
                    Union)

if TYPE_CHECKING:  # at run time the core is imported where it is used: importing giltracer
    from . import _core  # stays cheap

from . import _child, lockkinds, options, render, whatif_policy
from .lockkinds import STW, STW_GC, LockKinds
from .options import DEFAULT_MAX_EVENTS, DEFAULT_MAX_OUTPUT, PROFILE_SORTS, VIEWER_THEMES
from .rows import (GIL_STATES, OS_STATES, PARK_STATES, PROFILE_STATES, BlameRow, FunctionRow,
                   ProcessInfo, ProfileNode, ThreadInfo, ThreadSummary, WhatIf, WhatIfFunction,
                   WhatIfThread)

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep

VIEWER_TABS = ("timeline", "profile", "blame", "top", "whatif")

# A free-threaded build (3.13t+): traced like any other; there is no GIL to show.
FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))

_last: Optional["Trace"] = None


def stop_active() -> bool:
    """Stop the process's active trace, whoever holds it, and release its records (they
    are not merged: that trace gives no results; its ``stop()`` says so). For a trace
    that nothing can stop any more, e.g. one started in a line that failed and kept
    alive by ``sys.last_traceback``. Returns True if there was one."""
    from . import _core

    return _core.stop_active()


def last() -> Optional["Trace"]:
    """The trace that finished last in this process (e.g. the last ``%%giltracer``
    cell's), or None."""
    return _last


_SIZE_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9,
               "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}


def parse_size(text: str) -> int:
    """'20MB' -> 20_000_000, '500k' -> 500_000, '1MiB' -> 1_048_576, '1000' -> 1000."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*", str(text))
    unit = m.group(2).lower() if m else ""
    if not m or unit not in _SIZE_UNITS:
        raise ValueError(f"not a size: {text!r}; use e.g. 20MB, 500k or 1000000 (bytes)")
    return int(float(m.group(1)) * _SIZE_UNITS[unit])



def code_runner() -> Callable[..., Any]:
    """``run(code, globals, locals=None)``: exec (or eval, for a code object compiled in
    "eval" mode) `code` from C. Get it before the trace starts, then call it inside: the
    tracer records neither the call nor a frame of ours, so the code's own ``<module>``
    is depth 1 for ``max_depth`` and no plumbing span (``exec``) appears in its trace."""
    from . import _core

    return _core.run_code


def start_failure(e: BaseException) -> str:
    """The one line that says a trace could not start (Trace.start() raised `e`), for the
    front ends that report it instead of a traceback."""
    why = str(e)
    why = why[len("giltracer: "):] if why.startswith("giltracer: ") else why
    return f"giltracer: could not start the trace: {why}"


def check_output_path(path: str) -> Optional[str]:
    """Why `path` cannot be written (its directory is missing or not writable, or it
    is a directory), or None; checked before the traced code runs, so its work is not
    lost to a typo in the output path."""
    full = os.path.abspath(path)
    folder = os.path.dirname(full)
    if os.path.isdir(full):
        return f"{path} is a directory; give a file name, e.g. {os.path.join(path, 'trace.html')}"
    if not os.path.isdir(folder):
        return f"the directory {folder} does not exist; create it first or give another path"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"the directory {folder} is not writable; give a path in a directory you can write to"
    if os.path.exists(full) and not os.access(full, os.W_OK):
        return f"{path} exists and is not writable; remove it or give another path"
    return None


def _own_command() -> str:
    try:
        with open("/proc/self/cmdline", "rb") as f:
            return f.read(4096).replace(b"\0", b" ").strip().decode("utf-8", "replace")
    except OSError:
        return ""


def _states(v: Sequence[int]) -> Dict[str, int]:
    return dict(zip(PROFILE_STATES, v))


class BudgetNotice(UserWarning):
    """The event budget was reached: part of the trace changed form (see the message)."""


def _warn_notice(message: str) -> None:
    warnings.warn(message, BudgetNotice, stacklevel=4)


def _check_globs(name: str, value: Union[None, str, Iterable[str]]) -> Optional[List[str]]:
    if value is None:
        return None
    values: Iterable[object] = [value] if isinstance(value, (str, bytes, os.PathLike)) else value
    out = []
    for v in values:
        if not isinstance(v, str) or not v:
            raise ValueError(f"{name} takes filename globs such as '*/mypkg/*', got {v!r}")
        out.append(v)
    return out


def _weak_set_members(weak_set: Any) -> List[Any]:
    """The live objects of a WeakSet that other threads add to while we read it. Iterating
    the WeakSet runs bytecode, so a thread created meanwhile raises "Set changed size during
    iteration"; copying its underlying set is one C call. Retried in case a collection's
    weakref callbacks removed entries during the copy."""
    refs = getattr(weak_set, "data", None)
    if refs is None:
        return []
    for _ in range(8):
        try:
            copied = list(refs)
        except RuntimeError:
            continue
        return [obj for obj in (ref() for ref in copied) if obj is not None]
    return []


def _ended_threads() -> "weakref.WeakSet[threading.Thread]":
    """Thread objects of threads that have already run and ended (as at a session's start)."""
    return weakref.WeakSet(t for t in _weak_set_members(getattr(threading, "_dangling", None))
                           if t.ident is not None and not t.is_alive())


def _thread_names(ended_before: Iterable[threading.Thread] = ()) -> Dict[int, str]:
    """native id -> name, for threads alive now and threads that ended but whose Thread
    objects still exist (threading keeps a weak set of them), except those that had ended
    before the session began: the OS reuses their ids, for another Python thread or for a
    thread without a Thread object, which would then show under a stale name."""
    stale = set(map(id, ended_before))
    names: Dict[int, str] = {}
    for t in _weak_set_members(getattr(threading, "_dangling", None)) + threading.enumerate():
        nid = getattr(t, "native_id", None)
        if nid is not None and id(t) not in stale:
            names[nid] = t.name
    return names


class _GcWindows:
    """A free-threaded build's garbage collections during a trace, from gc.callbacks: each
    stops the world, so time another thread spent parked inside one was a stop-the-world
    pause (GC). Registered on free-threaded builds only (the callback is a traced call)."""

    def __init__(self) -> None:
        self.open: Dict[int, int] = {}
        self.windows: List[Tuple[int, int, int]] = []  # (collector tid, start ns, end ns)

    def __call__(self, phase: str, info: Dict[str, Any]) -> None:
        tid, now = threading.get_native_id(), time.monotonic_ns()
        if phase == "start":
            self.open[tid] = now
        elif tid in self.open:
            self.windows.append((tid, self.open.pop(tid), now))

    def parked_in(self, tid: int, parked: Iterable[Tuple[int, int]]) -> int:
        """ns of `parked` (the thread's parked intervals) inside another thread's GC."""
        return sum(max(0, min(b, e) - max(a, s)) for a, b in parked
                   for who, s, e in self.windows if who != tid)


def _lock_kinds_text(t: "Trace", all_threads: bool, top: int = 5) -> str:
    locks = t._locks
    assert locks is not None
    if not locks.running:
        return f"\nparks not labelled: {locks.reason}\n"
    lost = f"; {locks.lost} records lost (ring buffer full): some parks unlabelled" if locks.lost else ""
    lines = [f"\nwhat the parks waited for ({locks.reason}{lost}):"]
    for d in t.summary(all_threads=all_threads):
        kinds = ", ".join(f"{k or 'unknown'} {v / 1e6:.1f} ms" for k, v in (d.park_kinds or {}).items())
        lines.append(f"  {d.name} ({d.tid}): {kinds or 'no parks'}")
    rows = t.blame(all_threads=all_threads)[:top]
    if rows:
        names = {th.tid: th.name for th in t.threads}
        lines.append("blame: what the parked waited for (of its parks woken by that thread):")
        for b in rows:
            lines.append(f"  {names.get(b.waiter, b.waiter)} <- {names.get(b.holder, b.holder)} in "
                         f"{b.function or '(no Python function)'} {b.wait_ns / 1e6:.1f} ms: {b.kind or 'unknown'}")
    return "\n".join(lines) + "\n"


class Trace:
    """A traced block. Use as a context manager; after it exits the facts are here.

    Attributes available after the block: ``threads``, ``event_count``,
    ``dropped_events``, ``dropped`` (per stream), ``duration_ns``, ``backend``, ``backend_reason``,
    ``sched_status``; methods ``summary()``, ``summary_text()``, ``blame()``,
    ``spans(tid)``, ``gil_intervals(tid)``, ``os_intervals(tid)``, ``save(path)``,
    ``to_html()`` (a Trace as a cell's last expression shows the viewer); the
    GIL-split profile: ``profile(thread=None)``, ``functions()``, ``profile_text()``.
    """

    def __init__(
        self,
        *,
        functions: bool = True,
        c_calls: bool = True,
        max_events: Optional[int] = DEFAULT_MAX_EVENTS,
        include: Union[None, str, Sequence[str]] = None,
        exclude: Union[None, str, Sequence[str]] = None,
        max_depth: Optional[int] = None,
        gil: bool = True,
        sched: bool = True,
        backend: str = "auto",
        follow_children: bool = False,
        crosscheck: bool = False,
        title: Optional[str] = None,
        mode: str = "trace",
        sample_interval: Union[str, float] = options.DEFAULT_SAMPLE_INTERVAL,
        keep: str = "first",
    ) -> None:
        options.check_keyword("backend", backend)
        options.check_keyword("keep", keep)
        options.check_keyword("mode", mode)
        sample_ns, functions = options.sampling(mode, sample_interval, functions)
        options.check_keyword("max_events", max_events)
        options.check_keyword("max_depth", max_depth)
        # backend="bpf": its probe follows forked children system-wide (root); otherwise every
        # child process starts its own session and the parent merges them (_child.py).
        bpf_follow = bool(follow_children) and backend == "bpf"
        self._follow = bool(follow_children) and not bpf_follow
        self.options: Dict[str, Any] = dict(
            functions=bool(functions),
            c_calls=bool(c_calls),
            max_events=max_events or 0,
            include=_check_globs("include", include),
            exclude=_check_globs("exclude", exclude),
            max_depth=max_depth or 0,
            gil=bool(gil),
            sched=bool(sched),
            backend=backend,
            follow_children=bpf_follow,
            crosscheck=bool(crosscheck),
            sample_ns=sample_ns,
            keep=keep,
        )
        self.mode = mode
        self._children: Optional[_child.Children] = None
        self._commands: Dict[int, str] = {}
        self._pid: Optional[int] = None
        self.max_events = max_events
        self.title = title
        self._session: Optional[_core.Session] = None
        self._ended_before: Iterable[threading.Thread] = ()
        self._names_at_start: Dict[int, str] = {}
        self._result: Optional[_core.Result] = None
        self._funcs: Optional[List[_core.Function]] = None
        self._gc: Optional[_GcWindows] = None
        self._locks: Optional[LockKinds] = None
        # At stop: {file name: name shown instead}, e.g. a notebook cell's -> "In [5]" (magics).
        self.file_labels: Optional[Callable[[], Dict[str, str]]] = None
        # At start: is this thread the host's own machinery (a notebook kernel's IOPub, shell
        # channel, heartbeat)? Such threads are background in every view (magics).
        self.host_thread: Optional[Callable[[threading.Thread], bool]] = None

    # -- lifecycle ---------------------------------------------------------------
    def start(self) -> "Trace":
        if self._session is not None:
            raise RuntimeError("this trace was already started; make a new giltracer.trace()")
        from . import _core

        _child.yield_to_own_trace()
        self._pid = os.getpid()
        children = None
        if self._follow:
            children = self._children = _child.Children(self._child_options())
        try:
            session = self._session = _core.Session(
                own_dir=_PACKAGE_DIR, children=children.prefix if children else None,
                **self.options)
            threads = [(t.ident, t.native_id, self._thread_kind(t))
                       for t in threading.enumerate() if t.ident is not None]
            self._ended_before = _ended_threads()
            # Names of the threads running now: one that ends during the session and whose
            # Thread object is gone by stop is otherwise nameless.
            self._names_at_start = {t.native_id: t.name for t in threading.enumerate()
                                    if t.native_id is not None}
            if children is not None:
                children.begin()
            if FREE_THREADED:
                # Registered before the start and removed after the stop: the tracer would
                # record the list's append and remove as calls of the traced code.
                self._gc = _GcWindows()
                gc.callbacks.append(self._gc)
                self._locks = LockKinds().start()
            session.start(threads)
        except BaseException:
            # Whatever failed, the program is left as it was (and the children's folder
            # removed).
            try:
                self._end_plumbing()
            finally:
                self._collect_children()
            raise
        return self

    def _end_plumbing(self) -> None:
        """The lock-kind probe stopped (its events read), the gc callback removed, no
        child joins any more: each whatever happened to the one before (a failure in
        reading the probe must leave nothing of the trace's behind)."""
        try:
            self._stop_locks()
        finally:
            try:
                self._unregister_gc()
            finally:
                self._end_children()

    def _stop_locks(self) -> None:
        if self._locks is not None:
            self._locks.stop()

    def _unregister_gc(self) -> None:
        if self._gc is not None and self._gc in gc.callbacks:
            gc.callbacks.remove(self._gc)

    def progress(self) -> Optional[Dict[str, Any]]:
        """The recording's facts so far (per-thread GIL held / waiting / released ns,
        calls, GIL events, dropped, budget_reached, and keep: which calls the timeline
        keeps past the budget), or None when it does not record. Cheap: for a live view,
        from any thread."""
        session = self._session
        p = session.progress() if session is not None else None
        if p is not None:
            p["keep"] = self.options.get("keep", "first")
        return p

    def _child_options(self) -> Dict[str, Any]:
        """What a child's session records: the parent's options, with the in-process probe."""
        return {k: v for k, v in self.options.items()
                if k in ("functions", "c_calls", "max_events", "include", "exclude", "max_depth",
                         "gil", "sched")}

    def _end_children(self) -> None:
        if self._children is not None:
            self._children.end()

    def _collect_children(self) -> None:
        if self._children is not None:
            self._commands = self._children.collect()
            self._children = None

    def _thread_kind(self, t: threading.Thread) -> int:
        """2: giltracer's own (a live meter's: in no view), 1: the host's (background), 0."""
        if getattr(t, "giltracer_service", False):
            return 2
        try:
            return int(bool(self.host_thread is not None and self.host_thread(t)))
        except Exception:  # a guess that fails is no reason to lose the trace
            return 0

    def stop(self) -> "Trace":
        if self._result is not None:
            return self
        session = self._session
        if session is None:
            raise RuntimeError("this trace was never started")
        if session.state == "released":
            from . import _core

            raise RuntimeError(_core.RELEASED_MESSAGE)
        self._session = None
        try:
            try:
                session.stop()
            finally:  # after the stop: the tracer does not record this plumbing
                self._end_plumbing()
        finally:
            # Finished whatever happens here (e.g. a KeyboardInterrupt while naming the
            # threads): a session stays the active one until it is finished.
            names = dict(self._names_at_start)
            try:
                names.update(_thread_names(self._ended_before))
            finally:
                try:
                    self._result = session.finish(names, self.title, self._labels())
                    # the viewer's "What if" tab: the same defaults as what_if()
                    from . import calibrate

                    cpus = calibrate.usable_cpus()
                    self._result.set_what_if(cpus, whatif_policy.ft_factor_for()[0],
                                             whatif_policy.default_handoff_us() * 1e3,
                                             whatif_policy.default_event_ns(self.options),
                                             whatif_policy.parallel_speed_for(cpus)[0])
                finally:
                    self._collect_children()
        global _last
        _last = self
        notice = self.budget_notice()
        if notice:
            (self.on_notice or _warn_notice)(notice)
        for message in self.loss_notes():
            if self.on_loss is None:
                warnings.warn(message, RuntimeWarning, stacklevel=3)
            else:
                self.on_loss(message)
        return self

    def loss_notes(self) -> List[str]:
        """What the stopped trace lost or could not record, one sentence each (warned at
        stop, or handed to ``on_loss``)."""
        notes = []
        dropped = self.dropped
        if dropped["calls"]:
            notes.append(
                f"giltracer: {dropped['calls']:,} call events were dropped "
                f"(max_events={self.max_events:,} reached); the GIL was still probed. "
                "Raise max_events, narrow with include=/exclude=, or set c_calls=False.")
        if self.result.tracer_note:
            notes.append(f"giltracer: {self.result.tracer_note}")
        lost = [f"{n:,} {what}" for n, what in
                ((dropped["gil"], "GIL events"), (dropped["sched"], "scheduler records")) if n]
        if lost:
            notes.append(
                f"giltracer: {' and '.join(lost)} were lost (a probe's buffer overflowed, "
                "or memory ran out; max_events never drops them, it aggregates them): GIL "
                "figures and OS states may have gaps.")
        return notes

    # Where the stop's loss notes go: None warns (RuntimeWarning); the CLI, whose table
    # says each, takes them itself.
    on_loss: Optional[Callable[[str], None]] = None

    # Where the end-of-run budget notice goes: None warns (BudgetNotice); the magics and
    # the CLI print it as it is.
    on_notice: Optional[Callable[[str], None]] = None

    def budget_notice(self) -> Optional[str]:
        """What changed form when max_events was reached, and how to get more; None if
        nothing did."""
        r = self.result
        calls, gil = r.calls_aggregated, r.gil_aggregated + r.sched_aggregated
        if not calls and not gil:
            return None
        cap = f"{self.max_events:,}" if self.max_events else "the memory"
        parts = [f"giltracer: the event budget (max_events={cap}) was reached."]
        kids = sum(1 for p in self.processes if p.child)
        if kids:
            parts.append(f"This process and its {kids} child process{'es' if kids > 1 else ''} "
                         "shared it; each child kept its own aggregates past it, so the "
                         "per-process tables and Profile cover their whole runs.")
        if calls and self.options.get("keep") == "last":
            parts.append(f"The timeline shows each thread's last calls (keep='last'; where its "
                         f"window starts is marked); the {calls:,} call events before them "
                         "were kept as per-thread call trees, so Profile and Top functions "
                         "cover the whole run (GIL blame before the window says unknown).")
        elif calls:
            parts.append(f"The timeline shows the calls recorded until then; the {calls:,} call "
                         "events after it were kept as per-thread call trees, so Profile and "
                         "Top functions cover the whole run (GIL blame after that point names "
                         "the function that held the GIL most of each stretch).")
        if gil:
            parts.append(f"{gil:,} GIL and OS-state events after it were aggregated: the "
                         "per-thread table is exact, their strips are coalesced.")
        parts.append("For more of the timeline, raise max_events (--max-events N) or narrow "
                     "it with include/exclude.")
        return " ".join(parts)

    def _labels(self) -> Optional[Dict[str, str]]:
        """file_labels(), or None when there are none or they cannot be had (names are a
        nicety: the trace is finished without them)."""
        try:
            labels = self.file_labels() if self.file_labels is not None else None
            return {str(k): str(v) for k, v in labels.items()} if labels else None
        except Exception:
            return None

    def __enter__(self) -> "Trace":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- results -----------------------------------------------------------------
    @property
    def result(self) -> _core.Result:
        if self._result is None:
            if self._session is not None and self._session.state == "released":
                from . import _core

                raise RuntimeError(_core.RELEASED_MESSAGE)
            raise RuntimeError("results are available after the traced block has ended")
        return self._result

    @property
    def threads(self) -> List[ThreadInfo]:
        return [ThreadInfo(**d) for d in self.result.threads()]

    def _tid(self, thread: Union[int, str, threading.Thread]) -> int:
        """The tid of a thread given by tid, name or Thread. The kernel can reuse a tid
        within a session (after a wrap of pid_max): ``threads`` then lists both threads
        under it, and lookups by tid (spans, intervals, profile) give the latest."""
        if isinstance(thread, threading.Thread):
            return int(thread.native_id)  # type: ignore[arg-type]
        if isinstance(thread, str):
            for t in self.threads:
                if t.name == thread:
                    return t.tid
            raise KeyError(f"no thread named {thread!r} in this trace")
        return int(thread)

    event_count = property(lambda self: self.result.event_count, doc="call events recorded")
    dropped_events = property(lambda self: self.result.dropped_events, doc="call events dropped")

    @property
    def dropped(self) -> Dict[str, int]:
        """Events not recorded, per stream: ``calls`` (max_events reached), ``gil`` and
        ``sched`` (lost: a probe's buffer overflowed, or memory ran out)."""
        r = self.result
        return {"calls": r.dropped_events, "gil": r.gil_dropped, "sched": r.sched_lost}
    duration_ns = property(lambda self: self.result.duration_ns, doc="traced wall time")
    backend = property(lambda self: self.result.backend, doc="GIL probe that ran")
    backend_reason = property(lambda self: self.result.backend_reason, doc="why")
    sched_status = property(lambda self: self.result.sched_status, doc="OS-state source")
    gil_known = property(lambda self: self.result.gil_known, doc="a GIL probe ran")
    free_threaded = property(lambda self: self.result.free_threaded,
                             doc="a free-threaded build: the GIL figures are lock contention")

    def summary(self, all_threads: bool = False, process: Optional[int] = None) -> List[ThreadSummary]:
        """Per-thread GIL and OS figures of the cell's threads; ``all_threads=True`` adds
        the background threads (``ThreadSummary.background``); ``process``: only the
        threads of that pid (see ``processes``)."""
        rows = [d for d in self.result.summary()
                if (all_threads or not d["background"]) and (process is None or d["pid"] == process)]
        locks = self._locks if self._locks is not None and self._locks.running else None
        if self.result.free_threaded and (self._gc is not None or locks is not None):
            for d in rows:
                parked = [(a, b) for a, b, q in self.result.gil_intervals(d["tid"]) if q == 1]
                if locks is not None:
                    kinds = d["park_kinds"] = locks.kinds(d["tid"], parked)
                    d["stop_the_world_ns"] = kinds.get(STW_GC, 0) + kinds.get(STW, 0)
                elif self._gc is not None:
                    d["stop_the_world_ns"] = self._gc.parked_in(d["tid"], parked)
        return [ThreadSummary(**d) for d in rows]

    @property
    def tool_threads(self) -> List[ThreadSummary]:
        """giltracer's own threads (a live meter's, the sampler's, a followed child's
        spooler): in no view (table, blame, profile, viewer), their cost in ``tool_note``."""
        return [ThreadSummary(**d) for d in self.result.tool()["threads"]]

    @property
    def tool_note(self) -> Optional[str]:
        """What giltracer's own threads cost the traced code: the GIL they held and the
        waits they caused (a sentence, also under the text table and in the viewer), or None."""
        return self.result.tool_note

    @property
    def processes(self) -> List[ProcessInfo]:
        """The traced process first, then each child process followed
        (``follow_children=True``) in the order it started."""
        own = os.getpid() if self._pid is None else self._pid
        order: Dict[int, List[ThreadInfo]] = {}
        for t in self.threads:
            order.setdefault(t.pid, []).append(t)
        rows = []
        for pid, threads in sorted(order.items(), key=lambda kv: (kv[0] != own, min(t.start_ns for t in kv[1]))):
            rows.append(ProcessInfo(pid, self._commands.get(pid, "") if pid != own else _own_command(),
                                    pid != own, tuple(t.tid for t in threads),
                                    min(t.start_ns for t in threads), max(t.end_ns for t in threads)))
        return rows

    def summary_text(self, top: int = 5, all_threads: bool = False) -> str:
        """The per-thread table (background threads on one line unless ``all_threads``)
        and the top GIL-blame rows; on a free-threaded build, what the parks waited for
        (with the lock-kind probe) or why that is not known."""
        text = self.result.text(top, all_threads)
        if self.result.free_threaded and self._locks is not None:
            text += _lock_kinds_text(self, all_threads, top)
        return text

    @property
    def lock_kinds_reason(self) -> Optional[str]:
        """Free-threaded builds: what labelled the parks (the eBPF lock-kind probe) or why
        they are unlabelled (e.g. not root); None elsewhere."""
        return self._locks.reason if self._locks is not None else None

    def park_labels(self, thread: Union[int, str, threading.Thread]) -> List[Tuple[int, int, str]]:
        """Free-threaded builds with the lock-kind probe: [(start_ns, end_ns, label)] of the
        thread's parked intervals ("" where unknown); [] when the probe did not run."""
        locks = self._locks
        if locks is None or not locks.running:
            return []
        tid = self._tid(thread)
        return [(a, b, locks.label(tid, a, b)) for a, b, q in self.result.gil_intervals(tid) if q == 1]

    def crosscheck(self, all_threads: bool = False) -> Optional[List[ThreadSummary]]:
        """With ``crosscheck=True`` (root): the bpf probe's per-thread summary of the same
        run, to compare with ``summary()`` from the hooks (the same threads: those the
        hooks' result folds as background are left out unless ``all_threads``)."""
        rows = self.result.crosscheck()
        if rows is None:
            return None
        folded = set() if all_threads else {t["tid"] for t in self.result.threads() if t["background"]}
        return [ThreadSummary(**d) for d in rows if d["tid"] not in folded]

    def blame(self, all_threads: bool = False) -> List[BlameRow]:
        """Who waited for the GIL, on whom, in which function (largest first); a background
        thread's own waits only with ``all_threads=True``."""
        folded = set() if all_threads else {t["tid"] for t in self.result.threads() if t["background"]}
        rows = [d for d in self.result.blame() if d["waiter"] not in folded]
        pairs = self._pair_kinds()
        if pairs is not None:
            for d in rows:
                k = d["kinds"] = pairs.get((d["waiter"], d["holder"]), {})
                d["kind"] = lockkinds.main_kind(k)
        return [BlameRow(**d) for d in rows]

    _pairs: Optional[Dict[Tuple[int, int], Dict[str, int]]] = None

    def _pair_kinds(self) -> Optional[Dict[Tuple[int, int], Dict[str, int]]]:
        """(waiter, waker) -> parked ns by label, with the lock-kind probe; else None."""
        locks = self._locks
        if locks is None or not locks.running or not self.result.free_threaded:
            return None
        if self._pairs is None:
            r = self.result
            self._pairs = lockkinds.pair_kinds(locks, {t["tid"]: r.park_wakers(t["tid"]) for t in r.threads()})
        return self._pairs

    def spans(self, thread: Union[int, str, threading.Thread]) -> List[_core.Span]:
        """[(start_ns, end_ns, name, depth, flags)] of one thread, sorted by start."""
        return self.result.spans(self._tid(thread))

    def gil_intervals(self, thread: Union[int, str, threading.Thread]) -> List[Tuple[int, int, str]]:
        """[(start_ns, end_ns, state)]: released / wait / held; on a free-threaded build
        running / parked / released (waiting for another thread)."""
        names = PARK_STATES if self.result.free_threaded else GIL_STATES
        return [(a, b, names[s]) for a, b, s in self.result.gil_intervals(self._tid(thread))]

    def os_intervals(self, thread: Union[int, str, threading.Thread]) -> List[Tuple[int, int, str]]:
        return [(a, b, OS_STATES[s]) for a, b, s in self.result.os_intervals(self._tid(thread))]

    # -- profile -----------------------------------------------------------------
    def _func_table(self) -> List[_core.Function]:
        if self._funcs is None:
            self._funcs = self.result.functions()
        return self._funcs

    def _profile_tid(self, thread: Union[None, int, str, threading.Thread]) -> Optional[int]:
        return None if thread is None else self._tid(thread)

    def profile(self, thread: Union[None, int, str, threading.Thread] = None,
                outer_frames: bool = False, all_threads: bool = False) -> ProfileNode:
        """The call tree split by GIL state: merged over the cell's threads (``thread=None``;
        ``all_threads=True`` adds the background ones) or of one thread (tid, name or
        Thread). The root is the traced time of the thread(s); its children start at the
        traced code (``outer_frames=True`` keeps the frames above it, e.g. the kernel's)."""
        funcs = self._func_table()
        tid = self._profile_tid(thread)
        if tid is None:
            n = sum(1 for t in self.result.threads() if all_threads or not t["background"])
            root_name = f"all {n} threads" if all_threads else f"{n} threads of the traced code"
        else:
            root_name = next((t.name for t in self.threads if t.tid == tid), f"thread {tid}")
        nodes: List[ProfileNode] = []
        for parent, func, calls, total, self_ns, states, self_states in self.result.profile(
                tid, outer_frames, all_threads):
            name, file, line, is_c = funcs[func] if func >= 0 else (root_name, "", 0, False)
            node = ProfileNode(name, file, line, is_c, calls, total, self_ns, _states(states),
                               _states(self_states), [])
            nodes.append(node)
            if parent >= 0:
                nodes[parent].children.append(node)
        for node in nodes:
            node.children.sort(key=lambda n: -n.total_ns)
        return nodes[0]

    def functions(self, thread: Union[None, int, str, threading.Thread] = None,
                  sort: str = "self", outer_frames: bool = False,
                  all_threads: bool = False) -> List[FunctionRow]:
        """Per-function rows (merged over call paths; over the cell's threads unless
        ``thread``), largest first by ``sort``: self (the default, as the viewer's Top
        functions: where the time went, not the thread machinery around it), wait, held,
        total or caused. As in
        ``profile()``, frames above the traced code and background threads are left out
        unless ``outer_frames`` / ``all_threads``."""
        if sort not in PROFILE_SORTS:
            raise ValueError(f"sort must be one of {', '.join(PROFILE_SORTS)}; got {sort!r}")
        funcs = self._func_table()
        rows = [FunctionRow(*funcs[f][:4], calls, total, self_ns, _states(st), _states(sst), caused)
                for f, calls, total, self_ns, st, sst, caused
                in self.result.profile_functions(self._profile_tid(thread), outer_frames, all_threads)
                # a function only in the folded frames above the traced code has no time
                # here, only the GIL wait it caused (blame): folded with them
                if outer_frames or total or calls]
        rows.sort(key=render.sort_key(sort), reverse=True)
        return rows

    def profile_text(self, top: int = 10, sort: str = "wait", all_threads: bool = False) -> str:
        """Top functions by ``sort`` and by GIL held (self time split by GIL state), then
        the per-thread table and the GIL-blame rows."""
        return render.profile_text(self, top, sort, all_threads)

    def what_if(self, cpus: Optional[int] = None, ft_factor: Union[None, float, str] = None,
                top: int = 5, handoff_us: Optional[float] = None,
                event_ns: Union[None, float, str] = None,
                parallel_speed: Union[None, float, str] = None) -> WhatIf:
        """Would free-threading help? The cell re-scheduled without the GIL on ``cpus``
        CPUs (default: those this process may use: its affinity mask, capped by its
        cgroup's CPU quota), each thread's GIL-holding work taking ``ft_factor`` times as
        long (default: the free-threading cost measured on the bench host, else 1.0, or
        ``GILTRACER_FT_FACTOR``; ``"measure"``: measured here
        against this Python's free-threaded build, ``python3.Nt`` on PATH or
        ``GILTRACER_FT_PYTHON``, about 2 s once), its blocking kept and its hand-offs to
        other threads (locks, queues, joins) kept in order, a hand-off waited on costing
        ``handoff_us`` (default: the measured wake-up cost, else 0), less the tracer's own
        cost of ``event_ns`` per call event in that work (default: the one measured on the
        bench host for this interpreter and trace options, else 0; ``"measure"``: measured
        on this machine now, about 1.5 s once, see giltracer.calibrate;
        ``GILTRACER_EVENT_NS`` changes the default; it predicts the untraced cell), each
        CPU running at ``parallel_speed`` of its speed alone when all are busy (default
        1.0, or ``GILTRACER_PARALLEL_SPEED``; CPUs that share a core or a host give less:
        ``"measure"`` measures it here, about 3.5 s once); and, for the ``top`` functions by
        GIL wait caused, the wall time if that function alone released the GIL (tracer's
        cost kept).
        ``str()`` of the result is a table with the model's assumptions."""
        if cpus is None:
            from . import calibrate

            cpus = calibrate.usable_cpus()
        if isinstance(cpus, bool) or not isinstance(cpus, int) or cpus < 1:
            raise ValueError(f"cpus must be an integer >= 1 (the CPUs to schedule on; "
                             f"None = the CPUs this process may use), got {cpus!r}")
        from math import isfinite
        ft_factor, ft_factor_source = whatif_policy.ft_factor_for(ft_factor)
        if isinstance(top, bool) or not isinstance(top, int) or top < 0:
            raise ValueError(f"top must be an integer >= 0, got {top!r}")
        if handoff_us is None:
            handoff_us = whatif_policy.default_handoff_us()
        if (isinstance(handoff_us, bool) or not isinstance(handoff_us, (int, float))
                or not isfinite(handoff_us) or handoff_us < 0):
            raise ValueError(f"handoff_us must be a finite number >= 0 (a hand-off's wake-up "
                             f"cost without the GIL; 0 = none), got {handoff_us!r}")
        if event_ns is None or event_ns == "measure":
            event_ns, event_ns_source = whatif_policy.event_ns_for(self.options, event_ns)
        else:
            event_ns_source = "given"
        if (isinstance(event_ns, bool) or not isinstance(event_ns, (int, float))
                or not isfinite(event_ns) or event_ns < 0):
            raise ValueError(f"event_ns must be a finite number >= 0 (the tracer's own cost "
                             f"per call event; 0 = none) or \"measure\" (measure it on this "
                             f"machine now), got {event_ns!r}")
        speed, speed_source = whatif_policy.parallel_speed_for(cpus, parallel_speed)
        (n, factor, measured, predicted, replay, handoffs, threads, funcs, assumptions,
         handoff_ns, queue_handoffs, waited, event_ns, events, tracer_ns,
         speed) = self.result.what_if(cpus, float(ft_factor), top, float(handoff_us) * 1e3,
                                      float(event_ns), speed)
        table = self._func_table()
        return WhatIf(
            cpus=n, ft_factor=factor, measured_wall_s=measured / 1e9,
            predicted_wall_s=predicted / 1e9,
            speedup=measured / predicted if predicted > 0 else 1.0,
            threads=tuple(WhatIfThread(tid, name, m / 1e9, p / 1e9, w / 1e9)
                          for tid, name, m, p, w in threads),
            functions=tuple(WhatIfFunction(table[f][0], table[f][1], table[f][2], caused / 1e9,
                                           wall / 1e9, measured / wall if wall > 0 else 1.0,
                                           saving / 1e9)
                            for f, caused, saving, wall in funcs if f >= 0),
            assumptions=tuple(assumptions), gil_replay_wall_s=replay / 1e9, handoffs=handoffs,
            handoff_us=handoff_ns / 1e3, queue_handoffs=queue_handoffs, waited=waited,
            event_ns=event_ns, events=int(events), tracer_s=tracer_ns / 1e9,
            event_ns_source=event_ns_source, parallel_speed=speed,
            parallel_speed_source=speed_source, ft_factor_source=ft_factor_source)

    def save(self, path: Union[str, "os.PathLike[str]"], format: Optional[str] = None,
             tab: Optional[str] = None, theme: Optional[str] = None) -> str:
        """Write the trace: ``.html`` (self-contained viewer; ``tab`` = the tab it opens
        on: timeline, profile, blame, top or whatif; ``theme``: auto (default, follows the system's
        light or dark preference), light or dark), ``.json`` (Chrome Trace Event format for
        Perfetto / chrome://tracing) or ``.txt`` (the summary table)."""
        path = os.fspath(path)
        fmt = options.output_format(path, format)
        if tab is not None and tab not in VIEWER_TABS:
            raise ValueError(f"tab must be one of {', '.join(VIEWER_TABS)}; got {tab!r}")
        if theme is not None and theme not in VIEWER_THEMES:
            raise ValueError(f"theme must be one of {', '.join(VIEWER_THEMES)}; got {theme!r}")
        if fmt == "html":
            self._page_lock_kinds()
            self.result.save(path, "html", tab, None if theme == "auto" else theme)  # auto: the default
        elif fmt == "json":
            self.result.save(path, "json")
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(self.summary_text())
        return path

    _lock_kinds_set = False

    def _page_lock_kinds(self) -> None:
        """Free-threaded builds: the park labels and stop-the-world totals, computed here
        after the stop, go into the page's payload (once; the C emitter writes them)."""
        if self._lock_kinds_set or self._locks is None or not self.result.free_threaded:
            return
        r = self.result
        stw = {d.tid: d.stop_the_world_ns for d in self.summary(all_threads=True)}
        parked = {tid: [(a, b) for a, b, q in r.gil_intervals(tid) if q == 1] for tid in stw}
        lk = lockkinds.payload(self._locks, r.t0_ns, stw, parked)
        pairs = self._pair_kinds()
        if pairs is not None:  # the Blame tab's "Waited for": by (waiter, waker)
            lk["blame"] = [[w, h, [[k, v] for k, v in kinds.items()]] for (w, h), kinds in pairs.items()]
        text = json.dumps(lk, separators=(",", ":"))
        # as the core escapes the payload: it sits in a <script> element
        r.set_lock_kinds(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))
        self._lock_kinds_set = True

    def to_html(self, tab: Optional[str] = None, theme: Optional[str] = None) -> str:
        """The self-contained viewer page (what ``save("x.html")`` writes) as a string."""
        with tempfile.TemporaryDirectory(prefix="giltracer-") as d:
            path = self.save(os.path.join(d, "trace.html"), tab=tab, theme=theme)
            with open(path, encoding="utf-8") as f:
                return f.read()

    def display_bundle(self, height: int = 600, text: Optional[str] = None, tab: Optional[str] = None,
                       max_output: int = DEFAULT_MAX_OUTPUT, save_dir: str = ".",
                       saved_html: Optional[str] = None, theme: Optional[str] = None) -> Dict[str, str]:
        """The MIME bundle that shows this trace in a notebook: the viewer in an iframe
        (its JS and CSS cannot clash with the notebook's), opened on `tab`, and `text`
        (default: the per-thread table) for text-only front ends. Above `max_output`
        bytes the page goes to a file in `save_dir` (or is `saved_html`, already
        written) and the bundle is one line with a link, plus the text."""
        return render.display_bundle(self, height, text, tab, max_output, save_dir, saved_html,
                                     theme)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Optional[Dict[str, str]]:
        """A Trace as the last expression of a cell shows the viewer."""
        if self._result is None:
            return None
        return self.display_bundle()

    def __repr__(self) -> str:
        if self._result is None:
            state = self._session.state if self._session is not None else "not started"
            return f"<giltracer.Trace {'released by stop_active()' if state == 'released' else state}>"
        r = self._result
        return (f"<giltracer.Trace {len(r.threads())} threads, {r.duration_ns / 1e9:.3f} s, "
                f"{r.event_count} events, backend={r.backend}>")


def signature_text() -> str:
    """``giltracer.trace(...)`` with every keyword and its default, in Trace's order (the
    user guide (docs/user-guide.md) and trace()'s docstring quote it; tests/test_options.py
    holds both to it)."""
    def literal(v: Any) -> str:
        if isinstance(v, str):
            return f'"{v}"'
        if isinstance(v, int) and not isinstance(v, bool) and v >= 10_000:
            return f"{v:_}"
        return repr(v)
    params = inspect.signature(Trace.__init__).parameters.values()
    return "giltracer.trace(" + ", ".join(f"{p.name}={literal(p.default)}" for p in params
                                          if p.name not in ("self", "title")) + ")"


def trace(**options: Any) -> Trace:
    return Trace(**options)


trace.__doc__ = f"""Trace every call in every thread and probe the GIL while the block runs.

    ``with {signature_text()} as t:``

    ``mode="sample"`` records no call: a sampler thread reads every thread's stack every
    ``sample_interval`` ('5ms', '500us', or seconds as a number) while the GIL probe stays
    exact; ``t.result.sampler`` has the sampler's own GIL use.
    """
