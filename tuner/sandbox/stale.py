"""Sandboxes left behind by a killed tuner (SIGKILL): each sandbox directory names its owning process, and the
next sandbox created under the same ``base_dir`` removes those whose owner is gone — their servers, their loop
device and their files.

``base_dir`` (``/var/tmp``) is writable by everyone, so nothing found there is trusted: sandboxes live in tuner's
own directory (:func:`tuner.sandbox.host.private_dir`), and clean-up acts only on a sandbox directory that
is this user's, writable by nobody else, and holds the marker this user wrote; it signals only a process whose
executable is ``postgres`` and whose working directory (or ``-D``) is that sandbox's data directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import stat
import tempfile
import time
from pathlib import Path

from tuner.log import get_logger
from tuner.sandbox import device, loopdisk
from tuner.sandbox.host import not_ours, private_dir, private_dir_path
from tuner.sandbox.own import OWNER_FILE as _OWNER_FILE
from tuner.sandbox.own import PREFIX as _PREFIX

log = get_logger("tuner.sandbox")
_DATA_DIRS = ("primary", "standby", "mnt/primary", "mnt/standby")


def new_root(base_dir: Path, run_user: pwd.struct_passwd | None = None) -> Path:
    """A new sandbox directory in tuner's own directory under ``base_dir``, marked as this process's (what
    :func:`cleanup_stale` reads). With a ``run_user`` (root runs the servers as ``postgres``), that user's group
    may pass through it (mode 0710), not list or write it."""
    root = None
    for _attempt in range(4):  # another tuner may remove the (empty) private directory meanwhile
        with contextlib.suppress(FileNotFoundError):
            root = Path(tempfile.mkdtemp(prefix=_PREFIX, dir=private_dir(base_dir, run_user)))
            break
    root = root or Path(tempfile.mkdtemp(prefix=_PREFIX, dir=private_dir(base_dir, run_user)))
    if run_user is not None:
        os.chown(root, -1, run_user.pw_gid)
        os.chmod(root, 0o710)
    fd = os.open(root / _OWNER_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump({"pid": os.getpid(), "created": time.time()}, fh)
    return root


def _owner_pid(root: Path) -> int | None:
    """The pid in ``root``'s marker, if ``root`` and its marker are this user's own (else None: not ours)."""
    if not_ours(root):
        return None
    marker = root / _OWNER_FILE
    try:
        st = marker.lstat()
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
            return None
        pid = json.loads(marker.read_text())["pid"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return pid if isinstance(pid, int) and pid > 0 else None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _serves(pid: int, data_dirs: list[Path]) -> bool:
    """Is ``pid`` a ``postgres`` process working in (or started with ``-D``) one of ``data_dirs``?"""
    proc = Path("/proc") / str(pid)
    try:
        exe = os.readlink(proc / "exe").removesuffix(" (deleted)")
        cwd = os.readlink(proc / "cwd").removesuffix(" (deleted)")
        argv = (proc / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    if Path(exe).name != "postgres":
        return False
    wanted = {str(d.resolve()) for d in data_dirs} | {str(d) for d in data_dirs}
    given = {a.decode(errors="replace") for flag, a in zip(argv, argv[1:]) if flag == b"-D"}
    return cwd in wanted or bool(given & wanted)


def _kill(pid: int) -> None:
    """SIGKILL ``pid`` and, when it leads its process group (pg_ctl starts the postmaster that way), the group."""
    with contextlib.suppress(OSError):
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
            return
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)


def kill_postmaster(data_dir: Path) -> None:
    """Last resort: SIGKILL the postmaster named in ``data_dir``'s postmaster.pid — only if it is a postgres
    serving that directory (a pid file is a claim, and a stale one may name a recycled pid)."""
    try:
        pid = int((data_dir / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    if pid > 0 and _serves(pid, [data_dir]):
        _kill(pid)


def server_pids(root: Path) -> list[int]:
    """PIDs of processes whose working directory lies under ``root`` (postgres chdirs to its data directory;
    its command line does not name it)."""
    out = []
    prefix = str(root.resolve())
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            cwd = os.readlink(p / "cwd").removesuffix(" (deleted)")
        except OSError:
            continue
        if cwd == prefix or cwd.startswith(prefix + "/"):
            out.append(int(p.name))
    return out


def remove_if_empty(directory: Path) -> None:
    with contextlib.suppress(OSError):
        directory.rmdir()


def cleanup_stale(base_dir: Path) -> list[Path]:
    """Remove sandboxes whose owning tuner process is gone (e.g. after SIGKILL). Returns what was removed."""
    removed: list[Path] = []
    private = private_dir_path(base_dir)
    problem = not_ours(private)
    if problem:
        if private.exists() or private.is_symlink():
            log.warning("sandbox.not_ours", dir=str(private), problem=problem)
        return removed
    for root in sorted(private.glob(f"{_PREFIX}*")):
        owner = _owner_pid(root)
        if owner is None:
            log.warning("sandbox.stale_skipped", dir=str(root), reason="not this user's, or no marker of tuner's")
            continue
        if _pid_alive(owner):
            continue
        data_dirs = [root / d for d in _DATA_DIRS]
        for data_dir in data_dirs:
            kill_postmaster(data_dir)
        for pid in server_pids(root):
            if _serves(pid, data_dirs):
                _kill(pid)
        loopdisk.release(root)
        device.release(root)  # a device profile's cgroup, latency helper and tmpfs, after the loop device
        shutil.rmtree(root, ignore_errors=True)
        log.info("sandbox.stale_removed", dir=str(root), owner_pid=owner)
        removed.append(root)
    remove_if_empty(private)
    return removed
