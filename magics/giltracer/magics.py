"""IPython magics: ``%%giltracer`` traces one cell and shows the viewer inline;
``%gilprofile STATEMENT`` / ``%%gilprofile`` show the GIL-split profile."""

from __future__ import annotations

import ast
import inspect
import re
import sys
import threading
from types import FrameType
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.core.magic import (Magics, cell_magic, line_cell_magic, magics_class,
                                needs_local_scope, no_var_expand)
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display

from . import api, live as live_meter, options
from .api import Trace, parse_size
from .options import DEFAULT_MAX_OUTPUT


def viewer_bundle(t: Trace, height: int, text: Optional[str] = None,
                  tab: Optional[str] = None, max_output: int = DEFAULT_MAX_OUTPUT,
                  saved_html: Optional[str] = None, theme: Optional[str] = None) -> Dict[str, str]:
    """The MIME bundle shown for a trace (Trace.display_bundle); a page over
    `max_output` bytes is saved in the working directory (the notebook's) and linked."""
    return t.display_bundle(height, text, tab, max_output=max_output, saved_html=saved_html,
                            theme=theme)


def max_output_arg(text: str) -> int:
    try:
        n = parse_size(text)
    except ValueError as e:
        raise UsageError(f"--max-output: {e}") from None
    if n < 1:
        raise UsageError("--max-output must be a positive size, e.g. --max-output 20MB")
    return n


def make_trace(args: Any, title: str) -> Trace:
    """A Trace from the options both magics share; a bad value is a UsageError."""
    if args.output:
        try:
            options.output_format(args.output)
        except ValueError as e:
            raise UsageError(str(e)) from None
    why = api.check_output_path(args.output) if args.output else None
    if why:  # before the code runs: its work is not lost to the output path
        raise UsageError(f"-o {args.output}: {why}")
    try:
        t = Trace(title=title, **options.trace_keywords(args))
    except ValueError as e:
        raise UsageError(str(e)) from None
    # The budget notice as a plain message under the cell (not a warning with a file:line).
    t.on_notice = (lambda m: None) if getattr(args, "quiet", False) else (
        lambda m: print(m, file=sys.stderr))
    return t


def check_var(name: Optional[str]) -> None:
    if name is not None and not name.isidentifier():
        raise UsageError(f"--var {name}: give a Python variable name, e.g. --var t")


Magic = Callable[..., Any]


def magic_options(front: str) -> Callable[[Magic], Magic]:
    """@magic_arguments() and an @argument for each of `front`'s options in the table."""
    def decorate(func: Magic) -> Magic:
        for o in reversed(list(options.of(front))):
            func = argument(*o.flags, **o.argparse_kwargs())(func)
        return magic_arguments()(func)  # type: ignore[no-any-return]
    return decorate


def check_options(args: Any, front: str) -> None:
    """A parsed value out of range is a UsageError."""
    bad = options.problem(args, front)
    if bad:
        raise UsageError(bad)
    check_var(args.var)


def start_trace(t: Trace) -> None:
    """A trace that cannot start (another one is recording) is a UsageError."""
    try:
        t.start()
    except RuntimeError as e:
        raise UsageError(api.start_failure(e)) from None


def end_trace(t: Trace, error: Optional[BaseException]) -> None:
    """Stop the trace; when it cannot end, the code's exception (`error`) propagates with
    a note saying so, or, when the code raised none, the failure to end it."""
    try:
        t.stop()
    except Exception as e:
        if error is None:
            raise
        output_failed(error, f"could not end the trace: {type(e).__name__}: {e}")
        raise error


def start_live(t: Trace, live: Optional["live_meter.NotebookMeter"]) -> None:
    """The live meter's redraws, then start_trace() (a trace that cannot start clears it).
    Begun before the trace: waking the meter's thread is giltracer's doing, not the cell's
    (in the trace it is calls of the cell's thread and a GIL wait on the meter)."""
    if live is not None:
        live.begin()
    try:
        start_trace(t)
    except BaseException:
        if live is not None:
            live.close()
        raise


def end_live(t: Trace, error: Optional[BaseException],
             live: Optional["live_meter.NotebookMeter"]) -> None:
    """end_trace(), then the meter's end (after the trace, as its begin was before it;
    a trace that cannot end clears it)."""
    try:
        end_trace(t, error)
    except BaseException:
        if live is not None:
            live.close()
        raise
    if live is not None:
        live.end()


def run_traced(t: Trace, run: Any, live: Optional["live_meter.NotebookMeter"] = None
               ) -> Tuple[Any, Optional[BaseException]]:
    """run() inside the trace: (its value, the exception it raised or None), once the
    trace has ended (end_trace()). A trace that cannot start is a UsageError, and run()
    does not run. `live`: the meter shown while it runs (made before the trace)."""
    start_live(t, live)
    try:
        value, error = run(), None
    except BaseException as e:  # shown after the trace, then re-raised
        value, error = None, e
    end_live(t, error, live)
    return value, error


async def run_traced_async(t: Trace, run: Any, live: Optional["live_meter.NotebookMeter"] = None
                           ) -> Tuple[Any, Optional[BaseException]]:
    """run_traced() for code with a top-level await: run() gives a coroutine, awaited
    inside the trace on the loop that awaits this (IPython's, as for any such cell)."""
    start_live(t, live)
    try:
        value = run()
        if inspect.isawaitable(value):
            value = await value
        error = None
    except BaseException as e:  # shown after the trace, then re-raised
        value, error = None, e
    end_live(t, error, live)
    return value, error


def make_live(shell: InteractiveShell, args: Any, t: Trace) -> Optional["live_meter.NotebookMeter"]:
    """The live GIL meter for this cell, shown now (before the trace starts: its thread
    is then the host's), or None: --no-live, -q, or no kernel front end to update it."""
    if not getattr(args, "live", True) or args.quiet or not live_meter.kernel_displays(shell):
        return None
    try:
        return live_meter.NotebookMeter(t)
    except Exception:  # no meter is no reason not to trace
        return None


def host_thread(t: threading.Thread) -> bool:
    """The kernel's threads: background in every view. (The live meter's is giltracer's
    own, which the trace leaves out of every view by itself.)"""
    return kernel_thread(t)


# CO_COROUTINE: what a code object compiled with PyCF_ALLOW_TOP_LEVEL_AWAIT is flagged with
# when it awaits at the top level (its run gives a coroutine).
_CO_COROUTINE = inspect.CO_COROUTINE
_TOP_LEVEL_AWAIT: int = getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0x2000)


def awaits(code: Any) -> bool:
    return bool(code.co_flags & _CO_COROUTINE)


def await_cells(lines: List[str]) -> List[str]:
    """IPython post-input transformer: a %%giltracer or %%gilprofile cell whose body awaits
    at the top level becomes ``await get_ipython().run_cell_magic(...)``, so IPython runs the
    cell as it runs any cell with a top-level await (on its loop, with autoawait) and awaits
    the coroutine the magic returns for such a body."""
    text = "".join(lines)
    if not text.startswith("get_ipython().run_cell_magic(") or "await" not in text:
        return lines
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return lines
    stmt = tree.body[0] if len(tree.body) == 1 else None
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    args = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
            ] if isinstance(call, ast.Call) and not call.keywords else []
    if len(args) != 3 or len(args) != len(call.args):  # type: ignore[union-attr]
        return lines
    name, body = str(args[0]), str(args[2])
    if name not in ("giltracer", "gilprofile"):
        return lines
    shell = InteractiveShell.instance() if InteractiveShell.initialized() else None
    if shell is not None and not shell.autoawait:
        return lines  # IPython would not await it: the magic says why it cannot run
    try:
        # As the magic compiles it: its IPython syntax (!cmd, %time) made Python first.
        source = shell.transform_cell(body) if shell is not None else body
        if not awaits(compile(source, "<cell>", "exec", flags=_TOP_LEVEL_AWAIT, dont_inherit=True)):
            return lines
    except (SyntaxError, ValueError):
        return lines  # not Python even so: compiled, and reported, by the magic
    return ["await " + text.lstrip()]


def caller_awaits() -> bool:
    """Whether the code that called the magic (the nearest frame outside IPython and
    giltracer) runs as a coroutine, so it can await what the magic returns: a cell that
    await_cells rewrote, or an async function. A plain call would get a coroutine it
    never awaits, and the cell would silently not run."""
    frame: Optional[FrameType] = sys._getframe(1)
    while frame is not None:
        module = str(frame.f_globals.get("__name__", ""))
        if (module.split(".", 1)[0] not in ("IPython", "giltracer", "decorator")
                and not frame.f_code.co_filename.startswith("<decorator-gen")):
            return awaits(frame.f_code)
        frame = frame.f_back
    return False


def check_awaited(magic: str) -> None:
    """A cell with a top-level await that nothing would await is a UsageError (before it
    runs), not a coroutine lost."""
    if not caller_awaits():
        raise UsageError(
            f"%%{magic}: the cell awaits at the top level, but what ran it does not await "
            "it (IPython awaits such a cell when it is the notebook's own cell with "
            "%autoawait on; from code, use await get_ipython().run_cell_magic(...) in an "
            "async function); nothing ran")


def cell_numbers(shell: InteractiveShell) -> Dict[str, Any]:
    """IPython's compiler's {cell file name: execution count} (a private map: {} where
    this IPython has none), copied: cells run while it is read."""
    return dict(getattr(shell.compile, "_filename_map", None) or {})


def cell_labels(shell: InteractiveShell) -> Dict[str, str]:
    """The file names IPython's compiler gave the notebook's cells -> "In [N]" (the cells
    whose execution count it knows)."""
    return {f: f"In [{n}]" for f, n in cell_numbers(shell).items() if isinstance(n, int) and n > 0}


# Packages whose threads are a kernel's own machinery: IOPub, shell channel, control,
# heartbeat, parent poller, output pipe watchers, zmq's garbage collector.
KERNEL_PACKAGES = ("ipykernel", "jupyter_client", "zmq", "tornado", "IPython", "debugpy")


def kernel_thread(t: threading.Thread) -> bool:
    """Whether the thread is the kernel's (by the module of its class or of its target),
    not the user's: such threads are background in every view, whatever they did with the
    GIL (IOPub holds it for milliseconds while it sends a cell's output)."""
    target = getattr(t, "_target", None)
    for mod in (type(t).__module__, getattr(target, "__module__", None) or ""):
        if mod.split(".", 1)[0] in KERNEL_PACKAGES:
            return True
    return False


def current_cell(shell: InteractiveShell) -> int:
    """The execution count of the cell that called the magic (0 when unknown, e.g. called
    from a function): the nearest caller's frame whose file IPython's compiler cached for a
    cell. (shell.execution_count moves before or after the cell, by IPython's version.)"""
    numbers = cell_numbers(shell)
    frame: Optional[FrameType] = sys._getframe(1)
    while frame is not None:
        n = numbers.get(frame.f_code.co_filename)
        if isinstance(n, int) and n > 0:
            return n
        frame = frame.f_back
    return 0


def output_failed(error: BaseException, message: str) -> None:
    """Say that the trace could not be saved or shown, beside the code's own exception
    `error`: a note on it (3.11+) and a line on stderr (every version)."""
    line = f"giltracer: {message}"
    if hasattr(error, "add_note"):
        error.add_note(line)
    print(line, file=sys.stderr)


def deliver(t: Trace, args: Any, error: Optional[BaseException], what: str, bundle: Any) -> None:
    """Save (-o) and show (bundle() -> the MIME bundle) the trace of code that raised `error`
    (or None), then raise that error. Saving or showing never replaces it: a failure is a
    note on it and a line on stderr. When the code did not raise, a failure is a
    UsageError (a one-line message; the trace is still in --var NAME and giltracer.last())."""
    failures = []
    if args.output:
        html_out = options.is_page(args.output)
        try:
            t.save(args.output, tab=bundle.tab if html_out else None,
                   theme=args.theme if html_out else None)
            if not args.quiet:
                print(f"giltracer: saved {args.output}")
        except Exception as e:
            failures.append(f"could not save the trace to {args.output}: {type(e).__name__}: {e}")
    live = getattr(bundle, "live", None)
    if not args.quiet and error is not None:
        where = "above" if live is not None else "below"
        print(f"giltracer: the {what} raised {type(error).__name__}; its trace is {where}")
    if not args.quiet:
        try:
            if live is not None:  # the viewer takes the live meter's place
                live.replace(bundle())
            else:
                display(bundle(), raw=True)
        except Exception as e:
            failures.append(f"could not show the trace: {type(e).__name__}: {e}")
            if live is not None:
                live.close()
    elif live is not None:
        live.close()
    if error is not None:
        for message in failures:
            output_failed(error, message)
        raise error
    if failures:
        raise UsageError("giltracer: " + "; ".join(failures) + " (the trace is in --var NAME "
                         "or giltracer.last())")


class Bundle:
    """The viewer bundle of a trace, made when shown (deliver() catches its failures)."""

    def __init__(self, t: Trace, args: Any, max_output: int,
                 text: Union[None, str, Callable[[], str]] = None, tab: Optional[str] = None,
                 live: Optional["live_meter.NotebookMeter"] = None) -> None:
        self.t, self.args, self.max_output, self.text, self.tab = t, args, max_output, text, tab
        self.live = live  # the live meter the viewer replaces, or None

    def __call__(self) -> Dict[str, str]:
        a = self.args
        text = self.text() if callable(self.text) else self.text
        return viewer_bundle(self.t, a.height, text, tab=self.tab, max_output=self.max_output,
                             saved_html=saved_page(a), theme=a.theme)


def saved_page(args: Any) -> Optional[str]:
    """The -o path when it is the viewer page (linked instead of saving a second copy)."""
    return args.output if args.output and options.is_page(args.output) else None


# Options of %gilprofile that take a value: the statement starts after the options.
_PROFILE_VALUE_OPTIONS = options.value_flags(options.PROFILE)
_PROFILE_OPTIONAL_VALUE_OPTIONS = options.optional_value_flags(options.PROFILE)


def split_statement(line: str) -> Tuple[str, str]:
    """'--top 3 f(x, "a  b")' -> ('--top 3', 'f(x, "a  b")'): the statement is kept
    verbatim. `--` ends the options (for a statement that starts with '-')."""
    pos, expect_value, optional_value = 0, False, False
    while True:
        m = re.match(r"\s*(\S+)", line[pos:])
        if not m:
            break
        token = m.group(1)
        if expect_value:
            expect_value = False
        elif optional_value and options.is_interval(token):
            optional_value = False
        elif token == "--":
            return line[:pos].strip(), line[pos + m.end():].strip()
        elif not token.startswith("-") or token == "-":
            break
        else:
            expect_value = token in _PROFILE_VALUE_OPTIONS
            optional_value = token in _PROFILE_OPTIONAL_VALUE_OPTIONS
            pos += m.end()
            continue
        optional_value = False
        pos += m.end()
    return line[:pos].strip(), line[pos:].strip()


@magics_class
class GilTracerMagics(Magics):
    @magic_options(options.CELL)
    @no_var_expand
    @cell_magic
    def giltracer(self, line: str, cell: str) -> Any:
        """Run the cell while tracing every call in every thread and probing the GIL;
        show the timeline inline. A cell that raises still shows its trace."""
        args = parse_argstring(self.giltracer, line)
        check_options(args, options.CELL)
        max_output = max_output_arg(args.max_output)
        code = self._compile(cell, "exec", cell_body=True)
        t = make_trace(args, self._title("%%giltracer"))
        t.file_labels = lambda: cell_labels(self._shell)
        t.host_thread = host_thread
        ns = self._shell.user_ns  # fetched before the trace: a property, a call of its own
        run = api.code_runner()
        if awaits(code):
            check_awaited("giltracer")
        live = make_live(self._shell, args, t)
        if awaits(code):
            return self._await(t, args, lambda: run(code, ns), ns, "cell",
                               Bundle(t, args, max_output, live=live))
        _, error = run_traced(t, lambda: run(code, ns), live)
        if args.var is not None:
            ns[args.var] = t
        deliver(t, args, error, "cell", Bundle(t, args, max_output, live=live))
        return None

    @magic_options(options.PROFILE)
    @no_var_expand
    @needs_local_scope
    @line_cell_magic
    def gilprofile(self, line: str, cell: Optional[str] = None, local_ns: Any = None) -> Any:
        """Run a statement (``%gilprofile f()``, whose value it returns, like ``%time``) or
        the cell (``%%gilprofile``) traced, and show where each function's time went
        GIL-wise: running, held off CPU, waiting for the GIL, released; plus the GIL wait
        it caused in other threads. A statement that raises still shows its profile.
        ``--`` ends the options, for a statement that starts with '-'."""
        words, statement = (line, "") if cell is not None else split_statement(line)
        args = parse_argstring(self.gilprofile, words)
        if cell is None and not statement:
            raise UsageError("%gilprofile needs a statement, e.g. %gilprofile f(); "
                             "or use %%gilprofile on a cell")
        check_options(args, options.PROFILE)
        max_output = max_output_arg(args.max_output)
        ns = self._shell.user_ns  # fetched before the trace: a property, a call of its own
        if cell is None:
            code, run_locals = self._statement(statement), local_ns
        else:
            code, run_locals = self._compile(cell, "exec", cell_body=True), None
        t = make_trace(args, "%gilprofile " + statement if cell is None else self._title("%%gilprofile"))
        t.file_labels = lambda: cell_labels(self._shell)
        t.host_thread = host_thread
        run = api.code_runner()
        if cell is not None and awaits(code):
            check_awaited("gilprofile")
        live = make_live(self._shell, args, t)
        if cell is not None and awaits(code):
            return self._await(t, args, lambda: run(code, ns), ns, "cell",
                               Bundle(t, args, max_output, lambda: t.profile_text(args.top, args.sort),
                                      tab="profile", live=live))
        value, error = run_traced(t, lambda: run(code, ns, run_locals), live)
        if args.var is not None:
            ns[args.var] = t
        deliver(t, args, error, "statement" if cell is None else "cell",
                Bundle(t, args, max_output, lambda: t.profile_text(args.top, args.sort), tab="profile",
                       live=live))
        return value if cell is None else None

    # -- helpers -------------------------------------------------------------------
    @property
    def _shell(self) -> InteractiveShell:
        shell = self.shell
        assert shell is not None, "the magics are used once registered in a shell"
        return shell

    def _title(self, magic: str) -> str:
        n = current_cell(self._shell)
        return f"{magic} In [{n}]" if n > 0 else f"{magic} cell"

    async def _await(self, t: Trace, args: Any, run: Any, ns: Dict[str, Any], what: str,
                     bundle: Bundle) -> None:
        """The magic of a cell with a top-level await: IPython awaits this (await_cells)."""
        _, error = await run_traced_async(t, run, bundle.live)
        if args.var is not None:
            ns[args.var] = t
        deliver(t, args, error, what, bundle)

    def _compile(self, source: str, mode: str, cell_body: bool = False) -> Any:
        """`source` compiled as IPython compiles cells. A cell magic's body is cached under
        the running cell's number and one line down (below the %%magic line), so its
        code reads "In [N]" with the cell's line numbers, in the trace and in tracebacks;
        a top-level await is allowed (the code then gives a coroutine: see await_cells)."""
        shell = self._shell
        source = shell.transform_cell(source)
        if not cell_body:
            return shell.compile(source, shell.compile.cache(source), mode)
        source = "\n" + source
        name = shell.compile.cache(source, current_cell(shell))
        try:
            return shell.compile(source, name, mode)
        except SyntaxError:
            flags = shell.compile.flags | _TOP_LEVEL_AWAIT
            return compile(source, name, mode, flags=flags, dont_inherit=True)

    def _statement(self, statement: str) -> Any:
        """`statement` compiled: in "eval" mode for an expression (running it gives its
        value), else in "exec" mode (running it gives None, as %time does)."""
        try:
            return self._compile(statement, "eval")
        except SyntaxError:
            try:
                return self._compile(statement, "exec")
            except SyntaxError as e:
                raise UsageError(f"%gilprofile: not a Python statement: {e.msg}: {statement!r}") from None
