"""The tracer on sys.monitoring (3.12+): the tool id it takes, and gives back.

giltracer takes a free tool id that no well-known tool claims (3, then 4; the debugger's,
coverage's, the profiler's and the optimizer's only when those are taken), so a program
traced may start its own debugger, coverage or profiler (cProfile). A program that asks
for the very id giltracer holds gets it: giltracer moves to another free id, or, none
free, gives its id up and says so in the note. With every id taken at start, the trace
records no calls and says so. A finished trace leaves no callback behind (3.12 and
3.13's free_tool_id() keeps callbacks registered; 3.14 has clear_tool_id()).
"""

import cProfile
import pstats
import sys
import threading

import pytest

import giltracer

pytestmark = pytest.mark.skipif(sys.version_info < (3, 12),
                                reason="sys.monitoring is 3.12+ (older: PyEval_SetProfile)")

EVENTS = ("PY_START", "PY_RESUME", "PY_THROW", "PY_RETURN", "PY_YIELD", "PY_UNWIND",
          "CALL", "C_RETURN", "C_RAISE")
IDS = range(6)
USE_TOOL_ID = sys.monitoring.use_tool_id if sys.version_info >= (3, 12) else None


def leaf(n):
    return n + 1


def leaves(n):
    for i in range(n):
        leaf(i)


def calls_of(name, t):
    return sum(1 for s in t.spans(threading.get_native_id()) if s[2] == name)


def held_by_giltracer():
    return [i for i in IDS if sys.monitoring.get_tool(i) == "giltracer"]


def take_free_ids(but=()):
    """Every free tool id but `but`, as another tool's: the ids taken."""
    m = sys.monitoring
    taken = [i for i in IDS if i not in but and m.get_tool(i) is None]
    for i in taken:
        m.use_tool_id(i, f"other-{i}")
    return taken


def free_ids(ids):
    for i in ids:
        sys.monitoring.free_tool_id(i)


def test_a_finished_trace_leaves_no_callback_registered():
    m = sys.monitoring
    with giltracer.trace() as t:
        held = held_by_giltracer()
        leaf(1)
    assert t.event_count > 0
    assert len(held) == 1 and held[0] not in (m.DEBUGGER_ID, m.COVERAGE_ID, m.PROFILER_ID,
                                              m.OPTIMIZER_ID), held
    assert held_by_giltracer() == [] and m.use_tool_id is USE_TOOL_ID
    m.use_tool_id(held[0], "probe")
    try:
        left = {name: m.register_callback(held[0], getattr(m.events, name), None)
                for name in EVENTS}
    finally:
        m.free_tool_id(held[0])
    assert all(cb is None for cb in left.values()), left


def test_cprofile_inside_the_trace_runs_and_both_record():
    with giltracer.trace() as t:
        pr = cProfile.Profile()
        pr.enable()  # sys.monitoring.PROFILER_ID: free
        leaves(40)
        pr.disable()
    assert sum(v[1] for k, v in pstats.Stats(pr).stats.items() if k[2] == "leaf") == 40
    assert calls_of("leaf", t) == 40
    assert t.result.tracer_note is None


def test_the_id_it_holds_asked_for_is_handed_over_and_the_trace_goes_on():
    m = sys.monitoring
    with giltracer.trace() as t:
        leaves(5)
        [mine] = held_by_giltracer()
        m.use_tool_id(mine, "the-programs-tool")  # succeeds: giltracer moved
        try:
            moved = held_by_giltracer()
            leaves(7)
        finally:
            m.free_tool_id(mine)
    assert len(moved) == 1 and moved[0] != mine, moved
    assert calls_of("leaf", t) == 12
    assert t.result.tracer_note is None
    assert held_by_giltracer() == [] and m.use_tool_id is USE_TOOL_ID


def test_the_id_it_holds_asked_for_with_none_other_free_is_given_up_and_noted():
    m = sys.monitoring
    taken = []
    try:
        with giltracer.trace() as t:
            [mine] = held_by_giltracer()
            taken = take_free_ids(but=(mine,))
            leaves(5)
            m.use_tool_id(mine, "the-programs-tool")
            taken.append(mine)
            assert held_by_giltracer() == []
            leaves(7)
        assert m.get_tool(mine) == "the-programs-tool"
    finally:
        free_ids(taken)
    assert calls_of("leaf", t) == 5
    note = t.result.tracer_note
    assert note and "asked for the sys.monitoring tool id" in note and "gave it up" in note, note
    assert held_by_giltracer() == [] and m.use_tool_id is USE_TOOL_ID


def test_every_id_taken_at_start_records_no_calls_and_says_why():
    taken = take_free_ids()
    try:
        with giltracer.trace() as t:
            leaves(3)
        assert held_by_giltracer() == []
        assert all(sys.monitoring.get_tool(i) == f"other-{i}" for i in taken)
    finally:
        free_ids(taken)
    assert calls_of("leaf", t) == 0
    note = t.result.tracer_note
    assert note and "every sys.monitoring tool id was in use" in note, note
    assert "'other-3'" in note, note
    assert t.gil_known or t.backend_reason
    with giltracer.trace() as t:  # freed: calls again
        leaves(3)
    assert calls_of("leaf", t) == 3
