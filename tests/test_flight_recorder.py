"""keep="last": the call streams as a flight recorder.

A run whose early phase calls early_fn many times and whose last phase calls late_fn,
under a budget far below either phase: keep="first" shows early_fn in the timeline and
not late_fn, keep="last" the opposite (early_phase, the frame the last phase runs in,
only as a frame open at the window's start); Profile and Top functions count every call
of both in both modes; the kept window nests (no unmatched frame). The option's bad
values are refused with the fix in the API, the magics and the CLI."""

import subprocess
import sys
import warnings

import pytest

import giltracer
from giltracer import cli

BUDGET = 2000      # call events: both phases are far past it
N_EARLY = 20000    # early_fn calls (40 000 events)
N_LATE = 5000      # late_fn calls (10 000 events, more than the window holds)
CLIPPED_START, CLIPPED_END = 1, 2


def early_fn(i):
    return i + 1


def late_fn(i):
    return i * 2


def late_phase():
    for i in range(N_LATE):
        late_fn(i)


def early_phase():
    for i in range(N_EARLY):
        early_fn(i)
    late_phase()  # early_phase stays open while the last phase runs


def traced(keep):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the budget notice
        with giltracer.trace(max_events=BUDGET, keep=keep, c_calls=False) as t:
            early_phase()
    return t


def assert_nested(spans):
    """Each span lies inside the innermost open one of a smaller depth, one level up."""
    stack = []
    for start, end, name, depth, flags in spans:
        while stack and stack[-1][1] <= start and stack[-1][3] >= depth:
            stack.pop()
        while stack and stack[-1][3] >= depth:
            stack.pop()
        if stack:
            p = stack[-1]
            assert p[3] == depth - 1, (p, (start, end, name, depth))
            assert p[0] <= start and end <= p[1], (p, (start, end, name, depth))
        stack.append((start, end, name, depth))


@pytest.mark.parametrize("keep", ["first", "last"])
def test_the_timeline_keeps_the_chosen_end_and_the_profile_the_whole(keep):
    t = traced(keep)
    spans = t.spans("MainThread")
    names = [s[2] for s in spans]
    assert t.event_count <= BUDGET + 8192, t.event_count  # a block more at most
    if keep == "first":
        assert names.count("early_fn") > BUDGET // 4
        assert "late_fn" not in names
    else:
        assert names.count("late_fn") > BUDGET // 4
        assert "early_fn" not in names
        # Frames open when the window starts begin at its start, first of all spans.
        window = min(s[0] for s in spans)
        (ep,) = [s for s in spans if s[2] == "early_phase"]
        (lp,) = [s for s in spans if s[2] == "late_phase"]
        assert ep[0] == lp[0] == window
        assert ep[1] >= lp[1] >= max(s[1] for s in spans if s[2] == "late_fn")
        # No unmatched frames: every late_fn returned inside late_phase.
        for s in spans:
            if s[2] == "late_fn":
                assert s[4] & (CLIPPED_START | CLIPPED_END) == 0, s
                assert s[3] == lp[3] + 1, s
    assert_nested(spans)
    # Profile and Top functions cover the whole run, calls counted once.
    calls = {r.name: r.calls for r in t.functions()}
    assert calls.get("early_fn") == N_EARLY, calls
    assert calls.get("late_fn") == N_LATE, calls
    assert calls.get("late_phase") == 1 and calls.get("early_phase") == 1, calls
    # The profile's root is the thread's traced time, none of it lost to the cut.
    wall = next(s.wall_ns for s in t.summary() if s.name == "MainThread")
    root = t.profile("MainThread", outer_frames=True)
    assert abs(root.total_ns - wall) <= 0.01 * wall, (root.total_ns, wall)
    notice = t.budget_notice()
    assert notice and (("last calls" in notice) == (keep == "last")), notice
    assert ("keep last" in t.summary_text()) == (keep == "last")


def test_keep_last_marks_the_window_in_the_page(tmp_path):
    import pagedata

    t = traced("last")
    html = open(t.save(str(tmp_path / "t.html")), encoding="utf-8").read()
    p = pagedata.payload(html)
    assert p["meta"].get("keep") == "last", p["meta"]
    th = {x["name"]: x for x in p["threads"]}["MainThread"]
    kept = th.get("calls_kept_from")
    sp = th["spans"]
    # The window starts at the first kept span (the open frames'), after the thread's start.
    assert kept is not None and th["start"] < kept == min(sp["start"]), (th["start"], kept)
    first = pagedata.payload(open(traced("first").save(str(tmp_path / "f.html")),
                                  encoding="utf-8").read())
    assert "keep" not in first["meta"]
    assert all("calls_kept_from" not in x for x in first["threads"])


def test_a_bad_keep_is_refused_with_the_fix_in_the_api():
    with pytest.raises(ValueError, match="keep must be one of first, last; got 'middle'"):
        giltracer.trace(keep="middle")


def test_a_bad_keep_is_a_usage_error_in_the_magics(ip):
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match="--keep.*invalid choice.*'first', 'last'"):
        ip.run_cell_magic("giltracer", "--keep middle", "pass")


def test_a_bad_keep_is_refused_by_the_cli(tmp_path, capsys):
    script = tmp_path / "never.py"
    script.write_text("open(__file__ + '.ran', 'w').close()\n")
    with pytest.raises(SystemExit) as e:
        cli.main(["--keep", "middle", str(script)])
    assert e.value.code == 2
    assert "argument --keep: invalid choice: 'middle' (choose from 'first', 'last')" in \
        capsys.readouterr().err
    assert not (tmp_path / "never.py.ran").exists()


def test_the_cli_keeps_the_last_calls(tmp_path):
    script = tmp_path / "phases.py"
    script.write_text(
        "def early_fn(i):\n    return i + 1\n"
        "def late_fn(i):\n    return i * 2\n"
        f"for i in range({N_EARLY}):\n    early_fn(i)\n"
        f"for i in range({N_LATE}):\n    late_fn(i)\n")
    out = tmp_path / "phases.txt"
    p = subprocess.run([sys.executable, "-m", "giltracer", "--keep", "last", "--max-events",
                        str(BUDGET), "--no-c", "-o", str(out), str(script)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "keep last" in out.read_text()


@pytest.mark.parametrize("keep", ["first", "last"])
def test_the_live_notice_says_which_calls_the_timeline_keeps(keep):
    from giltracer import live

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with giltracer.trace(max_events=BUDGET, keep=keep, c_calls=False) as t:
            for i in range(N_EARLY):
                early_fn(i)
            p = t.progress()
    assert p["budget_reached"] and p["keep"] == keep, p
    notice = live.budget_notice(p, BUDGET)
    assert ("last calls" in notice) == (keep == "last"), notice
    assert ("until now" in notice) == (keep == "first"), notice


def test_threads_started_past_the_budget_keep_their_last_calls():
    import threading

    def worker(n):
        for i in range(n):
            early_fn(i)
        for i in range(3000):
            late_fn(i)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with giltracer.trace(max_events=BUDGET, keep="last", c_calls=False) as t:
            # One after the other: the later ones start with the budget spent.
            for k in range(3):
                th = threading.Thread(target=worker, args=(20000 + 5000 * k,), name=f"w{k}")
                th.start()
                th.join()
    for k in range(3):
        spans = t.spans(f"w{k}")
        names = [s[2] for s in spans]
        assert names.count("late_fn") >= 200 and "early_fn" not in names, (k, len(names))
        assert_nested(spans)
        calls = {r.name: r.calls for r in t.functions(f"w{k}")}
        assert calls.get("early_fn") == 20000 + 5000 * k and calls.get("late_fn") == 3000, calls


def test_the_cell_magic_keeps_the_last_calls(ip):
    ip.user_ns.update(early_phase=early_phase)
    ip.run_cell_magic("giltracer", f"--keep last --max-events {BUDGET} --no-c -q --var kept_t",
                      "early_phase()\n")
    t = ip.user_ns["kept_t"]
    names = [s[2] for s in t.spans("MainThread")]
    assert names.count("late_fn") > BUDGET // 4 and "early_fn" not in names
    calls = {r.name: r.calls for r in t.functions()}
    assert calls.get("early_fn") == N_EARLY and calls.get("late_fn") == N_LATE, calls
    # Folded, the profile starts at the cell's code, not at the kernel's frames above it.
    top = [c.name for c in t.profile().children]
    assert top == ["<module>"], top  # the cell's own code, grafted tree and window alike
    assert [c.name for c in t.profile(outer_frames=True).children] != top
