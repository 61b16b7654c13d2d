"""The viewer's GIL colours stay apart for colour-blind readers: held, waiting and released
keep a CIEDE2000 difference of at least 30 under deuteranopia and protanopia, simulated
with Machado, Oliveira & Fernandes (2009) at severity 1.0, in both themes. The palette is
read from a saved viewer page (core/viewer/theme.js as built in), so the test checks what ships."""

import itertools
import math
import os
import re

import pytest

import giltracer
import pagedata

MIN_DELTA_E = 30.0

# Machado et al. 2009, severity 1.0; applied to linear RGB.
MACHADO = {
    "deuteranopia": ((0.367322, 0.860646, -0.227968),
                     (0.280085, 0.672501, 0.047413),
                     (-0.011820, 0.042940, 0.968881)),
    "protanopia": ((0.152286, 1.052583, -0.204868),
                   (0.114503, 0.786281, 0.099216),
                   (-0.003882, -0.048116, 1.051998)),
    "normal": ((1, 0, 0), (0, 1, 0), (0, 0, 1)),
}


@pytest.fixture(scope="module")
def palettes(tmp_path_factory):
    """{theme: {key: '#rrggbb'}} from the THEMES literal of the viewer's script."""
    with giltracer.trace(backend="hooks", sched=False) as t:
        pass
    with open(t.save(os.path.join(tmp_path_factory.mktemp("palette"), "p.html")), encoding="utf-8") as f:
        _, src = pagedata.code(f.read())  # the script as the page carries it (compressed)
    out = {}
    for name, body in re.findall(r"\b(light|dark):\s*\{(.*?)\}", src, re.S):  # minified or not
        out[name] = dict(re.findall(r"(\w+):\s*'(#[0-9a-fA-F]{6})'", body))
    return out


def to_linear(hex_colour):
    def lin(c):
        c /= 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
    return [lin(int(hex_colour[i:i + 2], 16)) for i in (1, 3, 5)]


def lab(linear_rgb):
    """CIELAB (D65) of a linear sRGB colour, clamped to the gamut first."""
    r, g, b = (min(1.0, max(0.0, c)) for c in linear_rgb)
    x = (0.4124564 * r + 0.3575761 * g + 0.1804375 * b) / 0.95047
    y = 0.2126729 * r + 0.7151522 * g + 0.0721750 * b
    z = (0.0193339 * r + 0.1191920 * g + 0.9503041 * b) / 1.08883

    def f(t):
        return t ** (1 / 3) if t > 216 / 24389 else (24389 / 27 * t + 16) / 116
    fx, fy, fz = f(x), f(y), f(z)
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def simulate(hex_colour, kind):
    m, c = MACHADO[kind], to_linear(hex_colour)
    return lab([sum(m[i][j] * c[j] for j in range(3)) for i in range(3)])


def ciede2000(lab1, lab2):
    """Sharma, Wu & Dalal (2005) formulation."""
    (l1, a1, b1), (l2, a2, b2) = lab1, lab2
    cbar = (math.hypot(a1, b1) + math.hypot(a2, b2)) / 2
    g = 0.5 * (1 - math.sqrt(cbar ** 7 / (cbar ** 7 + 25 ** 7)))
    a1p, a2p = (1 + g) * a1, (1 + g) * a2
    c1p, c2p = math.hypot(a1p, b1), math.hypot(a2p, b2)
    h1p = math.degrees(math.atan2(b1, a1p)) % 360
    h2p = math.degrees(math.atan2(b2, a2p)) % 360
    dlp, dcp = l2 - l1, c2p - c1p
    dhp = 0.0
    if c1p * c2p:
        dhp = h2p - h1p
        dhp -= 360 if dhp > 180 else -360 if dhp < -180 else 0
    dh = 2 * math.sqrt(c1p * c2p) * math.sin(math.radians(dhp) / 2)
    lbar, cbarp = (l1 + l2) / 2, (c1p + c2p) / 2
    if not c1p * c2p:
        hbar = h1p + h2p
    elif abs(h1p - h2p) <= 180:
        hbar = (h1p + h2p) / 2
    else:
        hbar = (h1p + h2p + (360 if h1p + h2p < 360 else -360)) / 2
    t = (1 - 0.17 * math.cos(math.radians(hbar - 30)) + 0.24 * math.cos(math.radians(2 * hbar))
         + 0.32 * math.cos(math.radians(3 * hbar + 6)) - 0.20 * math.cos(math.radians(4 * hbar - 63)))
    dtheta = 30 * math.exp(-(((hbar - 275) / 25) ** 2))
    rc = 2 * math.sqrt(cbarp ** 7 / (cbarp ** 7 + 25 ** 7))
    sl = 1 + 0.015 * (lbar - 50) ** 2 / math.sqrt(20 + (lbar - 50) ** 2)
    sc, sh = 1 + 0.045 * cbarp, 1 + 0.015 * cbarp * t
    rt = -math.sin(math.radians(2 * dtheta)) * rc
    return math.sqrt((dlp / sl) ** 2 + (dcp / sc) ** 2 + (dh / sh) ** 2 + rt * (dcp / sc) * (dh / sh))


def min_difference(colours, kind):
    labs = [simulate(c, kind) for c in colours]
    return min(ciede2000(a, b) for a, b in itertools.combinations(labs, 2))


@pytest.mark.parametrize("pair, expected", [  # Sharma et al. 2005, table 1, pairs 1, 7 and 17
    (((50.0, 2.6772, -79.7751), (50.0, 0.0, -82.7485)), 2.0425),
    (((50.0, 0.0, 0.0), (50.0, -1.0, 2.0)), 2.3669),
    (((50.0, 2.5, 0.0), (73.0, 25.0, -18.0)), 27.1492),
])
def test_ciede2000_matches_the_published_pairs(pair, expected):
    assert ciede2000(*pair) == pytest.approx(expected, abs=1e-4)


def test_both_themes_are_read_from_the_viewer(palettes):
    p = palettes
    assert set(p) == {"light", "dark"}
    for theme in p.values():
        assert {"held", "wait", "rel", "heldOff", "bg"} <= set(theme)


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize("kind", ["deuteranopia", "protanopia", "normal"])
def test_gil_states_stay_apart(palettes, theme, kind):
    p = palettes[theme]
    gil = (p["held"], p["wait"], p["rel"])
    assert min_difference(gil, kind) >= MIN_DELTA_E, (theme, kind, gil)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_gil_states_stand_out_from_the_background(palettes, theme):
    p = palettes[theme]
    for key in ("held", "wait"):
        for kind in MACHADO:
            assert ciede2000(simulate(p[key], kind), simulate(p["bg"], kind)) >= MIN_DELTA_E, (theme, key, kind)


def test_the_old_green_red_pair_fails_the_check():
    # why they were replaced: the former held #2f9e44 and waiting #e03131 look alike to deuteranopes
    assert min_difference(("#2f9e44", "#e03131", "#dee2e6"), "deuteranopia") < 10
    assert min_difference(("#2f9e44", "#e03131", "#dee2e6"), "normal") >= MIN_DELTA_E
