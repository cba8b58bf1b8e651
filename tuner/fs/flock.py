"""The one ``flock`` primitive tuner holds its state directory with: the journal's lock (:mod:`tuner.actuate.journal_lock`,
one session or restore at a time) and the daemon's (:mod:`tuner.daemon.daemon_lock`, one daemon per state directory)
are both this, each with its own file name and messages on top.

The kernel decides, not a PID file: a ``flock`` dies with its holder, even by SIGKILL, so a lock is never stale
(flock(2)). The file itself stays (removing it would let two processes lock two different files); it names its
holder for the message a second process gets. The descriptor is not inherited by the programs tuner starts
(``O_CLOEXEC``), so a server tuner started cannot keep the lock after tuner died.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

# O_NOFOLLOW: a symbolic link planted in the state directory must not make root lock (and write into) a file
# elsewhere.
_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


class Flock:
    """An exclusive, non-blocking ``flock`` on ``path``, held from :meth:`lock` to :meth:`release`. Raises
    :class:`OSError` as the system gives it; the callers turn it into their own messages."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def open(self, *, nonblock: bool = False) -> int:
        """Open (and create, mode 0600) the lock file; ``nonblock``: a FIFO planted there must not hang the open."""
        return os.open(self.path, _FLAGS | (os.O_NONBLOCK if nonblock else 0), 0o600)

    def lock(self, fd: int, holder: str) -> None:
        """Take the lock on ``fd`` (opened by :meth:`open`) and write ``holder`` (one line) into the file, or raise
        :class:`OSError` and leave ``fd`` open, for the caller to read who holds it (:func:`read_holder`) and close."""
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        text = f"{holder}\n".encode()
        # the holder only feeds the message a second tuner gets; a full disk must not stop this one
        with contextlib.suppress(OSError):
            os.pwrite(fd, text, 0)
            os.ftruncate(fd, len(text))  # write, then cut: a reader never sees the file empty while it is held
        self._fd = fd

    def release(self, *, empty: bool = False) -> None:
        """Release the lock (a no-op when not held); ``empty``: cut the holder's line first."""
        if self._fd is not None:
            if empty:
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None


def read_holder(fd: int) -> str:
    """The lock file's text (its first 200 bytes), "" when it cannot be read."""
    try:
        return os.pread(fd, 200, 0).decode(errors="replace")
    except OSError:
        return ""
