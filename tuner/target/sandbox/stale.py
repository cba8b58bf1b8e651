"""Sandboxes left behind by a killed tuner (SIGKILL): each sandbox directory names its owning process, and the
next sandbox created under the same ``base_dir`` removes those whose owner is gone — their servers, their loop
device and their files."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

from tuner.log import get_logger
from tuner.target.sandbox import loopdisk

log = get_logger("tuner.sandbox")
_PREFIX = "tuner-sandbox-"
_OWNER_FILE = "tuner-sandbox.json"


def new_root(base_dir: Path) -> Path:
    """A new sandbox directory under ``base_dir``, marked as this process's (what :func:`cleanup_stale` reads)."""
    root = Path(tempfile.mkdtemp(prefix=_PREFIX, dir=base_dir))
    (root / _OWNER_FILE).write_text(json.dumps({"pid": os.getpid(), "created": time.time()}))
    return root


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_postmaster(data_dir: Path) -> None:
    """Last resort: SIGKILL the postmaster named in postmaster.pid (only a process we started)."""
    try:
        pid = int((data_dir / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


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


def cleanup_stale(base_dir: Path) -> list[Path]:
    """Remove sandboxes whose owning tuner process is gone (e.g. after SIGKILL). Returns what was removed."""
    removed: list[Path] = []
    if not base_dir.is_dir():
        return removed
    for root in base_dir.glob(f"{_PREFIX}*"):
        owner = root / _OWNER_FILE
        try:
            pid = int(json.loads(owner.read_text())["pid"])
        except (OSError, ValueError, KeyError):
            continue
        if _pid_alive(pid):
            continue
        for data_dir in (root / "standby", root / "primary", root / "mnt" / "standby", root / "mnt" / "primary"):
            if (data_dir / "postmaster.pid").exists():
                kill_postmaster(data_dir)
        for pid in server_pids(root):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        loopdisk.release(root)
        shutil.rmtree(root, ignore_errors=True)
        log.info("sandbox.stale_removed", dir=str(root), owner_pid=pid)
        removed.append(root)
    return removed
