"""One daemon per state directory: an exclusive ``flock`` on ``<state_dir>/daemon.lock``, held for the daemon's life.

The same lock as the journal's (:mod:`tuner.actuate.journal_lock`), :class:`tuner.fs.flock.Flock`, on a file of its own:
the daemon holds this one all the time, while the sessions it runs take and release ``journal.lock`` one by one —
so a ``tuner recommend`` by hand still waits for (or is refused by) the daemon's session, not by the idle daemon.

The kernel decides, not a PID file: the lock dies with its holder, even by SIGKILL, so a file a dead daemon left
is simply taken over. The file stays (removing it would let two daemons lock two different files); it names its
holder (pid and start time) for the message a second daemon gets, and is emptied on release. The descriptor is not
inherited by the programs the daemon starts (``O_CLOEXEC``): a PostgreSQL a ``restart_command`` started must not
keep the lock after the daemon died.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from datetime import datetime
from pathlib import Path
from types import TracebackType

from tuner.errors import TunerError
from tuner.fs.flock import Flock, read_holder

LOCK_NAME = "daemon.lock"  # the journal's is journal.lock (tuner.actuate.journal_lock.LOCK_NAME)
_HOLDER = re.compile(r"pid [0-9]+, started [0-9T:+.-]+")
_STATE_DIR_HINT = "tuner keeps its state in [tuner] state_dir (or --state-dir): make it a writable directory"


class DaemonLock:
    """``with DaemonLock(state_dir):`` — hold ``state_dir/daemon.lock`` for the block, or raise :class:`TunerError`
    (exit 1) when another daemon holds it. Creates ``state_dir`` (mode 0700) when it is missing."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = Path(state_dir)
        self._flock = Flock(self.state_dir / LOCK_NAME)
        self.path = self._flock.path

    @property
    def held(self) -> bool:
        return self._flock.held

    def __enter__(self) -> DaemonLock:
        self.acquire()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()

    def acquire(self) -> None:
        """Take the lock (a no-op when this object holds it already) and write this process's pid and start time
        into the file, or raise :class:`TunerError`."""
        if self.held:
            return
        try:
            self.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise TunerError(f"cannot create tuner's state directory {self.state_dir}: {exc.strerror or exc}",
                             hint=_STATE_DIR_HINT) from None
        fd = self._open()
        started = datetime.now().astimezone().isoformat(timespec="seconds")
        try:
            self._flock.lock(fd, f"pid {os.getpid()}, started {started}")
        except OSError as exc:
            holder = _holder(fd)
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise TunerError(
                    f"another tuner daemon ({holder}) holds {self.path}",
                    hint="stop it first (systemctl stop tuner), or give this one its own [tuner] state_dir",
                ) from None
            raise TunerError(f"cannot lock {self.path}: {exc.strerror or exc}", hint=_STATE_DIR_HINT) from None

    def release(self) -> None:
        """Empty the file and release the lock (a no-op when not held)."""
        self._flock.release(empty=True)

    def _open(self) -> int:
        try:
            fd = self._flock.open(nonblock=True)  # a FIFO planted in the state directory must not hang the start
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise TunerError(f"{self.path} is a symbolic link; tuner does not lock through one",
                                 hint="remove it: tuner creates its lock file itself") from None
            raise TunerError(f"cannot open the daemon's lock {self.path}: {exc.strerror or exc}",
                             hint=_STATE_DIR_HINT) from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise TunerError(f"{self.path} is not a regular file; tuner does not lock through it",
                             hint="remove it: tuner creates its lock file itself")
        return fd


def _holder(fd: int) -> str:
    """Who holds the lock, from the file (its first line, only when it has the shape tuner writes)."""
    first = read_holder(fd).partition("\n")[0].strip()
    return first if _HOLDER.fullmatch(first) else "pid unknown"
