"""The Python API: ``with giltracer.trace(...) as t: ...``.

The C core does the work; this module validates options, hands the session the
thread list it needs, names threads at the end and turns results into small
dataclasses.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

DEFAULT_MAX_EVENTS = 5_000_000
BACKENDS = ("auto", "hooks", "bpf")
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep

GIL_STATES = ("released", "wait", "held")
OS_STATES = ("on-cpu", "preempted", "blocked")


_fork_hook_registered = False


def _core():
    global _fork_hook_registered
    from . import _core  # lazily: importing giltracer stays cheap

    if not _fork_hook_registered and hasattr(os, "register_at_fork"):
        # A forked child (multiprocessing) must not inherit the parent's hooks.
        os.register_at_fork(after_in_child=_core._after_fork_child)
        _fork_hook_registered = True
    return _core


@dataclass(frozen=True)
class ThreadInfo:
    tid: int
    ident: int
    name: str
    spans: int
    pid: int
    start_ns: int
    end_ns: int
    os_states: bool


@dataclass(frozen=True)
class ThreadSummary:
    tid: int
    ident: int
    name: str
    pid: int
    wall_ns: int
    held_ns: int
    wait_ns: int
    released_ns: int
    off_cpu_ns: Optional[int]
    preempted_ns: Optional[int]
    acquisitions: int
    longest_wait_ns: int
    drop_requests: int
    held_pct: float
    wait_pct: float
    released_pct: float
    spans: int


@dataclass(frozen=True)
class BlameRow:
    waiter: int
    holder: int
    function: Optional[str]
    file: str
    line: int
    wait_ns: int
    count: int


def _check_globs(name: str, value: Union[None, str, Iterable[str]]) -> Optional[List[str]]:
    if value is None:
        return None
    if isinstance(value, (str, bytes, os.PathLike)):
        value = [value]  # type: ignore[list-item]
    out = []
    for v in value:  # type: ignore[union-attr]
        if not isinstance(v, str) or not v:
            raise ValueError(f"{name} takes filename globs such as '*/mypkg/*', got {v!r}")
        out.append(v)
    return out


def _thread_names() -> Dict[int, str]:
    """native id -> name, for threads alive now and threads that ended but whose
    Thread objects still exist (threading keeps a weak set of them)."""
    names: Dict[int, str] = {}
    candidates = list(getattr(threading, "_dangling", ())) + threading.enumerate()
    for t in candidates:
        nid = getattr(t, "native_id", None)
        if nid is not None:
            names[nid] = t.name
    return names


class Trace:
    """A traced block. Use as a context manager; after it exits the facts are here.

    Attributes available after the block: ``threads``, ``event_count``,
    ``dropped_events``, ``dropped`` (per stream), ``duration_ns``, ``backend``, ``backend_reason``,
    ``sched_status``; methods ``summary()``, ``summary_text()``, ``blame()``,
    ``spans(tid)``, ``gil_intervals(tid)``, ``os_intervals(tid)``, ``save(path)``.
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
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}; got {backend!r}")
        if max_events is not None and (not isinstance(max_events, int) or max_events < 1):
            raise ValueError(f"max_events must be a positive integer or None (unlimited), got {max_events!r}")
        if max_depth is not None and (not isinstance(max_depth, int) or max_depth < 1):
            raise ValueError(f"max_depth must be a positive integer or None (unlimited), got {max_depth!r}")
        if follow_children and backend == "hooks":
            raise ValueError("follow_children needs the bpf backend (backend='bpf' or 'auto' as root)")
        self.options = dict(
            functions=bool(functions),
            c_calls=bool(c_calls),
            max_events=max_events or 0,
            include=_check_globs("include", include),
            exclude=_check_globs("exclude", exclude),
            max_depth=max_depth or 0,
            gil=bool(gil),
            sched=bool(sched),
            backend=backend,
            follow_children=bool(follow_children),
            crosscheck=bool(crosscheck),
        )
        self.max_events = max_events
        self.title = title
        self._session: Any = None
        self._result: Any = None

    # -- lifecycle ---------------------------------------------------------------
    def start(self) -> "Trace":
        if self._session is not None:
            raise RuntimeError("this trace was already started; make a new giltracer.trace()")
        core = _core()
        self._session = core.Session(own_dir=_PACKAGE_DIR, **self.options)
        threads = [(t.ident, t.native_id) for t in threading.enumerate() if t.ident is not None]
        self._session.start(threads)
        return self

    def stop(self) -> "Trace":
        if self._session is None:
            raise RuntimeError("this trace was never started")
        if self._result is not None:
            return self
        try:
            self._session.stop()
        finally:
            self._result = self._session.finish(_thread_names(), self.title)
            self._session = None
        dropped = self.dropped
        if dropped["calls"]:
            warnings.warn(
                f"giltracer: {dropped['calls']:,} call events were dropped "
                f"(max_events={self.max_events:,} reached); the GIL was still probed. "
                "Raise max_events, narrow with include=/exclude=, or set c_calls=False.",
                RuntimeWarning,
                stacklevel=3,
            )
        if self._result.tracer_note:
            warnings.warn(f"giltracer: {self._result.tracer_note}", RuntimeWarning, stacklevel=3)
        lost = [f"{n:,} {what}" for n, what in
                ((dropped["gil"], "GIL events"), (dropped["sched"], "scheduler records")) if n]
        if lost:
            cap = f"max_events={self.max_events:,} reached" if self.max_events else "lost"
            warnings.warn(
                f"giltracer: {' and '.join(lost)} were not recorded ({cap}, or lost by the "
                "probe): GIL figures and OS states may be inaccurate.",
                RuntimeWarning,
                stacklevel=3,
            )
        return self

    def __enter__(self) -> "Trace":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- results -----------------------------------------------------------------
    @property
    def result(self) -> Any:
        if self._result is None:
            raise RuntimeError("results are available after the traced block has ended")
        return self._result

    @property
    def threads(self) -> List[ThreadInfo]:
        return [ThreadInfo(**d) for d in self.result.threads()]

    def _tid(self, thread: Union[int, str, threading.Thread]) -> int:
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
        ``sched`` (max_events reached, or lost by the probe)."""
        r = self.result
        return {"calls": r.dropped_events, "gil": r.gil_dropped, "sched": r.sched_lost}
    duration_ns = property(lambda self: self.result.duration_ns, doc="traced wall time")
    backend = property(lambda self: self.result.backend, doc="GIL probe that ran")
    backend_reason = property(lambda self: self.result.backend_reason, doc="why")
    sched_status = property(lambda self: self.result.sched_status, doc="OS-state source")
    gil_known = property(lambda self: self.result.gil_known, doc="a GIL probe ran")

    def summary(self) -> List[ThreadSummary]:
        return [ThreadSummary(**d) for d in self.result.summary()]

    def summary_text(self, top: int = 5) -> str:
        return self.result.text(top)

    def crosscheck(self) -> Optional[List[ThreadSummary]]:
        """With ``crosscheck=True`` (root): the bpf probe's per-thread summary of the same
        run, to compare with ``summary()`` from the hooks."""
        rows = self.result.crosscheck()
        return None if rows is None else [ThreadSummary(**d) for d in rows]

    def blame(self) -> List[BlameRow]:
        return [BlameRow(**d) for d in self.result.blame()]

    def spans(self, thread: Union[int, str, threading.Thread]) -> list:
        """[(start_ns, end_ns, name, depth, flags)] of one thread, sorted by start."""
        return self.result.spans(self._tid(thread))

    def gil_intervals(self, thread: Union[int, str, threading.Thread]) -> list:
        return [(a, b, GIL_STATES[s]) for a, b, s in self.result.gil_intervals(self._tid(thread))]

    def os_intervals(self, thread: Union[int, str, threading.Thread]) -> list:
        return [(a, b, OS_STATES[s]) for a, b, s in self.result.os_intervals(self._tid(thread))]

    def save(self, path: Union[str, os.PathLike], format: Optional[str] = None) -> str:
        """Write the trace: ``.html`` (self-contained viewer), ``.json`` (Chrome Trace
        Event format for Perfetto / chrome://tracing) or ``.txt`` (the summary table)."""
        path = os.fspath(path)
        fmt = format or os.path.splitext(path)[1].lstrip(".").lower()
        if fmt in ("htm", "html"):
            self.result.save(path, "html")
        elif fmt == "json":
            self.result.save(path, "json")
        elif fmt in ("txt", "text"):
            with open(path, "w", encoding="utf-8") as f:
                f.write(self.summary_text())
        else:
            raise ValueError(f"cannot tell the format of {path!r}: use a .html, .json or .txt path, or format=")
        return path

    def __repr__(self) -> str:
        if self._result is None:
            return f"<giltracer.Trace {'recording' if self._session else 'not started'}>"
        r = self._result
        return (f"<giltracer.Trace {len(r.threads())} threads, {r.duration_ns / 1e9:.3f} s, "
                f"{r.event_count} events, backend={r.backend}>")


def trace(**options: Any) -> Trace:
    """Trace every call in every thread and probe the GIL while the block runs.

    ``with giltracer.trace(functions=True, c_calls=True, max_events=5_000_000,
    include=None, exclude=None, max_depth=None, gil=True, sched=True,
    backend="auto", follow_children=False) as t:``
    """
    return Trace(**options)
