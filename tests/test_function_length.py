"""Functions in core/ (C) and magics/ (Python) read as one straight line: none over
LIMIT lines (long functions hide their steps) unless listed in EXCEPTIONS with the reason it stays."""
import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
LIMIT = 80

# "path:function" -> why it is still longer than LIMIT. A listed function that shrinks
# to LIMIT or less fails the test too, so the list only ever gets shorter.
EXCEPTIONS: dict = {}

if not (ROOT / "core").is_dir() or not (ROOT / "magics").is_dir():
    pytest.skip("needs the source tree (core/, magics/) next to tests/",
                allow_module_level=True)


def c_functions(text):
    """(name, first line, length) of each function definition in C source written in
    the house style: the body's braces in column 0, the signature starting in column 0
    just above (its continuation lines indented)."""
    lines = text.splitlines()
    i = 1
    while i < len(lines):
        if lines[i].startswith("{") and lines[i - 1].rstrip().endswith(")"):
            start = i - 1
            while start > 0 and not lines[start][:1].strip():
                start -= 1
            end = i + 1
            while end < len(lines) and not lines[end].startswith("}"):
                end += 1
            m = re.search(r"(\w+)\s*\(", lines[start])
            yield (m.group(1) if m else lines[start]), start + 1, end - start + 1
            i = end
        i += 1


def py_functions(text):
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node.lineno, node.end_lineno - node.lineno + 1


def all_functions():
    for p in sorted((ROOT / "core").rglob("*")):
        if p.suffix in (".c", ".h") and "viewer" not in p.parts:
            for name, line, n in c_functions(p.read_text()):
                yield f"{p.relative_to(ROOT)}:{name}", line, n
    for p in sorted((ROOT / "magics").rglob("*.py")):
        for name, line, n in py_functions(p.read_text()):
            yield f"{p.relative_to(ROOT)}:{name}", line, n


def test_counter_sees_functions():
    """The counter finds the definitions it should (else the limit checks nothing)."""
    found = {key: n for key, _, n in all_functions()}
    assert 0 < found["core/probes/calls/tracer.c:gt_tracer__collect"] < 10
    assert found["core/py/children.c:gt_children__read_spools"] > 10
    assert "magics/giltracer/api.py:trace" in found
    assert len(found) > 500


def test_no_function_over_limit():
    long = {f"{key} (line {line})": n for key, line, n in all_functions()
            if n > LIMIT and key not in EXCEPTIONS}
    assert not long, f"functions over {LIMIT} lines: split them into named steps: {long}"


def test_exceptions_still_needed():
    lengths = {key: n for key, _, n in all_functions()}
    stale = [key for key in EXCEPTIONS if lengths.get(key, 0) <= LIMIT]
    assert not stale, f"no longer over {LIMIT} lines (or gone): drop from EXCEPTIONS: {stale}"
