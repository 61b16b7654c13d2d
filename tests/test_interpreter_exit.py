"""Interpreter exit with threads still running (3.14+ changed it): a daemon thread that
wants the GIL during finalization now hangs in take_gil instead of exiting, and take_gil
can call drop_gil itself first. Neither may hang or crash the process, with the trace
stopped by the CLI or still recording when the interpreter exits, on either backend."""

import os
import re
import subprocess
import sys
import textwrap
import time

import pytest

import giltracer
import giltracer._core
from conftest import needs_bpf_backend

_INFO = giltracer._core.build_info()
PKG_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(giltracer.__file__)))
BACKENDS = [
    "hooks",
    pytest.param("bpf", marks=needs_bpf_backend(_INFO)),
]

DAEMONS = """
    import threading, time
    def spin():
        x = 0
        while True:
            x += 1
    def nap():
        while True:
            time.sleep(0.001)
    for i, f in enumerate((spin, spin, nap)):
        threading.Thread(target=f, daemon=True, name=f"d{i}").start()
    time.sleep(0.3)
    print("main done", flush=True)
"""


def run(args, tmp_path, timeout=60):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([PKG_PARENT, env.get("PYTHONPATH", "")])
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, *args], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=timeout)
    return p, time.monotonic() - t0


@pytest.mark.parametrize("backend", BACKENDS)
def test_cli_with_daemon_threads_spinning_at_exit(tmp_path, backend):
    (tmp_path / "daemons.py").write_text(textwrap.dedent(DAEMONS))
    p, took = run(["-m", "giltracer", "--backend", backend, "-o", "d.html", "daemons.py"],
                  tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "main done" in p.stdout
    assert (tmp_path / "d.html").stat().st_size > 0
    # The two spinning daemons share the GIL while the main thread sleeps.
    rows = [line for line in p.stderr.splitlines() + p.stdout.splitlines()
            if re.match(r"\s*\d+\s+d[01]\s", line)]
    assert len(rows) == 2, p.stdout + p.stderr
    assert took < 30, took


@pytest.mark.parametrize("backend", BACKENDS)
def test_exit_while_recording_with_daemon_threads(tmp_path, backend):
    code = ("import giltracer\n"
            f"t = giltracer.trace(backend={backend!r})\n"
            "t.start()\n" + textwrap.dedent(DAEMONS))
    p, took = run(["-c", code], tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "main done" in p.stdout
    assert "Fatal Python error" not in p.stderr, p.stderr[-2000:]
    assert took < 30, took


def test_tracing_loads_no_library_with_exit_handlers(tmp_path):
    """The daemon-thread crash above, seen on 3.10 (1 run in 40): a library whose C exit
    handlers run after the interpreter is freed (libcrypto's, loaded by hashlib, itself
    by `secrets`) keeps the process alive long enough for a daemon thread still in
    take_gil to wake, see the finalization and reset its drop request on the freed
    interpreter (CPython gh-96387's fix, 3.9/3.10). Without libcrypto, 0 in 400. A whole
    trace (import, follow_children, save, summary) must not load it."""
    code = textwrap.dedent("""
        import sys, giltracer
        with giltracer.trace(follow_children=True) as t:
            sum(range(1000))
        t.save("x.html")
        str(t.result)
        print(sorted(m for m in ("_hashlib", "_ssl", "hashlib", "secrets") if m in sys.modules))
    """)
    p, _ = run(["-c", code], tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip().splitlines()[-1] == "[]", p.stdout
