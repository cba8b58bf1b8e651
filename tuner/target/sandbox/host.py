"""What the host must offer a sandbox before one is created: ``base_dir`` on a real disk (cold-cache probes on
tmpfs would never touch one), and — since PostgreSQL refuses to run as root — a ``postgres`` OS user, when
tuner is root, that can reach ``base_dir`` and the binaries."""

from __future__ import annotations

import grp
import os
import pwd
import stat
from pathlib import Path

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
