"""Reading a TOML input (a configuration or a policy): a regular file of at most MAX_FILE_BYTES, every failure
one :class:`ConfigError` sentence — a missing file, a directory, a path through a file, a device or pipe, a binary
or half-written file — and, for what root reads implicitly, the owner and mode of what was opened."""

from __future__ import annotations

import errno
import os
import stat
import tomllib
from pathlib import Path
from typing import Any

from tuner.errors import ConfigError

MAX_FILE_BYTES = 1 << 20  # a configuration or policy is a few kB; anything larger is not one
_HINT = "give the path of a TOML text file (see the commented sample tuner.toml)"
_MEANT = "check that it is the file you meant"


class Untrusted(Exception):
    """``./tuner.toml`` is not root's own, so root does not read it implicitly."""


def _read_bytes(path: Path, *, as_root_implicitly: bool = False) -> bytes:
    """The bytes of a regular file of at most MAX_FILE_BYTES. Opened without blocking (a FIFO must not hang
    tuner) and checked on the open descriptor, so what is checked is what is read."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (os.O_NOFOLLOW if as_root_implicitly else 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if as_root_implicitly and exc.errno == errno.ELOOP:  # O_NOFOLLOW met a symbolic link
            raise Untrusted("it is a symbolic link") from None
        raise
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(21, "Is a directory")
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"{path}: not a regular file (a device, pipe or socket)", hint=_HINT)
        if as_root_implicitly and st.st_uid != 0:
            raise Untrusted(f"it is owned by uid {st.st_uid}, not root")
        if as_root_implicitly and st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise Untrusted(f"group or others may write it (mode {stat.S_IMODE(st.st_mode):04o})")
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_FILE_BYTES // 1024} KiB, so not a tuner configuration or policy",
                          hint=_HINT)
    return data


def read_toml(path: Path, *, as_root_implicitly: bool = False) -> dict[str, Any]:
    """Read a TOML file, turning every failure into one ConfigError sentence."""
    try:
        return tomllib.loads(_read_bytes(path, as_root_implicitly=as_root_implicitly).decode("utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file", hint="pass --config PATH, or create tuner.toml") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a TOML file", hint=_HINT) from None
    except NotADirectoryError:
        raise ConfigError(f"{path}: a part of the path is a file, not a directory", hint=_HINT) from None
    except PermissionError:
        raise ConfigError(f"{path}: permission denied", hint=_HINT) from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or type(exc).__name__})", hint=_HINT) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (a binary file?): bad byte at offset {exc.start}",
                          hint=_HINT) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}", hint="check quoting and brackets near that line") from None
    except ValueError:  # an integer of thousands of digits
        raise ConfigError(f"{path}: invalid TOML: a number too long to read", hint=_MEANT) from None
    except RecursionError:
        raise ConfigError(f"{path}: invalid TOML: arrays or tables nested too deeply", hint=_MEANT) from None

