"""The journal's lock: one ``flock`` on ``<state_dir>/journal.lock``, held by a session from its start to its end
and by ``tuner restore`` while it works, so two tuners never change things (or rewrite the journal) at once.

The kernel drops the lock when its holder dies, even by SIGKILL, so a lock is never stale. The file itself stays
(removing it would let two processes lock two different files); it names its last holder, for the message a
second tuner gets. The descriptor is not inherited by the programs tuner starts (``O_CLOEXEC``), so a server a
session started cannot keep the lock after the session died.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from tuner.actuate.entry import JournalError

LOCK_NAME = "journal.lock"


class JournalLock:
    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / LOCK_NAME
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, purpose: str) -> None:
        """Take the lock (a no-op when this object holds it already), or raise a :class:`JournalError`."""
        if self._fd is not None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise JournalError(
                f"cannot open the journal's lock {self.path}: {exc.strerror or exc}",
                hint="tuner keeps its journal in [tuner] state_dir (or --state-dir): make it a writable directory",
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _read(fd)
            os.close(fd)
            raise JournalError(
                f"another tuner ({holder or 'its pid is unknown'}) holds the journal in {self.path.parent}; "
                "only one tuner at a time may change this machine",
                hint="wait for it to end (it puts back its own changes), or stop it with kill -TERM <pid>",
            ) from None
        with contextlib.suppress(OSError):  # who holds it, for the message above; a full disk must not stop us
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()}, {purpose}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None


def _read(fd: int) -> str:
    try:
        return os.pread(fd, 200, 0).decode(errors="replace").strip()
    except OSError:
        return ""
