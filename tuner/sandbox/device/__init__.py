"""Emulated disks under the sandbox (``--device``, ``[sandbox] device``): the kinds of disk tuner's answers must
differ on, made from what a plain Linux host offers (no device-mapper, nbd or ublk needed).

* :mod:`tuner.sandbox.device.profile` — the profile string, parsed once (pure; config reads it too);
* :mod:`.ram` — the image on a tmpfs (``ram``);
* :mod:`.latency` and ``latencyfs.c`` — a FUSE file that delays reads (``latency=``, ``hdd``) and flushes
  (``flush=``), and caps writes (``wiops=``, ``wmbps=``);
* :mod:`.throttle` — a cgroup read cap on the loop device (``iops=``, ``mbps=``);
* :mod:`.stack` — the pieces put together under a sandbox, torn down in reverse, and released after a crash.
"""

from tuner.sandbox.device.profile import LOCAL, SYNTAX, DeviceProfile, ProfileError, parse_profile
from tuner.sandbox.device.stack import DeviceStack, release

__all__ = ["LOCAL", "SYNTAX", "DeviceProfile", "DeviceStack", "ProfileError", "parse_profile", "release"]
