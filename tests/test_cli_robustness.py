"""The command line under what users do to it: a bad output path, a trace that cannot
start, a closed stdout, SIGTERM and Ctrl-C, a script that raises; each in a subprocess."""

import json
import os
import signal
import subprocess
import sys

import pytest

import giltracer
import pagedata


TIMEOUT = 120


def run(*args, cwd, env=None, input=None):
    return subprocess.run([sys.executable, "-m", "giltracer", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, input=input, timeout=TIMEOUT)


def marker_script(tmp_path):
    script = tmp_path / "marks.py"
    script.write_text("open('ran.marker', 'w').close()\nprint('ran')\n")
    return script


@pytest.mark.parametrize("output", ["no-such-dir/t.html", "no-such-dir/t.json", "a-dir.html"])
def test_bad_output_path_is_refused_before_the_script_runs(tmp_path, output):
    (tmp_path / "a-dir.html").mkdir()
    p = run("-o", str(tmp_path / output), str(marker_script(tmp_path)), cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert not (tmp_path / "ran.marker").exists()  # the script's work is not lost: it did not run
    assert "cannot write the trace to" in p.stderr and "Traceback" not in p.stderr


def test_trace_that_cannot_start_is_one_line(tmp_path):
    # Another trace recording in the process (started by sitecustomize): the CLI's cannot start.
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import giltracer\n_held = giltracer.trace(backend='hooks', sched=False).start()\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    p = run("-o", str(tmp_path / "t.html"), str(marker_script(tmp_path)), cwd=tmp_path, env=env)
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("giltracer: could not start the trace: "), lines
    assert not (tmp_path / "ran.marker").exists()


def test_module_that_does_not_exist_is_one_line(tmp_path):
    p = run("-o", str(tmp_path / "t.html"), "-m", "no_such_module_here", cwd=tmp_path)
    assert p.returncode == 2
    assert p.stderr.strip() == "giltracer: No module named no_such_module_here"


@pytest.mark.parametrize("quiet", [["-q"], []])
def test_script_that_closes_stdout(tmp_path, quiet):
    # json.tool closes sys.stdout when it is done
    out = tmp_path / "t.html"
    p = run(*quiet, "-o", str(out), "-m", "json.tool", cwd=tmp_path, input='{"a": 1}\n')
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith('{\n    "a": 1\n}\n')
    assert "Traceback" not in p.stderr and "closed file" not in p.stderr
    assert out.read_text(encoding="utf-8").rstrip().endswith("</html>")
    if quiet:
        assert p.stdout.endswith(f"{out}\n")  # the path line, after the script's output


def default_sigint():
    # A background job inherits SIGINT ignored, and Python then installs no handler.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


FOREVER = """
import threading, time
def spin():
    while True:
        sum(range(1000))
        time.sleep(0.005)
threading.Thread(target=spin, name="spinner", daemon=%s).start()
print("ready", flush=True)
while True:
    time.sleep(0.01)
"""


def signal_at(argv, line, signum, cwd):
    """Runs `argv` (in its own session, Ctrl-C at its default), sends it `signum` once it
    printed `line`; (exit status, stderr)."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
                         start_new_session=True, preexec_fn=default_sigint)
    try:
        assert p.stdout.readline() == line
        p.send_signal(signum)
        _, err = p.communicate(timeout=TIMEOUT)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return p.returncode, err


@pytest.mark.parametrize("signum, status, daemon", [
    (signal.SIGTERM, 143, False),  # a non-daemon thread does not keep it alive
    (signal.SIGINT, 130, True),
])
def test_signal_writes_the_trace(tmp_path, signum, status, daemon):
    script = tmp_path / "forever.py"
    script.write_text(FOREVER % daemon)
    out = tmp_path / "forever.html"
    returncode, err = signal_at([sys.executable, "-m", "giltracer", "-o", str(out), str(script)],
                                "ready\n", signum, tmp_path)
    name = signal.Signals(signum).name
    assert returncode == status, err
    assert f"giltracer: interrupted ({name}); wrote {out}" in err
    page = out.read_text(encoding="utf-8")
    assert page.rstrip().endswith("</html>") and "spinner" in [t["name"] for t in pagedata.data(page)["threads"]]


def test_script_handler_for_sigterm_is_respected(tmp_path):
    script = tmp_path / "handles.py"
    script.write_text(
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda s, f: sys.exit(7))\n"
        "print('ready', flush=True)\n"
        "while True:\n    time.sleep(0.01)\n")
    out = tmp_path / "h.html"
    p = subprocess.Popen([sys.executable, "-m", "giltracer", "-o", str(out), str(script)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert p.stdout.readline() == "ready\n"
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=TIMEOUT)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 7, err  # the script's own handler decided
    assert "interrupted" not in err and f"giltracer: wrote {out}" in err
    assert out.read_text(encoding="utf-8").rstrip().endswith("</html>")


def test_script_traceback_has_no_giltracer_frames(tmp_path):
    script = tmp_path / "raises.py"
    script.write_text("def f():\n    raise ValueError('bad value')\n\nf()\n")
    out = tmp_path / "r.html"
    p = run("-o", str(out), str(script), cwd=tmp_path)
    assert p.returncode == 1
    tb = p.stderr[p.stderr.index("Traceback"):p.stderr.index("ValueError: bad value")]
    assert f'File "{script}", line 4, in <module>' in tb and 'line 2, in f' in tb
    assert "cli.py" not in tb and "runpy" not in tb and "giltracer" not in tb, tb
    assert out.exists()


def test_sys_exit_with_a_message(tmp_path):
    script = tmp_path / "leave.py"
    script.write_text("import sys\nsys.exit('leaving: no input')\n")
    p = run("-q", "-o", str(tmp_path / "l.html"), str(script), cwd=tmp_path)
    assert p.returncode == 1
    assert "leaving: no input" in p.stderr and "Traceback" not in p.stderr


def span_names(path):
    """Names of the call spans in a Chrome-trace file ('f (deep.py:1)' -> 'f')."""
    with open(path, encoding="utf-8") as f:
        events = json.load(f)["traceEvents"]
    return {e["name"].split(" (")[0] for e in events if e.get("ph") in ("X", "B") and "name" in e}


def test_max_depth_1_is_the_script_module(tmp_path):
    script = tmp_path / "deep.py"
    script.write_text("def f():\n    return g()\ndef g():\n    return 1\nf()\n")
    out = tmp_path / "d.json"
    p = run("--no-sched", "--max-depth", "1", "-o", str(out), str(script), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    names = span_names(out)
    assert "<module>" in names
    # Nothing below the script's module code, and none of the CLI's plumbing (runpy's
    # run_path and the frames below it, exec); runpy's _run_module_as_main and _run_code
    # are the frames of `python -m giltracer` itself, open when the trace starts.
    assert not {"f", "g", "run_path", "_run_module_code", "exec"} & names, names
    p = run("--no-sched", "--max-depth", "2", "-o", str(out), str(script), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    names = span_names(out)
    assert "f" in names and "g" not in names, names


def test_forked_child_still_dies_of_sigterm(tmp_path):
    # multiprocessing's terminate() sends SIGTERM to a forked child, which inherits the
    # CLI's handler: the child must die of it, not raise in its own code.
    script = tmp_path / "children.py"
    script.write_text(
        "import multiprocessing as mp, time\n"
        "def sleep():\n    time.sleep(60)\n"
        "if __name__ == '__main__':\n"
        "    p = mp.get_context('fork').Process(target=sleep)\n"
        "    p.start()\n    time.sleep(0.3)\n    p.terminate()\n    p.join(30)\n"
        "    print('child exit', p.exitcode)\n")
    p = run("--backend", "hooks", "-o", str(tmp_path / "c.html"), str(script), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "child exit -15" in p.stdout, (p.stdout, p.stderr)
    assert "Terminated" not in p.stderr


def test_trace_that_cannot_be_written_after_the_run_is_one_line(tmp_path):
    d = tmp_path / "out"
    d.mkdir()
    script = tmp_path / "removes.py"
    script.write_text(f"import shutil\nshutil.rmtree({str(d)!r})\nprint('done')\n")
    p = run("-o", str(d / "t.html"), str(script), cwd=tmp_path)
    assert p.returncode == 1
    assert p.stdout == "done\n"
    assert "giltracer: could not write the trace to" in p.stderr and "Traceback" not in p.stderr


# Runs the command line with the trace's start, stop or save paused until a signal arrives
# (set_wakeup_fd: the signal's own arrival, not a sleep), having printed "paused" first.
PAUSING = """
import os, signal, sys
from giltracer import api, cli

stage, argv = sys.argv[1], sys.argv[2:]

def wait_for_a_signal():
    r, w = os.pipe()
    os.set_blocking(w, False)
    previous = signal.set_wakeup_fd(w)
    try:
        os.write(1, b"paused\\n")
        os.read(r, 1)
    finally:
        signal.set_wakeup_fd(previous)
        os.close(r)
        os.close(w)

original = getattr(api.Trace, stage)

def paused(self, *args, **kwargs):
    if stage != "start":  # as the trace stops, or as it is written
        wait_for_a_signal()
    result = original(self, *args, **kwargs)
    if stage == "start":  # started: the script is next
        wait_for_a_signal()
    return result

setattr(api.Trace, stage, paused)
raise SystemExit(cli.main(argv))
"""


def run_paused(tmp_path, stage, signum, *args):
    """Runs the CLI paused at `stage`, sends `signum` there; (exit status, stderr)."""
    wrapper = tmp_path / "pausing.py"
    wrapper.write_text(PAUSING)
    return signal_at([sys.executable, str(wrapper), stage, *args], "paused\n", signum, tmp_path)


def trace_events(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)["traceEvents"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_while_the_trace_starts_ends_the_run_before_the_script(tmp_path, signum):
    out = tmp_path / "t.json"
    status, err = run_paused(tmp_path, "start", signum, "-o", str(out),
                             str(marker_script(tmp_path)))
    assert status == 128 + signum, err
    assert not (tmp_path / "ran.marker").exists()  # as if the signal came at its first line
    assert f"giltracer: interrupted ({signal.Signals(signum).name}); wrote {out}" in err
    assert "Traceback" not in err, err
    assert isinstance(trace_events(out), list)


@pytest.mark.parametrize("stage", ["stop", "save"])
def test_second_ctrl_c_while_the_trace_stops_or_is_written_still_writes_it(tmp_path, stage):
    # The first Ctrl-C ends the script (its KeyboardInterrupt, as python prints it); the
    # second arrives as the trace stops, or as it is written.
    script = tmp_path / "interrupted.py"
    script.write_text("import os, signal, time\n"
                      "def work():\n    return sum(range(1000))\n"
                      "work()\nos.kill(os.getpid(), signal.SIGINT)\ntime.sleep(60)\n")
    out = tmp_path / "t.json"
    status, err = run_paused(tmp_path, stage, signal.SIGINT, "-o", str(out), str(script))
    assert status == 130, err
    assert err.count("Traceback") == 1 and "cli.py" not in err, err  # the script's only
    assert f"giltracer: interrupted (SIGINT); wrote {out}" in err
    assert any(e.get("name", "").startswith("work ") for e in trace_events(out))


def test_a_terminated_fork_child_keeps_its_trace_under_follow_children(tmp_path):
    # Pool.terminate() / Process.terminate() send SIGTERM to a followed fork child, which
    # ends its session and writes its trace first, under the CLI as under the API.
    script = tmp_path / "terminated.py"
    script.write_text(
        "import multiprocessing as mp, time\n"
        "import _giltracer_boot\n"
        "_giltracer_boot.SPOOL_EVERY = 3600  # no checkpoint: only the child's end writes\n"
        "def f(i):\n    return i * i\n"
        "def child(conn):\n"
        "    for i in range(500):\n        f(i)\n"
        "    conn.send('ready')\n"
        "    while True:  # until terminated (a loop: a blocking recv() can miss the signal,\n"
        "        time.sleep(0.01)  # CPython's race between its check and the wait)\n"
        "if __name__ == '__main__':\n"
        "    ctx = mp.get_context('fork')\n"
        "    here, there = ctx.Pipe()\n"
        "    p = ctx.Process(target=child, args=(there,))\n"
        "    p.start()\n"
        "    assert here.recv() == 'ready'\n"
        "    p.terminate()\n    p.join(60)\n"
        "    print(p.pid, p.exitcode)\n")
    out = tmp_path / "t.json"
    p = run("-q", "--follow-children", "-o", str(out), str(script), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    pid, exitcode = map(int, p.stdout.split()[:2])
    assert exitcode == -signal.SIGTERM, p.stdout  # it still dies of the signal
    assert "without writing its trace" not in p.stderr, p.stderr
    calls = [e for e in trace_events(out)
             if e.get("ph") == "X" and e.get("name", "").startswith("f ")]
    assert len(calls) == 500 and {e["pid"] for e in calls} == {pid}, len(calls)


@pytest.mark.parametrize("quiet", [False, True])
def test_a_note_of_the_trace_is_printed_once_as_a_line_not_as_a_python_warning(tmp_path, quiet):
    # A followed child killed by SIGKILL leaves a note: the table says it (WARNING), so it
    # is not also a RuntimeWarning pointing into cli.py; with -q (no table) it is one line.
    script = tmp_path / "killed.py"
    script.write_text(
        "import os, signal\n"
        "pid = os.fork()\n"
        "if pid == 0:\n    os.kill(os.getpid(), signal.SIGKILL)\n"
        "os.waitpid(pid, 0)\n")
    out = tmp_path / "t.json"
    p = run(*(["-q"] if quiet else []), "--follow-children", "-o", str(out), str(script),
            cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stderr.count("without writing its trace") == 1, p.stderr
    assert "RuntimeWarning" not in p.stderr and "cli.py" not in p.stderr, p.stderr
    line = next(s for s in p.stderr.splitlines() if "without writing its trace" in s)
    assert line.startswith("giltracer: " if quiet else "WARNING: "), line
