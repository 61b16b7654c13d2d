"""The static picture in a trace's MIME bundle (giltracer.picture): well-formed SVG with no
script and no link, one GIL strip per thread drawn from the trace's own intervals, names
escaped, the threads past MAX_LANES counted in one line."""

import threading
import xml.etree.ElementTree as ET

import giltracer
from giltracer import picture

SVG = "{http://www.w3.org/2000/svg}"


def spin(n):
    return sum(i * i for i in range(n))


def traced(names):
    with giltracer.trace(backend="hooks", sched=False) as t:
        ts = [threading.Thread(target=spin, args=(50_000,), name=n) for n in names]
        for th in ts:
            th.start()
        for th in ts:
            th.join()
    return t


def test_columns_take_the_state_with_most_time():
    cols = picture.columns([(0, 30, "held"), (30, 100, "wait"), (100, 150, "released"), (150, 160, "held")],
                           0, 200, n=4)
    # [0,50): held 30 wait 20; [50,100): wait; [100,150): released; [150,200): held 10
    assert cols == [2, 1, 0, 2]
    assert picture.columns([], 0, 100, n=3) == [-1, -1, -1]


def test_the_picture_is_plain_svg_with_a_strip_per_thread():
    t = traced(["a<b>&'\"", "w1"])
    svg = t.display_bundle()["image/svg+xml"]
    root = ET.fromstring(svg)  # well-formed, the odd name escaped
    assert root.tag == SVG + "svg"
    assert "<script" not in svg and "href" not in svg and "url(" not in svg
    texts = [e.text for e in root.iter(SVG + "text")]
    assert "a<b>&'\"" in texts and "w1" in texts and "MainThread" in texts
    # the strips: paths in the held / waiting / released colours, one set per thread
    fills = [p.get("fill") for p in root.iter(SVG + "path")]
    assert picture.HELD in fills
    assert len(svg) < 30_000


def test_threads_past_the_cap_are_counted():
    t = traced([f"t{i}" for i in range(5)])
    svg = picture.svg(t, max_lanes=3)
    assert f"+ {len(t.summary()) - 3} more threads" in svg  # the cell's threads, as drawn
