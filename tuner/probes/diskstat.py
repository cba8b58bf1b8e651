"""What the data directory's block device did during a probe, from its ``stat`` file.

``/sys/dev/block/MAJ:MIN/stat`` (Linux's Documentation/block/stat.rst) counts, since boot: reads completed (field
1), sectors read (3, always 512-byte units whatever the device's sector size), milliseconds reads spent waiting
(4, summed over every read), milliseconds the device had at least one request in flight (``io_ticks``, 10) and
the weighted milliseconds of every request (``time_in_queue``, 11). Read before and after the scans of a probe,
the differences give, over the window's wall time Δt:

* IOPS = Δreads / Δt; MiB/s = Δsectors · 512 / 2²⁰ / Δt; mean request = Δsectors · 512 / Δreads;
* mean latency per read = Δread_ms / Δreads;
* mean reads in flight = Δread_ms / Δt (Little's law: the summed wait of all reads over the time they spread
  across — the same as IOPS × latency);
* busy share = Δio_ticks / Δt (the part of the window with anything in flight at all: a device far from busy
  during a read workload is not what limits it).

The devices are those the data directory's and each tablespace's file systems sit on, by their own ``MAJ:MIN``
(a partition's own counters, not its disk's; a loop device in the sandbox). Tablespaces on other devices are read
too — a probe's tables may live there — and the devices' counters add up (``io_ticks``: the largest, the time
any of them was busy). Where the data directory is not on this host, or sits on a file system without a block
device (NFS, overlayfs, tmpfs), there is no reading and :func:`data_disk` says why in one sentence: nothing is
guessed.

Everything but :meth:`DiskStat.read` is pure; ``sys_root`` is a parameter, so the logic is tested on a tree
shaped like sysfs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from tuner.hostfacts.blockdev import read_text

SECTOR_BYTES = 512  # stat.rst: "sectors" are 512-byte units regardless of the device's own sector size

# Metric names a probe's trial carries (Trial.metrics); the regime reads them back by these names.
READS, IOPS, MIB_S = "disk_reads", "disk_read_iops", "disk_read_mib_s"
KIB_PER_READ, IN_FLIGHT, LATENCY_MS = "disk_read_kib_per_request", "disk_reads_in_flight", "disk_read_latency_ms"
BUSY, WINDOW_S = "disk_busy_share", "disk_window_s"


@dataclass(frozen=True)
class DiskStat:
    """One reading of a block device's counters (the fields of ``stat`` a read workload needs)."""

    reads: int
    sectors_read: int
    read_ms: int
    io_ticks_ms: int
    time_in_queue_ms: int

    @classmethod
    def parse(cls, text: str) -> DiskStat:
        """A ``stat`` line (11 fields before Linux 4.18, 15 to 5.4, 17 since): fields 1, 3, 4, 10 and 11."""
        f = [int(x) for x in text.split()]
        if len(f) < 11:
            raise ValueError(f"a block device stat line has at least 11 fields, not {len(f)}")
        return cls(reads=f[0], sectors_read=f[2], read_ms=f[3], io_ticks_ms=f[9], time_in_queue_ms=f[10])

    def minus(self, earlier: DiskStat) -> DiskStat:
        return DiskStat(self.reads - earlier.reads, self.sectors_read - earlier.sectors_read,
                        self.read_ms - earlier.read_ms, self.io_ticks_ms - earlier.io_ticks_ms,
                        self.time_in_queue_ms - earlier.time_in_queue_ms)

    def plus(self, other: DiskStat) -> DiskStat:
        """Two windows of one device, one after the other."""
        return DiskStat(self.reads + other.reads, self.sectors_read + other.sectors_read,
                        self.read_ms + other.read_ms, self.io_ticks_ms + other.io_ticks_ms,
                        self.time_in_queue_ms + other.time_in_queue_ms)

    def beside(self, other: DiskStat) -> DiskStat:
        """Two devices over the same window: counts add up, the busy time is the busier one's (a lower bound of
        the time any of them was busy; the sum could exceed the window)."""
        return DiskStat(self.reads + other.reads, self.sectors_read + other.sectors_read,
                        self.read_ms + other.read_ms, max(self.io_ticks_ms, other.io_ticks_ms),
                        self.time_in_queue_ms + other.time_in_queue_ms)


ZERO = DiskStat(0, 0, 0, 0, 0)


def figures(delta: DiskStat, window_s: float) -> dict[str, float]:
    """The per-probe figures of counters that moved by ``delta`` over ``window_s`` seconds (see the module's
    formulas); {} for an empty window. Latency and request size only where reads completed."""
    if window_s <= 0:
        return {}
    out = {READS: float(delta.reads), IOPS: delta.reads / window_s,
           MIB_S: delta.sectors_read * SECTOR_BYTES / 2**20 / window_s,
           IN_FLIGHT: delta.read_ms / 1000 / window_s,
           BUSY: min(1.0, delta.io_ticks_ms / 1000 / window_s), WINDOW_S: window_s}
    if delta.reads > 0:
        out[KIB_PER_READ] = delta.sectors_read * SECTOR_BYTES / 1024 / delta.reads
        out[LATENCY_MS] = delta.read_ms / delta.reads
    return out


@dataclass(frozen=True)
class DiskReader:
    """Where the counters of the devices under the data directory and its tablespaces are read: ``stat`` under
    each one's sysfs directory."""

    names: tuple[str, ...]  # kernel names: loop3, vda1, nvme0n1, dm-0
    stat_paths: tuple[Path, ...]

    @property
    def name(self) -> str:
        return "+".join(self.names)

    def read(self) -> DiskStat | None:
        """The counters now (added over the devices); None if a device went away (a detached loop device)."""
        total: DiskStat | None = None
        for path in self.stat_paths:
            text = read_text(path)
            try:
                now = DiskStat.parse(text) if text else None
            except ValueError:
                now = None
            if now is None:
                return None
            total = now if total is None else total.beside(now)
        return total


def _majmin(path: Path) -> tuple[str | None, str | None]:
    """(MAJ:MIN, None) of the device ``path`` sits on, or (None, why not)."""
    try:
        dev = os.stat(path).st_dev
    except OSError as exc:
        return None, f"cannot stat {path} ({exc.strerror or exc})"
    if os.major(dev) == 0:
        return None, f"{path} is on a file system without a block device of its own (NFS, overlayfs, tmpfs, btrfs)"
    return f"{os.major(dev)}:{os.minor(dev)}", None


def data_disk(local_data_directory: Path | None, tablespaces: Iterable[str] = (), *,
              sys_root: Path = Path("/sys")) -> tuple[DiskReader | None, str]:
    """The reader for the devices the data directory and the tablespaces at ``tablespaces`` (locations) sit on,
    with a phrase naming them; or None and one sentence saying why there is no reading. A tablespace whose device
    cannot be read is left out (the data directory's decides)."""
    if local_data_directory is None:
        return None, ("no device reading: tuner does not run on the server's host (its data directory is not "
                      "here), so what limits the reads is not measured")
    majmin, why = _majmin(local_data_directory)
    if majmin is None:
        return None, f"no device reading: {why}"
    found: dict[str, Path] = {}
    for mm in [majmin, *(m for m, _ in map(_majmin, map(Path, filter(None, tablespaces))) if m)]:
        stat = sys_root / "dev" / "block" / mm / "stat"
        if mm not in found and read_text(stat) is not None:
            found[mm] = stat
    if majmin not in found:
        return None, f"no device reading: block device {majmin} has no readable stat file in sysfs"
    names = tuple(p.parent.resolve().name for p in found.values())
    return (DiskReader(names=names, stat_paths=tuple(found.values())),
            f"block device {'+'.join(names)} ({', '.join(found)})")


class DiskWindow:
    """Accumulates a device's counters over the windows a probe reads in (one per cold scan): :meth:`start` and
    :meth:`stop` around each, :meth:`metrics` for the sum. A window whose reading failed adds nothing, and
    :meth:`metrics` is then empty: a partial reading would understate the probe."""

    def __init__(self, reader: DiskReader | None, clock: Callable[[], float] = time.monotonic) -> None:
        self.reader, self.clock = reader, clock
        self._start: tuple[DiskStat, float] | None = None
        self._sum, self._seconds, self._broken = ZERO, 0.0, reader is None

    def start(self) -> None:
        now = self.reader.read() if self.reader is not None else None
        self._start = (now, self.clock()) if now is not None else None
        self._broken = self._broken or now is None

    def stop(self) -> None:
        if self._start is None or self.reader is None:
            return
        now, t = self.reader.read(), self.clock()
        if now is None:
            self._broken = True
        else:
            self._sum, self._seconds = self._sum.plus(now.minus(self._start[0])), self._seconds + t - self._start[1]
        self._start = None

    def metrics(self) -> dict[str, float]:
        return {} if self._broken else figures(self._sum, self._seconds)
