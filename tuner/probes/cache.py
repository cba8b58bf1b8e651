"""Putting the cache in the declared state before a probe.

Cold means: shared buffers emptied (a restart of the staging server), then the OS page cache emptied —
``/proc/sys/vm/drop_caches`` as root, else ``posix_fadvise(POSIX_FADV_DONTNEED)`` on the probed relations'
files (needs read access to them, no root). The probe's own counters then say whether it worked.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

DROP_CACHES = Path("/proc/sys/vm/drop_caches")
OsMethod = Literal["drop_caches", "fadvise", "none"]


def can_drop_caches() -> bool:
    return os.geteuid() == 0 and os.access(DROP_CACHES, os.W_OK)


def can_fadvise(files: Sequence[Path]) -> bool:
    return bool(files) and all(os.access(f, os.R_OK) for f in files)


def choose_os_method(local_data_dir: Path | None, files: Sequence[Path]) -> OsMethod:
    """drop_caches as root on the target's host, else fadvise on readable relation files, else none."""
    if local_data_dir is None:
        return "none"
    if can_drop_caches():
        return "drop_caches"
    if can_fadvise(files):
        return "fadvise"
    return "none"


def _drop_caches() -> None:
    os.sync()
    DROP_CACHES.write_text("1\n")  # 1 = page cache only; dentries and inodes stay


def _fadvise(files: Sequence[Path]) -> None:
    for path in files:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            try:
                os.fdatasync(fd)  # dirty pages are not dropped; flush them first
            except OSError:
                pass
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


@dataclass
class CacheControl:
    """How this target is made cold. ``restart`` empties shared buffers (None: not possible here)."""

    restart: Callable[[], Awaitable[None]] | None
    os_method: OsMethod
    files: Sequence[Path] = field(default_factory=list)

    def describe(self) -> str:
        buffers = "restart" if self.restart else "not emptied"
        return f"shared buffers: {buffers}; OS page cache: {self.os_method}"

    async def make_cold(self) -> None:
        if self.restart is not None:
            await self.restart()
        if self.os_method == "drop_caches":
            await asyncio.to_thread(_drop_caches)
        elif self.os_method == "fadvise":
            await asyncio.to_thread(_fadvise, list(self.files))
