"""The read cap of a device profile: a cgroup of the sandbox's own that caps reads from its loop device.

cgroup v1's ``blkio`` controller where it is mounted (``blkio.throttle.read_iops_device`` /
``read_bps_device``), else cgroup v2's ``io.max`` (``riops=`` / ``rbps=``): both documented in the kernel's
admin-guide (cgroup-v1/blkio-controller.rst, cgroup-v2.rst "IO Interface Files").

A throttle on a block device counts the I/O that processes *in the cgroup* submit to that device. For reads
from a loop device that is the process reading the file system on it: PostgreSQL's backend for a read it waits
for, and for readahead (posix_fadvise WILLNEED prefetch included, which the kernel issues in the caller's
context). The loop driver's own worker then reads the backing file — with ``--direct-io=on`` as asynchronous
direct I/O, without as buffered reads — but that is I/O on the *backing* device, not on ``7:N``, so either way the
cap binds the reader (tests/integration/test_devices_physics.py proves it for O_DIRECT and buffered reads, inside the
cgroup and outside it). So every sandbox server process must be in the cgroup: :meth:`Throttle.wrap` makes each
command the sandbox runs (``initdb``, ``pg_ctl``, ``pg_basebackup``) join it before it starts, so postmasters —
also restarted ones — and all their children are in it. tuner's own process reads nothing from the device (cache
eviction is ``posix_fadvise(DONTNEED)`` and ``drop_caches``), so it stays where it is.

Writes are not capped here: under cgroup v1 the kernel's own writeback of dirty pages is charged to no sandbox
cgroup, and a flush counts as a write I/O (measured in docs/devices.md); ``wiops=``/``wmbps=`` are latencyfs's.
"""

from __future__ import annotations

import contextlib
import pwd
import shutil
import time
from pathlib import Path

from tuner.errors import SandboxError

V1_ROOT = Path("/sys/fs/cgroup/blkio")
PREFIX = "tuner-"


def _v2_root() -> Path | None:
    """The cgroup v2 mount whose controllers include ``io``, if any."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mounts").read_text().splitlines():
            fields = line.split()
            if len(fields) > 2 and fields[2] == "cgroup2":
                root = Path(fields[1])
                with contextlib.suppress(OSError):
                    if "io" in (root / "cgroup.controllers").read_text().split():
                        return root
    return None


def cgroup_root() -> tuple[Path, int] | None:
    """Where a cap can be set and which cgroup version that is: v1 blkio first (on a hybrid host the io
    controller is bound to v1 and v2's ``io.max`` is absent), else v2 with ``io``."""
    if (V1_ROOT / "blkio.throttle.read_iops_device").exists():
        return V1_ROOT, 1
    root = _v2_root()
    return (root, 2) if root is not None else None


class Throttle:
    """A cgroup named after the sandbox (``tuner-<sandbox dir name>``) whose processes' reads from one device are
    capped. :meth:`create` makes it (empty, no cap yet); :meth:`activate` sets the cap once the sandbox is loaded
    (loading at the capped rate would only make set-up slow); :meth:`remove` takes it away."""

    def __init__(self, path: Path, version: int, *, read_iops: int | None, read_bps: int | None) -> None:
        self.path = path
        self.version = version
        self.read_iops = read_iops
        self.read_bps = read_bps

    @classmethod
    def for_sandbox(cls, sandbox_root: Path, *, read_iops: int | None, read_bps: int | None) -> Throttle:
        found = cgroup_root()
        if found is None:
            raise SandboxError(
                "a device profile with iops= or mbps= needs the cgroup blkio (v1) or io (v2) controller, "
                "and neither is mounted",
                hint="mount the blkio or io cgroup controller, or leave iops= and mbps= out of the profile",
            )
        root, version = found
        return cls(root / f"{PREFIX}{sandbox_root.name}", version, read_iops=read_iops, read_bps=read_bps)

    @property
    def procs(self) -> Path:
        return self.path / "cgroup.procs"

    def create(self) -> None:
        if self.version == 2:
            # A v2 child gets a controller only when its parent delegates it.
            with contextlib.suppress(OSError):
                (self.path.parent / "cgroup.subtree_control").write_text("+io\n")
        self.path.mkdir(exist_ok=True)

    def wrap(self, args: list[str], user: pwd.struct_passwd | None) -> list[str]:
        """``args`` as a command that first joins this cgroup (as root: writing ``cgroup.procs`` needs it under
        v2) and then, for ``user``, drops to that user (``setpriv``, util-linux) before it runs."""
        prefix = ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(self.procs)]
        if user is not None:
            prefix += [shutil.which("setpriv") or "/usr/bin/setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", "--"]
        return prefix + args

    def activate(self, dev: str) -> None:
        """Cap reads from block device ``dev`` (``/dev/loopN``) for every process in the cgroup."""
        majmin = (Path("/sys/class/block") / Path(dev).name / "dev").read_text().strip()
        if self.version == 1:
            if self.read_iops is not None:
                (self.path / "blkio.throttle.read_iops_device").write_text(f"{majmin} {self.read_iops}\n")
            if self.read_bps is not None:
                (self.path / "blkio.throttle.read_bps_device").write_text(f"{majmin} {self.read_bps}\n")
        else:
            limits = [f"riops={self.read_iops}" if self.read_iops else "", f"rbps={self.read_bps}" if self.read_bps else ""]
            (self.path / "io.max").write_text(f"{majmin} {' '.join(x for x in limits if x)}\n")

    def members(self) -> list[int]:
        with contextlib.suppress(OSError):
            return [int(p) for p in self.procs.read_text().split()]
        return []

    def remove(self, *, timeout_s: float = 15.0) -> bool:
        """Remove the cgroup; a cgroup with processes cannot go, so wait (bounded) for the sandbox's processes,
        already stopped, to exit. True when it is gone."""
        deadline = time.monotonic() + timeout_s
        while self.path.exists():
            try:
                self.path.rmdir()
            except FileNotFoundError:
                break
            except OSError:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.1)
        return True


def remove_path(path: Path, *, timeout_s: float = 15.0) -> bool:
    """Remove the cgroup at ``path`` (stale clean-up: a cgroup a killed tuner left). Only a cgroup under a known
    controller root with tuner's prefix is touched."""
    found = cgroup_root()
    if found is None or path.parent != found[0] or not path.name.startswith(PREFIX):
        return False
    return Throttle(path, found[1], read_iops=None, read_bps=None).remove(timeout_s=timeout_s)


