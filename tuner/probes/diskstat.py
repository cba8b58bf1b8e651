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

The device is the one the data directory's file system sits on, by its own ``MAJ:MIN`` (a partition's own
counters, not its disk's; a loop device in the sandbox). Where the data directory is not on this host, or sits
on a file system without a block device (NFS, overlayfs, tmpfs), there is no reading and :func:`data_disk` says
why in one sentence: nothing is guessed.

Everything but :meth:`DiskStat.read` is pure; ``sys_root`` is a parameter, so the logic is tested on a tree
shaped like sysfs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tuner.knobs.devices import read_text

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
        return DiskStat(self.reads + other.reads, self.sectors_read + other.sectors_read,
                        self.read_ms + other.read_ms, self.io_ticks_ms + other.io_ticks_ms,
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
    """Where one block device's counters are read: ``stat`` under its sysfs directory."""

    name: str  # kernel name: loop3, vda1, nvme0n1, dm-0
    stat_path: Path

    def read(self) -> DiskStat | None:
        """The counters now; None if the device went away (a detached loop device)."""
        text = read_text(self.stat_path)
        try:
            return DiskStat.parse(text) if text else None
        except ValueError:
            return None


def data_disk(local_data_directory: Path | None, *, sys_root: Path = Path("/sys")) -> tuple[DiskReader | None, str]:
    """The reader for the device the data directory's file system sits on, with a phrase naming it; or None and
    one sentence saying why there is no reading."""
    if local_data_directory is None:
        return None, ("no device reading: tuner does not run on the server's host (its data directory is not "
                      "here), so what limits the reads is not measured")
    try:
        dev = os.stat(local_data_directory).st_dev
    except OSError as exc:
        return None, f"no device reading: cannot stat {local_data_directory} ({exc.strerror or exc})"
    majmin = f"{os.major(dev)}:{os.minor(dev)}"
    if os.major(dev) == 0:
        return None, (f"no device reading: {local_data_directory} is on a file system without a block device of "
                      "its own (NFS, overlayfs, tmpfs, btrfs)")
    link = sys_root / "dev" / "block" / majmin
    stat = link / "stat"
    if read_text(stat) is None:
        return None, f"no device reading: block device {majmin} has no readable stat file in sysfs"
    return DiskReader(name=link.resolve().name, stat_path=stat), f"block device {link.resolve().name} ({majmin})"


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
