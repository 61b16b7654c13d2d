"""Build (once, cached) and load bench/noop_hook.c for the running interpreter.

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
SOURCE = os.path.join(HERE, "noop_hook.c")
MODULE = "_gt_noop_hook"


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
    cmd = cc + ["-shared", "-fPIC", "-O2", "-Wall", "-I", inc, SOURCE, "-o", tmp]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"building the no-op hook failed: {' '.join(cmd)}\n{proc.stderr}")
    os.replace(tmp, out)  # atomic: concurrent builders cannot see a half-written file
    return out


def load():
    path = build()
    spec = importlib.util.spec_from_file_location(MODULE, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


if __name__ == "__main__":
    print(build())
