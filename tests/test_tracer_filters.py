"""include / exclude globs of the function tracer: on file paths, qualified function
names and C function names, and a note when include matched nothing."""

import threading
import time
import warnings

import giltracer


def cpu_work_gt17(n):
    time.sleep(0)
    return sorted(range(n))


def other_gt17(n):
    time.sleep(0)
    return cpu_work_gt17(n)


def span_names(t):
    return [s[2] for s in t.spans(threading.get_native_id())]


def test_include_matches_a_function_name_and_keeps_its_c_calls():
    with giltracer.trace(include=["*cpu_work_gt17*"]) as t:
        cpu_work_gt17(10)
        other_gt17(10)
    got = span_names(t)
    assert got.count("cpu_work_gt17") == 2
    assert "other_gt17" not in got
    # C calls made by an included function are kept; those of the others are not.
    assert got.count("time.sleep") == 2 and got.count("sorted") == 2
    assert not t.result.tracer_note


def test_include_matches_a_c_function_name():
    with giltracer.trace(include=["time.sleep"]) as t:
        other_gt17(10)
    got = span_names(t)
    assert got.count("time.sleep") == 2
    assert "other_gt17" not in got and "sorted" not in got


def test_exclude_drops_a_c_function_by_name():
    with giltracer.trace(exclude=["time.sleep"]) as t:
        other_gt17(10)
    got = span_names(t)
    assert "time.sleep" not in got
    assert got.count("sorted") == 1 and got.count("cpu_work_gt17") == 1


def test_exclude_drops_a_function_by_name():
    with giltracer.trace(exclude=["cpu_work_*"]) as t:
        other_gt17(10)
    got = span_names(t)
    assert "cpu_work_gt17" not in got and got.count("other_gt17") == 1


def test_include_that_matches_nothing_says_so():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with giltracer.trace(include=["*no_such_function_gt17*"]) as t:
            other_gt17(10)
    assert span_names(t) == []
    note = t.result.tracer_note
    assert note == ("include=['*no_such_function_gt17*'] matched no function and no file: "
                    "nothing was recorded")
    assert any(note in str(w.message) for w in caught)
    assert note in t.summary_text()
