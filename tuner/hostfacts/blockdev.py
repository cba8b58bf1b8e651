"""Which block device holds each of PostgreSQL's directories, and where its readahead lives.

For every path (data directory, ``pg_wal``, each tablespace; symlinks resolved) ``stat().st_dev`` gives
``MAJ:MIN``; ``/sys/dev/block/MAJ:MIN`` resolves into ``/sys/devices/…/block/<disk>[/<part>]``. A partition
shares its disk's readahead (the ioctl and sysfs both write the disk's bdi), so the knob is the parent disk's
``queue/read_ahead_kb``. Device-mapper (``dm-N``: LVM, dm-crypt, multipath) and md RAID (``mdN``) have their own
bdi, which is the one file reads use, so the knob is theirs, not their members'. NVMe namespaces (``nvme0n1``)
are disks like any other. A major number of 0 is an anonymous device (btrfs, overlayfs, tmpfs, NFS, ZFS):
no block-device readahead to tune there, and the reason says why. Sources: Linux's Documentation/ABI/stable/
sysfs-block (``queue/read_ahead_kb``; partitions have no ``queue/``) and sysfs-dev (``/sys/dev/block/MAJ:MIN``).

Everything here reads files only; ``sys_root`` and ``mountinfo`` are parameters so the logic is tested on a
directory tree shaped like sysfs, and against real loop devices.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

Kind = Literal["disk", "partition", "dm", "md", "nvme", "loop"]

_ANONYMOUS_REASONS = {
    "btrfs": "btrfs spans devices through its own bdi; tune its member devices by hand",
    "overlay": "overlayfs (a container root): tune the device under its upper directory on the host",
    "tmpfs": "tmpfs lives in memory: there is no readahead to tune",
    "ramfs": "ramfs lives in memory: there is no readahead to tune",
    "zfs": "ZFS uses its own prefetch, not block-device readahead",
    "nfs": "NFS has no local block device (its readahead is the client's rsize/bdi)",
    "nfs4": "NFS has no local block device (its readahead is the client's rsize/bdi)",
    "fuse": "a FUSE file system has no local block device",
}


@dataclass(frozen=True)
class BlockDevice:
    """The block device whose ``queue/read_ahead_kb`` governs file reads on a file system."""

    name: str  # kernel name of the device that carries the setting: sda, dm-0, md0, nvme0n1, loop3
    kind: Kind
    majmin: str  # of that device
    description: str  # e.g. "partition vda1 of vda", "device-mapper vg0-pgdata"
    sys_dir: Path  # /sys/block/<name>
    match: dict[str, str] = field(default_factory=dict)  # udev keys that identify it stably

    @property
    def node(self) -> str:
        return f"/dev/{self.name}"

    @property
    def read_ahead_path(self) -> Path:
        return self.sys_dir / "queue" / "read_ahead_kb"

    def read_ahead_kb(self) -> int:
        return int(self.read_ahead_path.read_text().strip())


@dataclass(frozen=True)
class Placement:
    """Where one of PostgreSQL's directories lives: a tunable device, or the reason it has none."""

    role: str  # "data directory", "pg_wal", "tablespace ts1"
    path: Path  # resolved
    device: BlockDevice | None
    fstype: str | None
    source: str | None  # what the file system was mounted from (mountinfo)
    reason: str | None = None  # why there is no device


@dataclass(frozen=True)
class DeviceGroup:
    """One readahead knob: a device and every directory that lives on it."""

    device: BlockDevice
    placements: tuple[Placement, ...]

    @property
    def roles(self) -> list[str]:
        return [p.role for p in self.placements]

    @property
    def tablespaces(self) -> list[str]:
        return [p.role.removeprefix("tablespace ") for p in self.placements if p.role.startswith("tablespace ")]

    @property
    def holds_data_directory(self) -> bool:
        return "data directory" in self.roles


def readahead_quantum_kb() -> int:
    """The step read_ahead_kb moves in: the kernel keeps readahead in whole pages (4 KiB on x86-64)."""
    return max(1, os.sysconf("SC_PAGE_SIZE") // 1024)


def read_text(path: Path) -> str | None:
    """A file's text, stripped ("" when empty); None when absent or unreadable. The one reader of host facts
    (sysfs here, /proc and cgroup files in :mod:`tuner.hostfacts.limits`): a missing file is a fact, not an error."""
    try:
        return path.read_text().strip()
    except OSError:
        return None


def read_fact(path: Path) -> str | None:
    """:func:`read_text`, with an empty file read as absent too."""
    return read_text(path) or None


def mount_of(majmin: str, mountinfo: str) -> tuple[str | None, str | None]:
    """(fstype, source) of the mount whose device is ``majmin``, from /proc/self/mountinfo text."""
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        fields = left.split()
        if sep and len(fields) > 2 and fields[2] == majmin:
            rest = right.split()
            return (rest[0] if rest else None, rest[1] if len(rest) > 1 else None)
    return None, None


# What _match_keys returns, as sets of udev keys: the only shapes a device's match may have wherever tuner reads
# one back (tuner.report.validate), and the only keys tuner.emit.quote.udev_value writes — never an assignment or a
# key that makes udev run something (PROGRAM, IMPORT{program}, RUN; udev(7)).
LOOP_KERNEL = "loop*"
MATCH_SHAPES: tuple[frozenset[str], ...] = (
    frozenset({"ENV{DM_UUID}"}), frozenset({"ENV{DM_NAME}"}), frozenset({"KERNEL", "ATTR{loop/backing_file}"}),
    frozenset({"ATTR{wwid}"}), frozenset({"ATTRS{wwid}"}), frozenset({"ATTR{serial}"}), frozenset({"KERNEL"}),
)
MATCH_KEYS: frozenset[str] = frozenset().union(*MATCH_SHAPES)


def _match_keys(sys_dir: Path, kind: Kind, name: str) -> dict[str, str]:
    """udev keys that find this device again after a reboot (kernel names are not stable)."""
    if kind == "dm":
        uuid = read_text(sys_dir / "dm" / "uuid")
        if uuid:
            return {"ENV{DM_UUID}": uuid}
        dm_name = read_text(sys_dir / "dm" / "name")
        if dm_name:
            return {"ENV{DM_NAME}": dm_name}
    if kind == "loop":
        backing = read_text(sys_dir / "loop" / "backing_file")
        if backing:
            return {"KERNEL": LOOP_KERNEL, "ATTR{loop/backing_file}": backing}
    for attr, key in (("wwid", "ATTR{wwid}"), ("device/wwid", "ATTRS{wwid}"), ("serial", "ATTR{serial}")):
        value = read_text(sys_dir / attr)
        if value:
            return {key: value}
    return {"KERNEL": name}


def device_of(majmin: str, *, sys_root: Path = Path("/sys")) -> BlockDevice | None:
    """The device that carries the readahead for block device ``majmin``, or None if sysfs has no entry."""
    link = sys_root / "dev" / "block" / majmin
    if not link.exists():
        return None
    real = link.resolve()
    name = real.name
    description = name
    if (real / "partition").exists():
        disk_dir = real.parent
        description = f"partition {name} of {disk_dir.name}"
        name = disk_dir.name
        real = disk_dir
    sys_dir = sys_root / "block" / name
    if not sys_dir.exists():
        sys_dir = real
    kind: Kind
    if (sys_dir / "dm").is_dir():
        kind = "dm"
        dm_name = read_text(sys_dir / "dm" / "name")
        description = f"device-mapper {dm_name or name}"
    elif (sys_dir / "md").is_dir():
        kind, description = "md", f"md RAID {name}"
    elif name.startswith("nvme"):
        kind = "nvme"
        description = description if description != name else f"NVMe namespace {name}"
    elif (sys_dir / "loop").is_dir():
        kind = "loop"
        backing = read_text(sys_dir / "loop" / "backing_file")
        description = f"loop device {name}" + (f" backed by {backing}" if backing else "")
    else:
        kind = "partition" if description != name else "disk"
    disk_majmin = read_text(sys_dir / "dev") or majmin
    return BlockDevice(
        name=name, kind=kind, majmin=disk_majmin, description=description, sys_dir=sys_dir,
        match=_match_keys(sys_dir, kind, name),
    )


def device_facts(dev: BlockDevice, roles: list[str]) -> dict[str, Any]:
    """model, serial, rotational, scheduler and read_ahead_kb of ``dev`` (from sysfs; what the daemon's drift check
    compares), with the directories it holds."""
    # What identifies the hardware behind a kernel name: a serial or WWID, a device-mapper UUID, a loop device's file.
    serial = next(filter(None, (read_fact(dev.sys_dir / p) for p in (
        "serial", "device/serial", "wwid", "device/wwid", "dm/uuid", "loop/backing_file"))), None)
    scheduler = read_fact(dev.sys_dir / "queue" / "scheduler")
    if scheduler and "[" in scheduler:  # "[mq-deadline] kyber none": the one in brackets is in force
        scheduler = scheduler.split("[", 1)[1].split("]", 1)[0]
    rotational = read_fact(dev.sys_dir / "queue" / "rotational")
    ra = read_fact(dev.read_ahead_path)
    return {"node": dev.node, "model": read_fact(dev.sys_dir / "device" / "model"), "serial": serial,
            "rotational": int(rotational) if rotational else None, "scheduler": scheduler,
            "read_ahead_kb": int(ra) if ra else None, "roles": roles}


def place(
    role: str, path: Path, *, sys_root: Path = Path("/sys"), mountinfo: str | None = None
) -> Placement:
    """Find the device under ``path`` (symlinks resolved)."""
    resolved = Path(os.path.realpath(path))
    if mountinfo is None:
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text()
        except OSError:
            mountinfo = ""
    try:
        st = os.stat(resolved)
    except OSError as exc:
        return Placement(role, resolved, None, None, None, f"cannot stat {resolved}: {exc.strerror or exc}")
    majmin = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    fstype, source = mount_of(majmin, mountinfo)
    if os.major(st.st_dev) == 0:
        why = _ANONYMOUS_REASONS.get(fstype or "", f"{fstype or 'this file system'} has no block device of its own")
        return Placement(role, resolved, None, fstype, source, f"{resolved} is on {fstype or 'an anonymous device'}: {why}")
    dev = device_of(majmin, sys_root=sys_root)
    if dev is None:
        return Placement(role, resolved, None, fstype, source, f"{resolved}: block device {majmin} has no sysfs entry")
    if not dev.read_ahead_path.exists():
        return Placement(role, resolved, None, fstype, source, f"{dev.node} has no queue/read_ahead_kb")
    return Placement(role, resolved, dev, fstype, source)


def postgres_paths(data_directory: Path, tablespaces: Mapping[str, str]) -> dict[str, Path]:
    """The directories whose devices matter: the data directory, pg_wal (often a symlink to another device),
    and every tablespace's location (``pg_default`` and ``pg_global`` live in the data directory)."""
    paths = {"data directory": data_directory, "pg_wal": data_directory / "pg_wal"}
    for name, location in tablespaces.items():
        if location:
            paths[f"tablespace {name}"] = Path(location)
    return paths


def discover(
    paths: Mapping[str, Path], *, sys_root: Path = Path("/sys"), mountinfo: str | None = None
) -> tuple[list[DeviceGroup], list[Placement]]:
    """Group the placements by device (several tablespaces on one device are one knob).

    Returns the groups and the placements that have no tunable device (with their reasons).
    """
    placements = [place(role, p, sys_root=sys_root, mountinfo=mountinfo) for role, p in paths.items()]
    return group(placements), [p for p in placements if p.device is None]


def group(placements: Iterable[Placement]) -> list[DeviceGroup]:
    by_name: dict[str, list[Placement]] = {}
    devices: dict[str, BlockDevice] = {}
    for p in placements:
        if p.device is not None:
            by_name.setdefault(p.device.name, []).append(p)
            devices[p.device.name] = p.device
    return [DeviceGroup(devices[n], tuple(ps)) for n, ps in by_name.items()]
