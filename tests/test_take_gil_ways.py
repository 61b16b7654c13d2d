"""How the bpf probe finds take_gil, and that its last way (calibration) finds the right
function where no symbol names it.

Debian's python3.13+ are stripped LTO builds: take_gil is `take_gil.lto_priv.0`, named
only by the -dbg package's debug file. Without that file the probe locates take_gil from
the hooks' calibration: the return addresses of take_gil's pthread_mutex_lock(gil mutex)
and pthread_cond_signal(gil switch_cond), mapped to their function by the unwind table.
giltracer._core.probe_info()["take_gil"] says where every way finds it (reading ELF files
needs no privileges); where a symbol or debug file names take_gil, calibration must find
the same address. As root, a run with the debug files hidden (a private mount namespace)
must then trace the GIL through calibration and agree with the hooks.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

import giltracer
import giltracer._core
from conftest import needs_gil

pytestmark = needs_gil

_INFO = giltracer._core.build_info()
PKG_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(giltracer.__file__)))
TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def info():
    i = giltracer._core.probe_info()
    if not i["hooks_ok"]:
        pytest.skip(f"no calibration without the hooks: {i['hooks_why']}")
    return i


def test_every_way_is_reported_with_an_address_or_a_reason(info):
    ways, whys = info["take_gil"], info["take_gil_why"]
    assert set(ways) == {"symbol", "debug file", "hint", "PyEval_RestoreThread heuristic",
                         "calibration"}
    for how, addr in ways.items():
        if addr is None:
            assert whys[how], (how, whys)
        else:
            assert how not in whys


def test_calibration_finds_take_gil_where_symbols_say_it_is(info):
    """pyenv's builds have take_gil in .symtab, Debian's 3.14/3.15 in the -dbg debug file,
    Debian's 3.11 by the PyEval_RestoreThread heuristic: calibration must agree with each."""
    ways, whys = info["take_gil"], info["take_gil_why"]
    if "this build has no eBPF probe" in (whys.get("symbol") or ""):
        pytest.skip(whys["symbol"])
    assert ways["calibration"], f"calibration did not find take_gil: {whys['calibration']}"
    named = {how: ways[how] for how in ("symbol", "debug file", "PyEval_RestoreThread heuristic")
             if ways[how]}
    if not named:
        pytest.skip("nothing else names take_gil here to compare with")
    for how, addr in named.items():
        assert ways["calibration"] == addr, (how, hex(addr), hex(ways["calibration"]))


HIDDEN_DEBUG_RUN = r"""
    import ctypes, os, sys
    libc = ctypes.CDLL(None, use_errno=True)
    CLONE_NEWNS, MS_REC, MS_PRIVATE = 0x00020000, 0x4000, 1 << 18
    assert libc.unshare(CLONE_NEWNS) == 0, os.strerror(ctypes.get_errno())
    # Nothing mounted here may propagate back: make shared mounts private first (in a
    # chroot "/" is no mount point, but there tools/in-chroot made every mount private).
    with open("/proc/self/mountinfo") as f:
        shared = [l for l in f if " shared:" in l.split(" - ")[0]]
    if shared:
        assert libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) == 0, shared[:3]
    assert libc.mount(b"tmpfs", b"/usr/lib/debug", b"tmpfs", 0, None) == 0, \
        os.strerror(ctypes.get_errno())
    assert os.listdir("/usr/lib/debug") == []
    # Exec again: this executable was mapped from the old namespace's mount, whose path
    # /proc/self/exe (what the probe reads) no longer shows inside a chroot.
    os.execv(sys.executable, [sys.executable, "-c", STAGE2])
"""

STAGE2 = r"""
import json
import giltracer, giltracer._core
from workloads import traced_cpu_pair
ways = giltracer._core.probe_info()["take_gil"]
t, _ = traced_cpu_pair(0.5, backend="bpf", functions=False)
c, _ = traced_cpu_pair(0.5, crosscheck=True, functions=False)
hooks = {s.tid: s for s in c.summary()}
bpf = {s.tid: s for s in c.crosscheck()}
print(json.dumps({
    "ways": ways, "reason": t.backend_reason,
    "held": {s.name: s.held_pct for s in t.summary()},
    "pairs": [[hooks[k].name, hooks[k].acquisitions, bpf[k].acquisitions,
               hooks[k].held_pct, bpf[k].held_pct] for k in hooks if k in bpf],
}))
"""


@pytest.mark.skipif(not _INFO["bpf_available"],
                    reason=f"the bpf backend is not available here: {_INFO['bpf_why']}")
def test_bpf_without_debug_files_finds_take_gil_by_calibration(info):
    """On a stripped build the -dbg package is optional: with /usr/lib/debug hidden the
    bpf probe falls back to calibration, says so, and counts what the hooks count."""
    ways = info["take_gil"]
    if ways["symbol"] or ways["PyEval_RestoreThread heuristic"]:
        pytest.skip("take_gil is named without the debug file here "
                    f"(symbol {ways['symbol'] and hex(ways['symbol'])}, heuristic "
                    f"{ways['PyEval_RestoreThread heuristic'] and hex(ways['PyEval_RestoreThread heuristic'])})")
    if not os.path.isdir("/usr/lib/debug"):
        pytest.skip("no /usr/lib/debug to hide")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([PKG_PARENT, TESTS_DIR, env.get("PYTHONPATH", "")])
    code = f"STAGE2 = {STAGE2!r}\n" + textwrap.dedent(HIDDEN_DEBUG_RUN)
    p = subprocess.run([sys.executable, "-c", code], env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert r["ways"]["debug file"] is None, r["ways"]
    assert r["ways"]["calibration"], r["ways"]
    assert "found by calibration" in r["reason"], r["reason"]
    for name in ("cpu-a", "cpu-b"):
        assert 20 <= r["held"][name] <= 80, r["held"]
    for name, h_acq, b_acq, h_held, b_held in r["pairs"]:
        assert abs(h_acq - b_acq) <= max(1, 0.01 * h_acq), r["pairs"]
        assert abs(h_held - b_held) <= 3, r["pairs"]
