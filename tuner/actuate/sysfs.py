"""The ``sysfs`` actuator: a file under /sys, e.g. ``queue/read_ahead_kb``, written directly as root or through
the configured privileged helper command. A kernel setting does not survive a reboot, so after one its journal
entry is dropped, not written back (the device may even have another name now)."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

from tuner.actuate.entry import JournalError, Restored


class SysfsWriter:
    """Writes a sysfs attribute: through the helper command when one is configured, else directly.

    The helper is a command line with ``{path}``, ``{device}`` and ``{value}`` placeholders, for example
    ``sudo -n /usr/local/sbin/tuner-sysfs {path} {value}``; each placeholder is shell-quoted.
    """

    def __init__(self, helper_command: str | None = None) -> None:
        self.helper_command = helper_command

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
