"""The ``ram`` storage of a device profile: the sandbox's image file on a tmpfs of its own (RAM-speed reads;
tmpfs supports O_DIRECT since Linux 6.6, so the loop device still attaches with ``--direct-io=on``).

The tmpfs is sized to the image, and the image is sparse: only what the clusters write takes memory.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

MOUNT = "ram"


def mount(directory: Path, size_mb: int) -> Path:
    """Mount a tmpfs at ``directory/ram`` (room for ``size_mb``); the mount point."""
    where = directory / MOUNT
    where.mkdir(exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0700", "tuner-ram", str(where)],
                   check=True, capture_output=True)
    return where


def unmount(directory: Path) -> None:
    where = directory / MOUNT
    if os.path.ismount(where):
        proc = subprocess.run(["umount", str(where)], check=False, capture_output=True)
        if proc.returncode != 0:
            subprocess.run(["umount", "-l", str(where)], check=False, capture_output=True)
