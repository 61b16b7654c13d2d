"""Free-threaded builds, as root: what each parked interval waited for.

The park probe (hooks: the parking lot's semaphore calls) says when a thread parked and
who woke it; the lock-kind probe (eBPF uprobes, core/probes/bpf/lockprobe.h) adds the
address it parked on (``_PyParkingLot_Park``), the type of the object when that address
is an object's per-object mutex (a critical section), and the stop-the-world windows
(``stop_the_world`` .. ``start_the_world``), with those inside ``gc_collect_main``
being the GC's. A label is given only where one is known: an interval that no probed
park contains stays unlabelled ("")."""

import bisect
import codecs
import sysconfig
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from . import env as variables

# lockprobe_abi.h
PARK, PARK_RET, STW_BEGIN, STW_END, GC_BEGIN, GC_END = 1, 2, 3, 4, 5, 6
F_OBJECT, F_SUSPENDED = 1, 2

STW_GC = "stop-the-world (GC)"
STW = "stop-the-world"

FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


def type_name(raw: bytes) -> str:
    """A type's tp_name as the probe read it: its first GTL_TNAME_LEN - 1 bytes, so a long
    name can end in part of a character, which is left out (bytes that are no UTF-8
    become U+FFFD: a name is a label, never a reason to fail)."""
    return codecs.getincrementaldecoder("utf-8")("replace").decode(raw, final=False)


class LockKinds:
    """One trace's lock-kind probe: ``start()`` before the session starts, ``stop()``
    after it stopped. ``running`` says whether it ran, ``reason`` what it probed or why
    it did not run."""

    def __init__(self) -> None:
        self.running = False
        self.reason = ""
        self.lost = 0
        # (stopper tid, start ns, end ns, the GC's)
        self.windows: List[Tuple[int, int, int, bool]] = []
        # tid -> sorted [(start ns, end ns, addr, flags, type name)] of _PyParkingLot_Park calls
        self.parks: Dict[int, List[Tuple[int, int, int, int, str]]] = {}
        self._starts: Dict[int, List[int]] = {}
        self._wstarts: List[int] = []

    def start(self) -> "LockKinds":
        if not FREE_THREADED:
            self.reason = "lock kinds: not a free-threaded build (no parking-lot contention to label)"
            return self
        if variables.get("GILTRACER_LOCK_KINDS", "1") == "0":
            self.reason = "lock kinds: off (GILTRACER_LOCK_KINDS=0)"
            return self
        from . import _core

        ok, text = _core._lock_kinds_open()
        if ok and not _core._lock_kinds_start():
            ok, text = False, "lock kinds: the probe could not start in this process"
        self.running, self.reason = ok, text
        return self

    def stop(self) -> None:
        if not self.running:
            return
        from . import _core

        raw, self.lost = _core._lock_kinds_stop()
        if raw is None:
            self.running = False
            self.reason = "lock kinds: the probe belongs to another process"
            return
        self._build([(ts, addr, tid, kind, flags, type_name(tname))
                     for ts, addr, tid, kind, flags, tname in raw])

    def _build(self, events: Iterable[Tuple[int, int, int, int, int, str]]) -> None:
        events = sorted(events)
        last = events[-1][0] if events else 0
        # A park can nest: one that detaches re-attaches on wake-up and, when the world
        # is stopped meanwhile, parks again (tstate_wait_attach) before it returns.
        open_park: Dict[int, List[Tuple[int, int, int, str]]] = {}
        stw_open: Dict[int, int] = {}
        gc_open: Dict[int, int] = {}
        gcs: List[Tuple[int, int, int]] = []
        for ts, addr, tid, kind, flags, tname in events:
            if kind == PARK:
                open_park.setdefault(tid, []).append((ts, addr, flags, tname))
            elif kind == PARK_RET and open_park.get(tid):
                s, a, f, n = open_park[tid].pop()
                self.parks.setdefault(tid, []).append((s, ts, a, f, n))
            elif kind == STW_BEGIN:
                stw_open.setdefault(tid, ts)
            elif kind == STW_END and tid in stw_open:
                self.windows.append((tid, stw_open.pop(tid), ts, False))
            elif kind == GC_BEGIN:
                gc_open.setdefault(tid, ts)
            elif kind == GC_END and tid in gc_open:
                gcs.append((tid, gc_open.pop(tid), ts))
        # Still open at the stop: they end there.
        for tid, stack in open_park.items():
            for s, a, f, n in stack:
                self.parks.setdefault(tid, []).append((s, max(s, last), a, f, n))
        for tid, s in stw_open.items():
            self.windows.append((tid, s, max(s, last), False))
        for tid, s in gc_open.items():
            gcs.append((tid, s, max(s, last)))
        # A window is the GC's when the stopper was inside gc_collect_main.
        self.windows = sorted(((w, s, e, any(g == w and gs <= s and e <= ge for g, gs, ge in gcs))
                               for w, s, e, _ in self.windows), key=lambda w: w[1])
        self._wstarts = [w[1] for w in self.windows]
        for tid, ps in self.parks.items():
            ps.sort()
            self._starts[tid] = [p[0] for p in ps]

    def _park(self, tid: int, start: int, end: int) -> Optional[Tuple[int, int, int, int, str]]:
        """The innermost probed park of `tid` that contains [start, end] (the one begun
        last; an outer one when the last begun ended before `end`)."""
        starts = self._starts.get(tid)
        if not starts:
            return None
        ps, i = self.parks[tid], bisect.bisect_right(starts, start)
        for p in reversed(ps[max(0, i - 4):i]):  # nesting is shallow
            if end <= p[1]:
                return p
        return None

    def _window(self, ts: int, stopper: Optional[int] = None) -> Optional[Tuple[int, int, int, bool]]:
        """The window (of `stopper`, if given) open at ts. One stop-the-world runs at a
        time (an interpreter's or the runtime's), so only the last ones begun can be open."""
        i = bisect.bisect_right(self._wstarts, ts)
        for w in reversed(self.windows[max(0, i - 4):i]):
            if ts <= w[2] and (stopper is None or w[0] == stopper):
                return w
        return None

    def label(self, tid: int, start: int, end: int) -> str:
        """What the parked interval [start, end] of thread `tid` waited for. Stop-the-world:
        a thread stopped by one (it parks on its own thread state, suspended), or the
        stopper inside its own window (waiting for the others to stop); "(GC)" when that
        window is inside gc_collect_main. Else a critical section on an object of a known
        type, or the lock's address. "" when no probed park contains the interval (e.g. a
        raw mutex's wait, or one begun before the trace)."""
        p = self._park(tid, start, end)
        if p is None:
            return ""
        w = self._window(p[0], tid)
        if w is None and p[3] & F_SUSPENDED:
            w = self._window(p[0])
            if w is None:
                return STW
        if w is not None:
            return STW_GC if w[3] else STW
        if p[3] & F_OBJECT:
            return f"critical section on {p[4]} object"
        return f"lock at {p[2]:#x}"

    def kinds(self, tid: int, parked: Iterable[Tuple[int, int]]) -> Dict[str, int]:
        """ns of the thread's parked intervals by label ("" = unknown), largest first."""
        out: Dict[str, int] = {}
        for a, b in parked:
            k = self.label(tid, a, b)
            out[k] = out.get(k, 0) + (b - a)
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def payload(locks: LockKinds, t0: int, stw: Dict[int, Optional[int]],
            parked: Dict[int, List[Tuple[int, int]]]) -> Dict[str, object]:
    """The viewer payload's "lock_kinds" (core/viewer/README.md): per thread the
    stop-the-world ns (`stw`: ThreadSummary.stop_the_world_ns), and with the probe the
    ns by label and each labelled park's start (ns since `t0`, as the page's intervals)
    with its label's index in "labels". Without the probe: why the parks are unlabelled."""
    out: Dict[str, object] = {"labelled": locks.running, "reason": locks.reason}
    labels: Dict[str, int] = {}
    threads: Dict[str, Dict[str, object]] = {}
    for tid, ivs in parked.items():
        row: Dict[str, object] = {"stw_ns": stw.get(tid)}
        if locks.running:
            kinds: Dict[str, int] = {}
            starts: List[int] = []
            idx: List[int] = []
            for a, b in sorted(ivs):
                lab = locks.label(tid, a, b)
                kinds[lab] = kinds.get(lab, 0) + (b - a)
                if lab:
                    starts.append(a - t0)
                    idx.append(labels.setdefault(lab, len(labels)))
            row["kinds"] = [[k, v] for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])]
            row["parks"] = {"s": starts, "l": idx}
        threads[str(tid)] = row
    out["labels"] = list(labels)
    out["threads"] = threads
    return out


def pair_kinds(locks: LockKinds, parks: Mapping[int, Sequence[Tuple[int, int, int]]]) -> Dict[Tuple[int, int], Dict[str, int]]:
    """Contention blame's pairs by what was waited for: (waiter, waker) -> ns of the
    waiter's parks that waker woke, by label ("" = unknown), largest first. `parks`: tid
    -> [(start, end, waker)] (Result.park_wakers: the parks blame uses)."""
    out: Dict[Tuple[int, int], Dict[str, int]] = {}
    for tid, ivs in parks.items():
        for a, b, waker in ivs:
            k = out.setdefault((tid, waker), {})
            lab = locks.label(tid, a, b)
            k[lab] = k.get(lab, 0) + (b - a)
    return {p: dict(sorted(k.items(), key=lambda kv: -kv[1])) for p, k in out.items()}


def main_kind(kinds: Dict[str, int]) -> str:
    """The known label with the most time ("" when none is known)."""
    known = [(v, k) for k, v in kinds.items() if k]
    return max(known)[1] if known else ""
