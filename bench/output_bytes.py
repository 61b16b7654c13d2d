#!/usr/bin/env python3
"""Bytes of a traced cell's output in a notebook: the MIME bundle %%giltracer
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
    for part in ("gt-data", "gt-code"):
        m = re.search(r'id="%s">\s*(.*?)</script>' % part, page, re.S)
        out[name][part] = len(m.group(1).strip()) if m else 0
    out[name]["events"] = t.event_count
print(json.dumps(out))
"""

# The same tiny cell in a real Jupyter kernel (nbclient, this interpreter's ipykernel):
# IPython's own threads (IOPub, heartbeat, control, history) are traced beside the cell's.
KERNEL = r"""
import html, json, re
import nbclient, nbformat
nb = nbformat.v4.new_notebook()
nb.cells = [nbformat.v4.new_code_cell(c) for c in ("%load_ext giltracer", "%%giltracer\nsum(range(10))")]
nbclient.NotebookClient(nb, timeout=300, kernel_name="python3").execute()
(b,) = [o["data"] for o in nb.cells[1].outputs if o.get("output_type") == "display_data"]
row = {k: len(v.encode("utf-8")) for k, v in b.items()}
page = html.unescape(b["text/html"])
for key, part in (("columns", "gt-bin"), ("gt-data", "gt-data"), ("gt-code", "gt-code")):
    m = re.search(r'id="%s">\s*(.*?)</script>' % part, page, re.S)
    row[key] = len(m.group(1).strip()) if m else 0
print(json.dumps(row))
"""


def measure(python: str, kernel: bool) -> dict:
    r = subprocess.run([python, "-c", CHILD], capture_output=True, text=True, timeout=600, check=True)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    if kernel:
        r = subprocess.run([python, "-c", KERNEL], capture_output=True, text=True, timeout=600, check=True)
        out["tiny, kernel"] = json.loads(r.stdout.strip().splitlines()[-1])
    return out


def kb(n: int) -> str:
    return f"{n / 1e3:.1f} KB" if n < 10**6 else f"{n / 1e6:.2f} MB"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", help="an interpreter with the older giltracer (e.g. main's .venv/bin/python)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "output-bytes"))
    ap.add_argument("--no-kernel", action="store_true", help="skip the tiny cell in a Jupyter kernel")
    a = ap.parse_args()
    runs = []
    if a.before:
        runs.append(("before", a.before))
    runs.append(("after", sys.executable))
    types = ["text/html", "image/svg+xml", "text/plain"]
    samples: dict = {label: [] for label, _ in runs}
    for _ in range(a.repeat):
        for label, py in runs:
            samples[label].append(measure(py, not a.no_kernel))
    cells = ("tiny", "1M calls") if a.no_kernel else ("tiny", "tiny, kernel", "1M calls")
    got = {}
    for label, ms in samples.items():
        got[label] = dict(ms[0])
        for cell in cells:
            by_total = sorted(ms, key=lambda m: sum(m[cell].get(k, 0) for k in types))
            got[label][cell] = by_total[len(by_total) // 2][cell]
    lines = ["# Bytes of a traced cell's output", "",
             "`python bench/output_bytes.py --before <main's python>` (`make bench-bytes`): the MIME bundle "
             "%%giltracer shows, per type, run as a cell under a 30-frame stack, the median of "
             f"{a.repeat} runs; before = the build given as --before (main's .venv), "
             "after = this build. "
             f"Target: a tiny cell's output <= {TINY_MAX // 1000} KB.", "",
             "The trace's columns (base64 in `#gt-bin`, unchanged by this work) vary from run to run "
             "with the machine's load; the rest of text/html (the viewer's code, CSS, template, "
             "JSON) is what changed.", "",
             "\"tiny, kernel\" is the same tiny cell run in a real Jupyter kernel (nbclient), where "
             "IPython's own threads (IOPub, heartbeat, control, ...) are traced too. Of text/html: "
             "`#gt-data` is the payload JSON (deflated and base64 after this work), `#gt-code` "
             "the viewer's CSS and script (base64 of zlib; the script minified at build time after "
             "this work), `#gt-bin` the trace's columns.", "",
             "| cell | build | text/html | of it: #gt-bin columns | #gt-data | #gt-code | the rest "
             "| image/svg+xml | text/plain | total | total, all runs |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for cell in cells:
        for label, _ in runs:
            row = got[label][cell]
            total = sum(row.get(k, 0) for k in types)
            every = ", ".join(kb(sum(m[cell].get(k, 0) for k in types)) for m in samples[label])
            parts = row["columns"] + row.get("gt-data", 0) + row.get("gt-code", 0)
            cells_ = [kb(row["text/html"]), kb(row["columns"]), kb(row.get("gt-data", 0)),
                      kb(row.get("gt-code", 0)), kb(row["text/html"] - parts)]
            cells_ += [kb(row[k]) if k in row else "\u2014" for k in types[1:]]
            lines.append(f"| {cell} | {label} | " + " | ".join(cells_) + f" | **{kb(total)}** | {every} |")
    tiny_after = max(sum(got["after"][c].get(k, 0) for k in types) for c in cells if c.startswith("tiny"))
    lines += ["", f"Tiny cell after (the larger of fresh process and kernel): {tiny_after:,} bytes "
              f"({'meets' if tiny_after <= TINY_MAX else 'MISSES'} the {TINY_MAX:,}-byte target)."]
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
