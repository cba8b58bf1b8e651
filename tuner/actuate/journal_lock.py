"""The journal's lock: one ``flock`` on ``<state_dir>/journal.lock``, held by a session from its start to its end
and by ``tuner restore`` while it works, so two tuners never change things (or rewrite the journal) at once.

The lock itself is :class:`tuner.fs.flock.Flock`, the daemon's too (:mod:`tuner.daemon.daemon_lock`); this module
gives it the journal's file name and messages. The file names its last holder (pid and purpose).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from tuner.actuate.entry import JournalError
from tuner.fs.flock import Flock, read_holder

LOCK_NAME = "journal.lock"


class JournalLock:
    def __init__(self, state_dir: Path) -> None:
        self._flock = Flock(state_dir / LOCK_NAME)
        self.path = self._flock.path

    @property
    def held(self) -> bool:
        return self._flock.held

    def acquire(self, purpose: str) -> None:
        """Take the lock (a no-op when this object holds it already), or raise a :class:`JournalError`."""
        if self.held:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = self._flock.open()
        except OSError as exc:
            raise JournalError(
                f"cannot open the journal's lock {self.path}: {exc.strerror or exc}",
                hint="tuner keeps its journal in [tuner] state_dir (or --state-dir): make it a writable directory",
            ) from None
        try:
            self._flock.lock(fd, f"pid {os.getpid()}, {purpose}")
        except OSError:
            holder = read_holder(fd).strip()
            os.close(fd)
            raise JournalError(
                f"another tuner ({holder or 'its pid is unknown'}) holds the journal in {self.path.parent}; "
                "only one tuner at a time may change this machine",
                hint="wait for it to end (it puts back its own changes), or stop it with kill -TERM <pid>",
            ) from None

    def release(self) -> None:
        self._flock.release()

    def live_holder(self) -> str | None:
        """Who holds the lock now (its line: pid and purpose), None when nobody does; creates nothing and takes
        the lock only for as long as it takes to test it."""
        if self.held:
            return None
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return None  # no lock file: no session ever ran here
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return read_holder(fd).strip() or "its pid is unknown"
        finally:
            os.close(fd)  # also releases the shared lock taken to test it
        return None
