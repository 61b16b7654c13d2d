"""IPython magics: ``%%giltracer`` traces one cell and shows the viewer inline."""

from __future__ import annotations

import html
import os
import tempfile
from typing import Any, Optional

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display

from .api import BACKENDS, DEFAULT_MAX_EVENTS, Trace


def viewer_bundle(t: Trace, height: int) -> dict:
    """The MIME bundle shown for a trace: the viewer in an iframe (its JS and CSS cannot
    clash with the notebook's) and the per-thread table for text-only front ends."""
    with tempfile.TemporaryDirectory(prefix="giltracer-") as d:
        path = t.save(os.path.join(d, "trace.html"))
        with open(path, encoding="utf-8") as f:
            page = f.read()
    frame = (
        f'<iframe srcdoc="{html.escape(page, quote=True)}" '
        f'style="width:100%;height:{height}px;border:1px solid #ccc;resize:vertical" '
        'sandbox="allow-scripts allow-downloads" frameborder="0"></iframe>'
    )
    return {"text/html": frame, "text/plain": t.summary_text()}


@magics_class
class GilTracerMagics(Magics):
    @magic_arguments()
    @argument("-o", "--output", metavar="PATH", help="also save the trace: .html, .json (Perfetto) or .txt")
    @argument("--backend", choices=BACKENDS, default="auto",
              help="GIL probe: auto (bpf when permitted, else hooks), hooks, bpf")
    @argument("--no-c", dest="c_calls", action="store_false", help="do not record C function calls")
    @argument("--no-functions", dest="functions", action="store_false", help="probe the GIL only")
    @argument("--sched", dest="sched", action="store_true", default=True, help="record OS states (default)")
    @argument("--no-sched", dest="sched", action="store_false", help="do not record OS scheduler states")
    @argument("--max-events", type=int, default=DEFAULT_MAX_EVENTS, metavar="N",
              help=f"keep at most N call events (default {DEFAULT_MAX_EVENTS:,})")
    @argument("--max-depth", type=int, default=None, metavar="N", help="record calls up to N levels below the cell")
    @argument("--include", action="append", metavar="GLOB", help="only trace files matching GLOB")
    @argument("--exclude", action="append", metavar="GLOB", help="do not trace files matching GLOB")
    @argument("--height", type=int, default=600, metavar="PX", help="height of the inline viewer (default 600)")
    @argument("--quiet", action="store_true", help="show the viewer only, no messages")
    @no_var_expand
    @cell_magic
    def giltracer(self, line: str, cell: str) -> None:
        """Run the cell while tracing every call in every thread and probing the GIL;
        show the timeline inline. A cell that raises still shows its trace."""
        args = parse_argstring(self.giltracer, line)
        if args.max_events < 1:
            raise UsageError("--max-events must be a positive number, e.g. --max-events 1000000")
        if args.max_depth is not None and args.max_depth < 1:
            raise UsageError("--max-depth must be a positive number, e.g. --max-depth 20")
        if args.height < 100:
            raise UsageError("--height is in pixels and must be at least 100, e.g. --height 600")
        if args.output and not args.output.lower().endswith((".html", ".htm", ".json", ".txt")):
            raise UsageError(f"-o {args.output}: use a path ending in .html, .json or .txt")
        try:
            t = Trace(functions=args.functions, c_calls=args.c_calls, max_events=args.max_events,
                      include=args.include, exclude=args.exclude, max_depth=args.max_depth,
                      sched=args.sched, backend=args.backend, title="%%giltracer cell")
        except ValueError as e:
            raise UsageError(str(e)) from None

        shell = self.shell
        source = shell.transform_cell(cell)
        filename = shell.compile.cache(source)
        code = shell.compile(source, filename, "exec")
        error: Optional[BaseException] = None
        with t:
            try:
                exec(code, shell.user_ns)
            except BaseException as e:  # shown after the trace, then re-raised
                error = e
        if args.output:
            t.save(args.output)
            if not args.quiet:
                print(f"giltracer: saved {args.output}")
        if not args.quiet and error is not None:
            print(f"giltracer: the cell raised {type(error).__name__}; its trace is below")
        display(viewer_bundle(t, args.height), raw=True)
        if error is not None:
            raise error
