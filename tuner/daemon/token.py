"""The API's bearer token, read from ``[daemon] token_file``: a private regular file holding one printable ASCII
word. Opened without blocking and checked on the open descriptor — a FIFO must not hang ``--check-config`` or the
event loop at start or SIGHUP (the watchdog and /healthz stop with it) — and every failure is one sentence."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from tuner.settings.config import Config, resolve_path
from tuner.errors import ConfigError

MAX_CHARS = 4096
_CREATE = "create it (e.g. openssl rand -hex 32 > FILE; chmod 600 FILE)"
_SHAPE = "e.g. openssl rand -hex 32 > FILE"


def read_token(cfg: Config) -> str | None:
    """The bearer token from ``[daemon] token_file``: a regular file only its owner can read, one word of 16 to
    4096 printable ASCII characters (an HTTP header carries it). None without a token_file."""
    if cfg.daemon.token_file is None:
        return None
    path = resolve_path(cfg, cfg.daemon.token_file)
    data = _read(path)
    try:
        token = data.decode("ascii").strip()
    except UnicodeDecodeError:
        raise ConfigError(f"[daemon] token_file {path} is not ASCII text (a token is sent in an HTTP header)",
                          hint=_SHAPE) from None
    if not 16 <= len(token) <= MAX_CHARS or not all("!" <= c <= "~" for c in token):
        raise ConfigError(f"[daemon] token_file {path} must hold one token of 16 to {MAX_CHARS} characters "
                          "(printable ASCII, no spaces)", hint=_SHAPE)
    return token


def _read(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        why = "it is a symbolic link" if exc.errno == errno.ELOOP else exc.strerror or type(exc).__name__
        raise ConfigError(f"[daemon] token_file {path} cannot be read: {why}", hint=_CREATE) from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise ConfigError(f"[daemon] token_file {path} cannot be read: it is a directory", hint=_CREATE)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"[daemon] token_file {path} cannot be read: not a regular file (a pipe, socket or "
                              "device)", hint=_CREATE)
        if st.st_mode & 0o077:
            raise ConfigError(f"[daemon] token_file {path} can be read by others (mode {st.st_mode & 0o777:o})",
                              hint=f"chmod 600 {path}")
        try:
            return os.read(fd, MAX_CHARS + 64)
        except OSError as exc:
            raise ConfigError(f"[daemon] token_file {path} cannot be read: {exc.strerror}", hint=_CREATE) from None
    finally:
        os.close(fd)
