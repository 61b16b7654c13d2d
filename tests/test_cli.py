"""The command line: `giltracer script.py` and `giltracer -m module`."""

import json
import os
import subprocess
import sys

import pytest

import giltracer
from conftest import TABLE_WORDS

HERE = os.path.dirname(os.path.abspath(__file__))
DEMO = os.path.join(HERE, "..", "examples", "threads_demo.py")


def run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "giltracer", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120)


@pytest.mark.skipif(not os.path.exists(DEMO), reason="examples/ not next to the tests")
def test_script_writes_html_and_prints_table(tmp_path):
    out = tmp_path / "demo.html"
    p = run("--backend", "hooks", "-o", str(out), DEMO)
    assert p.returncode == 0, p.stderr
    page = out.read_text(encoding="utf-8")
    assert 'id="gt-data"' in page and "GT_PAYLOAD" not in page
    for name in ("cpu-0", "cpu-1", "sleeper") + TABLE_WORDS:
        assert name in p.stderr
    assert f"wrote {out}" in p.stderr


def test_default_output_name_and_json(tmp_path):
    script = tmp_path / "tiny.py"
    script.write_text("import sys\nprint(sum(range(10)), sys.argv[1:])\n")
    p = run(str(script), "a", "b", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "45 ['a', 'b']" in p.stdout  # the script's own output and arguments
    assert (tmp_path / "tiny.giltracer.html").exists()
    p = run("-o", str(tmp_path / "t.json"), "--no-c", str(script), cwd=tmp_path)
    assert p.returncode == 0
    assert json.loads((tmp_path / "t.json").read_text())["traceEvents"]


def test_script_that_raises_still_saves(tmp_path):
    script = tmp_path / "boom.py"
    script.write_text("def f():\n    raise RuntimeError('boom')\nf()\n")
    out = tmp_path / "boom.html"
    p = run("-o", str(out), str(script))
    assert p.returncode == 1
    assert "RuntimeError: boom" in p.stderr
    assert out.exists()


def test_exit_status_of_the_script_is_kept(tmp_path):
    script = tmp_path / "exit3.py"
    script.write_text("raise SystemExit(3)\n")
    assert run("-q", "-o", str(tmp_path / "x.html"), str(script)).returncode == 3


def test_module_mode(tmp_path):
    p = run("-q", "-o", str(tmp_path / "m.json"), "-m", "json.tool", "--help")
    assert p.returncode == 0
    assert (tmp_path / "m.json").exists()


@pytest.mark.parametrize("args, message", [
    ([], "give a script"),
    (["--max-events", "0", "x.py"], "max-events"),
    (["-o", "x.png", "--", "nonexistent.py"], "no such script"),
    (["--backend", "perf", "x.py"], "invalid choice"),
])
def test_bad_usage_exits_2_with_a_message(tmp_path, args, message):
    p = run(*args, cwd=tmp_path)
    assert p.returncode == 2
    assert message in p.stderr


def test_block_that_raises_keeps_its_trace():
    def f():
        raise KeyError("x")

    t = giltracer.trace(c_calls=False)
    with pytest.raises(KeyError):
        with t:
            f()
    spans = t.spans(t._tid(__import__("threading").current_thread()))
    (span,) = [s for s in spans if s[2].split(".")[-1] == "f"]
    assert span[4] & 4  # left by the exception
