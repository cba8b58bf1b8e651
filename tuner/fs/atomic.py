"""Atomic file writes: readers see the old file or the new one, never half of one, and a crash keeps one of them;
and only into a directory nobody else could have planted or may write (:func:`tuner.fs.trust.open_directory`) — as
root, ``--output`` into a directory another user may write would write wherever that user's link points."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Mapping
from pathlib import Path

from tuner.errors import ConfigError
from tuner.fs.trust import open_directory

_OUTPUT_HINT = "give --output a directory of your own that nobody else may write (it is created if missing)"


def atomic_write(path: Path, text: str, *, dir_mode: int = 0o755) -> None:
    """Write ``text`` to ``path`` (mode 0600) via a temporary file in the same directory, fsync it, rename it over
    ``path``, and fsync the directory so the rename itself is durable. The directory is created (``dir_mode``)
    where missing; one that is a link, another user's or writable by others is :class:`tuner.fs.trust.Untrusted`
    (an OSError), and nothing is written."""
    dfd = open_directory(path.parent, mode=dir_mode)
    try:
        tmp = f".{path.name}.{secrets.token_hex(6)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path.name, src_dir_fd=dfd, dst_dir_fd=dfd)
            os.fsync(dfd)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=dfd)
            raise
    finally:
        os.close(dfd)


def check_directory(directory: Path) -> None:
    """Make sure ``directory`` can take tuner's files — it is created if missing, and it is reached without
    following another user's link, ours (or root's) and nobody else's to write — or one ConfigError sentence."""
    try:
        os.close(open_directory(directory))
    except OSError as exc:
        raise ConfigError(f"cannot write into {directory}: {exc.strerror or exc}", hint=_OUTPUT_HINT) from None


def write_files(files: Mapping[str, str], directory: Path) -> list[Path]:
    """Each of ``files`` (name relative to ``directory`` -> text) written atomically, after ``directory`` itself
    was checked (:func:`check_directory`: a refused one gets nothing); a failure is one ConfigError sentence
    (exit 2) that says how many files were written before it."""
    check_directory(directory)
    written: list[Path] = []
    for name, body in files.items():
        path = directory / name
        try:
            atomic_write(path, body)
        except OSError as exc:
            done = f" ({len(written)} of {len(files)} files were written before it)" if written else ""
            raise ConfigError(f"cannot write {path}: {exc.strerror or exc}{done}", hint=_OUTPUT_HINT) from None
        written.append(path)
    return written
