"""giltracer: see Python's GIL.

``%load_ext giltracer`` then ``%%giltracer`` on a cell, or from scripts::

    with giltracer.trace() as t:
        run_threads()
    print(t.summary_text())
    t.save("trace.html")
"""

import sys
from typing import Any

import _giltracer_boot

# giltracer._core, or its fallback build where the static TLS block is full (see there).
if not any(f is _giltracer_boot.CoreFinder for f in sys.meta_path):
    sys.meta_path.insert(0, _giltracer_boot.CoreFinder)

from .api import Trace, last, stop_active, trace
from .rows import BlameRow, FunctionRow, ProcessInfo, ProfileNode, ThreadInfo, ThreadSummary

__all__ = ["trace", "last", "stop_active", "Trace", "ThreadInfo", "ThreadSummary", "BlameRow", "ProfileNode", "FunctionRow",
           "ProcessInfo", "load_ipython_extension"]
__version__ = "0.1.0"


def load_ipython_extension(ipython: Any) -> None:  # pragma: no cover - exercised by the magic tests
    from .magics import GilTracerMagics, await_cells

    ipython.register_magics(GilTracerMagics)
    post = getattr(ipython, "input_transformers_post", None)
    if post is not None and await_cells not in post:  # %%giltracer cells with a top-level await
        post.append(await_cells)
