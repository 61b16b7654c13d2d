"""What a finished trace's results are made of: the row types (threads, processes, GIL
blame, the GIL-split profile, the what-if prediction and its table), the names of the states the core's
intervals and profile columns count, and what the renderers read of a finished trace.

Plain data that imports nothing of the package (but the core's types, for the checker):
api makes these rows, render and picture read them (giltracer/README.md says which module
may import which).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, Iterator, List, Optional, Protocol, Tuple

if TYPE_CHECKING:
    from . import _core

GIL_STATES = ("released", "wait", "held")
# A free-threaded build's "GIL" intervals: the park probe's; released = a blocking wait on a
# threading primitive (a lock's acquire, an event, a queue): waiting for another thread.
PARK_STATES = ("released", "parked", "running")
OS_STATES = ("on-cpu", "preempted", "blocked")
# Where each slice of a thread's time went (core/profile.h): GIL held and on CPU (or
# held, OS state not recorded), held but preempted/blocked, waiting for the GIL,
# released, and no GIL data.
PROFILE_STATES = ("running", "held_off_cpu", "waiting", "released", "unknown")


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
    # Only sat in a call already open at the start, with no GIL activity (in a kernel:
    # the shell channel, IOPub, heartbeat, pollers): folded in every view by default.
    background: bool = False
    interp: int = 0  # a subinterpreter whose GIL it held or waited for half its life, or 0


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
    background: bool = False
    interp: int = 0  # as in ThreadInfo
    # Free-threaded builds only (else None): the same figures named for lock contention.
    # running = held_ns (not parked), parked = wait_ns (waiting in the parking lot for a
    # contended lock, a stop-the-world or a join), parks = acquisitions. released_ns: waits
    # for another thread (the blocking acquire of a Lock or RLock, which Condition, Event,
    # Queue, Barrier and Semaphore wait in; SimpleQueue.get), as a GIL build shows them.
    running_ns: Optional[int] = None
    parked_ns: Optional[int] = None
    parks: Optional[int] = None
    longest_park_ns: Optional[int] = None
    running_pct: Optional[float] = None
    parked_pct: Optional[float] = None
    # Of parked_ns: inside another thread's garbage collection, which stops the world (from
    # gc.callbacks; None when not known).
    stop_the_world_ns: Optional[int] = None
    # Free-threaded builds as root (the eBPF lock-kind probe ran, see Trace.lock_kinds_reason):
    # parked_ns by what was waited for, largest first: "stop-the-world (GC)",
    # "stop-the-world", "critical section on <type> object", "lock at 0x...", "" (unknown).
    # stop_the_world_ns is then the stop-the-world labels' sum. Else None.
    park_kinds: Optional[Dict[str, int]] = None


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    command: str
    child: bool  # a child process followed (follow_children=True), not the traced one
    tids: Tuple[int, ...]
    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class BlameRow:
    waiter: int
    holder: int
    function: Optional[str]
    file: str
    line: int
    wait_ns: int
    count: int
    # Free-threaded builds as root (the lock-kind probe ran): what the waiter's parks woken
    # by this holder waited for (all the holder's functions): ns by label as in
    # ThreadSummary.park_kinds, and the known label with the most ("" if none). Else None.
    kinds: Optional[Dict[str, int]] = None
    kind: Optional[str] = None


@dataclass(frozen=True)
class _FunctionTimes:
    """A function's figures, in a call path (ProfileNode) or over all (FunctionRow).
    ``states``: where its inclusive time went, ``self_states``: its own time (callees
    excluded); each adds up to ``total_ns`` / ``self_ns``."""

    name: str
    file: str
    line: int
    is_c: bool
    calls: int
    total_ns: int
    self_ns: int
    states: Dict[str, int]
    self_states: Dict[str, int]


@dataclass(frozen=True)
class ProfileNode(_FunctionTimes):
    """A function within its caller path (the figures of ``_FunctionTimes``). ``calls``
    counts calls that began while tracing."""

    children: List["ProfileNode"]

    def walk(self) -> Iterator["ProfileNode"]:
        """This node and every node below it, depth first."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

    def find(self, name: str) -> List["ProfileNode"]:
        """Every node below (or at) this one whose function is ``name``."""
        return [n for n in self.walk() if n.name == name]


@dataclass(frozen=True)
class FunctionRow(_FunctionTimes):
    """One function merged over its call paths (recursion counted once in ``total_ns``).
    ``gil_wait_caused_ns``: time other threads waited for the GIL while this function
    was the holder's innermost Python function."""

    gil_wait_caused_ns: int

    @property
    def held_ns(self) -> int:
        return self.self_states["running"] + self.self_states["held_off_cpu"]


@dataclass(frozen=True)
class WhatIfThread:
    """One thread in ``Trace.what_if()``: its traced life and its predicted one."""

    tid: int
    name: str
    measured_s: float
    predicted_s: float
    gil_wait_s: float


@dataclass(frozen=True)
class WhatIfFunction:
    """A function by the GIL wait it caused (blame): its share of the predicted saving,
    and the predicted wall time if it alone released the GIL (the GIL kept otherwise)."""

    name: str
    file: str
    line: int
    gil_wait_caused_s: float
    release_predicted_wall_s: float
    release_speedup: float
    saving_s: float


@dataclass(frozen=True)
class WhatIf:
    """``Trace.what_if()``: the cell re-scheduled without the GIL on ``cpus`` CPUs
    (core/analyze/whatif.h); the same fields as the viewer payload's "what_if".
    ``gil_replay_wall_s``: the same scheduler replaying the trace with the GIL (a check of
    the model: near ``measured_wall_s``); ``handoffs``: hand-offs between threads found
    (``queue_handoffs`` of them: queue gets that found their item queued, tied to its put);
    ``waited``: hand-offs waited on without the GIL, each costing ``handoff_us``;
    ``events``: call events (a call's start or end) in the time the threads held the GIL,
    each costing the tracer ``event_ns`` there: ``tracer_s`` of it (on CPU) is not work;
    ``event_ns_source``: where that cost came from (the bench host's table, measured on
    this machine, GILTRACER_EVENT_NS, or given); ``parallel_speed``: each CPU's speed
    with all ``cpus`` busy, against one alone, and ``parallel_speed_source`` where it came
    from; ``ft_factor_source``: where ``ft_factor`` came from."""

    cpus: int
    ft_factor: float
    measured_wall_s: float
    predicted_wall_s: float
    speedup: float
    threads: Tuple[WhatIfThread, ...]
    functions: Tuple[WhatIfFunction, ...]
    assumptions: Tuple[str, ...]
    gil_replay_wall_s: float
    handoffs: int
    handoff_us: float = 0.0
    queue_handoffs: int = 0
    waited: int = 0
    event_ns: float = 0.0
    events: int = 0
    tracer_s: float = 0.0
    event_ns_source: str = ""
    parallel_speed: float = 1.0
    parallel_speed_source: str = ""
    ft_factor_source: str = ""

    def __str__(self) -> str:
        """The prediction (ms), per thread, per function, then the assumptions."""
        out = [f"What if there were no GIL ({self.cpus} CPUs, "
               f"free-threading cost {self.ft_factor:.2f}x):",
               f"  cell: {self.measured_wall_s * 1e3:.1f} ms measured, "
               f"{self.predicted_wall_s * 1e3:.1f} ms predicted, speed-up {self.speedup:.2f}x",
               f"  {'thread':<24} {'measured':>9} {'predicted':>9} {'GIL wait':>9}"]
        for t in self.threads:
            out.append(f"  {_cut(t.name or str(t.tid), 24):<24} {t.measured_s * 1e3:>9.1f} "
                       f"{t.predicted_s * 1e3:>9.1f} {t.gil_wait_s * 1e3:>9.1f}")
        out.append("  Functions by GIL wait caused (ms): caused, their share of the saving, and "
                   "the cell if only that function released the GIL:")
        if not self.functions:
            out.append("  none")
        else:
            out.append(f"  {'function':<24} {'location':<20} {'caused':>9} {'saving':>9} "
                       f"{'if released':>12}")
            for f in self.functions:
                out.append(f"  {_cut(f.name, 24):<24} {_cut(location(f.file, f.line), 20):<20} "
                           f"{f.gil_wait_caused_s * 1e3:>9.1f} {f.saving_s * 1e3:>9.1f} "
                           f"{f.release_predicted_wall_s * 1e3:>9.1f} ({f.release_speedup:.2f}x)")
        out.append("  Assumptions:")
        out.extend(f"  - {a}" for a in self.assumptions)
        if self.ft_factor_source:
            out.append(f"  - Free-threading's single-thread cost ({self.ft_factor:.2f}x): "
                       f"{self.ft_factor_source}.")
        if self.event_ns_source:
            out.append(f"  - The tracer's cost per call event ({self.event_ns:.0f} ns): "
                       f"{self.event_ns_source}.")
        if self.parallel_speed_source and self.cpus > 1:
            out.append(f"  - Each CPU's speed with all busy ({self.parallel_speed:.2f} of one alone): "
                       f"{self.parallel_speed_source}.")
        return "\n".join(out) + "\n"


def location(file: str, line: int) -> str:
    """A function's place as the text tables show it: file name and line, or (C)."""
    return f"{os.path.basename(file)}:{line}" if file else "(C)"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


class FinishedTrace(Protocol):
    """What render and picture read of a finished trace (api.Trace is one): they take this,
    not the Trace, so that the renderers need nothing of the module that calls them."""

    @property
    def result(self) -> _core.Result: ...

    def summary(self) -> List[ThreadSummary]: ...

    def summary_text(self, top: int = 5, all_threads: bool = False) -> str: ...

    def functions(self, *, sort: str = "self", all_threads: bool = False) -> List[FunctionRow]: ...

    def what_if(self) -> WhatIf: ...

    def to_html(self, tab: Optional[str] = None, theme: Optional[str] = None) -> str: ...
