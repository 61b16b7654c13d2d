"""giltracer.options: the one table of options, and the front ends made from it (the API,
%%giltracer, %gilprofile, `giltracer`, `giltracer profile`) exposing what it says."""

import inspect
import os
import subprocess
import sys

import pytest

import giltracer
from giltracer import cli, options
from giltracer.options import API, CELL, CLI, CLI_PROFILE, OPTIONS, PROFILE

IPython = pytest.importorskip("IPython")
from IPython.core.error import UsageError  # noqa: E402

# The command's own arguments, not options of a trace: the script and its arguments.
CLI_OWN = {"help", "module", "target", "args"}


def magic_parser(front):
    from giltracer.magics import GilTracerMagics

    return (GilTracerMagics.giltracer if front == CELL else GilTracerMagics.gilprofile).parser


def parser_of(front):
    if front in (CLI, CLI_PROFILE):
        return cli.build_parser(profile=front == CLI_PROFILE)
    return magic_parser(front)


def exposed(parser):
    """(flags, dest, default, choices, takes a value) of each option the parser has."""
    return {(tuple(a.option_strings), a.dest, a.default, tuple(a.choices or ()),
             a.nargs not in (0, "?")) for a in parser._actions if a.dest not in CLI_OWN}


def declared(front):
    return {(o.flags, o.name, o.default, tuple(o.choices or ()), o.takes_value)
            for o in options.of(front)}


@pytest.mark.parametrize("front", [CELL, PROFILE, CLI, CLI_PROFILE])
def test_each_front_end_has_the_options_the_table_gives_it(front):
    assert exposed(parser_of(front)) == declared(front)


def test_the_api_keywords_are_the_tables():
    params = inspect.signature(giltracer.Trace.__init__).parameters
    keywords = {k: p.default for k, p in params.items() if k not in ("self", "title")}
    table = {o.keyword: o.default for o in options.of(API)}
    assert keywords == table
    assert giltracer.api.DEFAULT_MAX_EVENTS == options.DEFAULT_MAX_EVENTS


def test_every_option_is_somewhere_and_one_keyword_has_one_default():
    for o in OPTIONS:
        assert o.fronts and set(o.fronts) <= set(options.FRONTS), o
        assert o.flags or o.fronts == (API,), o
        assert "%" not in o.help, o  # argparse would read it as a format
    defaults = {}
    for o in OPTIONS:
        if o.keyword:
            assert defaults.setdefault(o.keyword, o.default) == o.default, o


def test_the_options_that_end_at_the_script_or_statement_take_a_value():
    """The splitting of argv and of %gilprofile's line knows which options take a value."""
    from giltracer import magics

    takes = {f for front in (CLI, CLI_PROFILE) for a in parser_of(front)._actions
             if a.nargs not in (0, "?") and a.dest not in CLI_OWN for f in a.option_strings}
    assert cli._VALUE_OPTIONS == takes
    assert {"--max-events", "--include", "--top", "--sort", "-o"} <= takes
    assert magics._PROFILE_VALUE_OPTIONS == {f for a in magic_parser(PROFILE)._actions
                                             if a.nargs not in (0, "?") for f in a.option_strings}
    # An optional value ("--sample [INTERVAL]") is taken only when it is one.
    assert cli._OPTIONAL_VALUE_OPTIONS == magics._PROFILE_OPTIONAL_VALUE_OPTIONS == {"--sample"}


def squeezed(text):
    return "".join(text.split())  # help is wrapped (and split at hyphens) to the terminal


@pytest.mark.parametrize("front", [CLI, CLI_PROFILE])
def test_the_command_help_has_each_options_one_text(front):
    argv = ["profile", "--help"] if front == CLI_PROFILE else ["--help"]
    p = subprocess.run([sys.executable, "-m", "giltracer", *argv], capture_output=True, text=True,
                       timeout=60, env=dict(os.environ, COLUMNS="100"))
    assert p.returncode == 0, p.stderr
    for o in options.of(front):
        if o.flags:
            assert squeezed(o.help) in squeezed(p.stdout), o.name


@pytest.mark.parametrize("front, name", [(CELL, "giltracer"), (PROFILE, "gilprofile")])
def test_the_magic_docs_have_each_options_one_text(ip, front, name):
    magic = ip.find_cell_magic(name)  # what %%giltracer? shows
    for o in options.of(front):
        assert squeezed(o.help) in squeezed(magic.__doc__), o.name


RANGED = [(o, front) for o in OPTIONS if o.minimum is not None for front in o.fronts
          if front != API]


@pytest.mark.parametrize("o, front", RANGED, ids=[f"{f} {o.flags[-1]}" for o, f in RANGED])
def test_a_value_out_of_range_has_the_same_message_everywhere(ip, tmp_path, capsys, o, front):
    flag, low = o.flags[-1], o.minimum - 1
    message = o.problem(low)
    assert message and flag in message
    if front in (CELL, PROFILE):
        with pytest.raises(UsageError) as e:
            if front == CELL:
                ip.run_cell_magic("giltracer", f"{flag} {low}", "pass")
            else:
                ip.run_line_magic("gilprofile", f"{flag} {low} len('a')")
        assert str(e.value) == message
    else:
        script = tmp_path / "never.py"
        script.write_text("open(__file__ + '.ran', 'w').close()\n")
        argv = (["profile"] if front == CLI_PROFILE else []) + [flag, str(low), str(script)]
        with pytest.raises(SystemExit) as e:
            cli.main(argv)
        assert e.value.code == 2
        assert capsys.readouterr().err.rstrip().endswith(f"error: {message}")
        assert not (tmp_path / "never.py.ran").exists()


@pytest.mark.parametrize("keyword", [o.keyword for o in options.of(API) if o.minimum])
def test_the_api_refuses_what_the_table_refuses(keyword):
    with pytest.raises(ValueError, match=f"{keyword} must be a positive integer or None"):
        giltracer.Trace(**{keyword: 0})
    with pytest.raises(ValueError, match="backend must be one of auto, hooks, bpf"):
        giltracer.Trace(backend="perf")


def test_one_default_cap():
    """The core has no default cap of its own (the table's is the one)."""
    import giltracer._core as core

    assert not hasattr(core, "DEFAULT_MAX_EVENTS")


def test_the_user_guide_and_the_docstring_quote_the_signature():
    """The user guide's and trace()'s quoted signature is Trace's, every keyword with its
    default (they had drifted: the guide lacked mode and sample_interval, the docstring
    crosscheck)."""
    import os
    import re

    text = giltracer.api.signature_text()
    assert text.startswith("giltracer.trace(functions=True, c_calls=True, max_events=5_000_000,")
    guide = os.path.join(os.path.dirname(__file__), "..", "docs", "user-guide.md")
    if os.path.exists(guide):  # a copied test tree has no docs
        with open(guide, encoding="utf-8") as f:
            assert "`" + text + "`" in re.sub(r"\s+", " ", f.read())
    assert text in re.sub(r"\s+", " ", giltracer.trace.__doc__)
