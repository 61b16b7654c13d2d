"""The magics in a real IPython shell: --max-depth counts from the cell's own code, no
plumbing span in a cell's trace, and the output path never costs the cell's work or its
exception."""

import sys
import threading

import pytest

IPython = pytest.importorskip("IPython")
from IPython.core.error import UsageError  # noqa: E402

import giltracer  # noqa: E402


PLUMBING = ("exec", "eval", "user_ns", "run_code", "<lambda>")


@pytest.fixture(scope="module", autouse=True)
def depth_functions(ip):
    ip.run_cell("def depth_f():\n    return depth_g()\ndef depth_g():\n    return 1\n")


def recorded(t):
    """(name, flags) of the spans recorded on this thread, the frames open at start left out."""
    return [(s[2], s[4]) for s in t.spans(threading.current_thread()) if not s[4] & 1]


def names(t):
    return [name.split(".")[-1] for name, _ in recorded(t)]


# --- --max-depth counts from the cell's code ----------------------------------------------

def test_max_depth_1_records_the_cell_and_nothing_below(ip):
    ip.run_cell_magic("giltracer", "-q --var t --no-sched --max-depth 1", "x = depth_f()\n")
    got = names(ip.user_ns["t"])
    assert got == ["<module>"], got


def test_max_depth_2_records_what_the_cell_calls(ip):
    ip.run_cell_magic("giltracer", "-q --var t --no-sched --no-c --max-depth 2", "x = depth_f()\n")
    got = names(ip.user_ns["t"])
    assert got == ["<module>", "depth_f"], got


@pytest.mark.parametrize("magic, line, body", [
    ("giltracer", "-q --var t --no-sched", "x = depth_f()\n"),
    ("gilprofile", "-q --var t --no-sched", "x = depth_f()\n"),
])
def test_no_plumbing_span_in_a_cell(ip, magic, line, body):
    ip.run_cell_magic(magic, line, body)
    got = names(ip.user_ns["t"])
    assert got[:3] == ["<module>", "depth_f", "depth_g"], got
    assert not [n for n in got if n in PLUMBING or "user_ns" in n], got


def test_gilprofile_statement_has_no_plumbing_and_keeps_its_value(ip):
    value = ip.run_line_magic("gilprofile", "-q --var t --no-sched depth_f() + 41")
    assert value == 42
    got = names(ip.user_ns["t"])
    assert got == ["<module>", "depth_f", "depth_g"], got


def test_gilprofile_statement_sees_the_local_scope(ip):
    def caller():
        local_only = 41
        return ip.run_line_magic("gilprofile", "-q --no-sched local_only + 1")

    assert caller() == 42


# --- the output path ----------------------------------------------------------------------

@pytest.mark.parametrize("magic", ["giltracer", "gilprofile"])
def test_bad_output_directory_is_refused_before_the_cell_runs(ip, outputs, tmp_path, magic):
    ip.user_ns["ran"] = False
    with pytest.raises(UsageError, match="does not exist"):
        ip.run_cell_magic(magic, f"-q -o {tmp_path}/no-such-dir/trace.html", "ran = True\n1/0\n")
    assert ip.user_ns["ran"] is False  # the cell's work is not lost: it did not run
    assert outputs == []


def test_output_that_is_a_directory_is_refused(ip, tmp_path):
    d = tmp_path / "x.html"
    d.mkdir()
    with pytest.raises(UsageError, match="is a directory"):
        ip.run_cell_magic("giltracer", f"-q -o {d}", "pass\n")


@pytest.mark.parametrize("quiet", ["-q", ""])
def test_cell_exception_survives_a_failed_save(ip, outputs, tmp_path, capsys, quiet):
    d = tmp_path / "gone"
    d.mkdir()
    ip.user_ns["gone_dir"] = str(d)
    cell = "import shutil\nshutil.rmtree(gone_dir)\n1/0\n"
    with pytest.raises(ZeroDivisionError) as info:
        ip.run_cell_magic("giltracer", f"{quiet} --no-sched -o {d}/trace.html", cell)
    err = capsys.readouterr().err
    assert "giltracer: could not save the trace to" in err and "trace.html" in err
    if sys.version_info >= (3, 11):
        assert any("could not save the trace" in n for n in info.value.__notes__)
    assert len(outputs) == (0 if quiet else 1)  # the viewer is still shown
    assert giltracer.last() is not None and giltracer.last().event_count > 0


def test_failed_save_of_a_cell_that_ran_is_a_usage_error(ip, outputs, tmp_path):
    d = tmp_path / "gone"
    d.mkdir()
    ip.user_ns["gone_dir"] = str(d)
    with pytest.raises(UsageError, match="could not save the trace to .*trace.json"):
        ip.run_cell_magic("giltracer", f"--var t --no-sched -o {d}/trace.json",
                          "import shutil\nshutil.rmtree(gone_dir)\ndone = 1\n")
    assert ip.user_ns["done"] == 1
    assert ip.user_ns["t"].event_count > 0  # the trace is kept
    assert len(outputs) == 1  # and shown


def test_cell_exception_survives_a_failed_display(ip, monkeypatch, capsys):
    import giltracer.magics as m

    def broken(obj, raw=False):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(m, "display", broken)
    with pytest.raises(ZeroDivisionError):
        ip.run_cell_magic("giltracer", "--no-sched", "1/0\n")
    assert "giltracer: could not show the trace: OSError" in capsys.readouterr().err


@pytest.mark.parametrize("magic", ["giltracer", "gilprofile"])
def test_trace_that_cannot_start_is_a_usage_error_and_the_cell_does_not_run(ip, outputs, magic):
    ip.user_ns["ran"] = False
    held = giltracer.trace(backend="hooks", sched=False).start()  # another trace is recording
    try:
        with pytest.raises(UsageError, match="could not start the trace: "):
            ip.run_cell_magic(magic, "-q", "ran = True\n")
    finally:
        held.stop()
    assert ip.user_ns["ran"] is False and outputs == []


# --- a cell with a top-level await runs, or says why it cannot ------------------------------

ASYNC_BODY = "import asyncio\nheard = !echo hi\n%time hi = heard\nawait asyncio.sleep(0.01)\n" \
             "async_ran = True\n"


@pytest.mark.parametrize("magic", ["giltracer", "gilprofile"])
def test_an_awaiting_cell_with_ipython_syntax_runs_traced(ip, outputs, magic):
    """IPython syntax (!cmd, %time) beside a top-level await: the cell is awaited as a plain
    cell would be, its code run under the trace."""
    ip.user_ns.pop("async_ran", None)
    result = ip.run_cell(f"%%{magic} --var async_trace\n" + ASYNC_BODY)
    assert result.error_in_exec is None and result.result is None, result
    assert ip.user_ns.get("async_ran") is True and ip.user_ns["hi"] == ["hi"]
    assert len(outputs) == 1  # the viewer, shown once
    t = ip.user_ns["async_trace"]
    assert any(r.name == "sleep" and r.file.endswith("tasks.py") for r in t.functions()), \
        [r.name for r in t.functions()]


def never_awaited(warned):
    return [w for w in warned if "never awaited" in str(w.message)]


@pytest.mark.parametrize("magic", ["giltracer", "gilprofile"])
def test_an_awaiting_cell_nothing_awaits_is_a_usage_error(ip, outputs, magic):
    """Called from code that does not await it, or with %autoawait off, the magic says so
    before the cell runs: never a coroutine lost with the cell's code in it."""
    import gc
    import warnings

    ip.user_ns.pop("async_ran", None)
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        with pytest.raises(UsageError, match="awaits at the top level.*nothing ran"):
            ip.run_cell_magic(magic, "", ASYNC_BODY)
        ip.run_cell(f"def call_it():\n    return get_ipython().run_cell_magic({magic!r}, '', "
                    f"{ASYNC_BODY!r})\n")
        result = ip.run_cell("call_it()")
        assert isinstance(result.error_in_exec, UsageError), result
        ip.run_line_magic("autoawait", "False")
        try:
            result = ip.run_cell(f"%%{magic}\n" + ASYNC_BODY)
        finally:
            ip.run_line_magic("autoawait", "True")
        assert isinstance(result.error_in_exec, UsageError), result
        gc.collect()
    assert "async_ran" not in ip.user_ns and outputs == []
    assert not never_awaited(warned), [str(w.message) for w in warned]
