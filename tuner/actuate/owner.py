"""Who wrote a journal, and whether that tuner is still running: its pid, the process's start time (so a recycled
pid is not mistaken for a live tuner), its host and the boot it ran in."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def boot_id() -> str | None:
    try:
        return BOOT_ID.read_text().strip()
    except OSError:
        return None


def process_start(pid: int) -> str | None:
    """The start time of ``pid`` in clock ticks since boot (field 22 of /proc/PID/stat), or None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after its closing parenthesis.
    return stat.rsplit(")", 1)[1].split()[19]


def owner_alive(owner: dict[str, Any]) -> bool:
    if owner.get("host") != socket.gethostname() or owner.get("boot_id") != boot_id():
        return False
    pid = owner.get("pid")
    return isinstance(pid, int) and process_start(pid) == owner.get("start")
