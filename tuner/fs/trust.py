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
    """Why a directory above ``path`` (its parent up to ``/``, links above ``path`` resolved — ``path`` itself is
    not followed) lets another user replace what is in it, or None."""
    parent_dir = Path(os.path.realpath(Path(os.path.abspath(path)).parent))
    for parent in (parent_dir, *parent_dir.parents):
        try:
            st = parent.lstat()
        except OSError as exc:
            return f"{parent} cannot be checked: {exc.strerror or exc}"
        why = problem(st, above=True)
        if why:
            return f"{parent}: {why}"
    return None


_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_MAX_LINKS = 40  # as the kernel's path walk (path_resolution(7))


def open_directory(directory: Path, *, mode: int = 0o755) -> int:
    """A descriptor of ``directory``, created (with ``mode``) where missing, walked from ``/`` one directory at a
    time, each checked on its descriptor (:func:`problem`; those above ``directory`` may be sticky instead of
    closed), so what is checked is what is written into. A symbolic link on the way is followed only when it is
    root's or this user's, in a directory already checked (``/var/run``); ``directory`` itself is never a link.
    Raises :class:`Untrusted`, or the OSError of a directory that cannot be made."""
    todo = list(Path(os.path.abspath(directory)).parts[1:])
    fd, walked, links = os.open("/", _DIR), Path("/"), 0
    try:
        while todo:
            name = todo.pop(0)
            if name in ("", "."):
                continue
            try:
                nxt = os.open(name, _DIR | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                os.mkdir(name, mode, dir_fd=fd)
                nxt = os.open(name, _DIR | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR) or not _link_ok(fd, name, walked, last=not todo):
                    raise
                links += 1
                if links > _MAX_LINKS:
                    raise Untrusted(f"{directory}: too many symbolic links") from None
                target = Path(os.readlink(name, dir_fd=fd))
                if target.is_absolute():
                    os.close(fd)
                    fd, walked = os.open("/", _DIR), Path("/")
                todo = [*target.parts[1 if target.is_absolute() else 0:], *todo]
                continue
            os.close(fd)
            fd, walked = nxt, walked.parent if name == ".." else walked / name
            why = problem(os.fstat(fd), above=bool(todo))
            if why:
                raise Untrusted(f"{walked}: {why}")
        return fd
    except BaseException:
        os.close(fd)
        raise


def _link_ok(fd: int, name: str, walked: Path, *, last: bool) -> bool:
    """Whether ``name`` in the (checked) directory ``fd`` is a link tuner may follow: not the directory written
    into, and root's or this user's (in a sticky directory anyone may make one). Raises :class:`Untrusted` for a
    link it may not follow; False: not a link (the caller's OSError stands)."""
    st = os.lstat(name, dir_fd=fd)
    if not stat.S_ISLNK(st.st_mode):
        return False
    if last or st.st_uid not in owners():
        raise Untrusted(f"{walked / name} is a symbolic link" + ("" if last else f" of uid {st.st_uid}"))
    return True
