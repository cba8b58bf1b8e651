"""Reading a TOML input (a configuration or a policy): a regular file of at most MAX_FILE_BYTES, every failure
one :class:`ConfigError` sentence — a missing file, a directory, a path through a file, a device or pipe, a binary
or half-written file — and, for what root reads implicitly, the owner and mode of what was opened."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from tuner.fs import trust
from tuner.errors import ConfigError
from tuner.fs.inputfile import read_text

MAX_FILE_BYTES = 1 << 20  # a configuration or policy is a few kB; anything larger is not one
_HINT = "give the path of a TOML text file (see the commented sample tuner.toml)"
_MEANT = "check that it is the file you meant"


class Untrusted(Exception):
    """``./tuner.toml`` is not root's own, so root does not read it implicitly."""


def _trusted(st: os.stat_result) -> None:
    """What root reads implicitly must be root's own, and nobody else's to write (:mod:`tuner.fs.trust`)."""
    why = trust.problem(st, trusted={0})
    if why:
        raise Untrusted(why)


def _read_text(path: Path, *, as_root_implicitly: bool = False) -> str:
    """The text of a regular file of at most MAX_FILE_BYTES (tuner.fs.inputfile: a FIFO must not hang tuner), and
    for what root reads implicitly, its owner and mode checked on the descriptor that is read."""
    try:
        return read_text(path, MAX_FILE_BYTES, kind="a tuner configuration or policy", hint=_HINT,
                         missing_hint="pass --config PATH, or create tuner.toml", nofollow=as_root_implicitly,
                         inspect=_trusted if as_root_implicitly else None)
    except OSError as exc:  # only ELOOP: O_NOFOLLOW met a symbolic link
        raise Untrusted("it is a symbolic link") from exc


def read_toml(path: Path, *, as_root_implicitly: bool = False) -> dict[str, Any]:
    """Read a TOML file, turning every failure into one ConfigError sentence."""
    text = _read_text(path, as_root_implicitly=as_root_implicitly)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}", hint="check quoting and brackets near that line") from None
    except ValueError:  # an integer of thousands of digits
        raise ConfigError(f"{path}: invalid TOML: a number too long to read", hint=_MEANT) from None
    except RecursionError:
        raise ConfigError(f"{path}: invalid TOML: arrays or tables nested too deeply", hint=_MEANT) from None
