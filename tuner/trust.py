"""Whether another user could have planted or changed what tuner is about to act on — as root, a file another user
wrote is an instruction from that user. One rule, applied to the configuration root reads implicitly, the change
journal, the output directory and the PostgreSQL build cache: what tuner acts on, and every directory above it, is
owned by root or by this user, and nobody else may write it. A directory above it that others may write is
allowed only with the sticky bit (``/tmp``, ``/var/tmp``): there nobody else can rename or replace what is ours.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Collection
from pathlib import Path


class Untrusted(OSError):
    """What tuner was about to act on (or a directory above it) is not root's or this user's own."""

    def __init__(self, why: str) -> None:
        super().__init__(errno.EPERM, why)


def owners() -> frozenset[int]:
    """Whose files tuner trusts: root's and its own user's."""
    return frozenset({0, os.geteuid()})


def _name(uid: int) -> str:
    return "root" if uid == 0 else f"uid {uid}"


def problem(st: os.stat_result, *, trusted: Collection[int] | None = None, above: bool = False) -> str | None:
    """Why what ``st`` describes (an lstat or an fstat) may have been planted or changed by another user, or
    None: a symbolic link, another user's, or writable by group or others — a directory ``above`` what tuner acts
    on may be writable by others when it has the sticky bit."""
    allowed = owners() if trusted is None else trusted
    if stat.S_ISLNK(st.st_mode):
        return "it is a symbolic link"
    if st.st_uid not in allowed:
        return f"it is owned by uid {st.st_uid}, not {' or '.join(_name(u) for u in sorted(allowed))}"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not (above and st.st_mode & stat.S_ISVTX):
        return f"group or others may write it (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def check(st: os.stat_result, *, trusted: Collection[int] | None = None) -> None:
    """Raise :class:`Untrusted` with :func:`problem`'s sentence."""
    why = problem(st, trusted=trusted)
    if why:
        raise Untrusted(why)


def directories_above(path: Path) -> str | None:
    """Why a directory above ``path`` (its parent up to ``/``, links resolved) lets another user replace what is
    in it, or None."""
    for parent in Path(os.path.realpath(path)).parents:
        try:
            st = parent.lstat()
        except OSError as exc:
            return f"{parent} cannot be checked: {exc.strerror or exc}"
        why = problem(st, above=True)
        if why:
            return f"{parent}: {why}"
    return None


def open_directory(directory: Path, *, mode: int = 0o755) -> int:
    """A descriptor of ``directory``, created (with ``mode``) where missing, reached without following a symbolic
    link from the first directory that did not exist — or the directory itself — down: every directory on the way
    checked on its descriptor (:func:`problem`), so what is checked is what is written into. The existing
    directories above it are resolved and checked as :func:`directories_above` does. Raises :class:`Untrusted`,
    or the OSError of a directory that cannot be made."""
    directory = Path(os.path.abspath(directory))
    existing, missing = directory, []
    while not os.path.lexists(existing) and existing != existing.parent:
        missing.insert(0, existing.name)
        existing = existing.parent
    if not missing and os.path.islink(existing):
        raise Untrusted(f"{directory} is a symbolic link")
    parts = [*Path(os.path.realpath(existing)).parts[1:], *missing]
    fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for i, name in enumerate(parts):
            last = i == len(parts) - 1
            try:
                nxt = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except FileNotFoundError:
                os.mkdir(name, mode, dir_fd=fd)
                nxt = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(Path("/", *parts[:i + 1])):
                    raise Untrusted(f"{Path('/', *parts[:i + 1])} is a symbolic link") from None
                raise
            os.close(fd)
            fd = nxt
            why = problem(os.fstat(fd), above=not last)
            if why:
                raise Untrusted(f"{Path('/', *parts[:i + 1])}: {why}")
        return fd
    except BaseException:
        os.close(fd)
        raise
