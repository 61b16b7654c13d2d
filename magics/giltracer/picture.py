"""A static picture of a Trace: per-thread GIL strips over time and the per-thread table,
as one small SVG (no script, no font file, no link), for the places where the viewer's
script does not run (GitHub, nbviewer, a PDF export, an untrusted notebook)."""

from __future__ import annotations

import html
from typing import Dict, List, Optional, Sequence, Tuple

from .rows import GIL_STATES, FinishedTrace, ThreadSummary

# The viewer's light palette (core/viewer/theme.js: Okabe-Ito held / waiting, grey released).
HELD, WAIT, RELEASED, UNKNOWN = "#0072b2", "#d55e00", "#dee2e6", "#f1f3f5"
STATE = {"held": 2, "wait": 1, "released": 0}
COLOURS = (RELEASED, WAIT, HELD)

STRIP_W = 360  # one column per pixel of the strip
NAME_W, ROW_H, STRIP_H, HEAD_H = 150, 24, 16, 44
NUM_W = 58  # each number column
MAX_LANES = 12  # threads drawn; the rest are counted in one line
FONT = "font-family:system-ui,-apple-system,Segoe UI,Roboto,Arial,sans-serif"


def _pct(ns: Optional[int], wall: int) -> str:
    if ns is None:
        return "\u2014"
    p = 100.0 * ns / (wall or 1)
    return f"{p:.0f}%" if p == 0 or p >= 10 else f"{p:.1f}%"


def _dur(ns: int) -> str:
    for unit, div in (("s", 1e9), ("ms", 1e6), ("\u00b5s", 1e3)):
        if ns >= div:
            v = ns / div
            return f"{v:.0f} {unit}" if v >= 100 else f"{v:.1f} {unit}" if v >= 10 else f"{v:.2f} {unit}"
    return f"{ns} ns"


def _esc(s: str, limit: int = 0) -> str:
    if limit and len(s) > limit:
        s = s[: limit - 1] + "\u2026"
    return html.escape(s, quote=True)


def columns(intervals: Sequence[Tuple[int, int, str]], t0: int, t1: int, n: int = STRIP_W) -> List[int]:
    """The GIL state covering most of each of `n` equal columns of [t0, t1): 0 released,
    1 waiting, 2 held, -1 no GIL data. A column's state is the one with the most time in it,
    so a strip keeps its colours' proportions however many intervals fall in a pixel."""
    span = max(1, t1 - t0)
    acc = [[0.0, 0.0, 0.0] for _ in range(n)]
    for a, b, state in intervals:
        q = STATE[state]
        a, b = max(a, t0), min(b, t1)
        if b <= a:
            continue
        x0, x1 = (a - t0) * n / span, (b - t0) * n / span
        i = int(x0)
        while i < n and i < x1:
            acc[i][q] += min(x1, i + 1) - max(x0, i)
            i += 1
    out = []
    for c in acc:
        m = max(c)
        out.append(-1 if m <= 0 else c.index(m))
    return out


def _strip_paths(cols: List[int], x0: float, y: float) -> str:
    """One <path> per state: runs of equal columns as rectangles."""
    runs: Dict[int, List[str]] = {0: [], 1: [], 2: []}
    i, n = 0, len(cols)
    while i < n:
        j = i
        while j < n and cols[j] == cols[i]:
            j += 1
        if cols[i] >= 0:
            runs[cols[i]].append(f"M{x0 + i:g} {y:g}h{j - i}v{STRIP_H}h-{j - i}z")
        i = j
    return "".join(f'<path fill="{COLOURS[q]}" d="{"".join(d)}"/>' for q, d in runs.items() if d)


def _order(rows: List[ThreadSummary]) -> List[ThreadSummary]:
    """Threads that took part in the GIL first (by held + wait time), then the others."""
    return sorted(rows, key=lambda r: -(r.held_ns + r.wait_ns))


def svg(t: FinishedTrace, max_lanes: int = MAX_LANES) -> str:
    """The picture of a finished trace as an SVG document (a string)."""
    r = t.result
    t0, t1 = r.t0_ns, r.t0_ns + max(1, r.duration_ns)
    rows = _order(t.summary())
    shown, more = rows[:max_lanes], rows[max_lanes:]
    x_strip = NAME_W
    x_num = x_strip + STRIP_W + 10
    width = x_num + 4 * NUM_W + 12
    height = HEAD_H + ROW_H * len(shown) + (ROW_H if more else 0) + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="giltracer: GIL per thread">',
           f'<rect width="{width}" height="{height}" fill="#fff"/>',
           f'<g style="{FONT};font-size:11px" fill="#1f2328">']
    probe = f"GIL probe: {r.backend}" if r.gil_known else "GIL state unknown"
    ft = r.free_threaded  # the strip is running / parked / released: lock contention, no GIL
    if ft:
        probe = "free-threaded build: no GIL; showing lock contention"
    out.append(f'<text x="8" y="16" style="font-weight:700;font-size:13px">{_esc(r.title, 60)}</text>'
               f'<text x="{width - 8}" y="16" text-anchor="end" fill="#656d76">{_esc(_dur(r.duration_ns))} \u00b7 '
               f'{len(rows)} threads \u00b7 {_esc(probe)}</text>')
    hy = HEAD_H - 8
    out.append(f'<text x="8" y="{hy}" fill="#656d76">thread</text>'
               f'<text x="{x_strip}" y="{hy}" fill="#656d76">{"parked" if ft else "GIL"} over time \u2192</text>')
    for k, name in enumerate(("running", "parked", "released") if ft else ("held", "waiting", "released")):
        out.append(f'<text x="{x_num + (k + 1) * NUM_W - 6}" y="{hy}" text-anchor="end" fill="#656d76">{name}</text>')
    xo = x_num + 3 * NUM_W
    out.append(f'<text x="{xo + NUM_W}" y="{hy}" text-anchor="end" fill="#656d76">off CPU</text>'
               f'<line x1="{xo + 2}" y1="{HEAD_H - 20}" x2="{xo + 2}" y2="{height - 30}" stroke="#d0d7de"/>')
    for i, s in enumerate(shown):
        y = HEAD_H + i * ROW_H
        if i % 2:
            out.append(f'<rect x="0" y="{y}" width="{width}" height="{ROW_H}" fill="#f6f8fa"/>')
        ty = y + ROW_H / 2 + 4
        out.append(f'<text x="8" y="{ty:g}" style="font-weight:600">{_esc(s.name, 22)}</text>')
        sy = y + (ROW_H - STRIP_H) / 2
        out.append(f'<rect x="{x_strip}" y="{sy:g}" width="{STRIP_W}" height="{STRIP_H}" fill="{UNKNOWN}"/>')
        if r.gil_known:
            out.append(_strip_paths(columns(_gil(t, s.tid), t0, t1), x_strip, sy))
        nums = ([_pct(s.held_ns, s.wall_ns), _pct(s.wait_ns, s.wall_ns), _pct(s.released_ns, s.wall_ns)]
                if r.gil_known else ["\u2014"] * 3)
        nums.append(_pct(s.off_cpu_ns, s.wall_ns))
        for k, v in enumerate(nums):
            out.append(f'<text x="{x_num + (k + 1) * NUM_W - 6}" y="{ty:g}" text-anchor="end">{v}</text>')
    y = HEAD_H + ROW_H * len(shown)
    if more:
        names = ", ".join(m.name for m in more[:4]) + (", \u2026" if len(more) > 4 else "")
        out.append(f'<text x="8" y="{y + 16}" fill="#656d76">+ {len(more)} more threads ({_esc(names, 80)})</text>')
        y += ROW_H
    ly = y + 20
    x = 8.0
    legend = (((HELD, "running"), (WAIT, "parked (lock contention)"),
               (RELEASED, "released (waiting for another thread)")) if ft else
              ((HELD, "GIL held"), (WAIT, "waiting for the GIL"), (RELEASED, "released")))
    for col, name in legend:
        out.append(f'<rect x="{x:g}" y="{ly - 9}" width="12" height="10" fill="{col}"/>'
                   f'<text x="{x + 16:g}" y="{ly}">{name}</text>')
        x += 30 + 6.5 * len(name)
    parts = "running + parked + released" if ft else "held + waiting + released"
    out.append(f'<text x="{x + 8:g}" y="{ly}" fill="#656d76">{parts} = the thread\'s time; '
               'off CPU (OS) overlaps them</text>')
    out.append("</g></svg>")
    return "".join(out)


def _gil(t: FinishedTrace, tid: int) -> List[Tuple[int, int, str]]:
    """A thread's GIL intervals by tid (Trace.gil_intervals takes a name or Thread too)."""
    return [(a, b, GIL_STATES[q]) for a, b, q in t.result.gil_intervals(tid)]
