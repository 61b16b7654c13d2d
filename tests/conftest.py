import os
import sys
import threading

import pytest


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
