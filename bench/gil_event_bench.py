#!/usr/bin/env python3
"""The hooks GIL probe's cost per GIL event: bench/gil_event_bench.c, a Release
build of core/probes/hooks against the C tests' fake interpreter object, which drops and
retakes its GIL through its own GOT as CPython does. TSC ticks per drop+retake, best and
median of the rounds: before the hooks are installed (bare), installed but off, recording
(3 GIL events per cycle). Per event = (recording - bare) / events. No Python and no hardware
counters (this machine is a VM without them), and a thread's own cycles over a short batch,
best of many, are what a loaded machine spoils least.

    python bench/gil_event_bench.py [--cycles 20000] [--rounds 41] [--runs 3] [--out bench/results/gil-event]
                                    [--baseline OTHER.json]

--baseline adds the per-event cost of another run (its .json, e.g. this script run in a
worktree of an earlier commit just before) to the report, for a before/after.

`make bench-gil-event` runs it. Writes <out>.md and <out>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from profile_bench import build  # noqa: E402


def git_rev() -> str:
    try:
        rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "core"], capture_output=True,
                               text=True, check=True).stdout.strip()
        return rev + ("+dirty core" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "?"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cycles", type=int, default=20000, help="drop+retake cycles per timed batch")
    ap.add_argument("--rounds", type=int, default=41, help="batches per mode in one run")
    ap.add_argument("--runs", type=int, default=3, help="processes; each reports its best, the best run counts")
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build", "bench-gil-event"))
    ap.add_argument("--out", default=os.path.join(HERE, "results", "gil-event"))
    ap.add_argument("--baseline", help="the .json of another run to compare with")
    a = ap.parse_args(argv)
    exe = build(a.build_dir, "gil_event_bench")
    load = os.getloadavg()[0]
    runs = []
    for _ in range(a.runs):
        out = subprocess.run([exe, str(a.cycles), str(a.rounds)], check=True, capture_output=True,
                             text=True).stdout
        runs.append(json.loads(out))
    best = min(runs, key=lambda r: r["ticks_per_event"][0])
    f = best["tsc_per_ns"]
    lines = [
        "# The hooks GIL probe's cost per GIL event",
        "",
        f"`python bench/gil_event_bench.py` at {git_rev()} on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{platform.machine()}, {os.cpu_count()} CPUs (load average {load:.1f} at the start), TSC "
        f"{f:.3f} ticks/ns. One thread drops and retakes the fake interpreter's GIL "
        f"(tests/c/probes/hooks/fake_interp.c: CPython's pthread calls through its own GOT) "
        f"{a.cycles:,} times per batch; {a.rounds} batches per mode, {a.runs} processes, the best "
        f"process shown (best of its batches / median). {best['events_per_cycle']:.2f} GIL events per cycle.",
        "",
        "| mode | ticks / cycle, best | median | ns / cycle, best |",
        "|:--|---:|---:|---:|",
    ]
    for key, name in (("bare_ticks", "bare (no hooks)"), ("off_ticks", "hooks installed, off"),
                      ("rec_ticks", "hooks recording")):
        b, m = best[key]
        lines.append(f"| {name} | {b:.1f} | {m:.1f} | {b / f:.1f} |")
    b, m = best["ticks_per_event"]
    per_cycle = b * best["events_per_cycle"]
    lines += ["", f"**Per GIL event (recording - bare) / events: {b:.1f} ticks = {b / f:.1f} ns best, "
              f"{m:.1f} ticks median; per cycle {per_cycle:.1f} ticks.** Per run (best ticks / event): "
              + ", ".join(f"{r['ticks_per_event'][0]:.1f}" for r in runs) + "."]
    if a.baseline:
        with open(a.baseline, encoding="utf-8") as fh:
            base = json.load(fh)
        bb = min(base["runs"], key=lambda r: r["ticks_per_event"][0])
        lines += ["", f"Baseline {base['rev']} (`--baseline`, load {base['load']:.1f}): recording "
                  f"{bb['rec_ticks'][0]:.1f} ticks / cycle vs bare {bb['bare_ticks'][0]:.1f}, "
                  f"{bb['ticks_per_event'][0]:.1f} ticks = {bb['ticks_per_event'][0] / bb['tsc_per_ns']:.1f} ns "
                  f"per GIL event; per run: "
                  + ", ".join(f"{r['ticks_per_event'][0]:.1f}" for r in base["runs"])
                  + f". Now {b / bb['ticks_per_event'][0]:.2f}x of it per event; per cycle "
                  f"({bb['events_per_cycle']:.2f} events then, {best['events_per_cycle']:.2f} now) "
                  f"{per_cycle / (bb['ticks_per_event'][0] * bb['events_per_cycle']):.2f}x."]
    print("\n".join(lines))
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out + ".md", "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    with open(a.out + ".json", "w", encoding="utf-8") as fh:
        json.dump({"rev": git_rev(), "load": load, "runs": runs}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
