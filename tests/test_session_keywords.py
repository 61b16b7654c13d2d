"""The C side of the options table: cmake/session_keywords.py writes the keywords of
`_core.Session` (and the fields of struct gt_session_opts) from magics/giltracer/options.py
at build time, so the table and the C side cannot disagree; these hold the generator, the
built extension, the stub and the API to the table."""

import ast
import os
import subprocess
import sys
import types

import pytest

import giltracer
from giltracer import _core, options
from giltracer.options import API, Option

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GENERATOR = os.path.join(ROOT, "cmake", "session_keywords.py")
TABLE = os.path.join(ROOT, "magics", "giltracer", "options.py")

# The generator's tests need the source tree (a matrix run copies tests/ alone).
needs_source = pytest.mark.skipif(not os.path.exists(GENERATOR),
                                  reason="needs the source tree (cmake/session_keywords.py)")


def generator():
    spec = types.ModuleType("session_keywords")
    with open(GENERATOR) as f:
        exec(compile(f.read(), GENERATOR, "exec"), spec.__dict__)
    return spec


def c_value(o):
    """The Python value that gives a keyword its C default."""
    if o.c in ("bool", "choice"):
        return o.default
    return None if o.c in ("object", "str") else 0


@needs_source
def test_the_generator_writes_each_keyword_of_the_table_once(tmp_path):
    out = tmp_path / "session_keywords.h"
    subprocess.run([sys.executable, GENERATOR, TABLE, str(out)], check=True, timeout=60)
    text = out.read_text()
    rows = [line.strip() for line in text.split("#define GT_SESSION_KEYWORDS(X)")[1]
            .split("\n\n")[0].splitlines()[1:]]
    assert rows == [f"X({o.keyword}, {generator().C_TYPES[o.c]}, "
                    f"{o.keyword if o.c == 'choice' else o.c}, {generator().c_default(o)}) \\"
                    for o in options.session_keywords()]
    assert "enum gt_backend_choice { GT_BACKEND_AUTO, GT_BACKEND_HOOKS, GT_BACKEND_BPF };" in text
    assert 'X(backend, "auto", "hooks", "bpf")' in text
    # A keyword's C default: a switch's and a choice's from the table, else none.
    assert "X(functions, int, bool, 1)" in text and "X(crosscheck, int, bool, 0)" in text
    assert "X(max_events, uint64_t, u64, 0)" in text


@needs_source
def test_a_new_option_is_one_row(tmp_path):
    """Adding an option with a C kind to the table adds its field, keyword and enum."""
    table = types.SimpleNamespace(
        C_KINDS=options.C_KINDS,
        session_keywords=lambda: options.session_keywords() + [
            Option("order", ("--order",), fronts=(API,), keyword="order", choices=("oldest", "newest"),
                   default="newest", c="choice", help="a made-up option: which comes first")])
    text = generator().header(table)
    assert "enum gt_order_choice { GT_ORDER_OLDEST, GT_ORDER_NEWEST };" in text
    assert "X(order, int, order, GT_ORDER_NEWEST) \\" in text
    assert 'X(order, "oldest", "newest") \\' in text


@needs_source
@pytest.mark.parametrize("bad", [dict(c="float"), dict(c="choice", choices=None),
                                 dict(keyword="not-c")])
def test_the_generator_refuses_what_c_cannot_take(bad):
    row = dict(name="x", flags=(), help="", fronts=(API,), keyword="x", c="bool")
    row.update(bad)
    table = types.SimpleNamespace(C_KINDS=options.C_KINDS,
                                  session_keywords=lambda: [Option(**row)])
    with pytest.raises(SystemExit):
        generator().header(table)


def test_the_built_session_takes_exactly_the_tables_keywords():
    everything = {o.keyword: c_value(o) for o in options.session_keywords()}
    everything["functions"] = True
    _core.Session(**everything)  # each keyword is one it knows, with its C default
    with pytest.raises(TypeError, match="keep_nothing"):
        _core.Session(keep_nothing=True)
    with pytest.raises(TypeError):
        _core.Session(True)  # keyword-only, as the stub says
    with pytest.raises(ValueError, match="backend must be 'auto', 'hooks' or 'bpf', not 'x'"):
        _core.Session(backend="x")
    with pytest.raises(TypeError, match="argument 'max_depth'"):
        _core.Session(max_depth=1.5)


def test_the_stub_and_the_api_pass_the_tables_keywords():
    stub = ast.parse(open(os.path.join(os.path.dirname(giltracer.__file__), "_core.pyi")).read())
    session = next(n for n in stub.body if isinstance(n, ast.ClassDef) and n.name == "Session")
    init = next(n for n in session.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    stubbed = {a.arg: ast.literal_eval(d) for a, d in zip(init.args.kwonlyargs,
                                                          init.args.kw_defaults)}
    assert stubbed == {o.keyword: c_value(o) for o in options.session_keywords()}
    # Trace passes every keyword of an API option with a C kind, and the internal ones.
    passed = set(giltracer.Trace().options) | {"own_dir", "children"}
    assert {o.keyword for o in options.of(API) if o.c} <= passed
    assert passed <= {o.keyword for o in options.session_keywords()}
