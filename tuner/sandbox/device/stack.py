"""A device profile put together under a sandbox, and taken apart again — also after a crash.

Set-up order (each piece written to ``device.json`` in the sandbox directory *before* it is made, so a stale
clean-up after SIGKILL knows what to remove): a tmpfs (``ram``), the image file, the latency layer's helper
(``latency=``, ``hdd``, and the write side: ``flush=``, ``wiops=``, ``wmbps=``) serving it, the loop device over
the served file (made by the sandbox's :class:`~tuner.sandbox.loopdisk.LoopDisk`), the cgroup (``iops=``,
``mbps=``) that every sandbox server joins as it starts; the caps themselves, and the write side's delays, once
the sandbox is loaded. Teardown runs in reverse, after the servers stop and the loop device is detached: cgroup,
helper (unmount), tmpfs.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
from pathlib import Path

from tuner.log import get_logger
from tuner.sandbox.device import latency, ram
from tuner.sandbox.device.profile import DeviceProfile
from tuner.sandbox.device.throttle import Throttle, remove_path

log = get_logger("tuner.sandbox")
STATE = "device.json"
IMAGE = "disk.img"
_MIB = 1024 * 1024


class DeviceStack:
    """The pieces of one profile under the sandbox directory ``root``, for an image of ``size_mb``."""

    def __init__(self, profile: DeviceProfile, root: Path, size_mb: int) -> None:
        self.profile = profile
        self.root = root
        self.size_mb = size_mb
        self._state: dict[str, object] = {"profile": str(profile)}
        self._layer: latency.LatencyLayer | None = None
        self._throttle: Throttle | None = None
        self._ram = False

    def _record(self, **entries: object) -> None:
        """Journal what is about to be made (atomic replace: a crash leaves the old record or the new)."""
        self._state.update(entries)
        tmp = self.root / (STATE + ".tmp")
        tmp.write_text(json.dumps(self._state))
        os.replace(tmp, self.root / STATE)

    def prepare(self) -> Path:
        """Make everything below the loop device; the file the loop device attaches to."""
        where = self.root
        if self.profile.ram:
            self._record(tmpfs=str(self.root / ram.MOUNT))
            where = ram.mount(self.root, self.size_mb + 64)
            self._ram = True
        backing = where / IMAGE
        backing.touch()
        os.truncate(backing, self.size_mb * _MIB)  # sparse: only what the clusters write takes space
        if self.profile.capped:  # checked before the helper starts: a host without cgroups fails fast
            self._throttle = Throttle.for_sandbox(
                self.root, read_iops=self.profile.read_iops,
                read_bps=self.profile.read_mbps * _MIB if self.profile.read_mbps else None)
        if self.profile.layered:
            binary = latency.build(self.root)
            p = self.profile
            layer = latency.LatencyLayer(binary, backing, self.root / latency.MOUNT, latency_us=p.latency_us or 0,
                                         hdd=p.hdd, flush_us=p.flush_delay_us, write_iops=p.write_iops,
                                         write_bps=p.write_mbps * _MIB if p.write_mbps else None)
            self._record(fuse=str(layer.mountpoint), helper=str(binary))
            self._layer = layer
            self._record(helper_pid=layer.start())
            backing = layer.served
        if self._throttle is not None:
            self._record(cgroup=str(self._throttle.path))
            self._throttle.create()
        log.info("sandbox.device", profile=str(self.profile), image=str(backing),
                 cgroup=str(self._throttle.path) if self._throttle else None)
        return backing

    def wrap(self, args: list[str], user: pwd.struct_passwd | None) -> list[str] | None:
        """``args`` made to join the sandbox's cgroup before running as ``user``; None when there is no cgroup
        (run ``args`` as usual)."""
        return self._throttle.wrap(args, user) if self._throttle is not None else None

    def activate(self, dev: str) -> None:
        """Switch the caps on for ``dev`` (the loaded sandbox's loop device), and the write side's flush delay and
        caps."""
        if self._layer is not None:
            self._layer.activate()
            log.info("sandbox.device_writes_shaped", flush_us=self.profile.flush_delay_us,
                     write_iops=self.profile.write_iops, write_mbps=self.profile.write_mbps)
        if self._throttle is not None:
            self._throttle.activate(dev)
            log.info("sandbox.device_capped", device=dev, read_iops=self.profile.read_iops,
                     read_mbps=self.profile.read_mbps, cgroup=str(self._throttle.path))

    def layer_stats(self) -> dict[str, int] | None:
        """The latency layer's counters (reads, writes, write_bytes, flushes, shaping); None without the layer."""
        return self._layer.stats() if self._layer is not None else None

    @property
    def cgroup(self) -> Path | None:
        """The profile's cgroup directory (``iops=``, ``mbps=``), or None."""
        return self._throttle.path if self._throttle is not None else None

    def cgroup_members(self) -> list[int]:
        return self._throttle.members() if self._throttle is not None else []

    def close(self) -> None:
        """Take apart what :meth:`prepare` made (the loop device above it must be detached already); each piece in
        its own try, so one failure does not leave the others."""
        left = False  # something could not be removed: keep the record, for the next stale clean-up
        if self._throttle is not None:
            try:
                if not self._throttle.remove():
                    left = True
                    log.warning("sandbox.cgroup_busy", cgroup=str(self._throttle.path),
                                members=self._throttle.members())
            except OSError as exc:
                left = True
                log.warning("sandbox.cgroup_remove_failed", cgroup=str(self._throttle.path), error=str(exc))
            self._throttle = None
        if self._layer is not None:
            try:
                self._layer.stop()
            except OSError as exc:
                log.warning("sandbox.latency_stop_failed", error=str(exc))
            self._layer = None
        if self._ram:
            ram.unmount(self.root)
            self._ram = False
        if not left:
            with contextlib.suppress(OSError):
                (self.root / STATE).unlink()


def release(root: Path) -> None:
    """Remove what a killed tuner's profile left under sandbox directory ``root`` (its servers stopped and its loop
    device detached already): the cgroup, the helper and its mount, the tmpfs."""
    try:
        state = json.loads((root / STATE).read_text())
    except FileNotFoundError:
        return  # no profile there (or its teardown finished)
    except (OSError, ValueError):
        state = {}  # a torn record: still look for a tmpfs
    if isinstance(state.get("cgroup"), str):
        remove_path(Path(state["cgroup"]))
    if isinstance(state.get("fuse"), str):
        latency.unmount(Path(state["fuse"]))
    if isinstance(state.get("helper_pid"), int) and isinstance(state.get("helper"), str):
        latency.kill_helper(state["helper_pid"], Path(state["helper"]))
    ram.unmount(root)
    with contextlib.suppress(OSError):
        (root / STATE).unlink()
    log.info("sandbox.device_released", dir=str(root), profile=state.get("profile"))
