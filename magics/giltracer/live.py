"""Live while it runs: a trace's progress (per-thread GIL held / waiting / released so
far, running / parked / released on a free-threaded build; elapsed time, events, the
budget) shown about twice a second by a background thread, as a meter in a notebook's
output area (IPython display updates) or as one rewritten line on a terminal's stderr
(the command line).

The meter thread is started before the trace (so the trace knows it from the start as
giltracer's own, left out of every view, its GIL use a note: Trace.tool_note) and reads
``Session.progress()``, which takes no lock a traced thread takes. Each redraw holds the
GIL for well under a millisecond (measured in tests/test_live_meter.py)."""

from __future__ import annotations

import html
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

INTERVAL = 0.5  # seconds between redraws
BAR = 24        # characters of a text bar

# The last meter's redraws and the seconds they took (progress(), drawing, sending: the
# GIL is held for most of it), set when it ends: what tests and the bench measure.
last: Dict[str, float] = {}

Progress = Dict[str, Any]


class MeterThread(threading.Thread):
    """The meter's thread: giltracer's own (a thread with ``giltracer_service`` true), which
    a trace leaves out of every view, its cost a note (Trace.tool_note)."""

    giltracer_service = True


def service_thread(t: threading.Thread) -> bool:
    """Whether `t` is a live meter's thread (giltracer's own, not the user's)."""
    return bool(getattr(t, "giltracer_service", False))


# The words of each state (held_ns, wait_ns, released_ns) by build kind: a free-threaded
# build has no GIL, its account is the park probe's (running = not parked, parked =
# waiting on a contended lock, a stop-the-world pause or a join, released = waiting for
# another thread: a lock's acquire, an event, a queue).
GIL_WORDS = ("held", "waiting", "released")
FT_WORDS = ("running", "parked", "released")


def words(p: Progress) -> Tuple[str, str, str]:
    """(held, waiting, released) as this progress' build kind calls them."""
    return FT_WORDS if p.get("free_threaded") else GIL_WORDS


def seconds(ns: int) -> str:
    s = ns / 1e9
    return f"{s:.1f} s" if s >= 1 or s == 0 else f"{s * 1e3:.0f} ms"


def user_threads(p: Progress) -> List[Dict[str, Any]]:
    """The threads a meter shows: not the host's, and only those the GIL probe has seen."""
    return [th for th in p["threads"] if not th["service"] and th["state"] != "unknown"]


def thread_names(known: Optional[Dict[int, str]] = None) -> Dict[int, str]:
    """{native id: name} of the running threads, added to `known` (kept by a meter: a
    thread that ended is still named)."""
    names = known if known is not None else {}
    names.update((t.native_id, t.name) for t in threading.enumerate() if t.native_id is not None)
    return names


def budget_notice(p: Progress, max_events: Optional[int]) -> str:
    if not p.get("budget_reached"):
        return ""
    table = "lock-contention table" if p.get("free_threaded") else "GIL table"
    cap = f" (max_events={max_events:,})" if max_events else ""
    lost = f"; {p['dropped']:,} events lost (no memory)" if p.get("dropped") else ""
    if p.get("keep") == "last":
        return (f"event budget reached{cap}: the timeline keeps each thread's last calls "
                f"(keep last); older calls go into per-thread call trees and the GIL table "
                f"stays exact{lost}")
    return (f"event budget reached{cap}: the timeline keeps the calls until now; from here "
            f"calls go into per-thread call trees and the {table} stays exact{lost}")


def headline(p: Progress, max_events: Optional[int] = None) -> str:
    kind = "park" if p.get("free_threaded") else "GIL"
    line = (f"giltracer: {seconds(p['elapsed_ns'])}, {p['calls']:,} calls, "
            f"{p['gil_events']:,} {kind} events")
    if p.get("dropped"):
        line += f", {p['dropped']:,} dropped"
    if p.get("mode"):
        line += f", mode {p['mode']}"
    return line


def text_bar(th: Dict[str, Any], width: int = BAR) -> str:
    total = int(th["held_ns"] + th["wait_ns"] + th["released_ns"])
    if total <= 0:
        return "." * width
    held = round(width * int(th["held_ns"]) / total)
    wait = min(width - held, round(width * int(th["wait_ns"]) / total))
    return "#" * held + "~" * wait + "." * (width - held - wait)


def text(p: Progress, names: Dict[int, str], max_events: Optional[int] = None) -> str:
    """The meter as plain text: a headline, a line per thread, the budget notice."""
    lines = [headline(p, max_events)]
    notice = budget_notice(p, max_events)
    if notice:
        lines.append("  !! " + notice)
    rows = user_threads(p)
    held, wait, rel = words(p)
    width = max([len(names.get(th["native_id"], str(th["native_id"]))) for th in rows] + [6])
    for th in rows:
        name = names.get(th["native_id"], str(th["native_id"]))
        lines.append(f"  {name:<{width}} [{text_bar(th)}] {held} {seconds(th['held_ns'])}, "
                     f"{wait} {seconds(th['wait_ns'])}, {rel} {seconds(th['released_ns'])}"
                     f" ({th['state']})")
    if rows:
        lines.append("  # running  ~ parked (lock contention)  . released" if p.get("free_threaded")
                     else "  # held  ~ waiting for the GIL  . released")
    return "\n".join(lines)


_COLOURS = {"held": "#2e7d32", "wait": "#c62828", "released": "#9e9e9e"}


def html_meter(p: Progress, names: Dict[int, str], max_events: Optional[int] = None) -> str:
    """The meter as HTML: bars of held / waiting / released per thread."""
    out = ['<div class="giltracer-live" style="font:12px/1.4 monospace">',
           f"<div>{html.escape(headline(p, max_events))}</div>"]
    notice = budget_notice(p, max_events)
    if notice:
        out.append('<div class="giltracer-live-notice" style="color:#b71c1c;font-weight:bold">'
                   f"&#9888; {html.escape(notice)}</div>")
    out.append('<table style="border-collapse:collapse">')
    held, wait, rel = words(p)
    for th in user_threads(p):
        name = html.escape(names.get(th["native_id"], str(th["native_id"])))
        total = th["held_ns"] + th["wait_ns"] + th["released_ns"] or 1
        bar = "".join(
            f'<span title="{word}" style="display:inline-block;height:10px;'
            f'width:{200 * th[key] / total:.1f}px;background:{_COLOURS[k]}"></span>'
            for k, key, word in (("held", "held_ns", held), ("wait", "wait_ns", wait),
                                 ("released", "released_ns", rel)))
        out.append(f"<tr><td style='padding-right:8px'>{name}</td>"
                   f"<td style='width:200px;background:#eee'>{bar}</td>"
                   f"<td style='padding-left:8px'>{held} {seconds(th['held_ns'])}, {wait} "
                   f"{seconds(th['wait_ns'])}, {rel} {seconds(th['released_ns'])} "
                   f"({th['state']})</td></tr>")
    out.append("</table></div>")
    return "".join(out)


class Meter:
    """Calls show(progress) every `interval` s while `trace` records, from a thread of its
    own. Made before the trace starts (its thread then exists: the trace knows it as
    giltracer's own); begin() before or once it records, end() before or after it stops
    (joins the thread): it redraws while the trace records."""

    def __init__(self, trace: Any, show: Callable[[Progress], None],
                 interval: float = INTERVAL) -> None:
        self.trace, self.show, self.interval = trace, show, interval
        self.updates = 0
        self.busy = 0.0  # seconds spent redrawing
        self._go = threading.Event()
        self._done = threading.Event()
        self._thread = MeterThread(target=self._run, name="giltracer-live", daemon=True)
        self._thread.start()

    def begin(self) -> None:
        self._go.set()

    def end(self) -> None:
        self._done.set()
        self._go.set()
        if self._thread is not threading.current_thread():
            self._thread.join(5)
        last.update(updates=self.updates, busy_s=self.busy)

    def _run(self) -> None:
        self._go.wait()
        recorded = False
        while not self._done.wait(self.interval):
            t0 = time.perf_counter()
            try:
                p = self.trace.progress()
                if p is None:
                    if recorded:  # the trace has ended
                        return
                    continue  # not recording yet (begun before the trace started)
                recorded = True
                self.show(p)
                self.updates += 1
            except Exception:  # a meter that cannot draw is no reason to disturb the code
                return
            finally:
                self.busy += time.perf_counter() - t0


class NotebookMeter:
    """The live meter in a notebook's output area: a display with an id, updated in
    place, then replaced by the viewer (replace()) or cleared (close())."""

    def __init__(self, trace: Any) -> None:
        from IPython.display import display

        self.max_events: Optional[int] = trace.max_events  # the budget the notice names
        self.names: Dict[int, str] = {}
        self.handle = display({"text/plain": "giltracer: starting"}, raw=True, display_id=True)
        self.meter = Meter(trace, self._show)

    def _show(self, p: Progress) -> None:
        names = thread_names(self.names)
        self.handle.update({"text/plain": text(p, names, self.max_events),
                            "text/html": html_meter(p, names, self.max_events)}, raw=True)

    def begin(self) -> None:
        self.meter.begin()

    def end(self) -> None:
        self.meter.end()

    def replace(self, bundle: Dict[str, str]) -> None:
        """Shows `bundle` (the viewer) where the meter was."""
        self.handle.update(bundle, raw=True)

    def close(self) -> None:
        self.meter.end()
        self.handle.update({"text/plain": ""}, raw=True)


def kernel_displays(shell: Any) -> bool:
    """Whether the shell is a kernel's whose front end shows display updates (not a
    terminal IPython, where each update would print anew)."""
    return getattr(shell, "kernel", None) is not None


class TerminalLine:
    """The CLI's progress line on stderr: rewritten in place, cleared by end()."""

    def __init__(self, trace: Any, stream: Any) -> None:
        self.stream = stream
        self.max_events: Optional[int] = trace.max_events  # the budget the notice names
        self._width = 0
        self.names: Dict[int, str] = {}
        self.meter = Meter(trace, self._show)

    def line(self, p: Progress) -> str:
        names = thread_names(self.names)
        parts = [headline(p, self.max_events)]
        held, wait = ("running", "parked") if p.get("free_threaded") else ("held", "wait")
        for th in user_threads(p)[:4]:
            total = th["held_ns"] + th["wait_ns"] + th["released_ns"] or 1
            parts.append(f"{names.get(th['native_id'], th['native_id'])} "
                         f"{100 * th['held_ns'] / total:.0f}% {held} "
                         f"{100 * th['wait_ns'] / total:.0f}% {wait}")
        if p.get("budget_reached"):
            exact = "contention" if p.get("free_threaded") else "GIL"
            parts.append(f"BUDGET REACHED: calls aggregated from here, {exact} still exact")
        return " | ".join(str(x) for x in parts)

    def _show(self, p: Progress) -> None:
        s = self.line(p)
        cols = terminal_columns(self.stream)
        s = s[:cols - 1]
        self.stream.write("\r" + s + " " * max(0, self._width - len(s)))
        self.stream.flush()
        self._width = len(s)

    def begin(self) -> None:
        self.meter.begin()

    def end(self) -> None:
        self.meter.end()
        if self._width:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def terminal_columns(stream: Any) -> int:
    import os
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return 80


def stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def measure_redraw(show: Callable[[Progress], None], trace: Any, n: int = 20) -> float:
    """Median seconds of one redraw (progress() + show()), for tests and the bench."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        p = trace.progress()
        if p is not None:
            show(p)
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2]
