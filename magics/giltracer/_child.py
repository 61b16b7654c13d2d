"""Following child processes (``follow_children=True``): the parent's side and the
child's.

The parent makes a private session folder (``tempfile.mkdtemp``: 0700) and a random
token, and puts both, with the trace's options, in the environment variable
``GILTRACER_CHILD`` while it records. A child process inherits it: one started by
``fork`` (multiprocessing, concurrent.futures) begins its own session in an
``os.register_at_fork`` hook; one that starts a new interpreter (``spawn``,
``forkserver``, ``subprocess`` running ``sys.executable``) in the ``.pth`` start-up hook
the package installs (``giltracer_children.pth``), which imports nothing and does nothing
without the variable. The child says it was born (``<token>-<pid>.born``, holding its
command line) and, when its session ends (normal exit, ``os._exit``, SIGTERM), writes its
streams to ``<token>-<pid>.spool`` (core/record/spool.h); the parent merges every spool
on one clock and notes the children that left none (killed by SIGKILL, or still running).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile
from typing import Any, Dict, Optional

ENV = "GILTRACER_CHILD"
# multiprocessing's helper processes: they outlive the parent's trace (no spool ever), the
# fork server's children are followed through its fork hook.
_HELPERS = (b"from multiprocessing.resource_tracker import main",
            b"from multiprocessing.semaphore_tracker import main")
_FORK_SERVER = b"from multiprocessing.forkserver import main"


# -- the parent ------------------------------------------------------------------------

class Children:
    """The parent's session folder, token and environment while it records."""

    def __init__(self, options: Dict[str, Any]) -> None:
        self.folder = tempfile.mkdtemp(prefix="giltracer-children-")
        self.token = secrets.token_hex(16)
        self.prefix = os.path.join(self.folder, self.token + "-")
        self.value = json.dumps({"prefix": self.prefix, "options": options})
        self._saved: Optional[str] = None
        self.commands: Dict[int, str] = {}

    def begin(self) -> None:
        global _following
        self._saved = os.environ.get(ENV)
        os.environ[ENV] = self.value
        _following = self.value
        _register_fork_hook()

    def end(self) -> None:
        """No more children join (called at stop)."""
        global _following
        _following = None
        if self._saved is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = self._saved

    def collect(self) -> Dict[int, str]:
        """pid -> command line of every child that started, then the folder is removed."""
        for name in os.listdir(self.folder):
            if name.startswith(self.token + "-") and name.endswith(".born"):
                try:
                    pid = int(name[len(self.token) + 1:-5])
                    fd = os.open(os.path.join(self.folder, name), os.O_RDONLY | os.O_NOFOLLOW)
                    with os.fdopen(fd, "rb") as f:
                        self.commands[pid] = f.read(4096).decode("utf-8", "replace")
                except (ValueError, OSError):
                    continue
        shutil.rmtree(self.folder, ignore_errors=True)
        return self.commands


# -- the child -------------------------------------------------------------------------

_following: Optional[str] = None  # the value a fork child follows with (parent or child)
_fork_hook = False
_session: Any = None
_real_exit = os._exit


def _register_fork_hook() -> None:
    global _fork_hook
    if not _fork_hook and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork)
        _fork_hook = True


def _after_fork() -> None:
    global _session
    _session = None  # the parent's (a fork of a followed child): not this process's
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
            global _following
            _following = value
            _register_fork_hook()
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
    global _session, _following
    spec = json.loads(value)
    prefix = spec["prefix"]
    pid = os.getpid()
    fd = os.open(f"{prefix}{pid}.born", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                 | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(_cmdline().replace(b"\0", b" ").strip())
    import threading

    from . import _core

    own_dir = os.path.dirname(os.path.abspath(__file__)) + os.sep
    session = _core.Session(own_dir=own_dir, backend="hooks", spool=f"{prefix}{pid}.spool",
                            **spec["options"])
    session.start([(t.ident, t.native_id) for t in threading.enumerate() if t.ident is not None])
    _session = session
    _following = value
    _register_fork_hook()
    _install_exits()


_exits_installed = False


def _install_exits() -> None:
    global _exits_installed
    if _exits_installed:
        return
    _exits_installed = True
    import atexit
    import signal

    atexit.register(end)
    os._exit = _exit  # fork workers (multiprocessing, concurrent.futures) leave this way
    try:
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:  # Pool.terminate(), kill
            signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread
        pass


def end() -> None:
    """Ends this child's session: its streams go to the parent's folder."""
    global _session
    session, _session = _session, None
    if session is None or getattr(session, "state", "") != "recording":
        return
    try:
        import threading

        names = {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}
        session.stop()
        session.finish(names)
    except Exception:
        pass


def _exit(code: int) -> None:
    end()
    _real_exit(code)


def _on_sigterm(signum: int, frame: Any) -> None:
    import signal

    end()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)
