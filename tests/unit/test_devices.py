"""Device discovery on directory trees shaped like sysfs (pure logic over files; real loop devices are in the
integration tests)."""

from __future__ import annotations

import os
from pathlib import Path

from tuner.hostfacts.blockdev import device_of, group, mount_of, place, Placement

MOUNTINFO = """\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw
30 27 0:35 / /var/lib/btr rw - btrfs /dev/sdb rw
31 27 0:40 / /mnt/nfs rw - nfs4 server:/export rw
"""


def _disk(sys_root: Path, devpath: str, majmin: str, **attrs: str) -> Path:
    """Make /sys/devices/<devpath> with a queue/read_ahead_kb, the /sys/block link and /sys/dev/block/MAJ:MIN."""
    real = sys_root / "devices" / devpath
    (real / "queue").mkdir(parents=True)
    (real / "queue" / "read_ahead_kb").write_text("128\n")
    (real / "dev").write_text(majmin + "\n")
    for rel, text in attrs.items():
        f = real / rel.replace("__", "/")
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text + "\n")
    (sys_root / "block").mkdir(parents=True, exist_ok=True)
    os.symlink(real, sys_root / "block" / real.name)
    _dev_link(sys_root, majmin, real)
    return real


def _dev_link(sys_root: Path, majmin: str, target: Path) -> None:
    (sys_root / "dev" / "block").mkdir(parents=True, exist_ok=True)
    os.symlink(target, sys_root / "dev" / "block" / majmin)


def test_a_partition_is_tuned_on_its_parent_disk(tmp_path: Path) -> None:
    sda = _disk(tmp_path, "pci0/host0/block/sda", "8:0", device__wwid="naa.5000c500a1b2c3d4")
    part = sda / "sda1"
    part.mkdir()
    (part / "partition").write_text("1\n")
    _dev_link(tmp_path, "8:1", part)
    dev = device_of("8:1", sys_root=tmp_path)
    assert dev is not None
    assert (dev.name, dev.kind, dev.majmin) == ("sda", "partition", "8:0")
    assert dev.description == "partition sda1 of sda"
    assert dev.read_ahead_path == tmp_path / "block" / "sda" / "queue" / "read_ahead_kb"
    assert dev.match == {"ATTRS{wwid}": "naa.5000c500a1b2c3d4"}


def test_device_mapper_is_tuned_itself_and_matched_by_uuid(tmp_path: Path) -> None:
    _disk(tmp_path, "virtual/block/dm-0", "253:0", dm__name="vg0-pgdata", dm__uuid="LVM-abc123")
    dev = device_of("253:0", sys_root=tmp_path)
    assert dev is not None and dev.kind == "dm" and dev.name == "dm-0"
    assert dev.description == "device-mapper vg0-pgdata"
    assert dev.match == {"ENV{DM_UUID}": "LVM-abc123"}


def test_md_raid_is_tuned_on_the_array(tmp_path: Path) -> None:
    _disk(tmp_path, "virtual/block/md0", "9:0", md__level="raid10")
    dev = device_of("9:0", sys_root=tmp_path)
    assert dev is not None and (dev.kind, dev.name, dev.description) == ("md", "md0", "md RAID md0")
    assert dev.match == {"KERNEL": "md0"}  # no stable attribute in sysfs: the kernel name, with a warning


def test_an_nvme_namespace_partition_maps_to_the_namespace(tmp_path: Path) -> None:
    ns = _disk(tmp_path, "pci0/nvme/nvme0/nvme0n1", "259:0", wwid="eui.0025388b71b12345")
    part = ns / "nvme0n1p2"
    part.mkdir()
    (part / "partition").write_text("2\n")
    _dev_link(tmp_path, "259:2", part)
    dev = device_of("259:2", sys_root=tmp_path)
    assert dev is not None and (dev.name, dev.kind) == ("nvme0n1", "nvme")
    assert dev.match == {"ATTR{wwid}": "eui.0025388b71b12345"}


def test_an_unknown_device_number_has_no_device(tmp_path: Path) -> None:
    assert device_of("8:99", sys_root=tmp_path) is None


def test_mountinfo_gives_the_file_system_of_a_device_number() -> None:
    assert mount_of("254:0", MOUNTINFO) == ("ext4", "/dev/vda")
    assert mount_of("0:40", MOUNTINFO) == ("nfs4", "server:/export")
    assert mount_of("1:1", MOUNTINFO) == (None, None)


def test_an_anonymous_device_is_reported_not_tunable_with_the_reason(tmp_path: Path) -> None:
    # /proc is on an anonymous device (major 0) on every Linux: the reason names its file system.
    p = place("pg_wal", Path("/proc/self"), sys_root=tmp_path)
    assert p.device is None and p.reason is not None and "/proc" in p.reason


def test_a_missing_directory_is_reported_not_raised(tmp_path: Path) -> None:
    p = place("tablespace gone", tmp_path / "nope", sys_root=tmp_path)
    assert p.device is None and p.reason is not None and "cannot stat" in p.reason


def test_several_tablespaces_on_one_device_are_one_knob(tmp_path: Path) -> None:
    _disk(tmp_path, "pci0/block/vdb", "254:16", serial="data-disk-1")
    dev = device_of("254:16", sys_root=tmp_path)
    assert dev is not None and dev.match == {"ATTR{serial}": "data-disk-1"}
    placements = [
        Placement("tablespace a", Path("/a"), dev, "ext4", "/dev/vdb"),
        Placement("tablespace b", Path("/b"), dev, "ext4", "/dev/vdb"),
        Placement("pg_wal", Path("/w"), None, "tmpfs", "tmpfs", "in memory"),
    ]
    [g] = group(placements)
    assert g.tablespaces == ["a", "b"] and not g.holds_data_directory
