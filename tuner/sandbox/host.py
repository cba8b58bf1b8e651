"""What the host must offer a sandbox before one is created: ``base_dir`` on a real disk (cold-cache probes on
tmpfs would never touch one), and — since PostgreSQL refuses to run as root — a ``postgres`` OS user, when
tuner is root, that can reach ``base_dir`` and the binaries.

``base_dir`` is usually ``/var/tmp``, where anyone may create anything: tuner keeps its sandboxes (and its copy of
the embedded server) in a directory of its own there, :func:`private_dir`, which it uses only while it is this
user's and writable by nobody else."""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import stat
from pathlib import Path

from tuner.fs import trust
from tuner.errors import SandboxError

_RAM_FILESYSTEMS = {"tmpfs", "ramfs", "overlay", "squashfs"}


def check_host(base_dir: Path, bin_dir: Path) -> pwd.struct_passwd | None:
    """Refuse a ``base_dir`` in memory or out of the server user's reach; return that user (None: this one)."""
    fstype = filesystem_type(base_dir)
    if fstype in _RAM_FILESYSTEMS:
        raise SandboxError(
            f"{base_dir} is on {fstype}: cold-cache probes there would never touch a disk",
            hint="set [sandbox] base_dir to a directory on a real disk",
        )
    try:
        mode = base_dir.stat().st_mode
    except OSError as exc:
        raise SandboxError(f"{base_dir} cannot be used: {exc.strerror or exc}") from None
    if mode & (stat.S_IWGRP | stat.S_IWOTH) and not mode & stat.S_ISVTX:
        raise SandboxError(
            f"{base_dir} may be written by other users and lacks the sticky bit: they could replace tuner's files",
            hint="set [sandbox] base_dir to a directory like /var/tmp (mode 1777) or one of your own",
        )
    user = run_user()
    if user is not None and not traversable_by(base_dir, user):
        raise SandboxError(
            f"the '{user.pw_name}' OS user that runs the sandbox servers cannot reach {base_dir}",
            hint="set [sandbox] base_dir to a directory every user can traverse, such as /var/tmp",
        )
    if user is not None and not traversable_by(bin_dir, user):
        raise SandboxError(
            f"the '{user.pw_name}' OS user cannot reach the PostgreSQL binaries in {bin_dir}",
            hint="set [sandbox] bin_dir to binaries in a world-readable place",
        )
    return user


def run_user() -> pwd.struct_passwd | None:
    """The OS user the servers run as: ``postgres`` when tuner is root, else None (tuner's own user)."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        raise SandboxError(
            "PostgreSQL cannot run as root and there is no 'postgres' OS user for the sandbox",
            hint="create one (useradd --system postgres) or run tuner as an ordinary user",
        ) from None


def filesystem_type(path: Path) -> str:
    """Filesystem type of the mount that holds ``path`` (from /proc/self/mountinfo)."""
    best, fstype = "", "unknown"
    target = str(path.resolve())
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return fstype
    for line in lines:
        left, _, right = line.partition(" - ")
        mount_point = left.split()[4].replace("\\040", " ")
        if (target == mount_point or target.startswith(mount_point.rstrip("/") + "/")) and len(mount_point) >= len(best):
            best, fstype = mount_point, right.split()[0]
    return fstype


def traversable_by(path: Path, user: pwd.struct_passwd) -> bool:
    """Can ``user`` reach ``path`` (x permission on every ancestor directory)?"""
    groups = {user.pw_gid} | {g.gr_gid for g in grp.getgrall() if user.pw_name in g.gr_mem}
    for p in [path.resolve(), *path.resolve().parents]:
        try:
            st = p.stat()
        except OSError:
            return False
        if not stat.S_ISDIR(st.st_mode):
            continue
        if st.st_uid == user.pw_uid:
            ok = st.st_mode & stat.S_IXUSR
        elif st.st_gid in groups:
            ok = st.st_mode & stat.S_IXGRP
        else:
            ok = st.st_mode & stat.S_IXOTH
        if not ok:
            return False
    return True


def private_dir_path(base_dir: Path) -> Path:
    return base_dir / f"tuner-{os.geteuid()}"


def not_ours(path: Path) -> str | None:
    """Why ``path`` is not a directory of this user's own that nobody else may write (None: it is)."""
    try:
        return _not_ours(path.lstat())
    except OSError as exc:
        return exc.strerror or str(exc)


def _not_ours(st: os.stat_result) -> str | None:
    if not stat.S_ISDIR(st.st_mode) and not stat.S_ISLNK(st.st_mode):
        return "it is not a directory"
    return trust.problem(st, trusted={os.geteuid()})


def private_dir(base_dir: Path, user: pwd.struct_passwd | None) -> Path:
    """tuner's own directory under ``base_dir``, created if need be: this user's, mode 0700 — or 0710 with
    ``user``'s group when the servers run as that user (they pass through it to their sandbox, and cannot list or
    write it). One that exists and is not ours (made by someone else, a link, writable by others) is refused;
    the checks and the changes are made on the opened directory, so what is checked is what is changed."""
    path, fd = private_dir_path(base_dir), -1
    for _attempt in range(3):  # another tuner may remove it (empty) between mkdir and open
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            break
        except FileNotFoundError:
            continue
        except OSError:
            break
    try:
        problem = (not_ours(path) or "cannot be opened") if fd < 0 else _not_ours(os.fstat(fd))
        if problem:
            raise SandboxError(f"{path}: {problem}; it is not tuner's own directory, so tuner does not use it",
                               hint="remove it (someone else may have made it), or set [sandbox] base_dir elsewhere")
        os.fchown(fd, -1, user.pw_gid if user is not None else os.getegid())
        os.fchmod(fd, 0o710 if user is not None else 0o700)
    finally:
        if fd >= 0:
            os.close(fd)
    return path
