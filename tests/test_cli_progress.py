"""The command line's live progress line: on a terminal (stderr a pty) it is rewritten
about twice a second while the script runs and cleared at the end; quiet when stderr is
piped, with -q, or with --no-live."""

import os
import pty
import select
import subprocess
import sys
import textwrap

import pytest

from conftest import LIVE_WORDS

SCRIPT = textwrap.dedent("""
    import threading, time
    def spin(seconds):
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass
    threads = [threading.Thread(target=spin, args=(2,), name=f"spinner-{i}") for i in range(2)]
    for t in threads: t.start()
    for t in threads: t.join()
    print("done")
""")


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "spin.py"
    path.write_text(SCRIPT)
    return path


def run_with_pty_stderr(args, cwd):
    """Runs giltracer with stderr on a pty (stdout piped): (status, stderr bytes, stdout)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "giltracer", *args], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    err = b""
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            proc.kill()
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        err += chunk
    os.close(master)
    out = proc.stdout.read()
    return proc.wait(60), err, out


def redraws(err):
    return [part for part in err.split(b"\r") if part.startswith(b"giltracer: ") and b" calls" in part]


def test_progress_line_on_a_terminal(script, tmp_path):
    status, err, out = run_with_pty_stderr([str(script)], tmp_path)
    assert status == 0, err
    assert b"done" in out
    lines = redraws(err)
    assert len(lines) >= 2, err[:2000]  # about four in the 2 s script
    held = f"% {LIVE_WORDS[0]}".encode()
    assert any(b"spinner-0" in x and held in x for x in lines), lines
    assert b"\r\x1b[K" in err  # cleared at the end ...
    assert err.index(b"\r\x1b[K") < err.index(b"giltracer: wrote")  # ... before the report


@pytest.mark.parametrize("flag", ["-q", "--no-live"])
def test_no_progress_line_with_a_flag(script, tmp_path, flag):
    status, err, _ = run_with_pty_stderr([flag, str(script)], tmp_path)
    assert status == 0, err
    assert not redraws(err) and b"\r\x1b[K" not in err, err[:2000]


def test_no_progress_line_when_piped(script, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "giltracer", str(script)], cwd=tmp_path,
                          capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert b"\r" not in proc.stderr and b"giltracer: wrote" in proc.stderr, proc.stderr
