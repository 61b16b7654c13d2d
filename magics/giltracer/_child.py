"""Following child processes (``follow_children=True``): the parent's side; the child's
is the top-level module ``_giltracer_boot`` (installed beside the package with the
``giltracer_children.pth`` start-up hook), which imports nothing of the package's Python.

The parent makes a private session folder (``tempfile.mkdtemp``: 0700) and a random
token, and puts both, with the trace's options, in the environment variable
``GILTRACER_CHILD`` while it records. A child process inherits it: one started by
``fork`` (multiprocessing, concurrent.futures) begins its own session in an
``os.register_at_fork`` hook; one that starts a new interpreter (``spawn``,
``forkserver``, ``subprocess`` running ``sys.executable``) in the start-up hook, which does
nothing without the variable. The child says it was born (``<token>-<pid>.born``, holding
its command line) and, when its session ends (normal exit, ``os._exit``, SIGTERM), writes
its streams to ``<token>-<pid>.spool`` (core/record/spool.h); the parent merges every
spool on one clock and notes the children that left none (killed by SIGKILL, or still
running).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Dict, Optional

import _giltracer_boot as boot

ENV = boot.ENV


def yield_to_own_trace() -> None:
    """A followed child that starts a trace of its own: the session it began at birth ends
    here (its streams so far go to the parent), and the child's own trace goes on."""
    if boot._session is not None and boot._session_pid == os.getpid():
        boot.end()
        boot.wait_spooler_gone()  # (else the child's own trace may see it end)
        boot.sigterm_default()


class Children:
    """The parent's session folder, token and environment while it records."""

    def __init__(self, options: Dict[str, Any]) -> None:
        # Its real path: a child refuses a folder reached through a link (check_folder).
        self.folder = os.path.realpath(tempfile.mkdtemp(prefix="giltracer-children-"))
        # (os.urandom, not secrets: that imports hashlib, whose libcrypto exit handlers
        # keep a 3.9/3.10 process alive after the interpreter is freed, long enough for a
        # daemon thread in take_gil to touch it: a crash at exit, CPython gh-96387's fix.)
        self.token = os.urandom(16).hex()
        self.prefix = os.path.join(self.folder, self.token + "-")
        self.value = boot.encode(self.prefix, options)
        self._saved: Optional[str] = None
        self._begun = False
        self.commands: Dict[int, str] = {}

    def begin(self) -> None:
        self._saved = os.environ.get(ENV)
        self._begun = True
        os.environ[ENV] = self.value
        boot.follow(self.value)

    def end(self) -> None:
        """No more children join (called at stop, and by a start that failed)."""
        if not self._begun:  # (the variable may be a parent's: this process is followed)
            return
        self._begun = False
        boot.follow(None)
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
        remove_folder(self.folder)
        return self.commands


def remove_folder(folder: str) -> None:
    """Removes the session folder, which a child may still write to: renamed away first, so
    that a child's write from then on fails (it then stops tracing) instead of putting a
    file back between the removal of the files and of the folder (which then stayed)."""
    gone = f"{folder}.gone"
    try:
        os.rename(folder, gone)
    except OSError:
        gone = folder
    shutil.rmtree(gone, ignore_errors=True)
