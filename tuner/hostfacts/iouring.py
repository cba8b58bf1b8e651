"""What would stop a PostgreSQL server from running with ``io_method = io_uring`` — checked before tuner spends a
restart and probes on it, so that the report can say which one stopped it.

A server that cannot set up its rings does not start (PostgreSQL 18 creates one io_uring per process slot in the
postmaster, before it accepts connections), so each blocker is read from what the running postmaster has:

* the build: ``io_uring`` is among ``io_method``'s ``pg_settings.enumvals`` only in a build made with liburing
  (PostgreSQL 18 docs, ``io_method``; a build without it says ``HINT: Available values: sync, worker.``);
* ``kernel.io_uring_disabled`` (Linux 6.6+, Documentation/admin-guide/sysctl/kernel.rst): 0 lets every process
  create rings, 1 only processes with CAP_SYS_ADMIN or in ``kernel.io_uring_group``, 2 none;
* a seccomp filter on the postmaster (``Seccomp: 2`` in /proc/PID/status, proc(5)): container runtimes' default
  profiles refuse ``io_uring_setup`` (Docker's since moby 25.0; containerd's, where CloudNativePG clusters
  crash-loop, cloudnative-pg PR 10446). tuner cannot read the filter's rules, so a filter counts as a blocker;
* ``RLIMIT_NOFILE`` of the postmaster (/proc/PID/limits): each ring is a file descriptor, one per process slot
  (PostgreSQL then says ``could not setup io_uring queue: Too many open files``, with a ``ulimit -n`` hint);
* ``RLIMIT_MEMLOCK``, on kernels before 5.12 only: they charged ring memory to it, later ones to the memory cgroup
  (liburing's README, "ulimit settings");
* and last an ``io_uring_setup`` of tuner's own, for what none of the above names (an LSM policy, say).

:func:`blocker` is the pure decision; :func:`read_facts` gathers its input from /proc.
"""

from __future__ import annotations

import ctypes
import os
import platform
import re
from dataclasses import dataclass
from pathlib import Path

CAP_SYS_ADMIN = 21  # capability bit (linux/capability.h)
SECCOMP_FILTER = 2  # /proc/PID/status "Seccomp:" (0 none, 1 strict, 2 filter)
MEMLOCK_ACCOUNTED_BEFORE = (5, 12)
# The processes besides connections and workers that get a slot (checkpointer, bgwriter, walwriter, startup,
# archiver, autovacuum launcher, ...): a floor, so the count errs on the side of starting.
_AUXILIARY_SLOTS = 5
SLOT_SETTINGS = ("max_connections", "autovacuum_max_workers", "max_worker_processes", "max_wal_senders")


@dataclass(frozen=True)
class IoUringFacts:
    """What decides whether this server could run io_uring. None: not known here (the check is skipped)."""

    offered: tuple[str, ...]  # io_method's enumvals on this build
    disabled: int | None = None  # kernel.io_uring_disabled (absent before Linux 6.6)
    group: int | None = None  # kernel.io_uring_group (-1: none)
    gids: frozenset[int] = frozenset()  # the postmaster's real, effective and supplementary groups
    cap_sys_admin: bool = False  # in the postmaster's effective capabilities
    seccomp: int | None = None
    nofile_hard: int | None = None  # the postmaster's RLIMIT_NOFILE hard limit (None: unlimited or unknown)
    slots: int | None = None  # process slots, each with a ring
    memlock_bytes: int | None = None  # the postmaster's RLIMIT_MEMLOCK soft limit (None: unlimited or unknown)
    kernel: tuple[int, int] = (0, 0)
    setup_error: str | None = None  # tuner's own io_uring_setup, when it failed


def blocker(f: IoUringFacts) -> str | None:
    """Why this server could not run ``io_method = io_uring`` (one sentence), or None when nothing stops it."""
    if "io_uring" not in f.offered:
        return (f"this build of PostgreSQL has no io_uring (built without liburing: io_method offers "
                f"{', '.join(f.offered) or 'nothing'})")
    if f.disabled == 2:
        return "kernel.io_uring_disabled is 2: the kernel refuses io_uring to every process"
    if f.disabled == 1 and not f.cap_sys_admin and (f.group is None or f.group < 0 or f.group not in f.gids):
        group = "no kernel.io_uring_group is set" if f.group is None or f.group < 0 else \
            f"the postmaster is not in kernel.io_uring_group {f.group}"
        return (f"kernel.io_uring_disabled is 1: only processes with CAP_SYS_ADMIN or in kernel.io_uring_group may "
                f"create rings, and {group}")
    if f.seccomp == SECCOMP_FILTER:
        return ("the postmaster runs under a seccomp filter, as container runtimes' default profiles do, and those "
                "refuse io_uring_setup; tuner cannot read the filter's rules, so it does not restart into io_uring")
    if f.nofile_hard is not None and f.slots is not None and f.nofile_hard < f.slots:
        return (f"the postmaster may open {f.nofile_hard} files (RLIMIT_NOFILE), and io_uring needs one per "
                f"process slot ({f.slots} here) before anything else: raise ulimit -n")
    if f.kernel < MEMLOCK_ACCOUNTED_BEFORE and f.memlock_bytes is not None:
        return (f"kernel {f.kernel[0]}.{f.kernel[1]} charges io_uring's rings to RLIMIT_MEMLOCK, and the "
                f"postmaster's is {f.memlock_bytes // 1024} kB: make it unlimited (kernels from 5.12 charge the "
                "memory cgroup instead)")
    if f.setup_error is not None:
        return f"io_uring_setup fails on this host ({f.setup_error})"
    return None


def read_facts(offered: tuple[str, ...], data_directory: Path, settings: dict[str, str],
               proc: Path = Path("/proc")) -> IoUringFacts:
    """:class:`IoUringFacts` for the server whose postmaster.pid is in ``data_directory``; ``settings`` carries
    pg_settings values of :data:`SLOT_SETTINGS` (those missing leave the slot count unknown)."""
    if "io_uring" not in offered:  # nothing else matters
        return IoUringFacts(offered=offered)
    status, limits = "", ""
    try:
        pid = int((data_directory / "postmaster.pid").read_text().split("\n", 1)[0])
        status = (proc / str(pid) / "status").read_text()
        limits = (proc / str(pid) / "limits").read_text()
    except (OSError, ValueError):
        pass
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    ids = [int(x) for key in ("Gid", "Groups") for x in fields.get(key, "").split()]
    try:
        slots = sum(int(settings[k]) for k in SLOT_SETTINGS) + _AUXILIARY_SLOTS
    except (KeyError, ValueError):
        slots = None
    return IoUringFacts(
        offered=offered, disabled=_int(proc / "sys/kernel/io_uring_disabled"), group=_int(proc / "sys/kernel/io_uring_group"),
        gids=frozenset(ids), cap_sys_admin=bool(int(fields.get("CapEff", "0").strip() or "0", 16) >> CAP_SYS_ADMIN & 1),
        seccomp=int(fields["Seccomp"]) if "Seccomp" in fields else None,
        nofile_hard=_limit(limits, "Max open files"), slots=slots,
        memlock_bytes=_limit(limits, "Max locked memory", soft=True), kernel=_kernel(platform.release()),
        setup_error=_own_setup_error(),
    )


def _int(path: Path) -> int | None:
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return None


def _limit(limits: str, name: str, *, soft: bool = False) -> int | None:
    """A limit from /proc/PID/limits (columns: name, soft, hard, units); None when unlimited or absent."""
    for line in limits.splitlines():
        if line.startswith(name):
            values = line[len(name):].split()
            value = values[0] if soft else values[1] if len(values) > 1 else ""
            return int(value) if value.isdigit() else None
    return None


def _kernel(release: str) -> tuple[int, int]:
    m = re.match(r"(\d+)\.(\d+)", release)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def _own_setup_error() -> str | None:
    """An io_uring_setup(2) of tuner's own with 8 entries, closed at once (None: it worked)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        params = ctypes.create_string_buffer(120)  # struct io_uring_params, zeroed
        fd = libc.syscall(425, 8, params)  # io_uring_setup: 425 on every architecture
    except (OSError, AttributeError) as exc:
        return f"io_uring_setup could not be called: {exc}"
    if fd < 0:
        return os.strerror(ctypes.get_errno())
    os.close(fd)
    return None
