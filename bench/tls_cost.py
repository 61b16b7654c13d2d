#!/usr/bin/env python3
"""What the core's thread-locals cost per event in each TLS model: the initial-exec build
(the default), the fallback build that giltracer loads where the process's static TLS block
is full (global-dynamic: __tls_get_addr), and TLS descriptors (-mtls-dialect=gnu2, the
alternative considered for one build that serves both: glibc puts a descriptor's variable
in static TLS when there is room, in dynamic TLS otherwise), each also loaded after the
static TLS surplus was used up ("static TLS full").

- GIL hooks: bench/gil_event_bench.c (ns per GIL event, recording - bare, best of its
  batches), its shared object built per model (CMakeLists.txt, GT_BUILD_BENCH) and loaded
  with ctypes, i.e. dlopen() as the extension is.
- call tracer: the core built per model (build dir per interpreter) loaded as
  giltracer._core; per workload (fib, method, builtins: Python and C calls, one thread)
  the best of 3 batches of about 0.1 s, thread CPU time, traced (backend hooks, the call
  tracer alone: gil=False, sched=False) minus untraced, over the call events recorded.

Every measurement in a fresh process; each run measures every variant once, in a rotated
order (interleaved); the table gives the median over the runs [min, max] and the
difference from initial-exec in the same run (median).

    python bench/tls_cost.py [--runs 7] [--only hooks|tracer] [--out bench/results]

`make bench-tls` runs it (~4 min). Writes <out>/tls-<python-version>.md and .json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WORKLOADS = ("fib", "method", "builtins")
# (name, build, its TLS model, fill the static TLS block first)
VARIANTS = (("initial-exec", "ie", False), ("global-dynamic (fallback)", "dyn", False),
            ("global-dynamic, static TLS full", "dyn", True), ("TLS descriptors (gnu2)", "gnu2", False),
            ("TLS descriptors, static TLS full", "gnu2", True))


def fill_static_tls(folder: str) -> int:
    """Uses up what is left of glibc's static TLS surplus (tests/static_tls.py, which the
    tests use too); the libraries stay loaded. Returns the bytes used."""
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from static_tls import fill_static_tls as fill

    loaded, used = fill(folder)
    _KEEP.extend(loaded)
    return used


_KEEP: list = []


def cmake(build_dir: str, args: list, targets: list) -> None:
    subprocess.run(["cmake", "-S", ROOT, "-B", build_dir, *args], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", build_dir, "-j2", "--target", *targets], check=True,
                   stdout=subprocess.DEVNULL)


def build(build_dir: str, only: str) -> dict:
    """The builds per variant: {"hooks": {build: lib}, "tracer": {build: module}}."""
    out: dict = {"hooks": {}, "tracer": {}}
    if only in ("", "hooks"):
        d = os.path.join(build_dir, "hooks")
        cmake(d, ["-DGT_BUILD_EXTENSION=OFF", "-DGT_BUILD_BENCH=ON", "-DGT_WITH_BPF=OFF",
                  "-DCMAKE_BUILD_TYPE=Release"],
              ["gil_event_bench_lib", "gil_event_bench_lib_dyn", "gil_event_bench_lib_gnu2"])
        for b, suffix in (("ie", ""), ("dyn", "_dyn"), ("gnu2", "_gnu2")):
            out["hooks"][b] = os.path.join(d, f"libgil_event_bench_lib{suffix}.so")
    if only in ("", "tracer"):
        name = "_core" + sysconfig.get_config_var("EXT_SUFFIX")
        # as the wheel is built (pyproject.toml: RelWithDebInfo), with the extension's
        # defaults; the gnu2 build's fallback module is the one with TLS descriptors
        for b, flags in (("plain", ""), ("gnu2", "-mtls-dialect=gnu2")):
            d = os.path.join(build_dir, f"core-{b}")
            cmake(d, [f"-DPython_EXECUTABLE={sys.executable}", "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                      f"-DCMAKE_C_FLAGS={flags}"], ["_core", "_core_dyn"] if b == "plain" else ["_core_dyn"])
            if b == "plain":
                out["tracer"]["ie"] = os.path.join(d, name)
                out["tracer"]["dyn"] = os.path.join(d, "tls_dynamic", name)
            else:
                out["tracer"]["gnu2"] = os.path.join(d, "tls_dynamic", name)
    return out


def worker_hooks(lib: str, fill: bool, cycles: int, rounds: int) -> None:
    import ctypes

    used = fill_static_tls(tempfile.mkdtemp(prefix="gt-tls-")) if fill else 0
    bench = ctypes.CDLL(lib).gil_event_bench
    bench.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    r, w = os.pipe()  # the bench prints its JSON with C's stdio: catch it on a pipe
    saved = os.dup(1)
    os.dup2(w, 1)
    args = (ctypes.c_char_p * 3)(b"gil_event_bench", str(cycles).encode(), str(rounds).encode())
    rc = bench(3, args)
    ctypes.CDLL(None).fflush(None)
    os.dup2(saved, 1)
    os.close(w)
    res = json.loads(os.read(r, 1 << 16))
    if rc:
        raise SystemExit(f"gil_event_bench: {rc}")
    print(json.dumps({"ns_per_event": res["ns_per_event"][0], "used": used}))


def worker_tracer(core: str, fill: bool) -> None:
    used = fill_static_tls(tempfile.mkdtemp(prefix="gt-tls-")) if fill else 0
    from importlib.machinery import ExtensionFileLoader, ModuleSpec

    loader = ExtensionFileLoader("giltracer._core", core)
    spec = ModuleSpec("giltracer._core", loader, origin=core)
    mod = loader.create_module(spec)
    mod.__spec__, mod.__loader__, mod.__file__ = spec, loader, core
    sys.modules["giltracer._core"] = mod
    loader.exec_module(mod)
    sys.path.insert(0, HERE)
    import giltracer
    import workloads as w
    from giltracer._calibrate_worker import batch

    opts = dict(backend="hooks", gil=False, sched=False, max_events=50_000_000)
    out = {"used": used, "tls_model": mod.probe_info()["tls_model"]}
    for name in WORKLOADS:
        fn, setup = w.WORKLOADS[name]
        if setup:
            setup()
        t0 = time.perf_counter()
        fn()
        reps = max(1, round(0.1 / max(time.perf_counter() - t0, 1e-6)))
        with giltracer.trace(**opts):
            fn()  # the tracer's warm-up
        untraced, traced, events = [], [], 0
        for _ in range(3):
            untraced.append(batch(fn, reps))
            with giltracer.trace(**opts) as t:
                traced.append(batch(fn, reps))
            events = t.event_count
        out[name] = (min(traced) - min(untraced)) * 1e9 / max(events, 1)
    print(json.dumps(out))


def run(args: list) -> dict:
    r = subprocess.run([sys.executable, os.path.abspath(__file__), *args], stdout=subprocess.PIPE, text=True,
                       check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def summary(rows: dict, base: str) -> dict:
    """{variant: (median, min, max, median difference from base in the same run)}."""
    out = {}
    for v, xs in rows.items():
        diffs = [x - b for x, b in zip(xs, rows[base])]
        out[v] = (statistics.median(xs), min(xs), max(xs), statistics.median(diffs))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--only", choices=("hooks", "tracer"), default="")
    ap.add_argument("--cycles", type=int, default=20000, help="gil_event_bench: cycles per batch")
    ap.add_argument("--rounds", type=int, default=41, help="gil_event_bench: batches per mode")
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build", f"bench-tls-{sys.version_info[0]}"
                                                                       f".{sys.version_info[1]}"))
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--worker", nargs=3, metavar=("KIND", "PATH", "FILL"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        kind, path, fill = a.worker
        if kind == "hooks":
            worker_hooks(path, fill == "1", a.cycles, a.rounds)
        else:
            worker_tracer(path, fill == "1")
        return 0
    builds = build(a.build_dir, a.only)
    load = os.getloadavg()[0]
    t_start = time.time()
    hooks: dict = {v[0]: [] for v in VARIANTS}
    tracer: dict = {v[0]: {w: [] for w in WORKLOADS} for v in VARIANTS}
    used = set()
    for k in range(a.runs):
        print(f"tls_cost: run {k + 1}/{a.runs} ...", file=sys.stderr, flush=True)
        order = VARIANTS[k % len(VARIANTS):] + VARIANTS[:k % len(VARIANTS)]
        for name, b, fill in order:
            if builds["hooks"]:
                r = run(["--cycles", str(a.cycles), "--rounds", str(a.rounds),
                         "--worker", "hooks", builds["hooks"][b], str(int(fill))])
                hooks[name].append(r["ns_per_event"])
                used.add(r["used"])
            if builds["tracer"]:
                r = run(["--worker", "tracer", builds["tracer"][b], str(int(fill))])
                assert r["tls_model"] == ("initial-exec" if b == "ie" else "global-dynamic"), r
                for w in WORKLOADS:
                    tracer[name][w].append(r[w])
                used.add(r["used"])
    version = sys.version.split()[0]
    api = "sys.monitoring" if sys.version_info >= (3, 12) else "sys.setprofile (PyEval_SetProfile)"
    lines = [f"# The core's thread-locals per TLS model: cost per event (Python {version}, {api})", "",
             f"`python bench/tls_cost.py --runs {a.runs}` (`make bench-tls`) on "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.machine()}, "
             f"{os.cpu_count()} CPUs, load average {load:.1f} at the start, {time.time() - t_start:.0f} s; "
             f"{os.confstr('CS_GNU_LIBC_VERSION')}. {a.runs} runs, each every variant once in a fresh "
             f"process, interleaved. \"Static TLS full\": {sorted(used - {0})} bytes of initial-exec "
             "thread-locals loaded first (what the surplus had left, to 8 bytes), so the module's "
             "thread-locals go to dynamic TLS. ns per event: median over the runs [min, max]; "
             "\"vs initial-exec\": the median of the differences within a run.", ""]
    result = {"python": version, "api": api, "runs": a.runs, "hooks": hooks, "tracer": tracer}
    if builds["hooks"]:
        lines += ["## GIL hooks (bench/gil_event_bench.c: recording - bare, per GIL event, best of "
                  f"{a.rounds} batches of {a.cycles} cycles)", "",
                  "| variant | ns / GIL event | vs initial-exec |", "|:--|---:|---:|"]
        for v, (med, lo, hi, d) in summary(hooks, VARIANTS[0][0]).items():
            lines.append(f"| {v} | {med:.1f} [{lo:.1f}, {hi:.1f}] | {d:+.1f} |")
        lines.append("")
    if builds["tracer"]:
        lines += ["## Call tracer (traced - untraced CPU time per call event, one thread, functions "
                  "and C calls)", "",
                  "| variant | " + " | ".join(WORKLOADS) + " | vs initial-exec (median of workloads) |",
                  "|:--|" + "---:|" * (len(WORKLOADS) + 1)]
        per = {w: summary({v: tracer[v][w] for v in tracer}, VARIANTS[0][0]) for w in WORKLOADS}
        for v in tracer:
            cells = [f"{per[w][v][0]:.1f} [{per[w][v][1]:.1f}, {per[w][v][2]:.1f}]" for w in WORKLOADS]
            d = statistics.median(per[w][v][3] for w in WORKLOADS)
            lines.append(f"| {v} | " + " | ".join(cells) + f" | {d:+.1f} |")
        lines.append("")
    text = "\n".join(lines)
    print(text)
    os.makedirs(a.out, exist_ok=True)
    base = os.path.join(a.out, f"tls-{sys.version_info[0]}.{sys.version_info[1]}")
    with open(base + ".md", "w", encoding="utf-8") as fh:
        fh.write(text + "\n")
    with open(base + ".json", "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
