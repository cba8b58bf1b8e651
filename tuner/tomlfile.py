"""Reading a TOML input (a configuration or a policy): a regular file of at most MAX_FILE_BYTES, every failure
one :class:`ConfigError` sentence — a missing file, a directory, a path through a file, a device or pipe, a binary
or half-written file — and, for what root reads implicitly, the owner and mode of what was opened."""

from __future__ import annotations

import errno
import json
import math
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



def dumps(data: dict[str, Any]) -> str:
    """``data`` (tables of scalars, arrays, tables and arrays of tables) as TOML that :func:`tomllib.loads` reads
    back to the same values; ``None`` becomes a comment (TOML has no null)."""
    lines: list[str] = []
    _table(lines, [], data)
    return "\n".join(lines).lstrip("\n") + "\n"


def _key(k: str) -> str:
    return k if k and all(c.isalnum() and c.isascii() or c in "_-" for c in k) else json.dumps(k, ensure_ascii=True)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items() if x is not None) + "}"
    # A TOML basic string: JSON's escapes (\n, \", \\, \uXXXX) are TOML's, so no value can break out of it.
    return json.dumps(str(v), ensure_ascii=True)


def _is_tables(v: Any) -> bool:
    return isinstance(v, (list, tuple)) and bool(v) and all(isinstance(x, dict) for x in v)


def _table(lines: list[str], path: list[str], body: dict[str, Any], *, array: bool = False) -> None:
    if path:
        name = ".".join(_key(p) for p in path)
        lines += ["", f"[[{name}]]" if array else f"[{name}]"]
    nested = []
    for k, v in body.items():
        if isinstance(v, dict) or _is_tables(v):
            nested.append((k, v))
        elif v is None:
            lines.append(f"# {_key(k)} is unset")
        else:
            lines.append(f"{_key(k)} = {_value(v)}")
    for k, v in nested:
        if isinstance(v, dict):
            _table(lines, [*path, k], v)
        else:
            for item in v:
                _table(lines, [*path, k], item, array=True)
