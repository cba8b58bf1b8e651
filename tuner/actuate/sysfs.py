"""The ``sysfs`` actuator: a block device's ``queue/read_ahead_kb`` under /sys, written directly as root or through
the configured privileged helper command. A kernel setting does not survive a reboot, so after one its journal
entry is dropped, not written back (the device may even have another name now).

It writes nothing else: :func:`entry_problem` — checked when an entry is journaled and again when a journal is
read — accepts only ``<sys>/block/DEV/queue/ATTR`` or ``<sys>/devices/…/queue/ATTR`` of a block device that
``<sys>/block`` lists (real paths compared, so no ``..`` or symbolic link leads elsewhere), the attributes in
:data:`ATTRIBUTES` and integer values in their range."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

from tuner.actuate.entry import JournalError, Restored

SYS_ROOT = Path("/sys")
ATTRIBUTES = {"read_ahead_kb": (0, 1 << 30)}  # the queue attributes this actuator writes, and the values it accepts
_DEVICE = re.compile(r"/dev/[A-Za-z0-9._+:-]{1,64}")
FIELDS = {"kind", "path", "device", "name", "original", "recorded_at"}


class SysfsWriter:
    """Writes a sysfs attribute: through the helper command when one is configured, else directly.

    The helper is a command line with ``{path}``, ``{device}`` and ``{value}`` placeholders, for example
    ``sudo -n /usr/local/sbin/tuner-sysfs {path} {value}``; each placeholder is shell-quoted.
    """

    def __init__(self, helper_command: str | None = None, *, sys_root: Path = SYS_ROOT) -> None:
        self.helper_command = helper_command
        self.sys_root = sys_root  # where sysfs is: /sys, a tree of plain files in the unit tests

    def can_write(self, path: Path) -> bool:
        return self.helper_command is not None or os.access(path, os.W_OK)

    def write(self, path: Path, value: str, *, device: str = "") -> None:
        if self.helper_command is None:
            try:
                path.write_text(f"{value}\n")
            except OSError as exc:
                raise JournalError(
                    f"could not write {value} to {path}: {exc.strerror or exc}",
                    hint="run tuner as root, or set [readahead] helper_command to a privileged helper",
                ) from None
        else:
            cmd = self.helper_command.format(
                path=shlex.quote(str(path)), device=shlex.quote(device), value=shlex.quote(value)
            )
            proc = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=60)
            if proc.returncode != 0:
                detail = (proc.stderr or proc.stdout).strip().splitlines()
                raise JournalError(
                    f"the readahead helper command failed for {path}: "
                    f"{detail[-1] if detail else 'exit ' + str(proc.returncode)}",
                    hint="check [readahead] helper_command (it gets {path}, {device} and {value})",
                )
        found = path.read_text().strip()
        if found != value:
            raise JournalError(f"wrote {value} to {path}, but it reads {found}")


def path_problem(path: str, sys_root: Path) -> str | None:
    """Why ``path`` is not a block device queue attribute this actuator may write, or None."""
    if "\x00" in path:  # os.path.realpath raises on it
        return "path contains a NUL character"
    if not os.path.isabs(path) or os.path.normpath(path) != path:
        return f"path {path!r} is not a plain absolute path"
    root, parts = str(sys_root).rstrip("/"), Path(path).parts
    if parts[-2:-1] != ("queue",) or parts[-1] not in ATTRIBUTES:
        return f"path {path!r} is not a block device's queue/{'|'.join(ATTRIBUTES)}"
    if not (path.startswith(f"{root}/block/") or path.startswith(f"{root}/devices/")):
        return f"path {path!r} is not under {root}/block or {root}/devices"
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if not (real.startswith(f"{real_root}/block/") or real.startswith(f"{real_root}/devices/")):
        return f"path {path!r} leads to {real}, outside {root}"
    device_dir = os.path.dirname(os.path.dirname(real))
    if os.path.exists(device_dir) and os.path.realpath(f"{root}/block/{os.path.basename(device_dir)}") != device_dir:
        return f"path {path!r} leads to {real}, which is not the queue of a block device {root}/block lists"
    return None


def value_problem(name: str, value: object) -> str | None:
    """Why ``value`` is not one ``name`` may be set to, or None."""
    lo, hi = ATTRIBUTES.get(name, (0, -1))
    text = str(value).strip() if isinstance(value, (str, int)) and not isinstance(value, bool) else ""
    if not re.fullmatch(r"\d{1,12}", text) or not lo <= int(text) <= hi:
        return f"{name} value {value!r} is not an integer from {lo} to {hi}"
    return None


def entry_problem(change: dict[str, Any], sys_root: Path) -> str | None:
    """Why a ``sysfs`` journal entry is not one this actuator wrote (or may write back), or None."""
    path, name, device = change.get("path"), change.get("name"), change.get("device")
    if not isinstance(path, str):
        return "has no path"
    problem = path_problem(path, sys_root)
    if problem:
        return problem
    if name != Path(path).name:
        return f"names {name!r}, not the attribute of its path {path!r}"
    expected = f"/dev/{Path(path).parent.parent.name}"
    if not isinstance(device, str) or not _DEVICE.fullmatch(device) or device != expected:
        return f"device {device!r} is not {expected}, the device of its path"
    return value_problem(name, change.get("original"))


def sysfs_entry(path: Path, *, device: str, name: str) -> dict[str, Any]:
    """The journal entry for ``path`` before it is first changed: the value it has now."""
    try:
        original = path.read_text().strip()
    except OSError as exc:
        raise JournalError(f"cannot read {path}: {exc.strerror or exc}") from None
    return {"kind": "sysfs", "path": str(path), "device": device, "name": name, "original": original}


def restore_sysfs(writer: SysfsWriter, change: dict[str, Any], *, same_boot: bool) -> Restored:
    """Write a ``sysfs`` entry's original value back (``same_boot``: the journal was written in this boot)."""
    path, original = Path(change["path"]), str(change["original"])
    obj, name = change.get("device") or str(path), change.get("name") or path.name
    if not same_boot:
        return Restored(obj, name, None, original, "dropped: the machine rebooted since, which reset it")
    if not path.exists():
        return Restored(obj, name, None, original, "dropped: the device is gone")
    was = path.read_text().strip()
    if was == original:
        return Restored(obj, name, was, original, "already at the original value")
    writer.write(path, original, device=obj)
    return Restored(obj, name, was, original, "restored")
