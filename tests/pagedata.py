"""Read a viewer page's payload back in Python (schema: core/viewer/README.md): the JSON
in #gt-data (base64 of its zlib stream; plain JSON in older pages) with the binary columns
of #gt-bin (version 2) decoded into lists, so it reads like version 1. For tests."""

import base64
import json
import re
import zlib

PROFILE_COLS = ("parent", "func", "calls", "run", "hoff", "wait", "rel", "unk")


def data(page):
    """The JSON of #gt-data, parsed."""
    s = re.search(r'id="gt-data">(.*?)</script>', page, re.S).group(1).strip()
    if not s.startswith(("{", "[")):
        s = zlib.decompress(base64.b64decode(s)).decode("utf-8")
    return json.loads(s)


def with_data(page, p):
    """The page with #gt-data replaced by the payload `p`, written as the core writes it
    (`<`, `>`, `&` as \\u escapes, then deflated, in base64)."""
    m = re.search(r'(id="gt-data">)(.*?)(</script>)', page, re.S)
    text = json.dumps(p, separators=(",", ":")).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    b64 = base64.b64encode(zlib.compress(text.encode("utf-8"), 9)).decode()
    return page[:m.start(2)] + "\n" + b64 + "\n" + page[m.end(2):]


def _uvarints(b):
    out, v, shift = [], 0, 0
    for byte in b:
        v |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            out.append(v)
            v, shift = 0, 0
    assert shift == 0, "a column ends inside a number"
    return out


def _zz(v):
    return (v >> 1) ^ -(v & 1)


def chunks(page):
    """The inflated chunks of #gt-bin, as bytes."""
    b64 = re.search(r'id="gt-bin">(.*?)</script>', page, re.S).group(1)
    raw, out, p = zlib.decompress(base64.b64decode(b64.strip())), [], 0
    while p < len(raw):
        n, shift = 0, 0
        while True:
            byte = raw[p]
            p += 1
            n |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        out.append(raw[p:p + n])
        p += n
    assert p == len(raw)
    return out


def _deltas(values):
    """core/emit/deflate.h col_delta: d + 1, or 0 then zigzag(d) for a negative d."""
    out, it = [], iter(values)
    for v in it:
        out.append(v - 1 if v else _zz(next(it)))
    return out


def _spans(ch, ref):
    c = ref["c"]
    depth_steps, func, flags = (_uvarints(ch[c + k]) for k in range(3))
    enter, exits = (_deltas(_uvarints(ch[c + k])) for k in (3, 4))
    n = ref["n"]
    assert len(depth_steps) == len(func) == len(flags) == len(enter) == len(exits) == n
    start, end, depth = [0] * n, [0] * n, [0] * n
    stack, clock, prev, ei = [], 0, -1, 0
    for i in range(n + 1):
        d = prev + 1 + _zz(depth_steps[i]) if i < n else -1
        while stack and depth[stack[-1]] >= d:
            clock += exits[ei]
            ei += 1
            end[stack.pop()] = clock
        if i == n:
            break
        depth[i] = prev = d
        clock += enter[i]
        start[i] = clock
        stack.append(i)
    return {"start": start, "dur": [e - s for s, e in zip(start, end)], "func": [f - 1 for f in func],
            "depth": depth, "flags": flags}


def _intervals(ch, ref):
    c = ref["c"]
    starts, dur, state = (_uvarints(ch[c + k]) for k in range(3))
    out, end = [], 0
    for s, d in zip(starts, dur):
        out.append(end + _zz(s))
        end = out[-1] + d
    iv = {"start": out, "dur": dur, "state": state}
    if ref.get("i"):  # GIL intervals of a run with subinterpreters: whose GIL
        iv["interp"] = _uvarints(ch[c + 3])
    return iv


def _profile(ch, ref):
    cols = {k: _uvarints(ch[ref["c"] + j]) for j, k in enumerate(PROFILE_COLS)}
    cols["parent"] = [i - v for i, v in enumerate(cols["parent"])]
    cols["func"] = [v - 1 for v in cols["func"]]
    return cols


def payload(page):
    """The page's payload as version 1 (plain JSON columns)."""
    p = data(page)
    if p.get("version", 1) < 2:
        return p
    ch = chunks(page)
    for t in p["threads"]:
        t["spans"] = _spans(ch, t["spans"])
        t["gil"] = _intervals(ch, t["gil"])
        t["os"] = _intervals(ch, t["os"])
        t["profile"] = _profile(ch, t["profile"])
    p["version"] = 1
    return p


def profile_bytes(page):
    """What the profile columns cost in the page: compressed, in base64."""
    p = data(page)
    ch = chunks(page)
    raw = b"".join(ch[t["profile"]["c"] + j] for t in p["threads"] for j in range(len(PROFILE_COLS)))
    return len(zlib.compress(raw, 1)) * 4 // 3


# ---- writing (for tests that hand the page columns no tracer would make) ----------
def uvarint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _zz_enc(v):
    return (v << 1) if v >= 0 else ((-v) << 1) - 1


def _delta_enc(d):
    return uvarint(d + 1) if d >= 0 else uvarint(0) + uvarint(_zz_enc(d))


def span_chunks(spans):
    """[(start, end, func, depth, flags)] (ns since t0; func -1 = none) -> the 5 chunks of a
    spans block, written from the schema in core/viewer/README.md."""
    depth, func, flags, enter, exits = (bytearray() for _ in range(5))
    stack, clock, prev = [], 0, -1
    for start, end, f, d, fl in spans:
        end = max(end, start)
        while stack and stack[-1][0] >= d:
            e = stack.pop()[1]
            exits += _delta_enc(e - clock)
            clock = e
        depth += uvarint(_zz_enc(d - prev - 1))
        prev = d
        func += uvarint(f + 1)
        flags += uvarint(fl)
        enter += _delta_enc(start - clock)
        clock = start
        stack.append((d, end))
    while stack:
        e = stack.pop()[1]
        exits += _delta_enc(e - clock)
        clock = e
    return [bytes(c) for c in (depth, func, flags, enter, exits)]


def with_spans(page, thread, spans):
    """The page with thread `thread`'s spans replaced by `spans` (see span_chunks)."""
    p = data(page)
    ch = chunks(page)
    p["threads"][thread]["spans"] = {"n": len(spans), "c": len(ch)}
    ch += span_chunks(spans)
    blob = zlib.compress(b"".join(uvarint(len(c)) + c for c in ch))
    page = with_data(page, p)
    b = re.search(r'(id="gt-bin">)(.*?)(</script>)', page, re.S)
    return page[:b.start(2)] + "\n" + base64.b64encode(blob).decode() + "\n" + page[b.end(2):]


def code(page):
    """(css, script) the page carries compressed in #gt-code (base64 of zlib of the CSS, a
    NUL, the panes' markup, a NUL, the script as shipped: minified at build time by
    core/jsmin)."""
    m = re.search(r'<script type="application/octet-stream" id="gt-code">\s*(.*?)\s*</script>', page, re.S)
    css, _markup, js = zlib.decompress(base64.b64decode(m.group(1))).decode("utf-8").split("\0")
    return css, js
