

def test_gil_handoffs_are_drawn_as_arrows(page):
    t, p = page
    p.js("gtViewer.view(0, 1e18)")
    p.js("gtViewer.redraw()")
    held = sorted((s, e, name) for name in ("MainThread", "w0", "w1")
                  for s, e, st in t.gil_intervals(name) if st == "held")
    plot_w = p.js("document.getElementById('gt-ov').clientWidth") - p.js("gtViewer.lanes().length && 0") - 230
    if len(held) * 8 > plot_w:
        pytest.skip("too many GIL turns to draw at this width")  # the viewer draws none then
    expect = sum(1 for a, b in zip(held, held[1:]) if a[2] != b[2] and a[1] <= b[0] + 1)
    assert expect > 0
    assert p.js("gtViewer.handoffs()") == expect
    assert not p.errors, p.errors
