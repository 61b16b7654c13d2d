import os
import sys
import sysconfig
import threading

import pytest

FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
# Ground truth about the GIL (who holds it, waits, takes turns) cannot hold on a
# free-threaded build: tests of it are skipped there with this reason.
NO_GIL = "free-threaded build: no GIL"
needs_gil = pytest.mark.skipif(FREE_THREADED, reason=NO_GIL)
# The live meter's words for held / waiting (progress()'s states): a free-threaded
# build's account is the park probe's, running / parked.
LIVE_WORDS = ("running", "parked") if FREE_THREADED else ("held", "waiting")
LIVE_STATES = (LIVE_WORDS + ("released",))

# What the text calls things on each build kind (a free-threaded build's text is about
# lock contention: running / parked, the waker instead of the holder).
PROFILE_HEAD = "Contention profile of" if FREE_THREADED else "GIL profile of"
BLAME_HEAD = "Top lock contention" if FREE_THREADED else "Top GIL waits"
TABLE_WORDS = ("run", "parked") if FREE_THREADED else ("held", "wait")
# The profile text's table titles (Trace.profile_text, %gilprofile, giltracer profile).
TOP_WAIT, TOP_HELD, TOP_CAUSED = (
    ("Top functions by time parked:", "Top functions by time running:",
     "Top functions by parked time caused:") if FREE_THREADED else
    ("Top functions by GIL wait:", "Top functions by GIL held:",
     "Top functions by GIL wait caused:"))

# The bpf probe probes the GIL: a free-threaded build's session refuses backend="bpf"
# (its uprobes on the parking lot are not written yet).
NO_BPF_FT = "free-threaded build: the bpf probe has no contention probe yet"


def needs_bpf_backend(info):
    """Skip a test of backend="bpf" where that backend cannot run: not available (info is
    _core.build_info()), or a free-threaded build."""
    if FREE_THREADED:
        return pytest.mark.skipif(True, reason=NO_BPF_FT)
    return pytest.mark.skipif(not info["bpf_available"],
                              reason=f"bpf backend unavailable: {info['bpf_why']}")


@pytest.fixture(autouse=True)
def leaves_interpreter_clean():
    """Every test must leave no profile function and no monitoring tool behind."""
    before = sys.getprofile()
    yield
    assert sys.getprofile() is before
    if hasattr(threading, "getprofile"):
        assert threading.getprofile() is None
    if sys.version_info >= (3, 12):
        assert "giltracer" not in [sys.monitoring.get_tool(i) for i in range(6)]


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """No what-if calibration kept (giltracer.calibrate): in this process, nor in the cache
    folder (a new one); GILTRACER_EVENT_NS, GILTRACER_PARALLEL_SPEED, GILTRACER_FT_FACTOR
    and GILTRACER_FT_PYTHON unset."""
    from giltracer import calibrate
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    for name in ("GILTRACER_EVENT_NS", "GILTRACER_PARALLEL_SPEED", "GILTRACER_FT_FACTOR",
                 "GILTRACER_FT_PYTHON"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(calibrate, "_cache", {})
    monkeypatch.setattr(calibrate, "_ft_cache", {})
    return tmp_path


def is_root():
    return os.geteuid() == 0


@pytest.fixture(scope="session")
def ip():
    """A real IPython shell with giltracer's magics loaded (one per test run: the
    first get_ipython() starts it, later calls return None)."""
    IPython = pytest.importorskip("IPython")
    from IPython.testing.globalipapp import get_ipython

    shell = get_ipython() or IPython.get_ipython()
    shell.run_line_magic("load_ext", "giltracer")
    return shell


@pytest.fixture
def outputs(ip, monkeypatch):
    """What the magics display, instead of displaying it."""
    shown = []
    import giltracer.magics as m

    monkeypatch.setattr(m, "display", lambda obj, raw=False: shown.append(obj))
    return shown


def run_script(tmp_path, body, *args, name="script.py", timeout=240, env=None):
    """Runs `body` as a script in tmp_path; its last stdout line is JSON: (that, the process)."""
    import json
    import subprocess
    import sys

    path = tmp_path / name
    path.write_text(body)
    p = subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True,
                       timeout=timeout, cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1]), p


# Suites whose result does not depend on the interpreter: the viewer in Chromium and in
# JupyterLab, the lessons (their facts are tested on every interpreter by the suites
# below them; CI also runs them on 3.14 and 3.14t beside busy processes), the page's
# size, the source's static checks. Marked `any_python` (as are single tests elsewhere):
# CI's matrix runs them on the main interpreter only (pytest -m "not any_python" elsewhere).
ANY_PYTHON = ("browser/", "test_notebooks.py", "test_kernel_output_bytes.py",
              "test_function_length.py", "test_palette.py")
# ... but for the views that differ on a free-threaded build (its headings, lock kinds,
# parked time): those run on every interpreter.
NOT_ANY_PYTHON = ("browser/test_ft_headings_view.py", "browser/test_lock_kinds_view.py",
                  "browser/test_park_view.py")


def pytest_configure(config):
    # Here, not in pyproject.toml: the matrix runs a copy of tests/ without it.
    config.addinivalue_line(
        "markers", "any_python: the result does not depend on the interpreter (ANY_PYTHON)")


def pytest_collection_modifyitems(config, items):
    here = os.path.dirname(os.path.abspath(__file__))
    for item in items:
        rel = os.path.relpath(str(item.fspath), here)
        if rel.startswith(ANY_PYTHON) and not rel.startswith(NOT_ANY_PYTHON):
            item.add_marker(pytest.mark.any_python)
