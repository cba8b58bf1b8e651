"""What the drift check reads about the host under a local PostgreSQL: a block device's identity and queue
settings (sysfs), the cgroup v2 limits that bind the postmaster, and the memory data can be cached in.

Files only, nothing written; a file that is absent or unreadable gives None, never an error. ``proc`` is a
parameter so the cgroup walk is tested on a directory tree shaped like /proc and a cgroup2 mount.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tuner.knobs.devices import BlockDevice

CGROUP_FILES = ("memory.max", "io.max", "cpu.max")


def _raw(path: Path) -> str | None:
    """A file's text, stripped ("" when empty); None when absent or unreadable."""
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _read(path: Path) -> str | None:
    return _raw(path) or None


def device(dev: BlockDevice, roles: list[str]) -> dict[str, Any]:
    """model, serial, rotational, scheduler and read_ahead_kb of ``dev``, with the directories it holds."""
    # What identifies the hardware behind a kernel name: a serial or WWID, a device-mapper UUID, a loop device's file.
    serial = next(filter(None, (_read(dev.sys_dir / p) for p in (
        "serial", "device/serial", "wwid", "device/wwid", "dm/uuid", "loop/backing_file"))), None)
    scheduler = _read(dev.sys_dir / "queue" / "scheduler")
    if scheduler and "[" in scheduler:  # "[mq-deadline] kyber none": the one in brackets is in force
        scheduler = scheduler.split("[", 1)[1].split("]", 1)[0]
    rotational = _read(dev.sys_dir / "queue" / "rotational")
    ra = _read(dev.read_ahead_path)
    return {"node": dev.node, "model": _read(dev.sys_dir / "device" / "model"), "serial": serial,
            "rotational": int(rotational) if rotational else None, "scheduler": scheduler,
            "read_ahead_kb": int(ra) if ra else None, "roles": roles}


def cgroup(data_directory: Path, *, proc: Path = Path("/proc")) -> dict[str, Any] | None:
    """The cgroup v2 limits that bind the postmaster (its pid from ``postmaster.pid``), from its cgroup up to the
    root: memory.max (the lowest), cpu.max (the lowest quota/period), io.max (the nearest set one); "max" when no
    level limits it, None when no level has the file (controller off, or cgroup v1). None without a pid, a /proc
    entry or a cgroup2 mount."""
    pid = (_raw(data_directory / "postmaster.pid") or "").split("\n", 1)[0]
    lines = (_raw(proc / pid / "cgroup") or "").splitlines() if pid.isdigit() else []
    rel = next((line[3:] for line in lines if line.startswith("0::")), None)
    mounts = (_raw(proc / "self" / "mountinfo") or "").splitlines()
    root = next((line.split()[4] for line in mounts if " - cgroup2 " in line), None)
    if rel is None or root is None:
        return None
    leaf = Path(root) / rel.lstrip("/")
    chain = [leaf, *leaf.parents[:len(Path(rel).parts) - 1]]
    out: dict[str, Any] = {"path": rel}
    for name in CGROUP_FILES:
        values = [v for v in (_raw(d / name) for d in chain) if v is not None]
        limits = [v for v in values if v and v != "max" and not v.startswith("max ")]
        if not values:
            out[name] = None
        elif not limits:
            out[name] = "max"
        elif name == "memory.max":
            out[name] = str(min(int(v) for v in limits))
        elif name == "cpu.max":  # "quota period": the smallest share of a CPU binds
            out[name] = min(limits, key=lambda v: int(v.split()[0]) / int(v.split()[1]))
        else:
            out[name] = limits[0]
    return out


def memory(limits: dict[str, Any] | None, *, proc: Path = Path("/proc")) -> tuple[int | None, str]:
    """The memory (bytes) PostgreSQL on this host may cache data in, and where that figure comes from: MemTotal,
    or the cgroup's memory.max when lower."""
    meminfo = _read(proc / "meminfo") or ""
    total = next((int(line.split()[1]) * 1024 for line in meminfo.splitlines() if line.startswith("MemTotal:")), None)
    limit = (limits or {}).get("memory.max")
    if total and limit and limit.isdigit() and int(limit) < total:
        return int(limit), "cgroup memory.max"
    return total, "MemTotal"
