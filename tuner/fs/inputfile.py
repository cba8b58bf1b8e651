"""Reading a file a user points tuner at: a regular file of bounded size, opened so that nothing can make the read
hang or run away — a FIFO is opened without blocking, /dev/zero or a socket is refused by what the open
descriptor is, and no more than ``limit`` bytes (plus one, to tell) are read."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path

from tuner.errors import ConfigError


class NotRegular(OSError):
    """The path is a device, a pipe or a socket, not a regular file."""


class TooLarge(OSError):
    """The file is larger than the reader's limit."""


def read_regular(path: Path, limit: int, *, nofollow: bool = False,
                 inspect: Callable[[os.stat_result], None] | None = None) -> tuple[bytes, os.stat_result]:
    """The bytes of the regular file ``path`` (at most ``limit``) and its status, both from one open descriptor,
    so what is checked is what is read. Raises FileNotFoundError, IsADirectoryError, NotADirectoryError,
    PermissionError (any OSError), :class:`NotRegular` or :class:`TooLarge`; with ``nofollow`` a symbolic link
    is ELOOP. ``inspect`` sees the status of a regular file before anything is read (and may raise)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (os.O_NOFOLLOW if nofollow else 0))
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(21, "Is a directory")
        if not stat.S_ISREG(st.st_mode):
            raise NotRegular(f"{path} is not a regular file")
        if inspect is not None:
            inspect(st)
        if st.st_size > limit:
            raise TooLarge(f"{path} has {st.st_size} bytes")
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:  # it grew after fstat
        raise TooLarge(f"{path} has more than {limit} bytes")
    return data, st


def _size(limit: int) -> str:
    return f"{limit // 1024} KiB" if limit < 16 << 20 else f"{limit >> 20} MiB"


def read_text(path: Path, limit: int, *, kind: str, hint: str, missing_hint: str | None = None,
              nofollow: bool = False, inspect: Callable[[os.stat_result], None] | None = None) -> str:
    """The UTF-8 text of the regular file ``path`` (see :func:`read_regular`); every failure one
    :class:`ConfigError` sentence that names ``path`` and says why it is not ``kind`` ("a TOML file", "a
    report.json"), with ``hint`` (``missing_hint`` for a file that is not there). With ``nofollow``, a symbolic
    link is left to the caller as the OSError ELOOP; ``inspect`` as for :func:`read_regular`."""
    try:
        return read_regular(path, limit, nofollow=nofollow, inspect=inspect)[0].decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file", hint=missing_hint or hint) from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not {kind}", hint=hint) from None
    except NotADirectoryError:
        raise ConfigError(f"{path}: a part of the path is a file, not a directory", hint=hint) from None
    except PermissionError:
        raise ConfigError(f"{path}: permission denied", hint=hint) from None
    except NotRegular:
        raise ConfigError(f"{path}: not a regular file (a device, pipe or socket)", hint=hint) from None
    except TooLarge:
        raise ConfigError(f"{path}: larger than {_size(limit)}, so not {kind}", hint=hint) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (a binary file?): bad byte at offset {exc.start}",
                          hint=hint) from None
    except OSError as exc:
        if nofollow and exc.errno == errno.ELOOP:
            raise
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or type(exc).__name__})", hint=hint) from None
