#!/usr/bin/env python3
"""Bytes of a traced cell's output in a notebook (issue 25): the MIME bundle %%giltracer
shows, per type (text/html: the viewer in its iframe; image/svg+xml: the static picture;
text/plain: the table), for a tiny cell and for a cell of a million calls, each run the way
%%giltracer runs a cell (giltracer.magics.run_traced) under a stack a kernel's depth.
Each interpreter given is measured in a child process, so the same table shows an older
build (before) beside this one (after), alternately, `--repeat` times; the table shows the
median run by total bytes (the 1M-call page's time columns vary with the machine's load:
their low bits are timing noise).

    python bench/output_bytes.py [--before /path/to/main/.venv/bin/python] [--out bench/results/output-bytes]

Target: a tiny cell's output <= 60 KB.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TINY_MAX = 60_000

CHILD = r"""
import html, json, re, sys
import giltracer
from giltracer.magics import run_traced

def deep(n, f):  # a kernel runs a cell ~30 frames deep
    return f() if n == 0 else deep(n - 1, f)

def tiny():
    return sum(range(10))

def tick():
    pass

def million():
    for _ in range(1_000_000):
        tick()

out = {"version": giltracer.__version__ if hasattr(giltracer, "__version__") else "?"}
for name, fn in (("tiny", tiny), ("1M calls", million)):
    t = giltracer.Trace(backend="hooks", sched=False, title=name)
    _, error = deep(30, lambda: run_traced(t, fn))
    assert error is None, error
    b = t.display_bundle()
    out[name] = {k: len(v.encode("utf-8")) for k, v in b.items()}
    page = html.unescape(b["text/html"])  # base64 needs no escaping: its length is the same
    m = re.search(r'id="gt-bin">\s*(.*?)</script>', page, re.S)
    out[name]["columns"] = len(m.group(1).strip()) if m else 0
    out[name]["events"] = t.event_count
print(json.dumps(out))
"""


def measure(python: str) -> dict:
    r = subprocess.run([python, "-c", CHILD], capture_output=True, text=True, timeout=600, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def kb(n: int) -> str:
    return f"{n / 1e3:.1f} KB" if n < 10**6 else f"{n / 1e6:.2f} MB"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", help="an interpreter with the older giltracer (e.g. main's .venv/bin/python)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "output-bytes"))
    a = ap.parse_args()
    runs = []
    if a.before:
        runs.append(("before", a.before))
    runs.append(("after", sys.executable))
    types = ["text/html", "image/svg+xml", "text/plain"]
    samples: dict = {label: [] for label, _ in runs}
    for _ in range(a.repeat):
        for label, py in runs:
            samples[label].append(measure(py))
    got = {}
    for label, ms in samples.items():
        got[label] = dict(ms[0])
        for cell in ("tiny", "1M calls"):
            by_total = sorted(ms, key=lambda m: sum(m[cell].get(k, 0) for k in types))
            got[label][cell] = by_total[len(by_total) // 2][cell]
    lines = ["# Bytes of a traced cell's output (issue 25)", "",
             "`python bench/output_bytes.py --before <main's python>` (`make bench-bytes`): the MIME bundle "
             "%%giltracer shows, per type, run as a cell under a 30-frame stack, the median of "
             f"{a.repeat} runs; before = main's viewer "
             "(script and CSS inline, srcdoc double-quoted, no picture), after = this build. "
             f"Target: a tiny cell's output <= {TINY_MAX // 1000} KB.", "",
             "The trace's columns (base64 in `#gt-bin`, unchanged by this work) vary from run to run "
             "with the machine's load; the rest of text/html (the viewer's code, CSS, template, "
             "JSON) is what changed.", "",
             "| cell | build | text/html | of it: trace columns | of it: the rest | image/svg+xml | text/plain "
             "| total | total, all runs |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for cell in ("tiny", "1M calls"):
        for label, _ in runs:
            row = got[label][cell]
            total = sum(row.get(k, 0) for k in types)
            every = ", ".join(kb(sum(m[cell].get(k, 0) for k in types)) for m in samples[label])
            cells = [kb(row["text/html"]), kb(row["columns"]), kb(row["text/html"] - row["columns"])]
            cells += [kb(row[k]) if k in row else "\u2014" for k in types[1:]]
            lines.append(f"| {cell} | {label} | " + " | ".join(cells) + f" | **{kb(total)}** | {every} |")
    tiny_after = sum(got["after"]["tiny"].get(k, 0) for k in types)
    lines += ["", f"Tiny cell after: {tiny_after:,} bytes ({'meets' if tiny_after <= TINY_MAX else 'MISSES'} "
              f"the {TINY_MAX:,}-byte target)."]
    text = "\n".join(lines) + "\n"
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out + ".md", "w", encoding="utf-8") as f:
        f.write(text)
    with open(a.out + ".json", "w", encoding="utf-8") as f:
        json.dump({"median": got, "runs": samples}, f, indent=1)
    print(text)
    return 0 if tiny_after <= TINY_MAX else 1


if __name__ == "__main__":
    sys.exit(main())
