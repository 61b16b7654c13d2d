"""What the proofs need is really here when the run says so.

Several suites skip when a piece of the environment is missing (no Chromium, no
JupyterLab, no Jupyter kernel): right for someone running pytest by hand, wrong for the
runs that stand as evidence. `make test` (and CI through it) names what it installed in
GILTRACER_REQUIRE (a comma list); each named piece must then be usable, so a broken
environment fails instead of turning the browser, JupyterLab and notebook proofs into skips.
"""

import importlib.util
import os
import shutil

import pytest

import giltracer._core

REQUIRED = [w for w in os.environ.get("GILTRACER_REQUIRE", "").split(",") if w]


def required(what: str) -> bool:
    return what in REQUIRED


def _modules(*names):
    missing = [n for n in names if importlib.util.find_spec(n) is None]
    return not missing, f"not importable: {', '.join(missing)}"


CHECKS = {
    "chromium": lambda: (any(shutil.which(c) for c in ("chromium", "chromium-browser", "google-chrome")),
                         "no chromium on PATH (apt-get install chromium)"),
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
