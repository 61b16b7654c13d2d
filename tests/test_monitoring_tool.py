"""The tracer on sys.monitoring (3.12+): the profiler tool id it takes, and gives back.

giltracer registers as sys.monitoring.PROFILER_ID (2). Another tool holding that id makes
a trace with functions fail with a message naming the tool and what to do; a finished
trace leaves no callback behind (3.12 and 3.13's free_tool_id() keeps callbacks
registered; 3.14 has clear_tool_id()).
"""

import sys

import pytest

import giltracer

pytestmark = pytest.mark.skipif(sys.version_info < (3, 12),
                                reason="sys.monitoring is 3.12+ (older: PyEval_SetProfile)")

EVENTS = ("PY_START", "PY_RESUME", "PY_THROW", "PY_RETURN", "PY_YIELD", "PY_UNWIND",
          "CALL", "C_RETURN", "C_RAISE")


def leaf(n):
    return n + 1


def test_a_finished_trace_leaves_no_callback_registered():
    m = sys.monitoring
    with giltracer.trace() as t:
        leaf(1)
    assert t.event_count > 0
    assert m.get_tool(m.PROFILER_ID) is None
    m.use_tool_id(m.PROFILER_ID, "probe")
    try:
        left = {name: m.register_callback(m.PROFILER_ID, getattr(m.events, name), None)
                for name in EVENTS}
    finally:
        m.free_tool_id(m.PROFILER_ID)
    assert all(cb is None for cb in left.values()), left


def test_another_tool_holding_the_id_is_named_with_what_to_do():
    m = sys.monitoring
    m.use_tool_id(m.PROFILER_ID, "somebody-elses-profiler")
    try:
        with pytest.raises(RuntimeError) as e:
            giltracer.trace().start()
        msg = str(e.value)
        assert "'somebody-elses-profiler'" in msg, msg
        assert f"free_tool_id({m.PROFILER_ID})" in msg, msg
        assert "functions=False" in msg, msg
        # What the message offers works: the GIL probe alone needs no tool id.
        with giltracer.trace(functions=False) as t:
            leaf(2)
        assert t.gil_known or t.backend_reason
        assert m.get_tool(m.PROFILER_ID) == "somebody-elses-profiler"
    finally:
        m.free_tool_id(m.PROFILER_ID)
    with giltracer.trace() as t:
        leaf(3)
    assert any(s.name for s in t.threads)
