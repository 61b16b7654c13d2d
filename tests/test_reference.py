"""docs/reference.md and the environment table: the committed reference is what the option
and environment tables generate, every option of the table is in each front end it names,
and every GILTRACER_* variable in the sources is in the environment table."""

import ast
import inspect
import os
import re

import pytest

import giltracer
from giltracer import cli, env, options
from giltracer.options import API, CELL, CLI, CLI_PROFILE, OPTIONS, PROFILE

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
# A copied test tree (the matrix, the chroot) has no sources beside it.
needs_sources = pytest.mark.skipif(not os.path.isdir(os.path.join(ROOT, "core")),
                                   reason="no source tree beside the tests")


@needs_sources
def test_the_committed_reference_is_what_the_tables_generate():
    with open(os.path.join(ROOT, options.REFERENCE), encoding="utf-8") as f:
        assert f.read() == options.reference_markdown(), "run `make reference`"


def flags_of(front):
    if front in (CLI, CLI_PROFILE):
        parser = cli.build_parser(profile=front == CLI_PROFILE)
    else:
        pytest.importorskip("IPython")
        from giltracer.magics import GilTracerMagics

        parser = (GilTracerMagics.giltracer if front == CELL else GilTracerMagics.gilprofile).parser
    return {f for a in parser._actions for f in a.option_strings}


def stub_keywords():
    path = os.path.join(os.path.dirname(giltracer.__file__), "_core.pyi")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    session = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Session")
    init = next(n for n in session.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    return {a.arg for a in init.args.kwonlyargs}


@pytest.mark.parametrize("o", OPTIONS, ids=[f"{o.name} {' '.join(o.flags)}" for o in OPTIONS])
def test_each_option_is_in_every_front_end_it_names(o):
    trace_keywords = set(inspect.signature(giltracer.Trace.__init__).parameters)
    for front in o.fronts:
        if front == API:
            assert o.keyword in trace_keywords, f"Trace() has no {o.keyword}="
            if o.c:
                assert o.keyword in stub_keywords(), f"_core.pyi's Session has no {o.keyword}="
        else:
            assert set(o.flags) <= flags_of(front), f"{front} lacks {o.flags}"


@pytest.mark.parametrize("front", [CELL, PROFILE, CLI, CLI_PROFILE])
def test_the_front_ends_make_the_same_trace_keywords(front):
    """--sample and every option named as one of Trace's keywords: one translation."""
    if front in (CLI, CLI_PROFILE):
        parse = cli.build_parser(profile=front == CLI_PROFILE).parse_args
        args = parse(["--sample", "2ms", "--no-c", "x.py"])
    else:
        pytest.importorskip("IPython")
        from IPython.core.magic_arguments import parse_argstring

        from giltracer.magics import GilTracerMagics

        magic = GilTracerMagics.giltracer if front == CELL else GilTracerMagics.gilprofile
        args = parse_argstring(magic, "--sample 2ms --no-c")
    kw = options.trace_keywords(args)
    assert kw["mode"] == "sample" and kw["sample_interval"] == "2ms" and kw["c_calls"] is False
    t = giltracer.Trace(**kw)
    assert t.options["functions"] is False and t.options["sample_ns"] == 2_000_000


@pytest.mark.parametrize("path, fmt", [("t.html", "html"), ("T.HTM", "html"), ("t.json", "json"),
                                       ("t.txt", "txt"), ("t.text", "txt")])
def test_one_list_of_output_formats(path, fmt):
    assert options.output_format(path) == fmt
    assert options.is_page(path) == (fmt == "html")


def test_an_unknown_format_has_one_message():
    with pytest.raises(ValueError) as e:
        options.output_format("t.png")
    assert str(e.value) == "cannot tell the format of 't.png': use a .html, .json or .txt path"


SOURCES = ("core", "magics", "bench", "tests", "Makefile", "tools")


def source_files():
    for top in SOURCES:
        path = os.path.join(ROOT, top)
        if os.path.isfile(path):
            yield path
        for d, dirs, files in os.walk(path):
            dirs[:] = [x for x in dirs if x not in ("__pycache__", "corpus")]
            for name in files:
                # (the table itself, and this file's made-up name, are no readers)
                if name in ("env.py", "test_reference.py"):
                    continue
                if name.endswith((".py", ".c", ".h", ".pyi", ".sh", ".md")):
                    yield os.path.join(d, name)


@needs_sources
def test_every_environment_variable_is_in_the_table():
    found = set()
    for path in source_files():
        with open(path, encoding="utf-8", errors="replace") as f:
            found |= set(re.findall(r"\bGILTRACER_[A-Z][A-Z0-9_]*[A-Z0-9]", f.read()))
    assert found - set(env.BY_NAME) == set()
    assert set(env.BY_NAME) - found == set()  # (a row nothing reads any more)


@needs_sources
def test_the_package_reads_the_environment_through_the_table():
    package = os.path.join(ROOT, "magics", "giltracer")
    for name in os.listdir(package):
        if name.endswith(".py") and name != "env.py":
            with open(os.path.join(package, name), encoding="utf-8") as f:
                text = f.read()
            assert not re.search(r"(environ(\.get)?\(|getenv\()\s*[\"']GILTRACER_", text), name


def test_each_variable_says_who_sets_it():
    for v in env.VARIABLES:
        assert v.kind in (env.USER, env.INTERNAL, env.TEST, env.BENCH), v
        assert v.name.startswith("GILTRACER_") and v.meaning and v.read_by, v
    with pytest.raises(AssertionError):
        env.get("GILTRACER_NO_SUCH_VARIABLE")
