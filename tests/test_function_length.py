"""Functions in core/ (C, the .inc parts of C files, the viewer's JavaScript) and magics/
(Python) read as one straight line: none over LIMIT lines (long functions hide their steps)
unless listed in EXCEPTIONS with the reason it stays."""
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


# A named JavaScript function, as the viewer writes them: `function name(`, `name = function (`,
# `name: function (` (methods of an object literal), `name = (a) => {` or `name = a => {`.
JS_HEAD = re.compile(r"\bfunction\s+(\w+)\s*\("
                     r"|\b(\w+)\s*[:=]\s*function\b"
                     r"|\b(\w+)\s*=\s*(?:\([^()]*\)|\w+)\s*=>\s*(?=\{)")
# After these words a `/` starts a regular expression, not a division.
JS_REGEX_AFTER = {"return", "typeof", "instanceof", "in", "of", "new", "delete", "void",
                  "throw", "case", "do", "else"}


def js_code(text):
    """`text` with its comments, strings, template literals and regular expression literals
    blanked (newlines kept, so offsets and line numbers stay), left for brace counting."""
    out = list(text)
    i, n, prev = 0, len(text), ""  # prev: the last code character, or the last word

    def blank(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if c == "/" and text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif c == "/" and text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            blank(i, j)
            i = j
        elif c in "'\"`" or (c == "/" and (prev in JS_REGEX_AFTER
                                           or not re.match(r"[\w$)\]]", prev[-1:]))):
            j, in_class = i + 1, False
            while j < n and (text[j] != c or in_class):
                if text[j] == "\\":
                    j += 1
                elif c == "/" and text[j] in "[]":
                    in_class = text[j] == "["
                j += 1
            blank(i + 1, j)
            i, prev = j + 1, "x"  # a literal is a value: a `/` after it divides
        elif c.isspace():
            i += 1
        else:
            m = re.match(r"[\w$]+", text[i:i + 200])
            prev = m.group(0) if m else c
            i += len(prev)
    return "".join(out)


def js_functions(text):
    """(name, first line, length) of each named function in the viewer's JavaScript: from
    its header to the brace closing its body (nested functions are counted on their own,
    and in the function around them)."""
    code = js_code(text)
    for m in JS_HEAD.finditer(code):
        depth, body = 0, code.index("{", m.end())
        for j in range(body, len(code)):
            depth += {"{": 1, "}": -1}.get(code[j], 0)
            if depth == 0:
                break
        first = code.count("\n", 0, m.start()) + 1
        yield m.group(m.lastindex), first, code.count("\n", m.start(), j) + 1


def py_functions(text):
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node.lineno, node.end_lineno - node.lineno + 1


def all_functions():
    for p in sorted((ROOT / "core").rglob("*")):
        if p.suffix in (".c", ".h", ".inc") and "viewer" not in p.parts:
            for name, line, n in c_functions(p.read_text()):
                yield f"{p.relative_to(ROOT)}:{name}", line, n
    for p in sorted((ROOT / "core" / "viewer").glob("*.js")):
        for name, line, n in js_functions(p.read_text()):
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
    # the .inc parts of tracer.c
    assert found["core/probes/calls/free_threaded.inc:ft_enter"] > 5
    assert found["core/probes/calls/monitoring.inc:release_tool"] > 40
    assert found["core/probes/calls/profile_hook.inc:profile_hook"] > 20
    # the viewer's JavaScript: a declaration, one nested in another, methods of an object
    # literal and a function assigned to a name
    assert found["core/viewer/decode.js:parseData"] > 2
    assert found["core/viewer/tables.js:banner"] > 2
    assert found["core/viewer/main.js:profileFrames"] > 2
    assert found["core/viewer/main.js:go"] == 1
    assert found["core/viewer/timeline.js:draw"] > 10
    assert sum(".js:" in key for key in found) > 150
    assert len(found) > 500


def test_js_counter_skips_braces_in_literals():
    """Braces in strings, comments and regular expressions do not end a function early."""
    src = ("function a(x) {\n  var s = '}', r = /[}/]\\}/g, q = x / 2 / 3; // }\n"
           "  /* } */ return `}`;\n}\nvar b = function () {\n};\nvar c = (y) => {\n  return y;\n};\n"
           "var d = y => y + 1;\nvar e = {\n};\n")
    assert list(js_functions(src)) == [("a", 1, 4), ("b", 5, 2), ("c", 7, 3)]


def test_no_function_over_limit():
    long = {f"{key} (line {line})": n for key, line, n in all_functions()
            if n > LIMIT and key not in EXCEPTIONS}
    assert not long, f"functions over {LIMIT} lines: split them into named steps: {long}"


def test_exceptions_still_needed():
    lengths = {key: n for key, _, n in all_functions()}
    stale = [key for key in EXCEPTIONS if lengths.get(key, 0) <= LIMIT]
    assert not stale, f"no longer over {LIMIT} lines (or gone): drop from EXCEPTIONS: {stale}"
