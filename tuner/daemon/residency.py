"""Keep the daemon's own code in memory while its probes empty the page cache.

A cold-cache probe writes ``/proc/sys/vm/drop_caches`` (tuner.probes.cache), which evicts every clean file page on
the host — the daemon's own shared libraries and interpreter included. The next /metrics request then stalls on
major page faults, reading that code back from disk (issue 44: /metrics stalled up to 791 ms during a session).

:func:`lock_working_set` ``mlock()``s the pages of the process's read-only file mappings (code and constants of
the interpreter and its extension modules) that it has actually touched — present in its page tables, from
``/proc/self/pagemap`` (https://docs.kernel.org/admin-guide/mm/pagemap.html) — so drop_caches cannot evict them
(mlock(2): locked pages stay in RAM). Only the working set is locked, not whole libraries: a few tens of MiB,
which the process holds anyway. Anonymous memory (the heap) is never evicted by drop_caches and is left alone.
Without the privilege (RLIMIT_MEMLOCK, no CAP_IPC_LOCK), nothing is locked and the caller is told why.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
import struct
from dataclasses import dataclass

from tuner.log import get_logger

log = get_logger("tuner.daemon")

# What lifts the limit (examples/systemd/tuner.service sets LimitMEMLOCK=128M).
FIX = "set LimitMEMLOCK=128M in the daemon's unit (as examples/systemd/tuner.service does), or run it as root"

PAGE = mmap.PAGESIZE
_PRESENT = 1 << 63  # pagemap: the page is in RAM and mapped by this process


@dataclass(frozen=True)
class Locked:
    bytes_locked: int
    ranges: int
    problem: str | None = None  # why (some of) it could not be locked


def _mappings() -> list[tuple[int, int]]:
    """Read-only file-backed mappings of this process (code, constants), as (start, end) addresses."""
    out = []
    with open("/proc/self/maps") as fh:
        for line in fh:
            parts = line.split(maxsplit=5)
            if len(parts) < 6:
                continue
            span, perms, path = parts[0], parts[1], parts[5].strip()
            if not path.startswith("/") or path.startswith("/dev/") or path.endswith("(deleted)"):
                continue
            if "w" in perms or "r" not in perms:
                continue
            start, end = (int(x, 16) for x in span.split("-"))
            out.append((start, end))
    return out


def _present_runs(pagemap: int, start: int, end: int) -> list[tuple[int, int]]:
    """The runs of pages in [start, end) present in this process's page tables."""
    pages = (end - start) // PAGE
    raw = os.pread(pagemap, pages * 8, (start // PAGE) * 8)
    runs: list[tuple[int, int]] = []
    run_start = None
    for i, (entry,) in enumerate(struct.iter_unpack("<Q", raw)):
        addr = start + i * PAGE
        if entry & _PRESENT:
            if run_start is None:
                run_start = addr
        elif run_start is not None:
            runs.append((run_start, addr))
            run_start = None
    if run_start is not None:
        runs.append((run_start, start + len(raw) // 8 * PAGE))
    return runs


def lock_working_set() -> Locked:
    """mlock the touched pages of the process's read-only file mappings; idempotent (locking twice is free)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.mlock.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
    try:
        pagemap = os.open("/proc/self/pagemap", os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        return Locked(0, 0, f"/proc/self/pagemap cannot be read ({exc.strerror})")
    total = ranges = 0
    try:
        for start, end in _mappings():
            try:
                runs = _present_runs(pagemap, start, end)
            except OSError:
                continue  # a mapping that went away meanwhile
            for a, b in runs:
                if libc.mlock(ctypes.c_void_p(a), ctypes.c_size_t(b - a)) != 0:
                    err = ctypes.get_errno()
                    return Locked(total, ranges, f"mlock failed after {total // (1 << 20)} MiB: "
                                                 f"{os.strerror(err)} (RLIMIT_MEMLOCK, or no CAP_IPC_LOCK)")
                total += b - a
                ranges += 1
    finally:
        os.close(pagemap)
    return Locked(total, ranges)


class LockNotice:
    """Says what could not be locked once, at warning and with the fix — the limit is the same every session, so
    later sessions say it only at debug — and what was locked at debug."""

    def __init__(self) -> None:
        self._told = False

    def __call__(self, locked: Locked) -> None:
        mib = round(locked.bytes_locked / (1 << 20), 1)
        if locked.problem is None or self._told:
            log.debug("daemon.code_locked", mib=mib, problem=locked.problem)
            return
        self._told = True
        log.warning("daemon.code_not_locked", mib=mib, problem=locked.problem, fix=FIX,
                    effect="a cold probe's drop_caches may evict the daemon's code: /metrics can stall meanwhile")
