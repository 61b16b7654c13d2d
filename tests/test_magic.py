"""%%giltracer in a real IPython shell: display bundle, errors, options."""

import html
import os

import pagedata
import pytest
from conftest import BLAME_HEAD, PROFILE_HEAD, TABLE_WORDS, TOP_CAUSED, TOP_HELD, TOP_WAIT

IPython = pytest.importorskip("IPython")
from IPython.core.error import UsageError  # noqa: E402


CELL = """
import threading
def work():
    return sum(i * i for i in range(20000))
ts = [threading.Thread(target=work, name=f"w{i}") for i in range(2)]
for t in ts: t.start()
for t in ts: t.join()
result = 42
"""


def test_cell_shows_viewer_and_table(ip, outputs):
    ip.run_cell_magic("giltracer", "", CELL)
    assert ip.user_ns["result"] == 42  # the cell ran in the user namespace
    (bundle,) = outputs
    assert bundle["text/html"].startswith("<iframe srcdoc=")
    assert "gt-data" in bundle["text/html"]  # the viewer page, escaped into srcdoc
    assert "<script" not in bundle["text/html"]  # ... so nothing leaks into the notebook
    assert "w0" in bundle["text/plain"] and TABLE_WORDS[0] in bundle["text/plain"]


def test_cell_that_raises_shows_trace_then_reraises(ip, outputs):
    with pytest.raises(ZeroDivisionError):
        ip.run_cell_magic("giltracer", "", "x = 1\n1/0\n")
    assert len(outputs) == 1 and "text/plain" in outputs[0]
    assert ip.user_ns["x"] == 1


def test_output_file(ip, outputs, tmp_path):
    out = tmp_path / "cell.json"
    ip.run_cell_magic("giltracer", f"-o {out} --no-sched", "y = [len('a') for _ in range(10)]")
    assert out.exists() and out.stat().st_size > 0


@pytest.mark.parametrize("magic", ["giltracer", "gilprofile"])
def test_theme_reaches_the_viewer_and_the_saved_page(ip, outputs, tmp_path, monkeypatch, magic):
    import giltracer.api as api

    themes, save = [], api.Trace.save
    def spy(self, path, format=None, tab=None, theme=None):
        themes.append((os.path.basename(os.fspath(path)), theme))
        return save(self, path, format, tab, theme)
    monkeypatch.setattr(api.Trace, "save", spy)
    out = tmp_path / "cell.html"
    ip.run_cell_magic(magic, f"-o {out} --theme dark --no-sched", "y = [len('a') for _ in range(10)]")
    assert sorted(themes) == [("cell.html", "dark"), ("trace.html", "dark")]  # -o and the inline viewer
    assert len(outputs) == 1


def test_save_rejects_an_unknown_theme(tmp_path):
    import giltracer

    with giltracer.trace(backend="hooks", sched=False) as t:
        pass
    with pytest.raises(ValueError, match="theme must be one of auto, light, dark"):
        t.save(tmp_path / "t.html", theme="sepia")
    assert t.save(tmp_path / "t.html", theme="light")


def test_var_keeps_the_trace_for_the_next_cells(ip, outputs):
    ip.user_ns.pop("cell_trace", None)
    ip.run_cell_magic("giltracer", "--var cell_trace", CELL)
    t = ip.user_ns["cell_trace"]
    assert {"w0", "w1"} <= {row.name for row in t.summary()}
    assert t.summary_text() == outputs[0]["text/plain"]


def test_var_is_set_when_the_cell_raises(ip, outputs):
    ip.user_ns.pop("failed_trace", None)
    with pytest.raises(ZeroDivisionError):
        ip.run_cell_magic("giltracer", "--quiet --var failed_trace", "1/0")
    assert ip.user_ns["failed_trace"].duration_ns > 0


@pytest.mark.parametrize("line, message", [
    ("--max-events 0", "max-events"),
    ("--backend perf", "backend"),
    ("-o trace.png", ".html"),
    ("--height 5", "height"),
    ("--no-such-option", "unrecognized"),
    ("--var 1t", "variable name"),
    ("--theme purple", "invalid choice"),
])
def test_bad_options_are_usage_errors(ip, outputs, line, message):
    with pytest.raises(UsageError, match=message):
        ip.run_cell_magic("giltracer", line, "pass")
    assert not outputs


# ------------------------------------------------------------------ %gilprofile
PAIR = """
import threading, time
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
def pair(n):
    ts = [threading.Thread(target=fib, args=(n,), name=f"p{i}") for i in range(2)]
    for t in ts: t.start()
    for t in ts: t.join()
    return fib(n)
"""


@pytest.fixture
def with_pair(ip):
    ip.run_cell(PAIR)
    return ip


def check_profile_bundle(bundle):
    assert bundle["text/html"].startswith("<iframe srcdoc=")
    assert pagedata.data(html.unescape(bundle["text/html"]))["view"] == "profile"  # opens on Profile
    assert "<script" not in bundle["text/html"]
    text = bundle["text/plain"]
    assert TOP_WAIT in text and TOP_HELD in text
    assert BLAME_HEAD in text  # the blame rows
    return text


def test_line_magic_returns_the_value_and_shows_the_profile(with_pair, outputs):
    value = with_pair.run_line_magic("gilprofile", "pair(16)")
    assert value == 987
    (bundle,) = outputs
    text = check_profile_bundle(bundle)
    assert "fib" in text and "p0" in text


def test_line_magic_assignment_and_verbatim_statement(with_pair, outputs, capsys):
    with_pair.run_cell('x = %gilprofile len("a  b")')
    assert with_pair.user_ns["x"] == 4  # the statement's spaces were kept
    assert with_pair.run_line_magic("gilprofile", "-- -1") == -1  # `--` ends the options
    with_pair.run_cell("r = %gilprofile y = 5")
    assert with_pair.user_ns["y"] == 5 and with_pair.user_ns["r"] is None  # a statement: None
    assert len(outputs) == 3


def test_line_magic_sees_local_variables(with_pair, outputs):
    with_pair.run_cell("def g():\n    k = 7\n    v = %gilprofile -q k * 6\n    return v\nz = g()\n")
    assert with_pair.user_ns["z"] == 42


def test_cell_magic_options(with_pair, outputs, tmp_path, capsys):
    out = tmp_path / "p.html"
    with_pair.run_cell_magic("gilprofile", f"--top 2 --sort held --no-c --no-sched -o {out}",
                             "r = pair(15)\ntime.sleep(0.01)\n")
    assert with_pair.user_ns["r"] == 610
    (bundle,) = outputs
    text = check_profile_bundle(bundle)
    assert text.index(TOP_HELD) < text.index(TOP_WAIT)
    assert "time.sleep" not in text  # --no-c
    first = text.split(TOP_HELD)[1].split("Top functions")[0]
    rows = [ln for ln in first.splitlines() if ln.strip() and not ln.startswith("  function")]
    assert 1 <= len(rows) <= 2  # --top 2
    assert "n/a" in text  # --no-sched: no off-CPU column data
    assert pagedata.data(out.read_text(encoding="utf-8"))["view"] == "profile"
    assert f"saved {out}" in capsys.readouterr().out


def test_gilprofile_var_keeps_the_trace(with_pair, outputs):
    for name in ("line_trace", "cell_trace", "failed_trace"):
        with_pair.user_ns.pop(name, None)
    assert with_pair.run_line_magic("gilprofile", "--var line_trace pair(14)") == 377
    t = with_pair.user_ns["line_trace"]
    assert {"p0", "p1"} <= {row.name for row in t.summary()}
    assert t.profile_text() == outputs[0]["text/plain"]  # the Trace the viewer showed
    with_pair.run_cell_magic("gilprofile", "--var cell_trace", "r = pair(13)\n")
    assert with_pair.user_ns["cell_trace"].functions()[0].total_ns > 0
    with pytest.raises(ZeroDivisionError):
        with_pair.run_line_magic("gilprofile", "--var failed_trace 1 / 0")
    assert with_pair.user_ns["failed_trace"].duration_ns > 0


def test_statement_that_raises_shows_profile_then_reraises(with_pair, outputs, capsys):
    with pytest.raises(ZeroDivisionError):
        with_pair.run_line_magic("gilprofile", "pair(12) / 0")
    assert len(outputs) == 1 and "fib" in outputs[0]["text/plain"]
    assert "raised ZeroDivisionError" in capsys.readouterr().out
    with pytest.raises(KeyError):
        with_pair.run_cell_magic("gilprofile", "", "w = 3\n{}['k']\n")
    assert len(outputs) == 2 and with_pair.user_ns["w"] == 3


@pytest.mark.parametrize("line, message", [
    ("--sort bogus f()", "sort"),
    ("--top 0 f()", "--top must be a positive number"),
    ("--backend perf f()", "backend"),
    ("-o trace.png f()", ".html"),
    ("--no-such-option f()", "unrecognized"),
    ("-q", "needs a statement"),
    ("-q f(", "not a Python statement"),
    ("--var 1t f()", "variable name"),
])
def test_gilprofile_bad_options_are_usage_errors(ip, outputs, line, message):
    with pytest.raises(UsageError, match=message):
        ip.run_line_magic("gilprofile", line)
    assert not outputs


def test_gilprofile_help_lists_the_options(ip):
    doc = ip.find_line_magic("gilprofile").__doc__
    for option in ("-o", "--backend", "--top", "--sort", "--no-c", "--no-sched", "-q", "--var"):
        assert option in doc


# ------------------------------------------------------------------ in a real kernel
def test_magics_in_a_jupyter_kernel(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    cells = [
        "%load_ext giltracer",
        PAIR,
        "x = %gilprofile pair(16)\nprint('value', x)",
        "%%gilprofile --top 3 --sort caused\nr = pair(15)",
        "%gilprofile --sort bogus pair(3)",
        "%gilprofile 1 / 0",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    out = [c.get("outputs", []) for c in nb.cells]
    assert any("value 987" in o.get("text", "") for o in out[2])
    for i in (2, 3, 5):
        (shown,) = [o for o in out[i] if o.get("output_type") == "display_data"]
        assert shown["data"]["text/html"].startswith("<iframe srcdoc=")
        assert TOP_HELD in shown["data"]["text/plain"]
    assert TOP_CAUSED in out[3][0]["data"]["text/plain"]
    # IPython shows a UsageError as one line on stderr, not as a traceback
    assert "UsageError: argument --sort: invalid choice" in "".join(o.get("text", "") for o in out[4])
    assert not [o for o in out[4] if o.get("output_type") == "display_data"]
    (err,) = [o for o in out[5] if o.get("output_type") == "error"]
    assert err["ename"] == "ZeroDivisionError"  # shown after its profile


def test_over_the_budget_the_page_is_saved_and_linked(ip, outputs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the kernel's working directory: the notebook's
    ip.run_cell_magic("giltracer", "--no-sched --max-output 50k --var big", CELL)
    (bundle,) = outputs
    (saved,) = tmp_path.glob("giltracer-*.html")
    page = saved.read_text(encoding="utf-8")
    assert page == ip.user_ns["big"].to_html() and len(page) > 50_000
    assert "<iframe" not in bundle["text/html"] and "gt-data" not in bundle["text/html"]
    assert f'<a href="{saved.name}"' in bundle["text/html"]
    assert "over the 50 kB inline budget" in bundle["text/html"]
    line, table = bundle["text/plain"].split("\n", 1)
    assert "over the 50 kB inline budget" in line and saved.name in line
    assert table == ip.user_ns["big"].summary_text()  # ... plus the summary
    assert "w0" in bundle["text/html"]
    assert len(bundle["text/html"]) < 50_000


def test_under_the_budget_the_viewer_is_inline(ip, outputs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ip.run_cell_magic("giltracer", "--no-sched --max-output 20MB", CELL)
    assert outputs[0]["text/html"].startswith("<iframe srcdoc=")
    assert not list(tmp_path.glob("giltracer-*.html"))


def test_an_html_output_file_is_the_linked_page(ip, outputs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ip.run_cell_magic("giltracer", "--no-sched --max-output 1k -o cell.html", CELL)
    assert [p.name for p in tmp_path.iterdir()] == ["cell.html"]  # saved once
    assert '<a href="cell.html"' in outputs[0]["text/html"]


@pytest.mark.parametrize("size, expect", [("20MB", 20_000_000), ("500k", 500_000), ("1000", 1000),
                                          ("1.5 M", 1_500_000), ("1MiB", 1 << 20), ("2gb", 2 * 10**9)])
def test_sizes(size, expect):
    from giltracer.api import parse_size

    assert parse_size(size) == expect


@pytest.mark.parametrize("size", ["", "MB", "20 parsecs", "-5k", "0"])
def test_bad_max_output_is_a_usage_error(ip, outputs, size):
    with pytest.raises(UsageError, match="--max-output"):
        ip.run_cell_magic("giltracer", f"--max-output '{size}'", "pass")
    assert not outputs


def test_last_and_to_html_and_a_trace_as_the_last_expression(ip, outputs):
    import giltracer

    ip.run_cell_magic("giltracer", "--quiet --no-sched --var cell_t", CELL)
    assert not outputs  # quiet
    t = giltracer.last()
    assert t is ip.user_ns["cell_t"]
    page = t.to_html()
    assert page.startswith("<!DOCTYPE html>") and pagedata.data(page)["version"] == 2 and 'id="gt-bin"' in page
    assert pagedata.data(t.to_html(tab="profile"))["view"] == "profile"
    data, _ = ip.display_formatter.format(t)  # what a cell ending in `t` shows
    assert data["text/html"].startswith("<iframe srcdoc=") and "gt-data" in data["text/html"]
    assert data["text/plain"] == t.summary_text()
    with giltracer.trace(backend="hooks", sched=False) as t2:
        sum(range(10))
    assert giltracer.last() is t2
    assert giltracer.Trace()._repr_mimebundle_() is None  # not run: the plain repr


# ------------------------------------------------------------------ -q and --max-output on both magics
def test_q_is_quiet_on_giltracer(ip, outputs, tmp_path, capsys):
    """-q/--quiet as in IPython's own magics: no viewer and no messages; the trace is
    still there (--var, giltracer.last()) and a raising cell still re-raises."""
    import giltracer

    out = tmp_path / "cell.json"
    ip.run_cell_magic("giltracer", f"-o {out} --no-sched", "y = 1")
    assert f"saved {out}" in capsys.readouterr().out  # without -q: the message ...
    assert len(outputs) == 1 and outputs[0]["text/html"].startswith("<iframe srcdoc=")  # ... the viewer
    for quiet in ("-q", "--quiet"):
        ip.run_cell_magic("giltracer", f"{quiet} -o {out} --no-sched --var quiet_t", "y = 2")
        assert capsys.readouterr().out == "" and len(outputs) == 1  # neither
        assert ip.user_ns["quiet_t"] is giltracer.last() and ip.user_ns["quiet_t"].event_count > 0
    with pytest.raises(ZeroDivisionError):
        ip.run_cell_magic("giltracer", "-q --no-sched", "1/0")
    assert "raised" not in capsys.readouterr().out and len(outputs) == 1


def test_q_is_quiet_on_gilprofile(with_pair, outputs, tmp_path, capsys):
    out = tmp_path / "p.json"
    assert with_pair.run_line_magic("gilprofile", f"-o {out} --no-sched pair(5)") == 5
    assert f"saved {out}" in capsys.readouterr().out and len(outputs) == 1
    assert with_pair.run_line_magic("gilprofile", f"-q -o {out} --no-sched pair(5)") == 5
    with_pair.run_cell_magic("gilprofile", f"--quiet -o {out} --no-sched", "r = pair(5)")
    assert capsys.readouterr().out == "" and len(outputs) == 1
    assert out.stat().st_size > 0 and with_pair.user_ns["r"] == 5


def test_gilprofile_options_with_values_end_before_the_statement(with_pair, outputs):
    assert with_pair.run_line_magic("gilprofile", "--theme dark --max-output 20MB pair(6)") == 8
    assert with_pair.run_line_magic("gilprofile", "--max-output=20MB --theme=light pair(7)") == 13
    assert len(outputs) == 2 and all(b["text/html"].startswith("<iframe srcdoc=") for b in outputs)


def check_linked(bundle, saved, budget):
    html_out, text = bundle["text/html"], bundle["text/plain"]
    assert "<iframe" not in html_out and "gt-data" not in html_out
    assert f'<a href="{saved.name}"' in html_out and f"over the {budget} inline budget" in html_out
    line, rest = text.split("\n", 1)
    assert f"over the {budget} inline budget" in line and saved.name in line
    return rest


def test_gilprofile_over_the_budget_saves_and_links(with_pair, outputs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the kernel's working directory: the notebook's
    value = with_pair.run_line_magic("gilprofile", "--no-sched --max-output 50k --var big pair(15)")
    assert value == 610
    (saved,) = tmp_path.glob("giltracer-*.html")
    page = saved.read_text(encoding="utf-8")
    big = with_pair.user_ns["big"]
    assert page == big.to_html(tab="profile") and len(page) > 50_000  # the Profile tab's page
    rest = check_linked(outputs[0], saved, "50 kB")
    assert rest == big.profile_text()  # ... plus the profile tables
    assert TOP_WAIT in outputs[0]["text/html"]
    assert len(outputs[0]["text/html"]) < 50_000
    with_pair.run_cell_magic("gilprofile", "--no-sched --max-output 1k --top 3 --sort held",
                             "r = pair(12)")
    (second,) = set(tmp_path.glob("giltracer-*.html")) - {saved}
    assert check_linked(outputs[1], second, "1 kB").startswith(
        f"{PROFILE_HEAD} %%gilprofile cell")
    assert TOP_HELD in outputs[1]["text/plain"]


def test_gilprofile_under_the_budget_is_inline(with_pair, outputs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with_pair.run_line_magic("gilprofile", "--no-sched --max-output 20MB pair(12)")
    with_pair.run_cell_magic("gilprofile", "--no-sched", "r = pair(12)")  # the default 20MB
    assert [b["text/html"][:15] for b in outputs] == ["<iframe srcdoc="] * 2
    assert not list(tmp_path.iterdir())


def test_gilprofile_html_output_file_is_the_linked_page(with_pair, outputs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with_pair.run_cell_magic("gilprofile", "--no-sched --max-output 1k -o cell.html", "r = pair(12)")
    assert [p.name for p in tmp_path.iterdir()] == ["cell.html"]  # saved once
    assert '<a href="cell.html"' in outputs[0]["text/html"]
    assert pagedata.data((tmp_path / "cell.html").read_text(encoding="utf-8"))["view"] == "profile"


@pytest.mark.parametrize("size, message", [
    ("MB", "not a size: 'MB'; use e.g. 20MB, 500k"),
    ("20parsecs", "not a size"),
    ("0", "must be a positive size, e.g. --max-output 20MB"),
])
def test_gilprofile_bad_max_output_is_a_usage_error(ip, outputs, size, message):
    with pytest.raises(UsageError, match=f"--max-output.*{message}"):
        ip.run_line_magic("gilprofile", f"--max-output {size} len('a')")
    with pytest.raises(UsageError, match=f"--max-output.*{message}"):
        ip.run_cell_magic("gilprofile", f"--max-output {size}", "x = 1")
    assert not outputs


def test_help_lists_q_and_max_output(ip):
    for magic in (ip.find_cell_magic("giltracer"), ip.find_line_magic("gilprofile")):
        assert "-q, --quiet" in magic.__doc__ and "--max-output SIZE" in magic.__doc__


def test_the_saved_page_never_follows_a_link_planted_at_its_name(ip, outputs, tmp_path, monkeypatch):
    # The page's name is predictable (the time): a link planted there must not be followed
    # (it would create or overwrite its target), and a file there must not be overwritten.
    from giltracer import render

    monkeypatch.setattr(render.time, "strftime", lambda fmt: "20261129-000000")
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    victim = elsewhere / "victim.txt"  # not there yet: a dangling link is not "taken"
    (work / "giltracer-20261129-000000.html").symlink_to(victim)
    (work / "giltracer-20261129-000000-2.html").write_text("an earlier page")
    monkeypatch.chdir(work)
    ip.run_cell_magic("giltracer", "--no-sched --max-output 1k --var big", CELL)
    assert not victim.exists()
    assert (work / "giltracer-20261129-000000-2.html").read_text() == "an earlier page"
    saved = work / "giltracer-20261129-000000-3.html"
    assert saved.read_text(encoding="utf-8") == ip.user_ns["big"].to_html()
    assert f'<a href="{saved.name}"' in outputs[0]["text/html"]
