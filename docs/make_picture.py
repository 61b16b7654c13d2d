"""Writes docs/threads-demo.svg, the picture the README shows: examples/threads_demo.py
traced with the hooks (as an ordinary user would) and drawn by giltracer.picture, the same
static picture a %%giltracer cell's output carries for viewers without scripts.

    .venv/bin/python docs/make_picture.py      (make readme-picture)
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import giltracer  # noqa: E402
import threads_demo  # noqa: E402
from giltracer.picture import svg  # noqa: E402

with giltracer.trace(title="threads_demo.py", backend="hooks") as t:
    threads_demo.main()
path = os.path.join(ROOT, "docs", "threads-demo.svg")
with open(path, "w", encoding="utf-8") as f:
    f.write(svg(t) + "\n")
print(t.summary_text())
print(f"wrote {path}")
