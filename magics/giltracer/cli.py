"""Command line: ``giltracer [options] script.py [args]`` or ``giltracer [options] -m module [args]``;
``giltracer profile [options] script.py [args]`` prints the GIL-split profile instead of the
per-thread table and writes the viewer opened on its Profile tab."""

from __future__ import annotations

import argparse
import builtins
import importlib.machinery
import io
import os
import runpy
import signal
import sys
import threading
import traceback
import types
import zipfile
from typing import Any, Dict, List, Optional, Tuple, cast

import _giltracer_boot as boot

from . import api, live, options
from .api import Trace

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
    options.add_arguments(p, options.CLI_PROFILE if profile else options.CLI)
    p.add_argument("-m", dest="module", metavar="MODULE", help="run a module as a script (like python -m)")
    p.add_argument("target", nargs="?", help="the script to run")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")
    return p


# Options of ours that take a value: everything after the script (or -m MODULE) belongs
# to the script, even when it looks like one of our options (e.g. `-m json.tool --help`).
_VALUE_OPTIONS = options.value_flags(*options.COMMANDS)
_OPTIONAL_VALUE_OPTIONS = options.optional_value_flags(*options.COMMANDS)


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
        if arg in _VALUE_OPTIONS or (arg in _OPTIONAL_VALUE_OPTIONS and i + 1 < len(argv)
                                     and options.is_interval(argv[i + 1])):
            i += 2
            continue
        if not arg.startswith("-") or arg == "-":
            return argv[: i + 1], argv[i + 1:]
        i += 1
    return argv, []


# Exit statuses of giltracer itself; otherwise the script's own (1 for an exception).
EXIT_USAGE = 2  # the script did not run: bad options or output path, or the trace could not start
EXIT_SIGINT = 128 + signal.SIGINT  # 130
EXIT_SIGTERM = 128 + signal.SIGTERM  # 143


class Terminated(BaseException):
    """SIGTERM as an exception in the main thread: the script unwinds (its finally blocks
    run), the trace ends and is written, then giltracer exits 143."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class SignalGuard:
    """Turns SIGTERM into Terminated while the script runs, and holds SIGTERM and Ctrl-C
    (SIGINT) while the trace starts, stops and is written: the trace is always written
    whole, then the run ends as the signal asks. While the script runs, Ctrl-C is Python's
    own (KeyboardInterrupt in the script). Installed only over the default disposition
    (for SIGINT, Python's default_int_handler): an inherited SIG_IGN or a handler of the
    embedding program is left alone; a handler the script installs replaces this one, so
    the script's own behaviour holds."""

    def __init__(self) -> None:
        self.running = False
        self.pending: Optional[int] = None
        self.installed: Dict[int, Any] = {}
        self.pid = os.getpid()
        from . import _core  # (made before the trace starts: no import traced later)

        self._call_untraced = _core.call_untraced
        self._signal: Any = __import__("_signal")  # (signal's functions are Python wrappers)

    def _handler(self, signum: int, frame: Any) -> None:
        if os.getpid() != self.pid:
            # A forked child (multiprocessing's Process.terminate()): it dies of the
            # signal, as it would without giltracer.
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        if self.running:
            raise Terminated(signum) if signum == signal.SIGTERM else KeyboardInterrupt()
        if self.pending != signal.SIGTERM:  # (the stronger of the two: it ends the process)
            self.pending = signum

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for signum, default in ((signal.SIGTERM, signal.SIG_DFL),
                                (signal.SIGINT, signal.default_int_handler)):
            previous = signal.getsignal(signum)
            if previous == default:
                signal.signal(signum, self._handler)
                self.installed[signum] = previous

    def script_begins(self) -> Optional[int]:
        """The script runs from now: SIGTERM raises Terminated, Ctrl-C is Python's again.
        The signal held since install (the script is not to run at all), or None."""
        self.running = True
        self._swap_sigint(self._handler, signal.default_int_handler)
        held, self.pending = self.pending, None
        return held

    def script_ended(self) -> None:
        """Signals are held again, while the trace stops and is written."""
        self.running = False
        self._swap_sigint(signal.default_int_handler, self._handler)

    def _swap_sigint(self, was: Any, now: Any) -> None:
        """SIGINT's handler `was` becomes `now` (else it is left alone: the script's own).
        Called while the script is traced: through _signal's C functions, from C, so the
        trace holds no call of giltracer's own beside the script's."""
        if signal.SIGINT not in self.installed:
            return
        quiet, raw = self._call_untraced, self._signal
        if quiet(raw.getsignal, signal.SIGINT) == was:
            quiet(raw.signal, signal.SIGINT, now)

    def restore(self) -> None:
        for signum, previous in self.installed.items():
            if signal.getsignal(signum) == self._handler:
                signal.signal(signum, previous)
        self.installed.clear()


# A followed fork child (_giltracer_boot) installs its own SIGTERM handler, which writes its
# trace before it dies, over the default only, or over this one: in a fork it stands for the
# default (the child dies of the signal).
setattr(SignalGuard._handler, boot.DEFAULT_IN_FORK, True)


def _ours(filename: str) -> bool:
    return (filename.startswith(api._PACKAGE_DIR) or filename == getattr(runpy, "__file__", None)
            or filename == "<frozen runpy>")  # 3.11+ freezes runpy


def _raised_by_us(e: BaseException) -> bool:
    """Whether `e` was raised in giltracer's or runpy's code, not in the user's."""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is None or _ours(tb.tb_frame.f_code.co_filename)


def print_user_traceback(e: BaseException) -> None:
    """The traceback Python itself would print for the script: giltracer's and runpy's
    frames left out (those between the interpreter and the script's own code)."""
    tb = e.__traceback__
    while tb is not None and _ours(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    try:
        traceback.print_exception(type(e), e, tb)
    except (OSError, ValueError):  # stderr closed by the script
        pass


def write(stream: Any, fd: int, text: str) -> None:
    """`text` on `stream` (sys.stdout or sys.stderr as they were before the script ran).
    When the script closed it (json.tool closes sys.stdout; the descriptor stays open), on
    the descriptor; when nobody reads any more (a closed pipe), nowhere, and later writes
    go to /dev/null so the interpreter's own flush at exit does not fail either."""
    try:
        stream.write(text)
        stream.flush()
        return
    except (AttributeError, ValueError):  # None, or closed
        pass
    except BrokenPipeError:
        _silence(fd)
        return
    except OSError:
        return
    try:
        os.write(fd, text.encode("utf-8", "replace"))
    except BrokenPipeError:
        _silence(fd)
    except OSError:
        pass


def _silence(fd: int) -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    except OSError:
        pass


def exit_status(e: SystemExit) -> int:
    """The status Python gives sys.exit(code): None 0, an int itself, anything else is
    printed on stderr and gives 1."""
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    write(sys.stderr, 2, f"{e.code}\n")
    return 1


def prepare_script(path: str) -> Optional[Tuple[Any, types.ModuleType]]:
    """(code, module) to run `path` as ``__main__`` the way ``python path`` does, or None
    for what runpy must run (a directory, a zip file, a .pyc). Compiled before the trace
    starts, so the script's module code is depth 1 for --max-depth."""
    if not os.path.isfile(path) or path.endswith((".pyc", ".pyo")) or zipfile.is_zipfile(path):
        return None
    path = os.path.abspath(path)  # as python (3.9+) names the script: __file__, tracebacks
    with io.open_code(path) as f:
        source = f.read()
    code = compile(source, path, "exec", dont_inherit=True)
    module = types.ModuleType("__main__")
    module.__dict__.update(__file__=path, __cached__=None, __package__=None, __spec__=None,
                           __loader__=importlib.machinery.SourceFileLoader("__main__", path),
                           __builtins__=builtins)
    return code, module


def prepare_module(name: str) -> Tuple[Any, types.ModuleType]:
    """(code, module) to run module `name` as ``__main__`` the way ``python -m name`` does
    (a package runs its __main__). Raises ImportError when there is no such module."""
    _, spec, code = runpy._get_module_details(name)  # type: ignore[attr-defined]
    module = types.ModuleType("__main__")
    module.__dict__.update(__file__=spec.origin, __cached__=spec.cached, __package__=spec.parent,
                           __spec__=spec, __loader__=spec.loader, __builtins__=builtins)
    return code, module


def main(argv: Optional[List[str]] = None) -> int:
    """The command line; returns the exit status (see EXIT_*). On SIGTERM it ends the
    process itself (os._exit(143)) once the trace is written, as the signal would have."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # `giltracer profile x.py`; a script really named "profile" runs as ./profile.
    profile = bool(argv) and argv[0] == PROFILE_COMMAND
    if profile:
        argv = argv[1:]
    p = build_parser(profile)
    ours, rest = split_argv(argv)
    a = p.parse_args(options.with_optional_values(ours, options.COMMANDS))
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
    bad = options.problem(a, options.CLI_PROFILE if profile else options.CLI)
    if bad:
        p.error(bad)
    out = a.output or (os.path.splitext(os.path.basename(target))[0] + ".giltracer.html")
    try:
        options.output_format(out)
    except ValueError as e:
        p.error(str(e))
    why = api.check_output_path(out)
    if why:  # before the script runs: its work is not lost to the output path
        p.error(f"cannot write the trace to {out}: {why}")
    try:
        t = Trace(title=run_name, **options.trace_keywords(a))
    except ValueError as e:
        p.error(str(e))
    t.host_thread = live.service_thread
    t.on_notice = lambda m: None  # the report's table says it (NOTE) ...
    t.on_loss = lambda m: None  # ... and each loss (WARNING; -q: report() prints them)
    return run(a, t, target, out, profile)


def run(a: argparse.Namespace, t: Trace, target: str, out: str, profile: bool) -> int:
    """Run the script (or module) traced, write the trace and report; the exit status."""
    stdout, stderr = sys.stdout, sys.stderr  # as they are now: the script may close or replace them
    try:
        prepared = prepare_module(target) if a.module else prepare_script(target)
    except BaseException as e:
        if isinstance(e, ImportError) and _raised_by_us(e):  # no such module: one line
            write(stderr, 2, f"giltracer: {e}\n")
            return EXIT_USAGE
        print_user_traceback(e)  # a syntax error, or a package's __init__ that raised
        return 1
    run_code = api.code_runner()
    saved_argv, saved_main, saved_path = sys.argv, sys.modules.get("__main__"), list(sys.path)
    main_file = target if prepared is None or not a.module else cast(str, prepared[1].__file__)
    sys.argv = [main_file] + list(a.args)
    if not a.module:
        sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
    if prepared is not None:
        sys.modules["__main__"] = prepared[1]
    guard = SignalGuard()
    guard.install()
    status, signum = 0, None
    meter = progress_line(a, t, stderr)
    try:
        try:
            t.start()
        except Exception as e:  # nothing ran: one line, no traceback
            if meter is not None:
                meter.end()
            guard.restore()
            write(stderr, 2, api.start_failure(e) + "\n")
            return EXIT_USAGE
        if meter is not None:
            meter.begin()
        try:
            status, signum = run_target(prepared, target, run_code, guard, meter)
        finally:
            try:
                t.stop()
            except Exception as e:
                write(stderr, 2, f"giltracer: could not end the trace: {type(e).__name__}: {e}\n")
                status = status or 1
                t = None  # type: ignore[assignment]
        if t is not None:
            status = report(a, t, out, profile, status, signum, stdout, stderr)
            if a.quiet:  # no table printed: its WARNING lines, one line each
                for note in t.loss_notes():
                    write(stderr, 2, note + "\n")
        held = guard.pending  # a signal while the trace was stopped and written
        if held is not None and signum != held and signum != signal.SIGTERM:
            signum, status = held, 128 + held
            write(stderr, 2, f"giltracer: interrupted ({signal.Signals(signum).name})\n")
    finally:
        guard.restore()
        sys.argv = saved_argv
        sys.path[:] = saved_path
        if prepared is not None:
            if saved_main is not None:
                sys.modules["__main__"] = saved_main
            else:
                sys.modules.pop("__main__", None)
    if signum == signal.SIGTERM:
        # Like the default disposition of SIGTERM: no waiting for the script's other
        # threads and no atexit handlers, once the trace is written.
        for stream, fd in ((stdout, 1), (stderr, 2)):
            write(stream, fd, "")
        os._exit(status)
    return status


def run_target(prepared: Any, target: str, run_code: Any, guard: SignalGuard,
               meter: Optional[live.TerminalLine]) -> Tuple[int, Optional[int]]:
    """Run the script (or module) as __main__; its exit status and the signal that ended
    it (None if none did), the way python would report them."""
    status, signum = 0, None
    try:
        try:
            held = guard.script_begins()
            if held is not None:  # while the trace started: as if at the script's first line
                return 128 + held, held
            if prepared is not None:
                run_code(prepared[0], prepared[1].__dict__)
            else:  # a directory or zip file with __main__.py, or a .pyc: runpy runs it
                runpy.run_path(target, run_name="__main__")
        finally:
            guard.script_ended()
            if meter is not None:
                meter.end()
    except SystemExit as e:  # the script's own exit status
        status = exit_status(e)
    except Terminated as e:
        status, signum = 128 + e.signum, e.signum
    except KeyboardInterrupt as e:  # Ctrl-C: what python prints, then 130 (as a shell reports it)
        print_user_traceback(e)
        status, signum = EXIT_SIGINT, signal.SIGINT
    except BaseException as e:  # the script's exception, as python would print it
        print_user_traceback(e)
        status = 1
    return status, signum


def progress_line(a: argparse.Namespace, t: Trace, stderr: Any) -> Optional[live.TerminalLine]:
    """The live progress line on stderr, made before the trace starts (its thread is then
    the host's), or None: -q, --no-live, or stderr is no terminal."""
    try:
        if a.quiet or not a.live or not stderr.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    return live.TerminalLine(t, stderr)


def report(a: argparse.Namespace, t: Trace, out: str, profile: bool, status: int,
           signum: Optional[int], stdout: Any, stderr: Any) -> int:
    """Write the trace to `out` and print the tables (or, with -q, the path); the status."""
    try:
        t.save(out, tab="profile" if profile and options.is_page(out) else None)
    except Exception as e:  # e.g. the directory was removed while the script ran
        write(stderr, 2, f"giltracer: could not write the trace to {out}: {type(e).__name__}: {e}\n")
        return status or 1
    wrote = (f"giltracer: interrupted ({signal.Signals(signum).name}); wrote {out}\n"
             if signum is not None else f"giltracer: wrote {out}\n")
    if profile and not a.quiet:
        write(stdout, 1, t.profile_text(a.top, a.sort))
        write(stderr, 2, wrote)
    elif not a.quiet:
        write(stderr, 2, t.summary_text(a.top))
        write(stderr, 2, wrote)
    else:
        write(stdout, 1, out + "\n")
        if signum is not None:
            write(stderr, 2, wrote)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
