"""The benchmark's floor (bench/hooks.c, the minimal recording hook) records what it
should and gives its references back: `bench/hooks.py --self-check`, compiled for the
running interpreter. Not timed."""

import os
import shutil
import subprocess
import sys
import sysconfig

import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")
HOOKS = os.path.join(BENCH, "hooks.py")


def test_floor_hook_self_check(tmp_path):
    if not os.path.exists(HOOKS):
        pytest.skip("bench/ is not next to tests/ (a copied test tree)")
    if not shutil.which(os.environ.get("CC", "cc").split()[0]):
        pytest.skip("no C compiler")
    if not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
        pytest.skip("no Python.h for this interpreter")
    env = dict(os.environ, GILTRACER_BENCH_CACHE=str(tmp_path))
    p = subprocess.run([sys.executable, HOOKS, "--self-check"], capture_output=True, text=True,
                       env=env, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "self-check: PASS" in p.stdout
