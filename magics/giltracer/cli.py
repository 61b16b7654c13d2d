"""Command line: ``giltracer [options] script.py [args]`` or ``giltracer [options] -m module [args]``;
``giltracer profile [options] script.py [args]`` prints the GIL-split profile instead of the
per-thread table and writes the viewer opened on its Profile tab."""

from __future__ import annotations

import argparse
import os
import runpy
import sys
import traceback
from typing import List, Optional, Tuple

from . import api
from .api import BACKENDS, DEFAULT_MAX_EVENTS, PROFILE_SORTS, Trace

PROFILE_COMMAND = "profile"


def build_parser(profile: bool = False) -> argparse.ArgumentParser:
    if profile:
        p = argparse.ArgumentParser(
            prog="giltracer profile",
            description="Run a Python script traced and print its GIL-split profile: each "
            "function's time as running, held off CPU, waiting for the GIL and released, and "
            "the GIL wait it caused; write the HTML viewer opened on its Profile tab.",
            epilog="examples:\n  giltracer profile examples/threads_demo.py\n"
            "  giltracer profile --sort caused --top 20 -m mypkg.main --fast\n",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
    else:
        p = argparse.ArgumentParser(
            prog="giltracer",
            description="Run a Python script while tracing every call in every thread and probing "
            "the GIL; write a self-contained HTML viewer (or Chrome-trace JSON) and print the "
            "per-thread GIL table. `giltracer profile ...` prints the GIL-split profile instead.",
            epilog="examples:\n  giltracer examples/threads_demo.py\n"
            "  giltracer -o trace.json -m mypkg.main --fast\n"
            "  giltracer profile examples/threads_demo.py\n",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
    p.add_argument("-o", "--output", metavar="PATH",
                   help="where to write the trace: .html (default: <script>.giltracer.html "
                        "in the current directory) or .json (Perfetto / chrome://tracing)")
    p.add_argument("--backend", choices=BACKENDS, default="auto",
                   help="GIL probe: auto (bpf when permitted, else hooks), hooks (in-process, "
                        "no privileges) or bpf (needs root or CAP_BPF+CAP_PERFMON)")
    p.add_argument("--no-c", dest="c_calls", action="store_false", help="do not record C function calls")
    p.add_argument("--no-functions", dest="functions", action="store_false",
                   help="probe the GIL only; record no function calls")
    p.add_argument("--no-sched", dest="sched", action="store_false", help="do not record OS scheduler states")
    p.add_argument("--max-events", type=int, default=DEFAULT_MAX_EVENTS, metavar="N",
                   help=f"keep at most N events of each kind: calls, GIL events, scheduler records "
                        f"(default {DEFAULT_MAX_EVENTS:,}); drops are counted and reported")
    p.add_argument("--max-depth", type=int, default=None, metavar="N", help="record calls up to N levels below where tracing starts")
    p.add_argument("--include", action="append", metavar="GLOB", help="only trace files matching GLOB (repeatable)")
    p.add_argument("--exclude", action="append", metavar="GLOB", help="do not trace files matching GLOB (repeatable)")
    p.add_argument("--follow-children", action="store_true",
                   help="also probe forked child processes (bpf backend only)")
    if profile:
        p.add_argument("--top", type=int, default=10, metavar="N",
                       help="functions (and GIL-blame rows) per table (default 10)")
        p.add_argument("--sort", choices=PROFILE_SORTS, default="wait",
                       help="order of the first table: self time waiting for the GIL (default), "
                            "holding it, total, self, or GIL wait caused in other threads")
    else:
        p.add_argument("--top", type=int, default=5, metavar="N", help="GIL-blame rows to print (default 5)")
    p.add_argument("-q", "--quiet", action="store_true", help="print only the output path")
    p.add_argument("-m", dest="module", metavar="MODULE", help="run a module as a script (like python -m)")
    p.add_argument("target", nargs="?", help="the script to run")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")
    return p


# Options of ours that take a value: everything after the script (or -m MODULE) belongs
# to the script, even when it looks like one of our options (e.g. `-m json.tool --help`).
_VALUE_OPTIONS = {"-o", "--output", "--backend", "--max-events", "--max-depth", "--include",
                  "--exclude", "--top", "--sort"}


def split_argv(argv: List[str]) -> Tuple[List[str], List[str]]:
    """(our options + target, the target's own arguments)."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            return argv[: i + 2], argv[i + 2:]
        if arg == "-m":
            return argv[: i + 2], argv[i + 2:]
        if arg.startswith("-m") and not arg.startswith("--"):  # -mjson.tool
            return argv[: i + 1], argv[i + 1:]
        if arg in _VALUE_OPTIONS:
            i += 2
            continue
        if not arg.startswith("-") or arg == "-":
            return argv[: i + 1], argv[i + 1:]
        i += 1
    return argv, []


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # `giltracer profile x.py`; a script really named "profile" runs as ./profile.
    profile = bool(argv) and argv[0] == PROFILE_COMMAND
    if profile:
        argv = argv[1:]
    p = build_parser(profile)
    ours, rest = split_argv(argv)
    a = p.parse_args(ours)
    a.args = list(a.args) + rest
    if a.module:
        if a.target is not None:
            a.args = [a.target] + a.args
        target, run_name = a.module, a.module
    elif a.target:
        if not os.path.exists(a.target):
            p.error(f"no such script: {a.target}")
        target, run_name = a.target, os.path.basename(a.target)
    else:
        p.error("give a script to run, or -m MODULE")
    if a.max_events is not None and a.max_events < 1:
        p.error("--max-events must be a positive number")
    if a.max_depth is not None and a.max_depth < 1:
        p.error("--max-depth must be a positive number")
    if profile and a.top < 1:
        p.error("--top must be a positive number, e.g. --top 10")
    out = a.output or (os.path.splitext(os.path.basename(target))[0] + ".giltracer.html")
    if not out.lower().endswith((".html", ".htm", ".json", ".txt")):
        p.error(f"cannot tell the format of {out!r}: use a .html, .json or .txt path")
    if api.FREE_THREADED:  # before the script runs: it would run untraced
        p.error(api.FREE_THREADED_REFUSAL)
    try:
        t = Trace(functions=a.functions, c_calls=a.c_calls, max_events=a.max_events,
                  include=a.include, exclude=a.exclude, max_depth=a.max_depth, sched=a.sched,
                  backend=a.backend, follow_children=a.follow_children, title=run_name)
    except ValueError as e:
        p.error(str(e))

    saved_argv = sys.argv
    sys.argv = [target] + list(a.args)
    if not a.module:
        sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
    status = 0
    try:
        with t:
            if a.module:
                runpy.run_module(target, run_name="__main__", alter_sys=True)
            else:
                runpy.run_path(target, run_name="__main__")
    except SystemExit as e:  # the script's own exit status
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # still save what was traced, then report
        traceback.print_exc()
        status = 1
    finally:
        sys.argv = saved_argv
    t.save(out, tab="profile" if profile and out.lower().endswith((".html", ".htm")) else None)
    if profile:
        if not a.quiet:
            print(t.profile_text(a.top, a.sort), end="")
            print(f"giltracer: wrote {out}", file=sys.stderr)
        else:
            print(out)
    elif not a.quiet:
        print(t.summary_text(a.top), file=sys.stderr, end="")
        print(f"giltracer: wrote {out}", file=sys.stderr)
    else:
        print(out)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
