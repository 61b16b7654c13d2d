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


@pytest.fixture(autouse=True)
def leaves_interpreter_clean():
    """Every test must leave no profile function and no monitoring tool behind."""
    before = sys.getprofile()
    yield
    assert sys.getprofile() is before
    if hasattr(threading, "getprofile"):
        assert threading.getprofile() is None
    if sys.version_info >= (3, 12):
        assert sys.monitoring.get_tool(sys.monitoring.PROFILER_ID) is None


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
