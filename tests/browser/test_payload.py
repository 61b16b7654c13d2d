"""The page's compact payload (zlib-compressed binary columns, decoded by the browser's
DecompressionStream) in headless Chromium: every span and GIL interval the viewer lays
out equals the C core's, exactly, on a known two-thread trace."""

import json
import os
import re
import shutil
import tempfile
import threading

import pytest

import giltracer

from test_profile_tab import Page  # the DevTools harness (same directory)


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def fails(k):
    raise ValueError(k)


def worker(barrier, out):
    barrier.wait()
    for k in range(30):
        fib(12)
        out.append(k)  # a C call
        try:
            fails(k)  # a span left by an exception
        except ValueError:
            pass


@pytest.fixture(scope="module")
def traced():
    barrier, out = threading.Barrier(2), []
    with giltracer.trace(backend="hooks", sched=False) as t:
        ts = [threading.Thread(target=worker, args=(barrier, out), name=f"w{i}") for i in range(2)]
        for th in ts:
            th.start()
        for th in ts:
            th.join()
    d = tempfile.mkdtemp(prefix="giltracer-payload-")
    path = t.save(os.path.join(d, "p.html"))
    p = Page("file://" + path, os.path.join(d, "chromium"))
    yield t, p, path
    p.close()
    shutil.rmtree(d, ignore_errors=True)


def test_the_page_carries_compressed_binary_columns(traced):
    t, p, path = traced
    html = open(path, encoding="utf-8").read()
    data = json.loads(re.search(r'id="gt-data">(.*?)</script>', html, re.S).group(1))
    assert data["version"] == 2
    assert all(set(th["spans"]) == {"n", "c"} for th in data["threads"])  # no JSON columns
    assert re.search(r'type="application/octet-stream" id="gt-bin">\s*[A-Za-z0-9+/=]{100,}\s*</script>', html)


def test_decoded_spans_equal_the_core_spans(traced):
    t, p, _ = traced
    assert p.js("gtPayload.threads()") == len(t.threads)
    checked = 0
    for i in range(len(t.threads)):
        got = p.js(f"gtPayload.thread({i})")
        t0 = int(got["t0"])
        want = sorted((s - t0, e - t0, name, depth, flags) for s, e, name, depth, flags in t.spans(got["tid"]))
        assert sorted(tuple(x) for x in got["spans"]) == want
        gil = [(a - t0, b - t0, s) for a, b, s in t.gil_intervals(got["tid"])]
        states = {"released": 0, "wait": 1, "held": 2}
        assert [tuple(x) for x in got["gil"]] == [(a, b, states[s]) for a, b, s in gil]
        checked += len(want)
    assert checked > 1000
    # the known trace has C calls (flag 8) and spans left by an exception (flag 4)
    w0 = p.js("gtPayload.thread(%d)" % next(i for i, th in enumerate(t.threads) if th.name == "w0"))
    assert any(s[2] == "fails" and s[4] & 4 for s in w0["spans"])
    assert any(s[4] & 8 for s in w0["spans"])
    assert not p.errors, p.errors
