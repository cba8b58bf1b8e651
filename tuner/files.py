"""Atomic file writes: readers see the old file or the new one, never half of one, and a crash keeps one of them;
and only into a directory nobody else could have planted or may write (:func:`tuner.trust.open_directory`) — as
root, ``--output`` into a directory another user may write would write wherever that user's link points."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from tuner.trust import open_directory


def atomic_write(path: Path, text: str, *, dir_mode: int = 0o755) -> None:
    """Write ``text`` to ``path`` (mode 0600) via a temporary file in the same directory, fsync it, rename it over
    ``path``, and fsync the directory so the rename itself is durable. The directory is created (``dir_mode``)
    where missing; one that is a link, another user's or writable by others is :class:`tuner.trust.Untrusted`
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
