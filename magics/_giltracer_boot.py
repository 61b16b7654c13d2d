"""A child process's side of ``follow_children`` (giltracer/_child.py has the parent's).

Imported by the ``giltracer_children.pth`` start-up hook only when ``GILTRACER_CHILD`` is
set, and by the parent's fork hook. It imports nothing of giltracer's package but its C core
(the package's ``__init__`` brings typing, re, dataclasses...: tens of milliseconds a child
would pay at birth), and only built-in modules besides.
"""

import os
import sys
from typing import Any, Dict, List, NoReturn, Optional, Tuple, Union

ENV = "GILTRACER_CHILD"
FIELD, ITEM = "\x1f", "\x1e"
# multiprocessing's helper processes outlive the parent's trace (no spool ever); the fork
# server is not traced, its forks (the workers) are, through its fork hook.
_HELPERS = (b"from multiprocessing.resource_tracker import main",
            b"from multiprocessing.semaphore_tracker import main")
_FORK_SERVER = b"from multiprocessing.forkserver import main"
# A SIGTERM handler marked with this attribute stands for the default disposition in a fork
# (it kills the child with the signal): giltracer.cli's, which a fork of the CLI inherits.
DEFAULT_IN_FORK = "_giltracer_default_in_fork"

_following: Optional[str] = None  # the value a fork child follows with (parent or child), or None
_fork_hook = False
_session: Any = None
_session_pid = 0  # the process _session records (a fork's copy is not ours)
_real_exit = os._exit
_exits_installed = False
# _begin() or end() is at work: a SIGTERM then waits for it (_term_pending), else a
# Pool.terminate() arriving as a worker starts or ends its session (os._exit) lost its trace.
_busy = False
_term_pending = False
# Every SPOOL_EVERY s a child writes what it recorded since to a checkpoint, so that a
# child killed (SIGKILL) loses only what it did after the last (Session.spool:
# core/py/session.h).
SPOOL_EVERY = 0.25
SPOOL_THREAD = "giltracer spool"
_spooler_tid = 0  # its native id


def encode(prefix: str, options: Dict[str, Any]) -> str:
    """The variable's value: the spool prefix, then name=value options (lists: items)."""
    parts = [prefix]
    v: Any
    for k, v in sorted(options.items()):
        if isinstance(v, (list, tuple)):
            v = "L" + ITEM.join(v)
        elif isinstance(v, bool):
            v = "B" + ("1" if v else "0")
        elif v is None:
            v = "N"
        else:
            v = "I" + str(int(v))
        parts.append(k + "=" + v)
    return FIELD.join(parts)


def decode(value: str) -> Tuple[str, Dict[str, Any]]:
    parts = value.split(FIELD)
    options: Dict[str, Union[None, bool, int, List[str]]] = {}
    for p in parts[1:]:
        k, _, v = p.partition("=")
        kind, v = v[:1], v[1:]
        options[k] = (v.split(ITEM) if v else []) if kind == "L" else (v == "1") if kind == "B" \
            else None if kind == "N" else int(v)
    return parts[0], options


# The fallback build of the core (CMakeLists.txt: _core_dyn), in this folder of the package.
TLS_DYNAMIC_DIR = "_tls_dynamic"
# Set to "dynamic": load the fallback build from the start, e.g. to leave the static TLS
# surplus to a library loaded later that needs it (giltracer's build takes 56 bytes of it).
TLS_ENV = "GILTRACER_TLS"


def core_loader(path: str) -> Any:
    """An ExtensionFileLoader of giltracer._core at `path` that falls back to the build in
    TLS_DYNAMIC_DIR beside it when the process's static TLS block has no room left for the
    core's initial-exec thread-locals (glibc's dlopen error "cannot allocate memory in
    static TLS block": libraries loaded before used up the surplus it keeps for them).
    The fallback reaches them through __tls_get_addr (probe_info()["tls_model"])."""
    from importlib.machinery import ExtensionFileLoader

    class CoreLoader(ExtensionFileLoader):
        def create_module(self, spec: Any) -> Any:
            dyn = os.path.join(os.path.dirname(self.path), TLS_DYNAMIC_DIR,
                               os.path.basename(self.path))
            if os.environ.get(TLS_ENV) == "dynamic":
                self.path = spec.origin = dyn
            try:
                return super().create_module(spec)
            except ImportError as e:
                if "static TLS" not in str(e) or self.path == dyn or not os.path.exists(dyn):
                    raise
            self.path = spec.origin = dyn  # the module's __file__ says which build loaded
            return super().create_module(spec)

    return CoreLoader("giltracer._core", path)


class CoreFinder:
    """The finder of giltracer._core (the package puts it first in sys.meta_path): the
    path finder's spec with core_loader()'s loader."""

    @staticmethod
    def find_spec(name: str, path: Any = None, target: Any = None) -> Any:
        if name != "giltracer._core":
            return None
        from importlib.machinery import ExtensionFileLoader, PathFinder

        spec = PathFinder.find_spec(name, path)
        if spec is not None and spec.origin and type(spec.loader) is ExtensionFileLoader:
            spec.loader = core_loader(spec.origin)
        return spec


def _core() -> Any:
    """giltracer._core, loaded without running the package's __init__ (a later
    ``import giltracer`` finds and uses this same module)."""
    mod = sys.modules.get("giltracer._core")
    if mod is not None:
        return mod
    from importlib.machinery import EXTENSION_SUFFIXES, ModuleSpec

    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "giltracer")
    for suffix in EXTENSION_SUFFIXES:
        path = os.path.join(here, "_core" + suffix)
        if os.path.exists(path):
            loader = core_loader(path)
            spec = ModuleSpec("giltracer._core", loader, origin=path)
            mod = loader.create_module(spec)
            mod.__spec__, mod.__loader__, mod.__file__ = spec, loader, spec.origin
            sys.modules["giltracer._core"] = mod
            loader.exec_module(mod)
            return mod
    raise ImportError("giltracer._core not found beside " + __file__)


def register_fork_hook() -> None:
    global _fork_hook
    if not _fork_hook and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork)
        _fork_hook = True


def follow(value: Optional[str]) -> None:
    """The parent: children forked from now on follow `value` (None: none do)."""
    global _following
    _following = value
    if value is not None:
        register_fork_hook()


def _after_fork() -> None:
    global _session
    _session = None  # a fork of a followed child: its session is the parent's, not ours
    if _following is not None:
        try:
            _begin(_following)
        except Exception:
            pass  # a child that cannot be followed runs untraced (the parent notes it)


def boot() -> None:
    """The ``.pth`` hook: a child of a following parent starts its session here."""
    value = os.environ.get(ENV)
    if not value:
        return
    cmd = _cmdline()
    if any(h in cmd for h in _HELPERS):
        return
    try:
        if _FORK_SERVER in cmd:  # its forks are the workers
            follow(value)
            return
        _begin(value)
    except Exception:
        pass


def _cmdline() -> bytes:
    try:
        with open("/proc/self/cmdline", "rb") as f:
            return f.read(8192)
    except OSError:
        return b""


def _begin(value: str) -> None:
    global _session, _session_pid, _busy
    prefix, options = decode(value)
    check_folder(os.path.dirname(prefix))
    pid = os.getpid()
    _write_new(f"{prefix}{pid}.born", _cmdline().replace(b"\0", b" ").strip())
    # A SIGTERM while the session starts (a pool terminate()d at once) waits for the start:
    # the child then ends as any terminated child does, its trace written.
    _busy = True
    _install_exits()
    try:
        import _thread

        core = _core()
        _watch_sigterm(core)
        own_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "giltracer") + os.sep
        session = core.Session(own_dir=own_dir, backend="hooks", spool=f"{prefix}{pid}.spool",
                               **options)
        spooler = _start_spooler(session)
        # The child's only thread is this one (in a fork: the thread that forked), and the
        # spooler, giltracer's own (kind 2: in no view). Not threading.enumerate(): before
        # 3.11 a forked child's MainThread may still carry the parent's native id there,
        # which became a phantom thread of the child.
        session.start([(_thread.get_ident(), _thread.get_native_id())] + spooler)
        _session, _session_pid = session, pid
        follow(value)
    except Exception as e:  # the parent says this child could not be traced, and why
        try:
            why = f"{type(e).__name__}: {e}".encode("utf-8", "replace")
            _write_new(f"{prefix}{pid}.failed", why)
        except OSError:
            pass
        raise
    finally:
        _busy = False
        if _term_pending:
            _on_sigterm(0, None)


def _write_new(path: str, data: bytes) -> None:
    """`data` in a new file of this user's at `path` (never through a link, never over one)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def check_folder(folder: str) -> None:
    """Raises PermissionError unless `folder` is a private folder of this process's user
    (mode 0700, as the parent's mkdtemp made it) whose path has no link in it: the
    variable is inherited, e.g. by a privileged process through `sudo -E`, and must not
    steer its writes elsewhere. A set-user-id process is never followed."""
    if os.getuid() != os.geteuid():
        raise PermissionError("giltracer: a set-user-id process is not followed")
    if os.path.realpath(folder) != os.path.normpath(os.path.abspath(folder)):
        raise PermissionError(f"giltracer: the session folder's path has a link in it: {folder}")
    st = os.lstat(folder)
    if (st.st_mode & 0o170000) != 0o040000 or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise PermissionError(f"giltracer: the session folder is not this user's private "
                              f"folder: {folder}")


def _start_spooler(session: Any) -> List[Tuple[int, int, int]]:
    """Starts the thread that checkpoints `session` (Session.spool), which waits for its
    start without the GIL; returns its (ident, native id, kind 2) for start(), or []."""
    import _thread

    ready = _thread.allocate_lock()
    ready.acquire()
    me: List[Tuple[int, int, int]] = []

    def run() -> None:
        global _spooler_tid
        _spooler_tid = _thread.get_native_id()
        me.append((_thread.get_ident(), _spooler_tid, 2))  # giltracer's own: in no view
        try:
            # (releases `ready` first: its starter goes on while it waits without the GIL)
            rc = session.spool(_names, int(SPOOL_EVERY * 1000), ready)
        except Exception:  # (before it released `ready`)
            ready.release()
            return
        if rc == -2:  # ENOENT: the parent's trace stopped, its folder is gone
            _stop_untraced(session)
        elif rc == -4:  # EINTR: a SIGTERM the main thread did not answer
            _sigterm_unanswered()

    try:
        _thread.start_new_thread(run, ())
    except RuntimeError:
        return []
    ready.acquire()
    return me


def _names() -> Dict[int, str]:
    threading = sys.modules.get("threading")
    names: Dict[int, str] = {}
    if threading is not None:
        names = {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}
    if _spooler_tid:
        names[_spooler_tid] = SPOOL_THREAD
    return names


def wait_spooler_gone(timeout: float = 2.0) -> None:
    """After end(): until the spooler's thread is gone (it needs the GIL to end)."""
    import time

    if not _spooler_tid:
        return
    end = time.monotonic() + timeout
    while os.path.exists(f"/proc/self/task/{_spooler_tid}") and time.monotonic() < end:
        time.sleep(0.001)


def _stop_untraced(session: Any) -> None:
    """The parent's trace has stopped: this child stops tracing (nothing to write to), and
    the processes it starts from now on are not followed either."""
    global _session
    if _session is not session:
        return
    _session = None
    value = _following
    follow(None)
    if value is not None and os.environ.get(ENV) == value:
        os.environ.pop(ENV, None)
    try:
        session.stop()
        session.finish()
    except Exception:
        pass
    sigterm_default()


def _install_exits() -> None:
    global _exits_installed
    if _exits_installed:
        return
    _exits_installed = True
    _signal: Any = __import__("_signal")  # (signal imports enum: milliseconds at birth)
    import atexit

    atexit.register(_end_at_exit)
    os._exit = _exit  # fork workers (multiprocessing, concurrent.futures) leave this way
    try:
        handler = _signal.getsignal(_signal.SIGTERM)  # Pool.terminate(), kill
        if handler == _signal.SIG_DFL or getattr(handler, DEFAULT_IN_FORK, False):
            _signal.signal(_signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread
        pass


def end() -> None:
    """Ends this child's session: its streams go to the parent's folder."""
    global _session, _busy
    # Busy before the session is taken (no call between: no signal handler runs there):
    # a SIGTERM handled right after the take found neither the session nor busy, and
    # died at once, the trace unwritten (a pool worker leaving by os._exit as terminate()
    # signals it: 2 of 6 runs of the stress row cli-terminated-idle-fork-pool).
    was, _busy = _busy, True
    session, _session = _session, None
    try:
        if session is not None and getattr(session, "state", "") == "recording":
            names = _names()
            session.stop()
            session.finish(names)
    except Exception:
        pass
    finally:
        _busy = was
    if not _busy and _term_pending:  # a SIGTERM came meanwhile: as it would have
        _die_of_sigterm()


def _end_at_exit() -> None:
    """atexit: end(), then the spooler's thread ends before the interpreter finalizes. A
    daemon thread that waits for the GIL then may ask its holder to drop it and exit from
    take_gil: the main thread, at its next check, drops the GIL and waits forever for a
    switch to that thread (the child hung at exit, its parent with it: seen on 3.9)."""
    end()
    wait_spooler_gone(10.0)  # (sleeping lets the GIL go: it takes it to return and end)


def _exit(status: int) -> "NoReturn":
    end()
    _real_exit(status)


def _on_sigterm(signum: int, frame: Any) -> None:
    global _term_pending
    if _busy:
        _term_pending = True
        return
    end()
    _die_of_sigterm()


def _watch_sigterm(core: Any) -> None:
    """Our SIGTERM handler is noted in C too (core/support/termwatch.h): the spooler's
    thread answers a SIGTERM the main thread does not (_sigterm_unanswered)."""
    _signal: Any = __import__("_signal")
    if _signal.getsignal(_signal.SIGTERM) is _on_sigterm:
        try:  # (again: a fork of a child whose session ended has the default)
            _signal.signal(_signal.SIGTERM, _on_sigterm)
        except ValueError:  # not the main thread
            pass
        core.watch_sigterm()


def sigterm_default() -> None:
    """This child's session is over while it runs on: SIGTERM kills it as it would
    untraced (from any thread; the Python handler, which CPython may never run, is left
    out)."""
    try:
        _core().sigterm_default()
    except Exception:
        pass


def _sigterm_unanswered() -> None:
    """The spooler's thread, ~0.1 s after a SIGTERM that _on_sigterm did not answer:
    CPython runs a Python handler only when the main thread next checks for signals, and
    one that arrived between that check and a wait it does not interrupt (a pool worker
    idle in get(), terminate()d) is never answered. The child hung, its pool with it; now
    it ends as _on_sigterm ends it, from this thread."""
    global _term_pending
    if _busy:  # _begin() or end() at work on the main thread: it dies once through
        _term_pending = True
        return
    end()
    _die_of_sigterm()


def _die_of_sigterm() -> None:
    """Dies of SIGTERM, from any thread (the core's; without it, the main thread's way)."""
    try:
        _core().die_of_sigterm()
    except Exception:
        pass
    _signal: Any = __import__("_signal")
    _signal.signal(_signal.SIGTERM, _signal.SIG_DFL)
    os.kill(os.getpid(), _signal.SIGTERM)
