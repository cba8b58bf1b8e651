"""Device profiles: what kind of disk the sandbox's loop device pretends to be (``--device``, ``[sandbox] device``).

A profile is a comma list of parts, each at most once:

* where the data lives — ``local`` (default: an image file on ``base_dir``'s disk, as without a profile) or
  ``ram`` (an image file on a tmpfs of the sandbox's own: NVMe-class, RAM-speed reads);
* a read layer under the loop device — ``latency=Xms`` (each read waits X, many wait at once: network-attached
  block storage) or ``hdd`` (one spindle: reads wait one after another, for a seek that grows with distance);
* caps on the loop device, for every sandbox process — ``iops=N`` (reads per second) and ``mbps=N`` (MiB of
  reads per second, as AWS quotes gp3's 125 MiB/s baseline);
* the write side, in the same layer (it counts every write that reaches the disk, whichever process made it) —
  ``flush=Xms`` (each fsync/fdatasync of the sandbox's file system waits X: a network volume's round trip, a
  spindle's rotation), ``wiops=N`` (writes per second) and ``wmbps=N`` (MiB of writes per second). ``hdd`` alone
  implies a flush of one rotation (:data:`HDD_FLUSH_US`).

``latency=1ms,iops=3000,flush=2ms,wiops=3000`` is a network volume with provisioned IOPS caps. A cloud-shaped
shorthand (``gp3``, ``gp2-100g``, ``io2``, ``pd-balanced``: :mod:`tuner.sandbox.device.cloud`) stands alone for
its comma list; the profile remembers the name. The parser is pure; nothing here touches the host.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Annotated

from pydantic import BeforeValidator, PlainSerializer

from tuner.sandbox.device import cloud

SYNTAX = ("local, ram, hdd, iops=N, mbps=N, latency=Xms (or Xus), flush=Xms (or Xus), wiops=N, wmbps=N, "
          "comma-separated, e.g. latency=1ms,iops=3000,flush=2ms; "
          f"or one cloud-shaped shorthand alone: {', '.join(cloud.NAMED)}")

_LATENCY = re.compile(r"^(\d+(?:\.\d+)?)(ms|us)$")
_MAX_LATENCY_US = 1_000_000  # one second per read: beyond any disk, and a probe would never end
_MAX_IOPS = 10_000_000
_MAX_MBPS = 1_000_000
# A 7,200 rpm spindle's flush takes about one rotation (60 s / 7,200 = 8.33 ms): the WAL sector just written has
# passed under the head, so the next commit's write waits about a whole turn — at most ~120 commits a second from
# one client, before any seek. Kind to a spindle, if anything: a public pg_test_fsync run on a SATA disk (WDC
# WD2002FYPS, gist.github.com/pklaus/3f4756c3d1bd48fa960a558ce3103b6b) shows fdatasync at 82 a second.
HDD_FLUSH_US = 8333


class ProfileError(ValueError):
    """A profile string that does not parse: one sentence naming the bad part (a ValueError, so the config
    loader reports it like any other bad value)."""


@dataclass(frozen=True)
class DeviceProfile:
    """One emulated disk. ``latency_us`` is the delay the read layer adds to each read (with ``hdd``: on top of
    the seek model, normally 0); ``flush_us`` what each flush waits, as given (see :attr:`flush_delay_us`)."""

    ram: bool = False
    hdd: bool = False
    latency_us: int | None = None
    read_iops: int | None = None
    read_mbps: int | None = None
    flush_us: int | None = None
    write_iops: int | None = None
    write_mbps: int | None = None
    # The cloud shorthand this profile was written as (gp3): shown beside the parts, not part of the disk's identity.
    shorthand: str | None = field(default=None, compare=False)

    @property
    def described(self) -> str:
        """What the report shows: the parts, after the shorthand's name when it was written as one
        (``gp3 = latency=800us,iops=3000,mbps=125``); reads back as the same profile."""
        return f"{self.shorthand} = {self}" if self.shorthand else str(self)

    @property
    def local(self) -> bool:
        """Today's sandbox disk, nothing emulated."""
        return self == LOCAL

    @property
    def flush_delay_us(self) -> int:
        """What each flush waits: ``flush=`` when given, else a rotation on ``hdd``, else nothing."""
        if self.flush_us is not None:
            return self.flush_us
        return HDD_FLUSH_US if self.hdd else 0

    @property
    def layered(self) -> bool:
        """Reads or writes pass through the latency layer (a FUSE file under the loop device)."""
        layer_parts = (self.latency_us, self.flush_us, self.write_iops, self.write_mbps)
        return self.hdd or any(v is not None for v in layer_parts)

    @property
    def capped(self) -> bool:
        """The loop device has a read cap (a cgroup of the sandbox's own)."""
        return self.read_iops is not None or self.read_mbps is not None

    def __str__(self) -> str:
        parts = ["ram" if self.ram else "local"] if self.ram or self.local else []
        if self.hdd:
            parts.append("hdd")
        if self.latency_us is not None:
            parts.append(f"latency={_fmt_latency(self.latency_us)}")
        if self.read_iops is not None:
            parts.append(f"iops={self.read_iops}")
        if self.read_mbps is not None:
            parts.append(f"mbps={self.read_mbps}")
        if self.flush_us is not None:
            parts.append(f"flush={_fmt_latency(self.flush_us)}")
        if self.write_iops is not None:
            parts.append(f"wiops={self.write_iops}")
        if self.write_mbps is not None:
            parts.append(f"wmbps={self.write_mbps}")
        return ",".join(parts)


LOCAL = DeviceProfile()


def _fmt_latency(us: int) -> str:
    return f"{us // 1000}ms" if us % 1000 == 0 else f"{us}us"


def _count(key: str, value: str, limit: int) -> int:
    if not value.isdigit() or not 1 <= int(value) <= limit:
        raise ProfileError(f"{key}={value!r} is not a whole number from 1 to {limit:,}")
    return int(value)


def _delay(key: str, value: str) -> int:
    """Microseconds from ``1ms`` / ``500us`` / ``0.25ms``."""
    m = _LATENCY.match(value)
    if not m:
        raise ProfileError(f"{key}={value!r} needs a unit: {key}=1ms or {key}=500us")
    us = float(m.group(1)) * (1000 if m.group(2) == "ms" else 1)
    if us != int(us) or not 1 <= us <= _MAX_LATENCY_US:
        raise ProfileError(f"{key}={value!r} must be a whole number of microseconds from 1us to 1000ms")
    return int(us)


def parse_profile(text: str) -> DeviceProfile:
    """The profile a string names; :class:`ProfileError` (one sentence, with the syntax) if it names none."""
    short = cloud.expand(text)
    if short is not None:
        return replace(parse_profile(short[1]), shorthand=short[0])
    fields: dict[str, object] = {}
    seen: set[str] = set()
    parts = [p.strip().lower() for p in str(text).split(",")]
    if not any(parts):
        raise ProfileError(f"the device profile is empty; profiles are {SYNTAX}")
    if (alone := cloud.stands_alone(parts)) is not None:
        raise ProfileError(f"{alone} is a shorthand for {cloud.SHORTHANDS[alone].parts} and stands alone; write its "
                           "parts out to combine them with others")
    for part in parts:
        key, _, value = part.partition("=")
        if key in seen:
            raise ProfileError(f"{key!r} appears twice in the device profile {text!r}")
        seen.add(key)
        if key in ("local", "ram", "hdd") and not value:
            if key != "local":
                fields[key] = True
        elif key == "iops" and value:
            fields["read_iops"] = _count(key, value, _MAX_IOPS)
        elif key == "mbps" and value:
            fields["read_mbps"] = _count(key, value, _MAX_MBPS)
        elif key == "latency" and value:
            fields["latency_us"] = _delay(key, value)
        elif key == "flush" and value:
            fields["flush_us"] = _delay(key, value)
        elif key == "wiops" and value:
            fields["write_iops"] = _count(key, value, _MAX_IOPS)
        elif key == "wmbps" and value:
            fields["write_mbps"] = _count(key, value, _MAX_MBPS)
        else:
            raise ProfileError(f"unknown device profile part {part!r}; profiles are {SYNTAX}")
    if {"local", "ram"} <= seen:
        raise ProfileError("a device profile is either local or ram, not both")
    if {"hdd", "latency"} <= seen:
        raise ProfileError("hdd already models its own latency (seek + rotation); use hdd or latency=…, not both")
    return DeviceProfile(**fields)  # type: ignore[arg-type]


def _coerce(value: object) -> object:
    return parse_profile(value) if isinstance(value, str) else value


# The type of ``[sandbox] device``: parsed once where the configuration is read, shown as its string (a
# shorthand with its parts, as the report shows it).
DeviceField = Annotated[DeviceProfile, BeforeValidator(_coerce),
                        PlainSerializer(lambda p: p.described, return_type=str)]
