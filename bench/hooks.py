"""Build (once, cached) and load bench/hooks.c for the running interpreter.

bench/hooks.c holds the reference hooks the benchmarks compare tracers with: the
no-op profile hook and the floor, the minimal recording hook (see the C file).

The extension is compiled with ``cc -shared -fPIC -O2`` against the running
interpreter's headers (sysconfig) into a per-user cache directory under the system
temp dir, keyed by the source text and the interpreter, so every interpreter gets its
own build and a changed source is rebuilt.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "hooks.c")
MODULE = "_gt_bench_hooks"


def cache_dir() -> str:
    root = os.environ.get("GILTRACER_BENCH_CACHE") or os.path.join(
        tempfile.gettempdir(), f"giltracer-bench-{os.getuid()}")
    return root


def _key() -> str:
    h = hashlib.sha256()
    with open(SOURCE, "rb") as f:
        h.update(f.read())
    h.update(sys.executable.encode())
    h.update(sys.version.encode())
    h.update((sysconfig.get_paths()["include"] or "").encode())
    return h.hexdigest()[:16]


def build() -> str:
    """Return the path of the built extension, compiling it if needed."""
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    out_dir = os.path.join(cache_dir(), _key())
    out = os.path.join(out_dir, MODULE + suffix)
    if os.path.exists(out):
        return out
    os.makedirs(out_dir, exist_ok=True)
    cc = shlex.split(os.environ.get("CC", "cc"))
    inc = sysconfig.get_paths()["include"]
    tmp = f"{out}.{os.getpid()}.tmp"
    cmd = cc + ["-shared", "-fPIC", "-O2", "-std=gnu11", "-Wall", "-Wextra", "-I", inc, SOURCE, "-o", tmp]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"building the benchmark hooks failed: {' '.join(cmd)}\n{proc.stderr}")
    os.replace(tmp, out)  # atomic: concurrent builders cannot see a half-written file
    return out


def load():
    path = build()
    spec = importlib.util.spec_from_file_location(MODULE, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


FIB_N = 15
FIB_CALLS = 1973  # calls of fib(15), the call included
C_LOOP = 1000


def _fib(n):
    return n if n < 2 else _fib(n - 1) + _fib(n - 2)


def _c_loop():
    probe = (1, 2, 3)
    n = 0
    for _ in range(C_LOOP):
        n += len(probe)
    return n


def self_check(mod=None) -> list[str]:
    """Check the floor hook against known counts; returns the problems found.

    fib(15) makes 1973 calls of one code object: the floor must record a call and a
    return for each, hold one reference to the code object per record while
    recording, and give every one back at floor_stop(). A loop of 1000 len() calls
    must give 1000 C calls and returns; a thread started while recording gets its
    own array; an exception unwinding a frame is recorded as such."""
    import threading

    mod = mod or load()
    problems = []

    def expect(what, got, want):
        if got != want:
            problems.append(f"{what}: got {got}, expected {want}")

    code = _fib.__code__
    mod.floor_prepare(1 << 16, 2)
    # warm up: specialisation and caches settle before the references are counted
    for _ in range(2):
        mod.floor_start()
        _fib(FIB_N)
        mod.floor_stop()
    base = sys.getrefcount(code)
    if sys.version_info < (3, 12):
        threading.setprofile(mod.floor_bootstrap)
    mod.floor_start()
    _fib(FIB_N)
    held = sys.getrefcount(code) - base
    stats = mod.floor_stop()
    threading.setprofile(None)
    expect("references held on fib's code while recording", held, 2 * FIB_CALLS)
    expect("references to fib's code after floor_stop()", sys.getrefcount(code) - base, 0)
    # fib's calls and returns, plus the getrefcount() call (a C call) and on < 3.12
    # floor_stop's own C call event
    if stats["call"] < FIB_CALLS or stats["call"] > FIB_CALLS + 2:
        problems.append(f"fib({FIB_N}) calls: got {stats['call']}, expected {FIB_CALLS}")
    if stats["return"] < FIB_CALLS or stats["return"] > FIB_CALLS + 2:
        problems.append(f"fib({FIB_N}) returns: got {stats['return']}, expected {FIB_CALLS}")
    expect("dropped", stats["dropped"], 0)

    mod.floor_start()
    _c_loop()
    stats = mod.floor_stop()
    # the len() calls, plus floor_stop itself (C call, no return) on < 3.12
    if not (C_LOOP <= stats["c_call"] <= C_LOOP + 1):
        problems.append(f"C calls of {C_LOOP} len(): got {stats['c_call']}")
    if not (C_LOOP <= stats["c_return"] <= C_LOOP + 1):
        problems.append(f"C returns of {C_LOOP} len(): got {stats['c_return']}")

    def raiser():
        raise ValueError

    def catcher():
        try:
            raiser()
        except ValueError:
            pass

    mod.floor_start()
    catcher()
    stats = mod.floor_stop()
    expect("unwinds of a raising function", stats["unwind"], 1)

    done = threading.Event()
    if sys.version_info < (3, 12):
        threading.setprofile(mod.floor_bootstrap)
    mod.floor_start()
    th = threading.Thread(target=lambda: (_fib(10), done.set()))
    th.start()
    th.join()
    stats = mod.floor_stop()
    threading.setprofile(None)
    expect("threads with an array", stats["threads"], 2)
    if stats["call"] < 177:  # fib(10): 177 calls, in the thread
        problems.append(f"calls with a thread running fib(10): got {stats['call']}, expected >= 177")
    expect("events lost (no array)", stats["lost"], 0)
    return problems


if __name__ == "__main__":
    if "--self-check" in sys.argv[1:]:
        found = self_check()
        for p in found:
            print("FAIL:", p)
        print("floor hook self-check:", "FAIL" if found else "PASS")
        sys.exit(1 if found else 0)
    print(build())
