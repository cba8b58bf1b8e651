"""What the drift check reads about the host under a local PostgreSQL beyond its block devices (those, sysfs, are
read in one place, :func:`tuner.hostfacts.blockdev.device_facts`): the cgroup v2 limits that bind the postmaster, and
the memory data can be cached in.

Files only, nothing written; a file that is absent or unreadable gives None, never an error. ``proc`` is a
parameter so the cgroup walk is tested on a directory tree shaped like /proc and a cgroup2 mount.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tuner.hostfacts.blockdev import read_fact, read_text

CGROUP_FILES = ("memory.max", "io.max", "cpu.max")


def cgroup(data_directory: Path, *, proc: Path = Path("/proc")) -> dict[str, Any] | None:
    """The cgroup v2 limits that bind the postmaster (its pid from ``postmaster.pid``), from its cgroup up to the
    root: memory.max (the lowest), cpu.max (the lowest quota/period), io.max (the nearest set one); "max" when no
    level limits it, None when no level has the file (controller off, or cgroup v1). None without a pid, a /proc
    entry or a cgroup2 mount."""
    pid = (read_text(data_directory / "postmaster.pid") or "").split("\n", 1)[0]
    lines = (read_text(proc / pid / "cgroup") or "").splitlines() if pid.isdigit() else []
    rel = next((line[3:] for line in lines if line.startswith("0::")), None)
    mounts = (read_text(proc / "self" / "mountinfo") or "").splitlines()
    root = next((line.split()[4] for line in mounts if " - cgroup2 " in line), None)
    if rel is None or root is None:
        return None
    leaf = Path(root) / rel.lstrip("/")
    chain = [leaf, *leaf.parents[:len(Path(rel).parts) - 1]]
    out: dict[str, Any] = {"path": rel}
    for name in CGROUP_FILES:
        values = [v for v in (read_text(d / name) for d in chain) if v is not None]
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
    meminfo = read_fact(proc / "meminfo") or ""
    total = next((int(line.split()[1]) * 1024 for line in meminfo.splitlines() if line.startswith("MemTotal:")), None)
    limit = (limits or {}).get("memory.max")
    if total and limit and limit.isdigit() and int(limit) < total:
        return int(limit), "cgroup memory.max"
    return total, "MemTotal"
