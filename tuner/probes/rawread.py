"""The device's raw sequential read rate, measured as operators compare a disk with ``dd``: read a relation's own files
with ``O_DIRECT`` (no page cache, no readahead) in large aligned requests. A cold sequential scan's MB/s divided
by this rate is its efficiency: how close PostgreSQL plus readahead get to what the device delivers.
"""

from __future__ import annotations

import mmap
import os
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

CHUNK = 1 << 20  # 1 MiB requests, like dd bs=1M


def read_direct(files: Sequence[Path], *, limit_bytes: int = 256 << 20) -> tuple[int, float]:
    """Read up to ``limit_bytes`` from ``files`` with O_DIRECT. Returns (bytes read, seconds)."""
    buf = mmap.mmap(-1, CHUNK)  # page-aligned, as O_DIRECT requires
    done = 0
    t0 = time.perf_counter()
    try:
        for path in files:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
            try:
                while done < limit_bytes:
                    n = os.readv(fd, [buf])
                    if n <= 0:
                        break
                    done += n
                    if n < CHUNK:
                        break
            finally:
                os.close(fd)
            if done >= limit_bytes:
                break
    finally:
        buf.close()
    return done, time.perf_counter() - t0


def raw_read_mb_s(files: Sequence[Path], *, repeats: int = 3, limit_bytes: int = 256 << 20) -> float | None:
    """Median MB/s (10^6 bytes per second) over ``repeats`` O_DIRECT passes, or None when it cannot be measured
    (no files, no permission, a file system without O_DIRECT support)."""
    rates = []
    for _ in range(repeats):
        try:
            n, s = read_direct(files, limit_bytes=limit_bytes)
        except OSError:
            return None
        if n == 0 or s <= 0:
            return None
        rates.append(n / 1e6 / s)
    return statistics.median(rates)
