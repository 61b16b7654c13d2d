#!/usr/bin/env python3
"""Write the seed corpus of the fuzz targets: tests/fuzz/corpus/<target>/seed-*.

The encoder mirrors tests/fuzz/fuzz_input.c's decoder, so each seed is a scenario
worth mutating (nested calls, returns without calls, out-of-order and duplicate
timestamps, a GIL hand-off with blame, OS states, truncation, a function map, hostile
names up to 100 KB) plus a few deterministic random ones. Files named crash-* in the
corpus are regressions the fuzzer found; this script leaves them alone.

    python3 tests/fuzz/make_corpus.py
"""
import pathlib
import random
import struct

HERE = pathlib.Path(__file__).resolve().parent
CALL, RETURN, UNWIND, CCALL, CRETURN, CRAISE = 1, 2, 3, 4, 5, 6
OPEN_AT_START = 0x80
WANT, ACQUIRED, RELEASED, DROP_REQUEST, SWITCH_DONE = 1, 2, 3, 4, 5
OUT_PREEMPTED, OUT_BLOCKED, SCHED_IN = 1, 2, 3
EXISTED, ENDED, HELD_AT_START, HAS_SCHED = 1, 2, 4, 8
# Indices into fuzz_input.c's `nasty` table.
SCRIPT, SCRIPT_UPPER, COMMENT_SCRIPT, CDATA_END, LS, PS, AMP, ESC_LT, SURROGATE = range(9)
OVERLONG, FF_FE, TOO_BIG, CONTROLS, PRINTF, TRUNCATED, EMOJI = range(9, 16)


def u8(v):
    return bytes([v & 0xFF])


def u16(v):
    return struct.pack("<H", v & 0xFFFF)


def u64(v):
    return struct.pack("<Q", v & 0xFFFFFFFFFFFFFFFF)


class Name:
    """A name as fuzz_input.c's name() reads it (only when names are on)."""

    @staticmethod
    def null():
        return u8(0)

    @staticmethod
    def raw(b):
        assert len(b) < 48
        return u8(1) + u8(len(b)) + b

    @staticmethod
    def nasty(*pieces):
        assert 1 <= len(pieces) <= 4
        return u8(3) + u8(len(pieces) - 1) + b"".join(u8(p) for p in pieces)

    @staticmethod
    def big(piece, sixteenths=15):
        # sel % 6 == 4; sel >> 4 == 15 gives 100 KB, smaller ones sixteenths * 256 bytes.
        sel = next(s for s in range(sixteenths << 4, (sixteenths + 1) << 4) if s % 6 == 4)
        return u8(sel) + u8(piece)

    @staticmethod
    def plain():
        return u8(5)


def events(evs, calls):
    """evs: (step, kind, func_or_aux) with step >= 0 forward, < 0 back, or ("at", off)."""
    out = b""
    for step, kind, f in evs:
        if isinstance(step, tuple):
            op, extra = 0xC0, u16(step[1])
        elif step >= 0:
            assert step < 128
            op, extra = step, b""
        else:
            assert -step < 64
            op, extra = 0x80 | -step, b""
        if calls:
            out += u8(op) + u8(kind) + u8(f) + extra
        else:
            out += u8(op) + u8(kind | (f << 3)) + extra
    return out


def chunks(n, splits=1):
    """One chunk, or `splits` chunks (each non-last takes half of the rest)."""
    if n == 0:
        return u8(0) + u8(0)  # no chunks; non-NULL array
    out = u8(splits)
    for _ in range(splits - 1):
        out += u8(2)  # (n - at) * 2 / 4
    return out


def thread(tid, flags=EXISTED, calls=(), gil=(), sched=(), name=b"", pid=None,
           trunc=None, func_map=None, split=1, base=0):
    fl = flags | (0x80 if pid is not None else 0) | (0x40 if trunc is not None else 0)
    fl |= 0x20 if func_map is not None else 0
    out = u8(fl) + u8(tid + 1)
    if pid is not None:
        out += u8(pid)
    out += u64(1000 + tid) + name
    if trunc is not None:
        out += u16(trunc)
    out += u8(base) + u16(len(calls)) + u8(len(gil)) + u8(len(sched))
    out += events(calls, True) + chunks(len(calls), split)
    if func_map is not None:
        out += u8(len(func_map)) + b"".join(u8(m) for m in func_map)
    out += events(gil, False) + chunks(len(gil), split)
    out += events(sched, False) + chunks(len(sched), split)
    return out


def trace(threads, nfuncs=4, unit=0, t0=100, dur=1000, gil=True, names=False,
          func_names=None, meta_names=None, bad_bounds=False):
    hdr = unit | (8 if bad_bounds else 0) | (16 if gil else 0)
    out = u8(hdr) + u16(t0) + u16(dur)
    if bad_bounds:
        out += u8(2)
    out += u8(nfuncs)
    for i in range(nfuncs):
        fl = 2 | (4 if i % 3 == 2 else 0)
        nm = func_names[i % len(func_names)] if func_names else Name.plain()
        out += u8(fl) + (nm + Name.plain() if names else b"") + u16(10 + i)
    out += u8(len(threads))
    for th in threads:
        out += th
    if names:
        for nm in meta_names or [Name.plain()] * 5:
            out += nm
    out += u16(4242) + u64(12345) + u8(1) + u64(7) + u8(1) + u64(3) + u8(0)
    return out


def nested():
    return [(1, CALL, 0), (5, CALL, 1), (5, CCALL, 2), (3, CRETURN, 2), (5, RETURN, 1),
            (2, CALL, 3), (0, UNWIND, 3), (10, RETURN, 0)]


def gil_handoff():
    a = [(0, RELEASED, 0), (20, WANT, 0), (0, DROP_REQUEST, 0), (30, ACQUIRED, 0),
         (100, RELEASED, 0), (1, SWITCH_DONE, 0), (5, WANT, 0), (40, ACQUIRED, 0)]
    b = [(5, WANT, 0), (15, ACQUIRED, 0), (40, RELEASED, 0), (3, WANT, 0),
         (50, ACQUIRED, 0), (90, RELEASED, 0)]
    return a, b


def scenarios(names):
    """(label, bytes) for one target."""
    n = names
    tn = (lambda b: Name.raw(b)) if n else (lambda b: b"")
    ga, gb = gil_handoff()
    sched = [(3, OUT_PREEMPTED, 0), (10, SCHED_IN, 1), (7, OUT_BLOCKED, 0), (30, SCHED_IN, 0)]
    calls_b = [(2, CALL, 1), (50, CALL, 0), (60, RETURN, 0), (10, RETURN, 1)]
    two = [thread(1, EXISTED | HELD_AT_START | HAS_SCHED, nested(), ga, sched, tn(b"Main")),
           thread(2, HAS_SCHED, calls_b, gb, list(reversed(sched)), tn(b"worker"), base=2)]
    out = [
        ("empty", b""),
        ("one-thread-nested", trace([thread(0, EXISTED, nested(), name=tn(b"Main"))], names=n)),
        ("no-gil", trace(two, gil=False, names=n)),
        ("gil-handoff-blame", trace(two, names=n)),
        ("returns-before-calls", trace([thread(0, EXISTED, [(1, RETURN, 2), (1, CRETURN, 1),
                                                             (1, UNWIND, 0), (2, CALL, 3)])],
                                       names=n)),
        ("open-at-start", trace([thread(0, EXISTED, [(0, CALL | OPEN_AT_START, 0),
                                                     (0, CALL | OPEN_AT_START, 1),
                                                     (4, CALL, 2), (4, RETURN, 1)])], names=n)),
        ("out-of-order", trace([thread(0, EXISTED,
                                       [(50, CALL, 0), (-40, CALL, 1), (-5, RETURN, 1),
                                        (30, RETURN, 0), (("at", 2000), CALL, 2),
                                        (-60, RETURN, 2)],
                                       [(30, ACQUIRED, 0), (-20, RELEASED, 0),
                                        (("at", 5), WANT, 0)])], names=n)),
        ("duplicate-ts", trace([thread(0, EXISTED, [(0, CALL, 0)] * 6 + [(0, RETURN, 0)] * 7,
                                       [(0, WANT, 0), (0, ACQUIRED, 0), (0, RELEASED, 0)] * 4),
                                thread(0, EXISTED, [(0, CALL, 1), (0, RETURN, 1)],
                                       [(0, WANT, 0), (0, ACQUIRED, 0)])], names=n)),
        ("mismatched-returns", trace([thread(0, EXISTED, [(1, CALL, 0), (1, CALL, 1),
                                                          (1, CALL, 2), (1, RETURN, 0),
                                                          (1, RETURN, 3), (1, CRAISE, 1)])],
                                     names=n)),
        ("bad-kinds-and-funcs", trace([thread(0, EXISTED, [(1, 0, 0), (1, 7, 1), (1, CALL, 250),
                                                           (1, CALL, 5), (1, 0x40 | CALL, 0),
                                                           (1, RETURN, 255)],
                                              [(1, 0, 0), (1, 6, 3), (1, 7, 0)],
                                              [(1, 0, 0), (1, 5, 0)])], nfuncs=3, names=n)),
        ("truncated", trace([thread(0, EXISTED, nested() * 3, trunc=15)], names=n)),
        ("func-map", trace([thread(0, EXISTED, nested(), func_map=[3, 2, 1, 0, 255, 9])],
                           names=n)),
        ("ended-thread", trace([thread(0, ENDED, nested(), ga, sched, base=3),
                                thread(1, ENDED, [], [], [])], names=n)),
        ("many-chunks", trace([thread(0, EXISTED | HAS_SCHED, nested() * 4, ga * 3, sched * 3,
                                      split=4)], names=n)),
        ("bad-bounds", trace([thread(0, EXISTED, nested())], bad_bounds=True, names=n)),
        ("multi-process", trace([thread(0, EXISTED | HELD_AT_START, nested(), ga, pid=1),
                                 thread(1, 0, calls_b, gb, pid=2),
                                 thread(2, 0, calls_b, gb, pid=1)], names=n)),
        ("no-funcs", trace([thread(0, EXISTED, nested(), ga)], nfuncs=0, names=n)),
        ("big-unit", trace(two, unit=3, names=n)),
        ("absolute-ts", trace([thread(0, EXISTED, nested(), ga)], unit=2, names=n)),
    ]
    if names:
        hostile = [Name.nasty(SCRIPT, LS, PS), Name.raw(b"\xff\xc3(\xe2\x82"),
                   Name.nasty(COMMENT_SCRIPT, CDATA_END, AMP), Name.nasty(SURROGATE, OVERLONG),
                   Name.nasty(SCRIPT_UPPER, ESC_LT, PRINTF, CONTROLS)]
        two_h = [thread(1, EXISTED | HELD_AT_START | HAS_SCHED, nested(), ga, sched,
                        Name.nasty(SCRIPT, COMMENT_SCRIPT)),
                 thread(2, 0, calls_b, gb, [], Name.raw(b"w\x00rker\xc0"))]
        out += [
            ("names-script", trace(two_h, names=True, func_names=hostile, meta_names=hostile)),
            ("names-null", trace(two_h, names=True, func_names=[Name.null()],
                                 meta_names=[Name.null()] * 5)),
            ("names-invalid-utf8", trace(two_h, names=True,
                                         func_names=[Name.raw(b"\x80\xbf\xfe"),
                                                     Name.nasty(FF_FE, TRUNCATED, TOO_BIG)],
                                         meta_names=[Name.raw(b"\xe2\x80")] * 5)),
            ("names-u2028", trace(two_h, names=True, func_names=[Name.nasty(LS, PS, EMOJI)],
                                  meta_names=[Name.nasty(LS)] * 5)),
            ("names-100k-script", trace(two_h, names=True, func_names=[Name.big(SCRIPT)],
                                        meta_names=[Name.big(SCRIPT_UPPER)] + [Name.plain()] * 4)),
            ("names-100k-invalid", trace(two_h, names=True, func_names=[Name.big(FF_FE, 8)],
                                         meta_names=[Name.big(LS, 4)] * 5)),
        ]
    rng = random.Random(8 + names)
    for i in range(8):
        out.append((f"random-{i}", bytes(rng.randrange(256) for _ in range(64 << (i % 5)))))
    return out


def main():
    for target, names in (("fuzz_merge", False), ("fuzz_emit", True)):
        d = HERE / "corpus" / target
        d.mkdir(parents=True, exist_ok=True)
        for old in d.glob("seed-*"):
            old.unlink()
        items = scenarios(names)
        for label, data in items:
            (d / f"seed-{label}").write_bytes(data)
        print(f"{d.relative_to(HERE.parent.parent)}: {len(items)} seeds")


if __name__ == "__main__":
    main()
