"""The cell's threads and the frames above the cell, decided once by the merge and used by
every view: background threads (not started during the trace, GIL held under 1 % or 1 ms) and the frames
that were open when the trace started are folded out of the summary, the text, the
profile and the function rows by default, and given back on request."""

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

import giltracer

IDLE = ("bg-a", "bg-b", "bg-c")


def cpu(n):
    s = 0
    for i in range(n):
        s += i
    return s


def traced_cell():
    """Traced as a cell is: from inside a call (the kernel's stack stands for it here)."""
    with giltracer.trace(sched=False) as t:
        with ThreadPoolExecutor(2, thread_name_prefix="pool") as ex:
            list(ex.map(cpu, [100_000] * 4))
    return t


@pytest.fixture(scope="module")
def trace():
    release = threading.Event()
    idlers = [threading.Thread(target=release.wait, name=n) for n in IDLE]
    for th in idlers:
        th.start()
    try:
        return traced_cell()
    finally:
        release.set()
        for th in idlers:
            th.join()


def test_background_threads_are_flagged_once(trace):
    flags = {t.name: t.background for t in trace.threads}
    assert all(flags[n] for n in IDLE), flags
    assert not flags["MainThread"] and not any(v for k, v in flags.items() if k.startswith("pool")), flags
    payload = json.loads(trace.result.payload())  # the viewer reads the same flag
    assert {t["name"] for t in payload["threads"] if t.get("background")} == {
        n for n, v in flags.items() if v}


def test_summary_lists_the_cells_threads(trace):
    names = [s.name for s in trace.summary()]
    assert "MainThread" in names and sum(n.startswith("pool") for n in names) == 2
    assert not set(IDLE) & set(names)
    every = trace.summary(all_threads=True)
    assert set(IDLE) <= {s.name for s in every} and all(s.background for s in every if s.name in IDLE)


def test_text_table_puts_background_threads_on_one_line(trace):
    text = trace.summary_text()
    rows = [line for line in text.splitlines() if any(n in line for n in IDLE)]
    assert len(rows) == 1 and "background thread" in rows[0], text
    assert all(n in rows[0] for n in IDLE)
    full = trace.summary_text(all_threads=True)
    assert "background thread" not in full and all(n in full for n in IDLE)


def test_profile_starts_at_the_traced_code(trace):
    kids = {c.name for c in trace.profile().children}
    # the block's own calls (co_name before 3.11: "_bootstrap")
    assert "traced_cell" not in kids and {"Thread._bootstrap", "_bootstrap"} & kids, kids
    outer = [c.name for c in trace.profile(outer_frames=True).children]
    assert "traced_cell" not in outer  # open at the start, below the test's frames
    assert "traced_cell" in {n.name for n in trace.profile(outer_frames=True).walk()}
    assert "traced_cell" not in {r.name for r in trace.functions()}
    assert "traced_cell" in {r.name for r in trace.functions(outer_frames=True)}
    mine = trace.profile(trace.threads[0].tid if trace.threads[0].name == "MainThread" else "MainThread")
    assert "traced_cell" not in {c.name for c in mine.children}


def test_background_threads_leave_the_merged_profile(trace):
    cell = trace.profile()
    every = trace.profile(all_threads=True)
    assert every.total_ns > cell.total_ns
    assert cell.total_ns == sum(trace.profile(t.tid).total_ns for t in trace.threads if not t.background)
    assert cell.name.startswith(f"{len(trace.summary())} threads")
    assert not {r.name for r in trace.functions()} & {"Event.wait"} or all(
        r.calls for r in trace.functions() if r.name == "Event.wait")
    assert trace.profile_text().count("background thread") == 1


def test_blame_leaves_out_background_waiters():
    """A background thread that waited for the GIL now and then (a poller waking during a
    busy cell) is folded in the blame rows too, text and API; all_threads gives it back."""
    stop = threading.Event()

    def poller():  # wakes every 20 ms for a look: waits behind the CPU-bound threads
        while not stop.wait(0.02):
            pass

    th = threading.Thread(target=poller, name="poller")
    th.start()
    try:
        with giltracer.trace(sched=False) as t:
            with ThreadPoolExecutor(2, thread_name_prefix="pool") as ex:
                list(ex.map(cpu, [300_000] * 4))
    finally:
        stop.set()
        th.join()
    poll = next(x for x in t.threads if x.name == "poller")
    if not poll.background:
        pytest.skip("the poller held the GIL over 1 ms in this run (a busy machine)")
    everyone = t.blame(all_threads=True)
    if not any(b.waiter == poll.tid for b in everyone):
        pytest.skip("the poller never waited for the GIL in this run")
    assert not any(b.waiter == poll.tid for b in t.blame())
    assert f"  poller ({poll.tid}) waited" not in t.summary_text(top=1000)
    assert f"  poller ({poll.tid}) waited" in t.summary_text(top=1000, all_threads=True)


class ToolThread(threading.Thread):
    """A thread of giltracer's own, as the live meter's is (giltracer_service)."""

    giltracer_service = True


def tool_spin(stop):
    while not stop.is_set():
        cpu(1000)


def test_giltracers_own_threads_are_in_no_view_and_their_cost_is_a_note(tmp_path):
    """A thread of giltracer's own that takes the GIL from the traced code (a live meter
    redrawing) is no holder, waiter or row anywhere, even with all_threads; the wait it
    caused is its cost, counted once in the note."""
    from conftest import FREE_THREADED

    stop = threading.Event()
    tool = ToolThread(target=tool_spin, args=(stop,), name="own-meter", daemon=True)
    tool.start()
    try:
        with giltracer.trace() as t:
            with ThreadPoolExecutor(1, thread_name_prefix="pool") as ex:
                list(ex.map(cpu, [300_000] * 4))
            cpu(1_000_000)
    finally:
        stop.set()
        tool.join()
    tid = tool.native_id
    assert tid not in {x.tid for x in t.threads}
    assert tid not in {s.tid for s in t.summary(all_threads=True)}
    assert not [b for b in t.blame(all_threads=True) if tid in (b.waiter, b.holder)]
    assert "tool_spin" not in {r.name for r in t.functions(all_threads=True, outer_frames=True)}
    assert "tool_spin" not in [n.name for n in t.profile(all_threads=True, outer_frames=True).walk()]
    payload = json.loads(t.result.payload())
    assert "own-meter" not in [th["name"] for th in payload["threads"]]
    for text in (t.summary_text(top=1000, all_threads=True), t.profile_text(all_threads=True)):
        rest = [ln for ln in text.splitlines() if not ln.startswith("Note: giltracer's own")]
        assert not [ln for ln in rest if "own-meter" in ln or str(tid) in ln], text
    t.save(str(tmp_path / "t.json"))
    assert f'"tid":{tid}' not in (tmp_path / "t.json").read_text().replace(" ", "")
    # Its figures and cost: once, in the note (text, viewer) and Trace.tool_threads.
    (own,) = t.tool_threads
    assert own.tid == tid and own.name == "own-meter"
    cost = t.result.tool()
    note = t.tool_note
    assert note and note.startswith("giltracer's own threads (own-meter) ") and "left out" in note
    assert payload["meta"]["tool_note"] == note
    assert f"Note: {note}" in t.summary_text()
    if not FREE_THREADED:
        # Two CPU-bound threads and the spinner share one GIL: they waited for it.
        assert own.held_ns > 0 and cost["caused_ns"] > 0 and cost["caused_waits"] > 0, cost
        assert f"held the GIL {own.held_ns / 1e6:.3f} ms" in note, note
        waited = sum(s.wait_ns for s in t.summary(all_threads=True))
        assert cost["caused_ns"] <= waited, (cost, waited)
