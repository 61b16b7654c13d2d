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
