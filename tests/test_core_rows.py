"""The core's rows are the API dataclasses' keyword arguments: each key the core gives is a
field, and every field without a default is given (the dataclasses are the one declaration
of these shapes; _core.pyi types the rows as plain dicts)."""

import dataclasses
import threading
import time

import giltracer
from giltracer.rows import BlameRow, ThreadInfo, ThreadSummary

# Keys the API adds itself, after the core.
ADDED_BY_API = {"stop_the_world_ns", "park_kinds", "kinds", "kind"}


def fields(cls):
    every = {f.name for f in dataclasses.fields(cls)}
    required = {f.name for f in dataclasses.fields(cls)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    return every, required


def check(rows, cls):
    every, required = fields(cls)
    assert rows, cls.__name__
    for row in rows:
        keys = set(row)
        assert keys <= every, (cls.__name__, sorted(keys - every))
        assert required <= keys, (cls.__name__, sorted(required - keys))
        assert not keys & ADDED_BY_API, (cls.__name__, keys & ADDED_BY_API)


def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_rows_match_the_dataclasses():
    with giltracer.trace(backend="hooks") as t:
        workers = [threading.Thread(target=spin, args=(0.15,)) for _ in range(2)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    r = t.result
    check(r.threads(), ThreadInfo)
    check(r.summary(), ThreadSummary)
    if t.gil_known and not t.free_threaded:  # two spinning threads wait on each other
        check(r.blame(), BlameRow)
    # and the API builds its rows from them
    assert len(t.summary(all_threads=True)) == len(r.summary())


def stub_rows():
    """{class name: [field, ...]} of the NamedTuple classes in _core.pyi."""
    import ast
    import pathlib
    stub = pathlib.Path(giltracer.__file__).with_name("_core.pyi")
    if not stub.exists():  # an install without the stub: the source tree's
        stub = pathlib.Path(__file__).parents[1] / "magics" / "giltracer" / "_core.pyi"
    out = {}
    for node in ast.parse(stub.read_text()).body:
        if isinstance(node, ast.ClassDef) and any(
                isinstance(b, ast.Name) and b.id == "NamedTuple" for b in node.bases):
            out[node.name] = [s.target.id for s in node.body if isinstance(s, ast.AnnAssign)]
    return out


def test_positional_rows_are_the_stubs_named_tuples():
    from giltracer import _core
    rows = stub_rows()
    assert {"Span", "Interval", "Function", "ProfileNode", "WhatIf"} <= set(rows)
    for name, names in rows.items():
        cls = getattr(_core, name)
        assert issubclass(cls, tuple), name
        assert cls.n_fields == len(names), name
        row = cls(range(len(names)))
        assert row == tuple(range(len(names))), name
        assert [getattr(row, f) for f in names] == list(range(len(names))), name
        assert all(getattr(cls, f).__doc__ for f in names), name


def test_positional_rows_keep_working_as_tuples():
    with giltracer.trace(backend="hooks") as t:
        spin(0.02)
    r = t.result
    tid = r.threads()[0]["tid"]
    span = r.spans(tid)[0]
    start, end, name, depth, flags = span
    assert (start, end, name) == (span.start_ns, span.end_ns, span.name) == span[:3]
    assert len(span) == 5 and span == tuple(span)
    funcs = r.functions()
    assert funcs[0].name == funcs[0][0]
    node = r.profile()[0]
    assert node.total_states == tuple(node[5]) and len(node.self_states) == 5
