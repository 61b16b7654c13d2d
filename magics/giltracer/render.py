"""What a finished Trace looks like: the GIL-split profile as text, and the viewer as a
notebook's MIME bundle (inline, or saved beside the notebook and linked). It reads the
trace as rows.FinishedTrace, so it needs nothing of api, which calls it."""

from __future__ import annotations

import html
import os
import time
from typing import Callable, Dict, Optional

from .options import DEFAULT_MAX_OUTPUT
from .picture import svg
from .rows import FinishedTrace, FunctionRow, location


def sort_key(sort: str) -> Callable[[FunctionRow], int]:
    """The figure rows are ordered by for `sort` (one of PROFILE_SORTS)."""
    return {
        "wait": lambda r: r.self_states["waiting"],
        "held": lambda r: r.held_ns,
        "total": lambda r: r.total_ns,
        "self": lambda r: r.self_ns,
        "caused": lambda r: r.gil_wait_caused_ns,
    }[sort]


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 10**5 else f"{n / 1e3:.0f} kB"


def _ms(ns: int) -> str:
    return f"{ns / 1e6:.1f}"


def profile_text(t: FinishedTrace, top: int = 10, sort: str = "wait", all_threads: bool = False) -> str:
    """Trace.profile_text."""
    rows = t.functions(sort="total", all_threads=all_threads)
    second = "held" if sort != "held" else "wait"
    titles = {"wait": "GIL wait", "held": "GIL held", "total": "total time",
              "self": "self time", "caused": "GIL wait caused"}
    if t.result.free_threaded:  # no GIL: the same figures are lock contention
        titles.update(wait="time parked", held="time running", caused="parked time caused")
    tables = [(key, [r for r in sorted(rows, key=sort_key(key), reverse=True)
                     if sort_key(key)(r) > 0][:top]) for key in (sort, second)]
    shown = [r for _, picked in tables for r in picked]
    width = max([8] + [len(r.name) for r in shown])
    width = min(width, 40)
    locw = min(max([8] + [len(location(r.file, r.line)) for r in shown]), 28)
    head = (f"  {'function':<{width}} {'location':<{locw}} {'calls':>8} {'total':>8} "
            f"{'self':>8} {'running':>8} {'held-off':>8} {'waiting':>8} {'released':>8} "
            f"{'caused':>8}")
    out = [f"GIL profile of {t.result.title} (ms): each function's self time split by "
           "GIL state; caused = other threads' GIL wait while it held the GIL"]
    if t.result.sampling:  # calls = samples' stack changes, times = runs of samples
        out.append(f"Sampled, not traced: {t.result.sampling}")
    for key, picked in tables:
        out.append(f"Top functions by {titles[key]}:")
        if not picked:
            out.append("  none")
            continue
        out.append(head)
        for r in picked:
            ss = r.self_states
            name = r.name if len(r.name) <= width else r.name[: width - 1] + "…"
            loc = location(r.file, r.line)
            loc = loc if len(loc) <= locw else "…" + loc[-(locw - 1):]
            out.append(
                f"  {name:<{width}} {loc:<{locw}} {r.calls:>8} "
                f"{_ms(r.total_ns):>8} {_ms(r.self_ns):>8} {_ms(ss['running']):>8} "
                f"{_ms(ss['held_off_cpu']):>8} {_ms(ss['waiting']):>8} "
                f"{_ms(ss['released']):>8} {_ms(r.gil_wait_caused_ns):>8}")
    if t.result.free_threaded:
        out[0] = (f"Contention profile of {t.result.title} (ms): free-threaded build: no GIL; "
                  "running = not parked, held-off = off CPU not parked (released to the OS), "
                  "waiting = parked on a contended lock, a stop-the-world pause or a join; "
                  "released = waiting for another thread (a lock's acquire, an event, a queue); "
                  "caused = other threads' parked time while it ran")
    return "\n".join(out) + "\n" + t.summary_text(top, all_threads) + what_if_section(t)


def what_if_section(t: FinishedTrace) -> str:
    """The what-if section of profile_text: empty where it cannot be predicted (no GIL
    data, a free-threaded trace)."""
    if t.result.free_threaded or not t.result.gil_known:
        return ""
    try:
        return "\n" + str(t.what_if())
    except ValueError:
        return ""


def save_new_page(page: str, save_dir: str) -> str:
    """`page` written to a new file giltracer-<time>[-k].html in `save_dir`; its path. The
    name is predictable, so it is created exclusively and not through a link (O_EXCL,
    O_NOFOLLOW): a file or link someone put there first is left alone and the next name
    taken, rather than followed and overwritten."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    for k in range(1, 1000):
        name = f"giltracer-{stamp}.html" if k == 1 else f"giltracer-{stamp}-{k}.html"
        path = os.path.join(save_dir, name)
        try:
            fd = os.open(path, flags, 0o644)
        except FileExistsError:
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(page)
        return path
    raise FileExistsError(f"giltracer: no free name giltracer-{stamp}-N.html in {save_dir}")


def display_bundle(t: FinishedTrace, height: int = 600, text: Optional[str] = None,
                   tab: Optional[str] = None, max_output: int = DEFAULT_MAX_OUTPUT,
                   save_dir: str = ".", saved_html: Optional[str] = None,
                   theme: Optional[str] = None) -> Dict[str, str]:
    """Trace.display_bundle."""
    text = t.summary_text() if text is None else text
    page = t.to_html(tab, theme)
    # single quotes around srcdoc: the payload's many double quotes then stay one byte each
    doc = html.escape(page, quote=False).replace("'", "&#x27;")
    frame = (
        f"<iframe srcdoc='{doc}' "
        f'style="width:100%;height:{height}px;border:1px solid #ccc;resize:vertical" '
        'sandbox="allow-scripts allow-downloads" frameborder="0"></iframe>'
    )
    # the picture for front ends that run no script (GitHub, nbviewer, PDF); JupyterLab
    # shows the richer text/html
    picture = svg(t)
    size = len(frame.encode("utf-8")) + len(text.encode("utf-8")) + len(picture.encode("utf-8"))
    if size <= max_output:
        return {"text/html": frame, "image/svg+xml": picture, "text/plain": text}
    path = saved_html if saved_html is not None else save_new_page(page, save_dir)
    href = os.path.relpath(path, save_dir) if not os.path.isabs(save_dir) else path
    line = (f"giltracer: the viewer is {_mb(size)}, over the {_mb(max_output)} inline budget "
            f"(--max-output); saved it as {path}")
    link = (f'<p>giltracer: the viewer is {_mb(size)}, over the {_mb(max_output)} inline budget '
            f'(--max-output); open it: <a href="{html.escape(href.replace(os.sep, "/"), quote=True)}" '
            f'target="_blank">{html.escape(os.path.basename(path))}</a></p>')
    return {"text/html": f"{link}<pre>{html.escape(text)}</pre>", "image/svg+xml": picture,
            "text/plain": f"{line}\n{text}"}
