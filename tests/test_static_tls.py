"""The core where the process's static TLS block is full.

The core keeps its hot-path thread-locals in the initial-exec TLS model (core/record/
registry.h, GT_TLS_HOT): a %fs-relative load per access. A module loaded by dlopen() gets
such variables from the surplus that glibc keeps in the static TLS block; libraries loaded
before may have used it up, and then the module cannot load at all ("cannot allocate memory
in static TLS block"). giltracer then loads its fallback build (giltracer/_tls_dynamic/),
whose thread-locals are in the default model, and a trace there records what it records
anywhere. Each case runs in a fresh interpreter: the surplus, once used, stays used."""

import json
import os
import shutil
import subprocess
import sys
import sysconfig

import pytest

import giltracer
import giltracer._core
from conftest import needs_gil

HERE = os.path.dirname(os.path.abspath(__file__))
needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler (cc)")
needs_glibc = pytest.mark.skipif(sys.platform != "linux" or not os.confstr("CS_GNU_LIBC_VERSION"),
                                 reason="glibc's static TLS surplus")

# The surplus filled first (tests/static_tls.py): what is left is below 8 bytes; the core
# needs 56.
FILL = "import ctypes, os, shutil, subprocess, sys\nfrom static_tls import fill_static_tls\n"


def run_full(tmp_path, body):
    """`body` in a fresh interpreter after fill_static_tls(); its last line of output as JSON."""
    script = FILL + "keep, used = fill_static_tls(%r)\n" % str(tmp_path) + body
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE] + sys.path[1:]))
    env.pop("GILTRACER_TLS", None)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=240,
                       env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def core_paths():
    """The initial-exec build and the fallback build of the core, as installed."""
    path = giltracer._core.__file__
    if os.sep + "_tls_dynamic" + os.sep in path:  # this process loaded the fallback
        path = os.path.join(os.path.dirname(os.path.dirname(path)), os.path.basename(path))
    return path, os.path.join(os.path.dirname(path), "_tls_dynamic", os.path.basename(path))


@needs_cc
@needs_glibc
def test_initial_exec_build_cannot_load_where_static_tls_is_full(tmp_path):
    """The situation itself: the core's initial-exec build, loaded as the import system
    loads an extension (dlopen), fails there; the fallback build loads."""
    ie, dyn = core_paths()
    out = run_full(tmp_path, f'''
import importlib.machinery, importlib.util, json
def load(path):
    spec = importlib.util.spec_from_file_location(
        "giltracer._core", path, loader=importlib.machinery.ExtensionFileLoader("giltracer._core", path))
    try:
        return importlib.util.module_from_spec(spec).probe_info()["tls_model"]
    except ImportError as e:
        return str(e)
print(json.dumps({{"used": used, "ie": load({ie!r}), "dyn": load({dyn!r})}}))
''')
    assert out["used"] > 0, out
    assert "cannot allocate memory in static TLS block" in out["ie"], out
    assert out["dyn"] == "global-dynamic", out


def test_normal_import_loads_the_initial_exec_build():
    assert giltracer._core.probe_info()["tls_model"] == "initial-exec"
    assert os.path.basename(os.path.dirname(giltracer._core.__file__)) == "giltracer"
    assert giltracer._core.__spec__.origin == giltracer._core.__file__


def test_environment_can_ask_for_the_fallback_build():
    """GILTRACER_TLS=dynamic loads the fallback build from the start (e.g. to leave the
    static TLS surplus to a library loaded later)."""
    r = subprocess.run([sys.executable, "-c", "import giltracer._core as c; "
                        "print(c.probe_info()['tls_model'], c.__file__)"],
                       capture_output=True, text=True, timeout=60, env=dict(os.environ, GILTRACER_TLS="dynamic"))
    assert r.returncode == 0, r.stderr
    model, path = r.stdout.split()
    assert model == "global-dynamic" and path == core_paths()[1], r.stdout


@needs_cc
@needs_glibc
@needs_gil
def test_import_where_static_tls_is_full_loads_the_fallback_and_traces(tmp_path):
    """`import giltracer` and a trace where the static TLS block is full: the fallback
    build loads (probe_info() and the module's file say so), and two CPU-bound threads
    each hold the GIL about half of the time and wait the rest (tests/test_gil.py's ground
    truth, with its tolerance for a disturbed run), their calls recorded."""
    out = run_full(tmp_path, '''
import json
import giltracer, giltracer._core
from workloads import gil_shares, held_while_preempted, preempted_ns, traced_cpu_pair
t, (a, b) = traced_cpu_pair(0.6, backend="hooks", c_calls=False)
window = (max(a.spin_ns[0], b.spin_ns[0]), min(a.spin_ns[1], b.spin_ns[1]))
rows = {s.tid: s for s in t.summary()}
print(json.dumps({
    "used": used, "file": giltracer._core.__file__,
    "tls_model": giltracer._core.probe_info()["tls_model"], "backend": t.backend,
    "window": window, "slack": 100 * held_while_preempted(t, {a.native_id, b.native_id}),
    "threads": [{"share": gil_shares(t, th.native_id, window),
                 "off_cpu": 100 * preempted_ns(t, th.native_id, ("released",), window)
                            / (window[1] - window[0]),
                 "acquisitions": rows[th.native_id].acquisitions,
                 "spans": len(t.spans(th.native_id))} for th in (a, b)]}))
''')
    assert out["used"] > 0, out
    assert out["tls_model"] == "global-dynamic", out
    assert os.path.basename(os.path.dirname(out["file"])) == "_tls_dynamic", out
    assert out["backend"] == "hooks", out
    lo, hi = out["window"]
    assert hi - lo > 0.2e9, out  # they spun together
    slack = out["slack"]
    for th in out["threads"]:
        share = th["share"]
        assert th["acquisitions"] >= 5, th
        assert th["spans"] > 0, th  # the call tracer recorded through the fallback's TLS
        assert share["held"] + share["wait"] >= 95 - th["off_cpu"], th
        assert 35 - slack <= share["held"] <= 65 + slack, (slack, th)
        assert 35 - slack <= share["wait"] <= 65 + slack, (slack, th)


@needs_cc
@needs_glibc
def test_calls_traced_exactly_where_static_tls_is_full(tmp_path):
    """The call tracer through the fallback build's thread-locals (on 3.12+ each event
    finds its thread's record through one), free-threaded builds included: every call of
    a function in two threads, counted exactly, per thread."""
    out = run_full(tmp_path, '''
import json, threading
import giltracer, giltracer._core
def leaf(i):
    return i + 1
def work():
    for i in range(5000):
        leaf(i)
threads = [threading.Thread(target=work, name="w%d" % k) for k in range(2)]
with giltracer.trace(backend="hooks", c_calls=False) as t:
    for th in threads:
        th.start()
    for th in threads:
        th.join()
print(json.dumps({"used": used, "tls_model": giltracer._core.probe_info()["tls_model"],
                  "calls": [sum(r.calls for r in t.functions(th.native_id) if r.name == "leaf")
                            for th in threads]}))
''')
    assert out["used"] > 0, out
    assert out["tls_model"] == "global-dynamic", out
    assert out["calls"] == [5000, 5000], out


@needs_cc
@needs_glibc
def test_other_import_errors_are_not_hidden_by_the_fallback(tmp_path):
    """Only the full static TLS block makes the loader try the fallback build: the
    initial-exec build's own error otherwise stays the error (here: not an ELF file)."""
    pkg = tmp_path / "pkg" / "giltracer"
    (pkg / "_tls_dynamic").mkdir(parents=True)
    name = "_core" + sysconfig.get_config_var("EXT_SUFFIX")
    (pkg / name).write_bytes(b"not a shared object")
    shutil.copyfile(core_paths()[1], pkg / "_tls_dynamic" / name)
    boot = os.path.dirname(os.path.dirname(core_paths()[0]))
    r = subprocess.run([sys.executable, "-c", f'''
import sys; sys.path.insert(0, {boot!r})
import importlib.util, _giltracer_boot as boot
path = {str(pkg / name)!r}
spec = importlib.util.spec_from_file_location("giltracer._core", path, loader=boot.core_loader(path))
try:
    importlib.util.module_from_spec(spec)
except ImportError as e:
    print("ImportError", e)
'''], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ImportError") and "static TLS" not in r.stdout, r.stdout
