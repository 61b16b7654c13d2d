#!/usr/bin/env python3
"""The page's column compression against libdeflate (ours stays only if the
library loses on the numbers). Traces payload_bench's two-thread fib workload (1M calls by
default), takes the inflated #gt-bin columns of its page, and compresses exactly those with
our writer (core/emit/deflate.c: zlib level 1 for ids, Huffman-only blocks for times, on its
own thread), zlib level 1, and libdeflate at levels 1, 2, 4 and 6 (bench/deflate_bench.c).
Needs libdeflate-dev. Writes bench/results/deflate.md (and .json).

    python bench/deflate_bench.py [--calls 1000000] [--reps 7] [--out bench/results/deflate]
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, HERE)

from profile_bench import build  # noqa: E402  (same directory)

# The kinds of a reference's chunks, in order (core/viewer/README.md, "Version 2"): 1 = times.
SPAN_KINDS = (0, 0, 0, 1, 1)
INTERVAL_KINDS = (1, 1, 0)


def chunk_kinds(p: dict, nchunks: int) -> list:
    kinds = [0] * nchunks
    for t in p["threads"]:
        for key, base in (("spans", SPAN_KINDS), ("gil", INTERVAL_KINDS), ("os", INTERVAL_KINDS)):
            ref = t.get(key)
            if isinstance(ref, dict) and "c" in ref:
                for j, k in enumerate(base):
                    kinds[ref["c"] + j] = k
    return kinds


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=7, help="runs per method; the best counts")
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build", "bench-deflate"))
    ap.add_argument("--out", default=os.path.join(HERE, "results", "deflate"))
    a = ap.parse_args(argv)
    exe = build(a.build_dir, "deflate_bench")


    import giltracer
    import pagedata
    from payload_bench import calls_workload

    with giltracer.trace(backend="hooks", sched=False, max_events=None) as t:
        calls_workload(a.calls)
    spans = sum(th.spans for th in t.threads)
    with tempfile.TemporaryDirectory() as d:
        html = os.path.join(d, "page.html")
        t.save(html)
        page = open(html, encoding="utf-8").read()
        page_bytes = os.path.getsize(html)
        p = pagedata.data(page)
        chunks = pagedata.chunks(page)
        kinds = chunk_kinds(p, len(chunks))
        path = os.path.join(d, "chunks.bin")
        with open(path, "wb") as f:
            for c, k in zip(chunks, kinds):
                f.write(struct.pack("<BI", k, len(c)) + c)
        load = os.getloadavg()[0]
        r = json.loads(subprocess.run([exe, path, str(spans), str(a.reps)], check=True,
                                      capture_output=True, text=True).stdout)
    r.update(spans=spans, page_bytes=page_bytes, load=load, python=sys.version.split()[0])
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out + ".json", "w") as f:
        json.dump(r, f, indent=1)
    ours = r["methods"]["ours"]
    lines = [
        "# Column compression: ours vs libdeflate",
        "",
        f"`python bench/deflate_bench.py` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"Python {r['python']}, {spans:,} spans (two threads of fib(20)), load average {load:.1f} "
        f"on {os.cpu_count()} CPUs. The inflated columns of the page ({r['raw_bytes']:,} bytes in "
        f"{r['chunks']} chunks) compressed to a zlib stream by each method; best of {a.reps}. "
        "`ours` is the page writer's compressor (zlib level 1 for ids, Huffman-only blocks for "
        "times, on its own thread), the others compress the same stream whole.",
        "",
        "| method | bytes | bytes/span | ns/span | size vs ours | time vs ours |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, m in r["methods"].items():
        lines.append(f"| {name} | {m['bytes']:,} | {m['bytes'] / spans:.2f} | {m['ns_per_span']:.1f} | "
                     f"{m['bytes'] / ours['bytes']:.2f}x | {m['ns_per_span'] / ours['ns_per_span']:.2f}x |")
    with open(a.out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
