"""%%giltracer in a real IPython shell: display bundle, errors, options."""

import pytest

IPython = pytest.importorskip("IPython")
from IPython.core.error import UsageError  # noqa: E402
from IPython.testing.globalipapp import get_ipython  # noqa: E402


@pytest.fixture(scope="module")
def ip():
    shell = get_ipython()
    shell.run_line_magic("load_ext", "giltracer")
    return shell


@pytest.fixture
def outputs(ip, monkeypatch):
    shown = []
    import giltracer.magics as m

    monkeypatch.setattr(m, "display", lambda obj, raw=False: shown.append(obj))
    return shown


CELL = """
import threading
def work():
    return sum(i * i for i in range(20000))
ts = [threading.Thread(target=work, name=f"w{i}") for i in range(2)]
for t in ts: t.start()
for t in ts: t.join()
result = 42
"""


def test_cell_shows_viewer_and_table(ip, outputs):
    ip.run_cell_magic("giltracer", "--quiet", CELL)
    assert ip.user_ns["result"] == 42  # the cell ran in the user namespace
    (bundle,) = outputs
    assert bundle["text/html"].startswith("<iframe srcdoc=")
    assert "gt-data" in bundle["text/html"]  # the viewer page, escaped into srcdoc
    assert "<script" not in bundle["text/html"]  # ... so nothing leaks into the notebook
    assert "w0" in bundle["text/plain"] and "held" in bundle["text/plain"]


def test_cell_that_raises_shows_trace_then_reraises(ip, outputs):
    with pytest.raises(ZeroDivisionError):
        ip.run_cell_magic("giltracer", "--quiet", "x = 1\n1/0\n")
    assert len(outputs) == 1 and "text/plain" in outputs[0]
    assert ip.user_ns["x"] == 1


def test_output_file(ip, outputs, tmp_path):
    out = tmp_path / "cell.json"
    ip.run_cell_magic("giltracer", f"-o {out} --quiet --no-sched", "y = [len('a') for _ in range(10)]")
    assert out.exists() and out.stat().st_size > 0


def test_var_keeps_the_trace_for_the_next_cells(ip, outputs):
    ip.user_ns.pop("cell_trace", None)
    ip.run_cell_magic("giltracer", "--quiet --var cell_trace", CELL)
    t = ip.user_ns["cell_trace"]
    assert {"w0", "w1"} <= {row.name for row in t.summary()}
    assert t.summary_text() == outputs[0]["text/plain"]


def test_var_is_set_when_the_cell_raises(ip, outputs):
    ip.user_ns.pop("failed_trace", None)
    with pytest.raises(ZeroDivisionError):
        ip.run_cell_magic("giltracer", "--quiet --var failed_trace", "1/0")
    assert ip.user_ns["failed_trace"].duration_ns > 0


@pytest.mark.parametrize("line, message", [
    ("--max-events 0", "max-events"),
    ("--backend perf", "backend"),
    ("-o trace.png", ".html"),
    ("--height 5", "height"),
    ("--no-such-option", "unrecognized"),
    ("--var 1t", "variable name"),
])
def test_bad_options_are_usage_errors(ip, outputs, line, message):
    with pytest.raises(UsageError, match=message):
        ip.run_cell_magic("giltracer", line, "pass")
    assert not outputs
