"""Cloud-shaped device profiles: the volumes operators rent, as named shorthands for a comma list of the
sandbox's primitives (``--device gp3`` is ``latency=800us,iops=3000,mbps=125``).

A rented volume has all its limits at once — a per-read latency, an IOPS cap and a throughput cap — and which
one binds depends on how many reads are in flight and how large they are. Each shorthand stacks the three
primitives that model them (:mod:`tuner.sandbox.device.profile`): ``latency=`` (the FUSE read layer: each read
waits, many wait at once), ``iops=`` and ``mbps=`` (the cgroup read caps on the loop device).

Where the figures come from (caps are the providers' published figures; per-read latencies are marked published
or estimate — no provider publishes a per-read latency for gp2, gp3 or pd-balanced, and none was measured on a
real volume for this table):

* ``gp3`` — Amazon EBS General Purpose SSD gp3 at its baseline: 3,000 IOPS and 125 MiB/s whatever the size
  (AWS EC2 API reference, ``CreateVolume``/``EbsBlockDevice``: "gp3: 3,000 - 16,000 IOPS … The default for gp3
  volumes is 3,000 IOPS", throughput "Valid Range: Minimum value of 125"). Latency 800 µs: an *estimate* — AWS
  describes General Purpose volumes as single-digit-millisecond, and says io2 Block Express reduces "the
  frequency of I/Os exceeding 800 microseconds by over 10 times" against them (EBS user guide, "Amazon EBS
  optimization"); the issue's "roughly 0.5-1 ms per read" for gp3.
* ``gp2-100g`` — a 100 GiB EBS gp2 volume *out of burst credits*: baseline 3 IOPS per GiB, at least 100, so 300
  IOPS (EBS user guide, "General Purpose SSD volumes"; AWS knowledge center "rds-low-burst-balance": "if the
  volume is 100 GiB, its baseline performance is 300 IOPS"). While credits last (5.4 million at creation) such
  a volume bursts to 3,000 IOPS; the shorthand models the exhausted state, where a long-running database ends
  up, not the burst. Throughput 128 MiB/s: gp2's limit for volumes up to 170 GiB (EBS user guide, gp2
  throughput). Latency 1 ms: an *estimate*, as for gp3.
* ``io2`` — an io2 Block Express volume provisioned at 16,000 IOPS: "designed to deliver an average latency of
  under 500 microseconds for 16KiB I/O operations" (EBS user guide, "Amazon EBS optimization") — 400 µs here,
  *published* (an upper bound on the average); IOPS 100-256,000 provisionable (EC2 API reference), 16,000
  chosen as a common provisioned size; throughput 4,000 MiB/s, io2 Block Express's per-volume maximum. On this
  2-core machine the IOPS cap is reached (16,000 with 64 8 KiB reads in flight) but not the throughput cap
  (2,000-3,200 MiB/s in 1 MiB reads through the FUSE layer; tests/integration/test_devices_cloud.py).
* ``pd-balanced`` — a 100 GB Google Cloud balanced persistent disk: 6 read IOPS per GiB plus a 3,000 IOPS
  baseline = 3,600 IOPS, 0.28 MiB/s per GiB plus a 140 MiB/s baseline = 168 MiB/s (Compute Engine docs, "About
  Persistent Disk performance": zonal balanced PD, "Read IOPS per GiB 6", "Throughput per GiB (MiBps) 0.28",
  and its baseline performance). Latency 1.5 ms: an *estimate* — the page says balanced PD is "designed for
  sub-millisecond latencies" yet asks for a queue depth of 32 or more to reach the limits (its earlier edition:
  one I/O in flight per 400-800 IOPS, i.e. 1.25-2.5 ms per I/O at the limits).
* ``hdd`` and ``ram`` — today's primitives, listed so ``--cloud`` measures the two ends (one 7,200 rpm spindle;
  NVMe-class memory-speed reads).

A shorthand stands alone: ``gp3,ram`` is refused (write the parts out to combine them). The parsed profile
remembers its shorthand, so the report says both (``gp3 = latency=800us,iops=3000,mbps=125``). These are read
profiles: the write side (flushes, write caps) is modelled separately by the write parts of a profile, and the
shorthands' write figures belong there.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Shorthand:
    """One named volume: its comma list of primitives, what it models, and where its figures come from."""

    name: str
    parts: str
    models: str
    sources: str


SHORTHANDS: dict[str, Shorthand] = {s.name: s for s in (
    Shorthand("gp3", "latency=800us,iops=3000,mbps=125", "AWS EBS gp3 at its baseline",
              "AWS EC2 API reference (3,000 IOPS, 125 MiB/s); latency estimated (EBS user guide, 'Amazon EBS "
              "optimization': General Purpose volumes often above 800 µs)"),
    Shorthand("gp2-100g", "latency=1ms,iops=300,mbps=128", "a 100 GiB AWS EBS gp2 out of burst credits",
              "EBS user guide, gp2: 3 IOPS per GiB (300 at 100 GiB), 128 MiB/s up to 170 GiB; latency estimated"),
    Shorthand("io2", "latency=400us,iops=16000,mbps=4000", "AWS EBS io2 Block Express, 16,000 IOPS provisioned",
              "EBS user guide, 'Amazon EBS optimization': average under 500 µs for 16 KiB I/O (published); "
              "EC2 API reference: io2 100-256,000 IOPS; 4,000 MiB/s per volume"),
    Shorthand("pd-balanced", "latency=1500us,iops=3600,mbps=168", "a 100 GB Google Cloud pd-balanced",
              "Compute Engine docs, 'About Persistent Disk performance': 3,000 + 6/GiB IOPS, 140 + 0.28/GiB MiB/s; "
              "latency estimated from its queue-depth guidance"),
    Shorthand("hdd", "hdd", "one 7,200 rpm spindle", "seek model of Ruemmler & Wilkes 1994 (latencyfs.c)"),
    Shorthand("ram", "ram", "NVMe-class, memory-speed reads", "the image on a tmpfs"),
)}

# The shorthands that are new names (hdd and ram are primitives of their own and parse as such).
NAMED = tuple(n for n, s in SHORTHANDS.items() if s.parts != n)


def expand(text: str) -> tuple[str, str] | None:
    """``(name, parts)`` when ``text`` is a shorthand standing alone (``gp3``) or written as the report spells
    it (``gp3 = latency=800us,…``, which must match the shorthand's parts); None when it names none."""
    name, sep, rest = (p.strip().lower() for p in str(text).partition(" = "))
    found = SHORTHANDS.get(name)
    if found is None or found.parts == name:
        return None
    if sep and rest.replace(" ", "") != found.parts:
        return None
    return name, found.parts


def stands_alone(parts: list[str]) -> str | None:
    """The shorthand among ``parts`` when it is combined with other parts (refused: one sentence names it)."""
    return next((p for p in parts if p in NAMED), None) if len(parts) > 1 else None
