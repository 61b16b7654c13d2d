"""What the proofs need is really here when the run says so.

Several suites skip when a piece of the environment is missing (no Chromium, no
JupyterLab, no Jupyter kernel): right for someone running pytest by hand, wrong for the
runs that stand as evidence. `make test` (and CI through it) names what it installed in
GILTRACER_REQUIRE (a comma list); each named piece must then be usable, so a broken
environment fails instead of turning the browser, JupyterLab and notebook proofs into skips.
"""

import importlib.util
import os
import sys

import pytest

import giltracer._core

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "browser"))
from devtools import CHROMIUM  # noqa: E402  (the browser tests' harness)

REQUIRED = [w for w in os.environ.get("GILTRACER_REQUIRE", "").split(",") if w]


def required(what: str) -> bool:
    """This run names `what` in GILTRACER_REQUIRE: a test that needs it fails, not skips,
    when it is missing or does not start."""
    return what in REQUIRED


def _modules(*names):
    missing = [n for n in names if importlib.util.find_spec(n) is None]
    return not missing, f"not importable: {', '.join(missing)}"


CHECKS = {
    "chromium": lambda: (CHROMIUM is not None, "no chromium on PATH (apt-get install chromium)"),
    "jupyterlab": lambda: _modules("jupyterlab", "websocket", "ipykernel"),
    "notebooks": lambda: _modules("nbclient", "nbformat", "nbconvert", "ipykernel", "numpy"),
    "bpf": lambda: (giltracer._core.build_info()["bpf_available"],
                    f"the bpf probe: {giltracer._core.build_info()['bpf_why']}"),
}


@pytest.mark.parametrize("what", REQUIRED or ["nothing"])
def test_what_the_run_requires_is_here(what):
    if what == "nothing":
        pytest.skip("GILTRACER_REQUIRE is not set (a run by hand)")
    assert what in CHECKS, f"GILTRACER_REQUIRE names {what!r}; known: {', '.join(CHECKS)}"
    ok, why = CHECKS[what]()
    assert ok, f"{what} is required by this run: {why}"
