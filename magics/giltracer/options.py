"""The options of a trace and of its front ends, each declared once.

``OPTIONS`` is the one table: from it come the arguments of ``%%giltracer``,
``%gilprofile``, ``giltracer`` and ``giltracer profile`` (one help text each), the options
that take a value (which end the options before a script or a statement), the range
checks and their messages, the checks of ``Trace``'s keywords (its signature stays
written out, typed; tests/test_options.py holds it to this table), the keywords a front
end's parsed arguments give ``Trace`` (trace_keywords: --sample becomes mode="sample"),
and the keywords of the C core's ``_core.Session`` with the C options struct they fill
(``c``: at build time cmake/session_keywords.py writes them into a header that
core/py/module.c and core/py/session.h expand). ``OUTPUT_FORMATS`` is the one list of
what a trace is written as. docs/reference.md is written from these tables and
env.VARIABLES (reference_markdown(), ``make reference``).
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, FrozenSet, Iterator, List, Optional, Tuple

# The front ends, as an option's `fronts` names them.
API = "giltracer.trace()"
CELL = "%%giltracer"
PROFILE = "%gilprofile"
CLI = "giltracer"
CLI_PROFILE = "giltracer profile"
FRONTS = (API, CELL, PROFILE, CLI, CLI_PROFILE)
MAGICS = (CELL, PROFILE)
COMMANDS = (CLI, CLI_PROFILE)

DEFAULT_MAX_EVENTS = 5_000_000
# The inline viewer's size budget in a notebook: above it, the page goes to a file.
DEFAULT_MAX_OUTPUT = 20_000_000
BACKENDS = ("auto", "hooks", "bpf")
PROFILE_SORTS = ("wait", "held", "total", "self", "caused")
VIEWER_THEMES = ("auto", "light", "dark")  # auto follows prefers-color-scheme
KEEPS = ("first", "last")  # past max_events: the timeline keeps the first or the last calls
MODES = ("trace", "sample")  # every call recorded, or stacks sampled at an interval
DEFAULT_SAMPLE_INTERVAL = "5ms"
_INTERVAL = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|us|µs|s)?\s*$")
_INTERVAL_NS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "µs": 1_000}


def is_interval(text: str) -> bool:
    return bool(_INTERVAL.match(text))


def parse_interval(value: Any) -> int:
    """A sampling interval in ns from '5ms', '500us', '0.01s', '5' (ms) or a number of
    seconds (the API's float); ValueError with the fix otherwise. 50 us to 10 s."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        ns = int(round(value * 1e9))
    else:
        m = _INTERVAL.match(str(value))
        if not m:
            raise ValueError(f"--sample {value}: give an interval with a unit, e.g. --sample 5ms "
                             "or --sample 500us (a bare number is ms)")
        ns = int(round(float(m.group(1)) * _INTERVAL_NS[m.group(2) or "ms"]))
    if not 50_000 <= ns <= 10_000_000_000:
        raise ValueError(f"--sample {value}: the interval must be between 50us and 10s, "
                         "e.g. --sample 5ms")
    return ns


@dataclass(frozen=True)
class Option:
    """One option. `flags` are its command-line spellings (none for a keyword only the
    API has); `keyword` the Trace keyword it sets (None: it is about the output);
    `action` None for an option that takes a value. `minimum` is checked after parsing
    (`unit` and `example` word the message)."""

    name: str
    flags: Tuple[str, ...]
    help: str
    fronts: Tuple[str, ...]
    keyword: Optional[str] = None
    action: Optional[str] = None
    type: Optional[Callable[[str], Any]] = None
    default: Any = None
    choices: Optional[Tuple[str, ...]] = None
    metavar: Optional[str] = None
    minimum: Optional[int] = None
    unit: str = ""
    example: str = ""
    nargs: Optional[str] = None  # "?": the value may be left out (then `const`)
    const: Any = None
    # The C kind (C_KINDS) of the `_core.Session` keyword the API passes this option's
    # value to, and of the `struct gt_session_opts` field it fills; None: the core takes
    # no such keyword (the API derives what it passes, e.g. sample_ns from mode).
    c: Optional[str] = None

    @property
    def c_default(self) -> Any:
        """The C field's default (a session made without the keyword): a switch's or a
        choice's is the table's; a number's, a path's or a list's is 0/NULL (none,
        unlimited): the API passes its own."""
        if self.c == "bool":
            return bool(self.default)
        if self.c == "choice":
            assert self.choices is not None
            return self.choices.index(self.default)
        return None

    @property
    def takes_value(self) -> bool:
        return self.action in (None, "append") and self.nargs != "?"

    def argparse_kwargs(self) -> Dict[str, Any]:
        kw: Dict[str, Any] = {"dest": self.name, "help": self.help}
        for key in ("action", "type", "choices", "metavar", "nargs", "const"):
            if getattr(self, key) is not None:
                kw[key] = getattr(self, key)
        if self.default is not None or self.action in ("store_true", "store_false"):
            kw["default"] = self.default
        return kw

    def problem(self, value: Any) -> Optional[str]:
        """Why `value`, as parsed from the command line, is out of range, or None."""
        if self.minimum is None or value is None or value >= self.minimum:
            return None
        flag = self.flags[-1]
        if self.unit:
            return (f"{flag} is in {self.unit} and must be at least {self.minimum}, "
                    f"e.g. {flag} {self.example}")
        return f"{flag} must be a positive number, e.g. {flag} {self.example}"


# What a trace can be written as, by the path's suffix: the one list the command line,
# the magics' -o and Trace.save() check a path against.
# (".text": Trace.save() always took it.)
OUTPUT_FORMATS: Dict[str, str] = {".html": "html", ".htm": "html", ".json": "json", ".txt": "txt",
                                  ".text": "txt"}
# save(format=...) names them so.
_FORMAT_NAMES: Dict[str, str] = {k[1:]: v for k, v in OUTPUT_FORMATS.items()}


def output_format(path: str, format: Optional[str] = None) -> str:
    """The format ("html", "json" or "txt") `path` is written in: `format` if given, else
    its suffix's; ValueError (one message for every front end) when there is none."""
    if format:
        fmt = _FORMAT_NAMES.get(format)
    else:
        fmt = next((f for suffix, f in OUTPUT_FORMATS.items() if path.lower().endswith(suffix)),
                   None)
    if fmt is None:
        raise ValueError(f"cannot tell the format of {path!r}: use a .html, .json or .txt path")
    return fmt


def is_page(path: str) -> bool:
    """Whether `path` names the viewer page (.html or .htm)."""
    return path.lower().endswith(tuple(s for s, f in OUTPUT_FORMATS.items() if f == "html"))


_OUTPUT_FORMATS = ".json (Perfetto / chrome://tracing) or .txt (the per-thread table)"

OPTIONS: Tuple[Option, ...] = (
    Option("output", ("-o", "--output"), fronts=COMMANDS, metavar="PATH",
           help="where to write the trace: .html, the viewer (default: <script>.giltracer.html "
                "in the current directory), " + _OUTPUT_FORMATS),
    Option("output", ("-o", "--output"), fronts=MAGICS, metavar="PATH",
           help="also save the trace: .html, the viewer (the profile's opens on its Profile "
                "tab), " + _OUTPUT_FORMATS),
    Option("backend", ("--backend",), fronts=FRONTS, keyword="backend", choices=BACKENDS,
           default="auto", c="choice",
           help="GIL probe: auto (with functions traced, bpf when permitted, else hooks; GIL "
                "only and sampling: hooks, the cheaper), hooks (in-process, no privileges) or "
                "bpf (needs root or CAP_BPF+CAP_PERFMON)"),
    Option("c_calls", ("--no-c",), fronts=FRONTS, keyword="c_calls", action="store_false",
           default=True, c="bool", help="do not record C function calls"),
    Option("functions", ("--no-functions",), fronts=(API, CELL) + COMMANDS, keyword="functions",
           action="store_false", default=True, c="bool",
           help="probe the GIL only; record no function calls"),
    Option("sample", ("--sample",), fronts=MAGICS + COMMANDS, nargs="?",
           const=DEFAULT_SAMPLE_INTERVAL, metavar="INTERVAL",
           help=f"sample every thread's stack every INTERVAL (default {DEFAULT_SAMPLE_INTERVAL}; "
                "with a unit: ms, us or s, e.g. 2ms or 500us) instead of recording every call: "
                "for long runs; the GIL table stays exact"),
    Option("mode", (), fronts=(API,), keyword="mode", default="trace", choices=MODES,
           help="trace: record every call; sample: sample every thread's stack every "
                "sample_interval instead (no per-call hook; the GIL stays exact)"),
    Option("sample_interval", (), fronts=(API,), keyword="sample_interval",
           default=DEFAULT_SAMPLE_INTERVAL,
           help="mode='sample': the interval, '5ms' or '500us' or seconds as a number"),
    Option("gil", (), fronts=(API,), keyword="gil", default=True, c="bool",
           help="probe the GIL (False: record function calls only)"),
    Option("sched", ("--sched",), fronts=(CELL,), keyword="sched", action="store_true",
           default=True, help="record OS scheduler states (the default)"),
    Option("sched", ("--no-sched",), fronts=FRONTS, keyword="sched", action="store_false",
           default=True, c="bool",
           help="do not record OS scheduler states (time holding the GIL is then one state)"),
    Option("max_events", ("--max-events",), fronts=(API, CELL) + COMMANDS, keyword="max_events",
           type=int, default=DEFAULT_MAX_EVENTS, metavar="N", minimum=1, example="1000000",
           c="u64",
           help=f"keep at most N events of each kind: calls, GIL events, scheduler records "
                f"(default {DEFAULT_MAX_EVENTS:,}); drops are counted and reported"),
    Option("keep", ("--keep",), fronts=(API, CELL) + COMMANDS, keyword="keep", choices=KEEPS,
           default="first", c="choice",
           help="past max_events, the timeline shows each thread's first calls (first, the "
                "default) or its last ones (last: a flight recorder, for what happened at the "
                "end); Profile and Top functions cover the whole run either way"),
    Option("max_depth", ("--max-depth",), fronts=(API, CELL) + COMMANDS, keyword="max_depth",
           type=int, metavar="N", minimum=1, example="20", c="int",
           help="record calls up to N levels deep: 1 is the cell's or the script's own code, "
                "2 the functions it calls, and so on"),
    Option("include", ("--include",), fronts=(API, CELL) + COMMANDS, keyword="include",
           action="append", metavar="GLOB", c="object",
           help="only trace functions whose file path or qualified name matches GLOB (C "
                "functions by name, e.g. time.sleep; C calls made by traced functions are "
                "kept) (repeatable)"),
    Option("exclude", ("--exclude",), fronts=(API, CELL) + COMMANDS, keyword="exclude",
           action="append", metavar="GLOB", c="object",
           help="do not trace functions whose file path or qualified name matches GLOB (C "
                "functions by name, e.g. time.sleep) (repeatable)"),
    Option("follow_children", ("--follow-children",), fronts=(API, CLI, CLI_PROFILE),
           keyword="follow_children", action="store_true", default=False, c="bool",
           help="also trace the child processes it starts (multiprocessing, concurrent.futures, "
                "subprocess running this Python): each records its own threads and GIL, shown "
                "beside this process's on one clock"),
    # On in the magics: a cell that starts no process pays one temporary folder (~0.1 ms),
    # and a cell's process pool is shown without knowing the flag.
    Option("follow_children", ("--follow-children",), fronts=MAGICS, action="store_true",
           default=True, help="trace the child processes the cell starts (the default)"),
    Option("follow_children", ("--no-follow-children",), fronts=MAGICS, action="store_false",
           default=True, help="do not trace the child processes the cell starts"),
    Option("crosscheck", (), fronts=(API,), keyword="crosscheck", default=False, c="bool",
           help="also run the bpf probe beside the hooks, to compare (root)"),
    Option("top", ("--top",), fronts=(CLI,), type=int, default=5, metavar="N",
           help="GIL-blame rows to print (default 5)"),
    Option("top", ("--top",), fronts=(PROFILE, CLI_PROFILE), type=int, default=10, metavar="N",
           minimum=1, example="10",
           help="functions (and GIL-blame rows) per table (default 10)"),
    Option("sort", ("--sort",), fronts=(PROFILE, CLI_PROFILE), choices=PROFILE_SORTS,
           default="wait",
           help="order of the first table: self time waiting for the GIL (default), holding "
                "it, total, self, or GIL wait caused in other threads"),
    Option("height", ("--height",), fronts=MAGICS, type=int, default=600, metavar="PX",
           minimum=100, unit="pixels", example="600",
           help="height of the inline viewer (default 600)"),
    Option("theme", ("--theme",), fronts=MAGICS, choices=VIEWER_THEMES, default="auto",
           help="viewer colours: auto (follows the system's light/dark preference), light, dark"),
    Option("quiet", ("-q", "--quiet"), fronts=COMMANDS, action="store_true", default=False,
           help="print only the output path"),
    Option("quiet", ("-q", "--quiet"), fronts=MAGICS, action="store_true", default=False,
           help="no viewer, no profile and no messages (the trace: --var NAME or "
                "giltracer.last())"),
    Option("live", ("--no-live",), fronts=MAGICS + COMMANDS, action="store_false", default=True,
           help="no live GIL meter while the code runs (shown by default in a notebook "
                "kernel, and on the command line when stderr is a terminal)"),
    Option("var", ("--var",), fronts=MAGICS, metavar="NAME",
           help="store the Trace in the variable NAME, for the next cells"),
    Option("max_output", ("--max-output",), fronts=MAGICS, default="20MB", metavar="SIZE",
           help="inline size budget, e.g. 20MB (default) or 500k; a bigger viewer is saved "
                "beside the notebook and linked"),
)


# The C kinds of a `_core.Session` keyword (cmake/session_keywords.py maps each to its C
# type and its converter in core/py/module.c).
C_KINDS = ("bool", "int", "u64", "object", "str", "choice")

# The keywords of `_core.Session` that are no option of a trace: the API and a followed
# child's boot pass them.
SESSION_ONLY: Tuple[Option, ...] = (
    Option("own_dir", (), fronts=(), keyword="own_dir", c="object",
           help="the package's folder: its own functions are not traced"),
    Option("sample_ns", (), fronts=(), keyword="sample_ns", c="u64",
           help="sampling mode: stacks every sample_ns, no per-call hook; 0: off "
                "(from mode and sample_interval)"),
    Option("spool", (), fronts=(), keyword="spool", c="str",
           help="in a followed child: the path its streams go to at finish, instead of its "
                "own merge (record/spool.h)"),
    Option("children", (), fronts=(), keyword="children", c="str",
           help="in the parent: the session folder and token as folder/token-; finish "
                "merges every token-<pid>.spool in it"),
)


def session_keywords() -> List[Option]:
    """The keywords of `_core.Session`, each once, in the order of the C struct's fields."""
    return [o for o in of(API) if o.c] + list(SESSION_ONLY)


def of(front: str) -> Iterator[Option]:
    """The options `front` has, in the table's order."""
    return (o for o in OPTIONS if front in o.fronts)


def add_arguments(parser: argparse.ArgumentParser, front: str) -> None:
    for o in of(front):
        parser.add_argument(*o.flags, **o.argparse_kwargs())


def value_flags(*fronts: str) -> FrozenSet[str]:
    """The spellings of the options of `fronts` that take a value: a command's or a
    statement's options end at the first word that is neither one nor its value."""
    return frozenset(f for front in fronts for o in of(front) if o.takes_value for f in o.flags)


def optional_value_flags(*fronts: str) -> FrozenSet[str]:
    """The spellings of the options of `fronts` whose value may be left out: the next
    word is their value only when it is one (is_interval)."""
    return frozenset(f for front in fronts for o in of(front) if o.nargs == "?" for f in o.flags)


def with_optional_values(words: List[str], fronts: Tuple[str, ...]) -> List[str]:
    """`words` with each optional-value flag not followed by a value spelled
    --flag=DEFAULT, so argparse does not take the next word (a script) as its value."""
    flags = optional_value_flags(*fronts)
    out = list(words)
    for i, w in enumerate(out):
        if w in flags and not (i + 1 < len(out) and is_interval(out[i + 1])):
            o = next(o for front in fronts for o in of(front) if w in o.flags)
            out[i] = f"{w}={o.const}"
    return out


def problem(args: argparse.Namespace, front: str) -> Optional[str]:
    """The first of `front`'s parsed options that is out of range, said, or None."""
    for o in of(front):
        why = o.problem(getattr(args, o.name, None))
        if why:
            return why
    sample = getattr(args, "sample", None)
    if sample is not None:
        try:
            parse_interval(sample)
        except ValueError as e:
            return str(e)
    return None


_KEYWORDS = {o.keyword: o for o in of(API) if o.keyword}


def check_keyword(keyword: str, value: Any) -> None:
    """Raise ValueError for a bad value of Trace's `keyword`."""
    o = _KEYWORDS[keyword]
    if o.choices is not None and value not in o.choices:
        raise ValueError(f"{keyword} must be one of {', '.join(o.choices)}; got {value!r}")
    if o.minimum is not None and value is not None and (not isinstance(value, int)
                                                         or value < o.minimum):
        raise ValueError(f"{keyword} must be a positive integer or None (unlimited), "
                         f"got {value!r}")


def sampling(mode: str, sample_interval: Any, functions: bool) -> Tuple[int, bool]:
    """(sample_ns, functions) of a trace: sampling replaces the per-call hook, so a
    sampled trace records no call (functions off); not sampling, sample_ns is 0."""
    if mode != "sample" and sample_interval != DEFAULT_SAMPLE_INTERVAL:
        raise ValueError("sample_interval is for mode='sample': pass both")
    sample_ns = parse_interval(sample_interval) if mode == "sample" else 0
    return sample_ns, bool(functions) and not sample_ns


def records_calls(session_options: Dict[str, Any]) -> bool:
    """Whether a session made with these `_core.Session` keywords traces function calls."""
    return bool(session_options.get("functions", True)) and not session_options.get("sample_ns")


def trace_keywords(args: argparse.Namespace) -> Dict[str, Any]:
    """Trace's keywords from a front end's parsed arguments (the magics' or the command
    line's): each option named as one of Trace's keywords, and --sample as
    mode="sample" with its interval (Trace turns functions off: sampling())."""
    kw = {k: getattr(args, k) for k in _KEYWORDS if hasattr(args, k)}
    sample = getattr(args, "sample", None)
    if sample is not None:
        kw.update(mode="sample", sample_interval=sample)
    return kw


REFERENCE = "docs/reference.md"


def _cell(text: str) -> str:
    """`text` in a Markdown table's cell: no column break, no HTML tag."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;").replace("\n", " ")


def _default(o: Option) -> str:
    """The default as trace()'s signature writes it (a string in double quotes)."""
    if o.default is None:
        return ""
    if isinstance(o.default, str):
        return f'`"{o.default}"`'
    if isinstance(o.default, int) and not isinstance(o.default, bool) and o.default >= 10_000:
        return f"`{o.default:_}`"
    return f"`{o.default!r}`"


def reference_markdown() -> str:
    """docs/reference.md: every option of every front end, the output formats and the
    environment variables, from their tables (`make reference` writes it with
    write_reference(); tests/test_reference.py holds the file to this)."""
    from . import env

    fronts = " | ".join(f"`{f}`" for f in FRONTS)
    lines = [
        "# giltracer reference",
        "",
        "<!-- Generated from magics/giltracer/options.py and magics/giltracer/env.py by "
        "`make reference`; do not edit by hand. -->",
        "",
        "## Options",
        "",
        "One row per option of the table: its command-line spelling (the magics' and the "
        "commands'), its keyword of `giltracer.trace()`, its default, and the front ends "
        "that have it (•).",
        "",
        f"| option | keyword | default | {fronts} | what it does |",
        "|---|---|---|" + "---|" * len(FRONTS) + "---|",
    ]
    for o in OPTIONS:
        flags = ", ".join(f"`{f}`" for f in o.flags)
        if o.flags and o.metavar:
            flags += f" `{o.metavar}`" if o.nargs != "?" else f" `[{o.metavar}]`"
        keyword = f"`{o.keyword}=`" if o.keyword and API in o.fronts else ""
        choices = " (" + ", ".join(f"`{c}`" for c in o.choices) + ")" if o.choices else ""
        if o.flags:
            flags += choices
        else:
            keyword += choices
        marks = " | ".join("•" if f in o.fronts else "" for f in FRONTS)
        lines.append(f"| {flags} | {keyword} | {_default(o)} | {marks} | {_cell(o.help)} |")
    lines += [
        "",
        "## Output formats",
        "",
        "What `-o PATH` and `Trace.save(path)` write, by the path's suffix (`save(path, "
        "format=...)` takes the format's name instead):",
        "",
        "| suffix | format |",
        "|---|---|",
    ]
    lines += [f"| `{suffix}` | {fmt} |" for suffix, fmt in OUTPUT_FORMATS.items()]
    lines += [
        "",
        "## Environment variables",
        "",
        f"A {env.USER} is for anyone; the variables giltracer sets for its own processes, "
        "and the test and bench switches, are listed so that nobody sets them by mistake.",
        "",
        "| variable | kind | meaning | read by |",
        "|---|---|---|---|",
    ]
    lines += [f"| `{v.name}` | {v.kind} | {_cell(v.meaning)} | {v.read_by} |"
              for v in env.VARIABLES]
    return "\n".join(lines) + "\n"



def write_reference(path: str = REFERENCE) -> None:
    """Write reference_markdown() to `path` (`make reference`)."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(reference_markdown())
