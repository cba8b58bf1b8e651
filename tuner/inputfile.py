"""Reading a file a user points tuner at: a regular file of bounded size, opened so that nothing can make the read
hang or run away — a FIFO is opened without blocking, /dev/zero or a socket is refused by what the open
descriptor is, and no more than ``limit`` bytes (plus one, to tell) are read."""

from __future__ import annotations

import os
import stat
from pathlib import Path


class NotRegular(OSError):
    """The path is a device, a pipe or a socket, not a regular file."""


class TooLarge(OSError):
    """The file is larger than the reader's limit."""


def read_regular(path: Path, limit: int, *, nofollow: bool = False) -> tuple[bytes, os.stat_result]:
    """The bytes of the regular file ``path`` (at most ``limit``) and its status, both from one open descriptor,
    so what is checked is what is read. Raises FileNotFoundError, IsADirectoryError, NotADirectoryError,
    PermissionError (any OSError), :class:`NotRegular` or :class:`TooLarge`; with ``nofollow`` a symbolic link
    is ELOOP."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (os.O_NOFOLLOW if nofollow else 0))
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(21, "Is a directory")
        if not stat.S_ISREG(st.st_mode):
            raise NotRegular(f"{path} is not a regular file")
        if st.st_size > limit:
            raise TooLarge(f"{path} has {st.st_size} bytes")
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:  # it grew after fstat
        raise TooLarge(f"{path} has more than {limit} bytes")
    return data, st
