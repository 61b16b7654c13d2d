"""Sampling mode's cost (make bench-sample): CPU time of the bench workloads untraced, with
the GIL probe alone (functions=False), under giltracer's sampling mode at its default
interval, and under py-spy `--gil --idle` and (3.15+) CPython's own sampling profiler
`profiling.sampling run -a --mode gil` at the same rate, in one run. Target: sampling
mode and GIL only <= 1.05x untraced CPU time.

  python bench/sample_bench.py [--rounds N] [--blocks N] [--only fib,cpu2] [--out bench/results]

The verdicts are paired: in one process per round, blocks of four short loops in shuffled
order (two untraced, one with the GIL probe alone, one sampled; BLOCK_REPS below), and the
ratio is the median over the blocks of the traced loop's CPU / the mean of the block's
untraced ones. This host's speed drifts by up to 2x over seconds to minutes, which separate
processes' medians keep and a block's loops, within seconds, cancel; the two untraced
loops' ratio (A/A) shows what noise is left. Besides, each configuration also runs in a
fresh process per round (interleaved, shuffled; the only way py-spy and
profiling.sampling, processes of their own, run), the workload about a second (REPS
below); CPU = the CPU time of the whole process over the
loop (time.process_time: every thread, the sampler included). For py-spy, its own CPU is
reported beside (the run's children's rusage less the traced process's), and so for
profiling.sampling, which exists from 3.15 on (on an interpreter without it the report
says so; `make bench-sample-sid` runs this bench on sid's 3.14 and 3.15).
Writes <out>/sample-<python-version>.md and .json.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPS = {"fib": 80, "method": 6, "builtins": 4, "threads2": 3, "mixed": 12, "cpu2": 3, "churn2": 3}
CONFIGS = ("untraced", "gil-hooks", "sample", "py-spy", "profiling.sampling")
PROFILERS = ("py-spy", "profiling.sampling")  # processes of their own: own CPU reported
# The verdicts' measurement, in one process per round: BLOCKS blocks of four short loops in
# shuffled order, two untraced (u1, u2), one with the GIL probe alone, one sampled. A
# block's ratio is its traced loop's CPU over the mean of its untraced ones; u2 / u1 is
# the A/A ratio: the noise left, the verdicts' scale.
BLOCK_LOOPS = ("u1", "u2", "gil-hooks", "sample")
BLOCKS = 8  # per round (--blocks)
# A block's loops are short (~0.15-0.45 s untraced, churn2 ~1 s) so that the host's drift,
# seconds to minutes here, cancels within a block.
BLOCK_REPS = {"fib": 20, "method": 2, "builtins": 1, "threads2": 1, "mixed": 4, "cpu2": 1,
              "churn2": 1}
PROFILER_RATE = 200  # per second, py-spy's and profiling.sampling's: giltracer's default 5 ms

WORKER = r"""
import json, os, resource, sys, time
sys.path.insert(0, {here!r})
import workloads
name, mode, reps = sys.argv[1], sys.argv[2], int(sys.argv[3])
fn, setup = workloads.WORKLOADS[name]
if setup:
    setup()
fn()  # warm-up, untimed


def session(kind):
    import giltracer
    if kind == "gil-hooks":  # the GIL probe alone: what sampling adds is the rest
        return giltracer.trace(functions=False, backend="hooks")
    return giltracer.trace(mode="sample", backend="auto")


def loop():
    c0, w0 = time.process_time(), time.perf_counter()
    for _ in range(reps):
        fn()
    return time.process_time() - c0, time.perf_counter() - w0


if mode == "blocks":
    # Blocks of short loops in shuffled order (see BLOCK_LOOPS): each block's loops ran
    # within seconds of each other, so the host's drift cancels in its ratios.
    import random
    rnd, blocks = random.Random(int(sys.argv[4])), []
    for k in range({blocks}):
        order, got = list({loops!r}), {{}}
        rnd.shuffle(order)
        for kind in order:
            if kind.startswith("u"):
                got[kind] = loop()[0]
            else:
                t = session(kind)
                t.start()
                got[kind] = loop()[0]
                t.stop()
        blocks.append(got)
    print("RESULT " + json.dumps(dict(blocks=blocks)))
    sys.exit(0)
t = None
if mode != "untraced":
    t = session(mode)
    t.start()
cpu, wall = loop()
out = dict(cpu=cpu, wall=wall)
if t is not None:
    t.stop()
if t is not None and t.result.sampler:
    st = t.result.sampler
    out.update(samples=st["samples"], skipped=st["skipped"], held_ns=st["held_ns"],
               waited_ns=st["waited_ns"], backend=t.result.backend)
    if name == "cpu2":  # the GIL split of the two spinning threads, from the samples
        shares = []
        for s in t.summary():
            if s.name.startswith("worker-"):
                node = t.profile(s.tid).find("_spin")
                if node:
                    st = node[0].states
                    held = st["running"] + st["held_off_cpu"]
                    shares.append(held / max(1, held + st["waiting"]))
        out["spin_held_share"] = shares
ru = resource.getrusage(resource.RUSAGE_SELF)
out["process_cpu"] = ru.ru_utime + ru.ru_stime
print("RESULT " + json.dumps(out))
"""


def pyspy_path():
    """py-spy beside this interpreter (a venv's bin/), else on PATH, else None."""
    here = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return here if os.access(here, os.X_OK) else shutil.which("py-spy")


def has_cpython_sampling() -> bool:
    """CPython's own sampling profiler (3.15+) in this interpreter?"""
    import importlib.util
    try:
        return importlib.util.find_spec("profiling.sampling") is not None
    except (ImportError, ValueError):
        return False


def run_one(workload: str, config: str, script: str, seed: int = 0) -> dict:
    reps = BLOCK_REPS[workload] if config == "blocks" else REPS[workload]
    target = [script, workload, "untraced" if config in PROFILERS else config, str(reps),
              str(seed)]
    cmd = [sys.executable] + target
    out = tempfile.mktemp(suffix=".txt", prefix="profile-")
    if config == "py-spy":
        cmd = [pyspy_path(), "record", "--gil", "--idle", "-r",
               str(PROFILER_RATE), "-f", "raw", "-o", out, "--"] + cmd
    elif config == "profiling.sampling":  # it runs the script as a child of its own
        cmd = [sys.executable, "-m", "profiling.sampling", "run", "-a", "--mode", "gil", "-r",
               str(PROFILER_RATE), "--collapsed", "-o", out] + target
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        os.unlink(out)
    except OSError:
        pass
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    if r.returncode != 0 or not line:
        raise RuntimeError(f"{config} {workload} failed ({r.returncode}): {r.stderr[-800:]}")
    res = json.loads(line[-1][7:])
    tree = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if config in PROFILERS:
        res["profiler_cpu"] = max(0.0, tree - res["process_cpu"])
    return res


def bootstrap_ci(a, b, n=2000, seed=1):
    """95 % interval of median(a) / median(b), resampling both."""
    rnd = random.Random(seed)
    ratios = sorted(statistics.median(rnd.choices(a, k=len(a))) /
                    statistics.median(rnd.choices(b, k=len(b))) for _ in range(n))
    return ratios[int(0.025 * n)], ratios[int(0.975 * n) - 1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--blocks", type=int, default=BLOCKS,
                    help="blocks of the paired measurement per round (default %(default)s)")
    ap.add_argument("--only", default="", help="comma-separated workloads")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    a = ap.parse_args()
    workloads = [w for w in REPS if not a.only or w in a.only.split(",")]
    have_pyspy = pyspy_path() is not None and os.geteuid() == 0
    has_sampling = has_cpython_sampling()
    configs = [c for c in CONFIGS if (c != "py-spy" or have_pyspy)
               and (c != "profiling.sampling" or has_sampling)]
    runs = configs + ["blocks"]
    with tempfile.TemporaryDirectory(prefix="gt-sample-bench-") as d:
        script = os.path.join(d, "sample_worker.py")
        with open(script, "w") as f:
            f.write(WORKER.format(here=HERE, blocks=a.blocks, loops=BLOCK_LOOPS))
        samples = {w: {c: [] for c in runs} for w in workloads}
        t0 = time.time()
        for rnd in range(a.rounds):
            for w in workloads:
                order = list(runs)
                random.Random(rnd * 31 + len(w)).shuffle(order)
                for c in order:
                    samples[w][c].append(run_one(w, c, script, seed=rnd))
            print(f"round {rnd + 1}/{a.rounds} done ({time.time() - t0:.0f} s)", flush=True)
    lines = report(samples, configs, workloads, a.rounds, a.blocks, have_pyspy, has_sampling)
    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(a.out, exist_ok=True)
    ver = platform.python_version()
    with open(os.path.join(a.out, f"sample-{ver}.md"), "w") as f:
        f.write(text)
    with open(os.path.join(a.out, f"sample-{ver}.json"), "w") as f:
        json.dump({"python": sys.version, "rounds": a.rounds, "reps": REPS,
                   "block_reps": BLOCK_REPS, "blocks": a.blocks,
                   "samples": samples}, f,
                  indent=1)
    return 0


def median_ci(ratios, n=2000, seed=1):
    """Median of the blocks' ratios, and its 95 % bootstrap interval (resampling the
    blocks)."""
    rnd = random.Random(seed)
    boots = sorted(statistics.median(rnd.choices(ratios, k=len(ratios))) for _ in range(n))
    return statistics.median(ratios), boots[int(0.025 * n)], boots[int(0.975 * n) - 1]


def report(samples, configs, workloads, rounds, blocks, have_pyspy, has_sampling):
    ver = platform.python_version()
    peers = "py-spy and profiling.sampling" if has_sampling else "py-spy"
    lines = [f"# Sampling mode: CPU time vs untraced and {peers} (Python {ver})", "",
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, "
             f"{rounds} rounds; per round and workload one process per configuration, in "
             "shuffled order. CPU = the process's CPU time over the workload loop (every "
             "thread; giltracer's sampler thread included). giltracer: `sample` = "
             "mode='sample' at the default 5 ms, backend auto (the in-process hooks as GIL "
             "probe, even as root); `gil-hooks` = functions=False with the hooks, no sampler: "
             "the GIL probe's own cost, which sampling keeps. py-spy: `record --gil --idle -r "
             f"{PROFILER_RATE}` (same rate), a process of its own (its own CPU in its "
             "'own CPU s' column); "
             "CPython's `python -m profiling.sampling run -a --mode gil -r "
             f"{PROFILER_RATE} --collapsed` (3.15+) likewise. "
             "Target: sampling and GIL only <= 1.05x untraced.", "",
             "**Paired** (the verdicts): in one process per round and workload, "
             f"{blocks} blocks of four short loops in shuffled order: two untraced, one "
             "gil-hooks, one sample (`BLOCK_REPS`, ~0.15-0.45 s untraced; churn2 ~1 s). Ratio "
             "= median over the blocks of all rounds of the traced loop's CPU / the mean of "
             "its block's two untraced loops, [95 % bootstrap interval over the blocks]. The "
             "host's speed drifts by up to 2x over seconds to minutes here; a block's loops "
             "run within seconds and cancel most of it. The untraced loops may follow a "
             "session in the same process (the hooks stay installed, switched off: a load "
             "and a compare per GIL call). *A/A*: the two untraced loops' ratio, block by "
             "block: the interval a ratio of 1 gets on this host during the run (a little "
             "wider than a verdict's noise, whose denominator is a mean of two), against "
             "which a verdict's 5 % can be read.", "",
             "**Separate processes** (info, and the only way py-spy runs): ratio = median / "
             "median untraced over the rounds, [95 % bootstrap interval].", ""]
    if not have_pyspy:
        lines += ["py-spy: not run (not installed, or not root: it needs ptrace).", ""]
    if not has_sampling:
        lines += ["CPython profiling.sampling: not in this interpreter (3.15+).", ""]
    columns = (["workload", "untraced CPU s", "paired gil-hooks", "paired sample",
                "paired A/A (noise)"]
               + [f"{c} (separate)" for c in configs if c != "untraced"]
               + ["sampler samples / skipped, GIL held"]
               + [f"{c} own CPU s" for c in configs if c in PROFILERS])
    lines += ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    verdict, noise = [], {}
    for w in workloads:
        base = [r["cpu"] for r in samples[w]["untraced"]]
        cells = [w, f"{statistics.median(base):.3f}"]
        measured = [b for r in samples[w]["blocks"] for b in r["blocks"]]
        for kind in ("gil-hooks", "sample", "A/A"):
            if kind == "A/A":
                ratio, lo, hi = median_ci([b["u2"] / b["u1"] for b in measured])
                noise[w] = (lo, hi)
            else:
                ratio, lo, hi = median_ci([2 * b[kind] / (b["u1"] + b["u2"]) for b in measured])
                verdict.append((w, kind, ratio, lo, hi))
            cells.append(f"**{ratio:.3f}** [{lo:.3f}, {hi:.3f}]")
        for c in configs:
            if c == "untraced":
                continue
            v = [r["cpu"] for r in samples[w][c]]
            lo, hi = bootstrap_ci(v, base)
            ratio = statistics.median(v) / statistics.median(base)
            cells.append(f"{ratio:.3f} [{lo:.3f}, {hi:.3f}]")
        s = samples[w]["sample"]
        cells.append(f"{statistics.median([r['samples'] for r in s]):.0f} / "
                     f"{statistics.median([r['skipped'] for r in s]):.0f}, "
                     f"{statistics.median([r['held_ns'] / 1e6 for r in s]):.2f} ms "
                     f"({100 * statistics.median([r['held_ns'] / 1e9 / r['wall'] for r in s]):.2f} %)")
        cells += [f"{statistics.median([r['profiler_cpu'] for r in samples[w][c]]):.3f}"
                  for c in configs if c in PROFILERS]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## Verdicts (paired median ratio <= 1.05)", ""]
    for w, c, ratio, lo, hi in verdict:
        nlo, nhi = noise[w]
        lines.append(f"- {w} {c}: {ratio:.3f} [{lo:.3f}, {hi:.3f}] "
                     f"{'PASS' if ratio <= 1.05 else 'FAIL'} (A/A: [{nlo:.3f}, {nhi:.3f}])")
    if "cpu2" in workloads:
        shares = [x for r in samples["cpu2"]["sample"] for x in r.get("spin_held_share", [])]
        if shares:
            lines += ["", f"cpu2 (two spinning threads), GIL-split profile from the samples: "
                      f"_spin held {100 * min(shares):.0f}-{100 * max(shares):.0f} % of its "
                      f"held+waiting time (median {100 * statistics.median(shares):.0f} %), "
                      "expected ~50 %."]
    return lines


if __name__ == "__main__":
    sys.exit(main())
