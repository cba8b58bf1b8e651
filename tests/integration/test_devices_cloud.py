"""Each cloud-shaped shorthand is the volume it names: on the emulated loop device (built as the sandbox builds it,
without PostgreSQL), one 8 KiB O_DIRECT random read at a time takes the shorthand's latency, and a deep stream of
reads holds at the limit that binds it — the IOPS cap for 8 KiB reads, the throughput cap for 1 MiB reads — or,
where this machine cannot reach a cap (io2's 4,000 MiB/s: two cores copy 2,000-3,200 MiB/s through the FUSE
layer), stays under it.

Bounds: a read takes at least 0.9× the latency the layer adds and at most 1.5× + 0.5 ms (the loop device, the
FUSE round trip and a loaded machine's scheduling add to it; docs/devices.md measured +0.2-0.3 ms); a capped
stream reads within 20 % below and 10 % above its cap (the regime line's own tolerance for naming a cap below,
blk-throttle's slice granularity above). Each stream runs 2 s after a half-second it does not count.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.test_devices_physics import emulated
from tuner.sandbox import loopdisk
from tuner.sandbox.device import parse_profile
from tuner.sandbox.device.cloud import NAMED

pytestmark = pytest.mark.skipif(not loopdisk.available(), reason="needs root and losetup")

KIB8, MIB = 8192, 1 << 20
DEPTH = 64
# What two cores move through the FUSE layer in 1 MiB reads (measured: 2,025 and 3,188 MiB/s on io2 under a load
# average of 5-10): a cap above this is not reached here, so only its upper bound is checked.
REACHABLE_MIB_S = 1000


def expected(name: str, block: int, depth: int) -> tuple[float, str]:
    """The rate (reads per second) a stream of ``block``-byte reads, ``depth`` in flight, is held to on the
    shorthand, and which limit holds it: each read counts once against the IOPS cap (a 1 MiB direct read is one bio
    at the loop device, where the cap counts)."""
    p = parse_profile(name)
    limits = {"latency": depth / ((p.latency_us or 0) / 1e6)}
    if p.read_iops:
        limits["iops"] = float(p.read_iops)
    if p.read_mbps:
        limits["throughput"] = p.read_mbps * MIB / block
    kind = min(limits, key=lambda k: limits[k])
    return limits[kind], kind


@pytest.mark.parametrize("name", NAMED)
def test_a_cloud_shorthand_reads_at_its_latency_and_holds_at_its_binding_cap(name: str, base_dir: Path) -> None:
    p = parse_profile(name)
    latency_ms = (p.latency_us or 0) / 1000
    with emulated(name, base_dir) as disk:
        one = disk.read("single", 40, KIB8)
        small = disk.read("depth", KIB8, DEPTH, 2)
        large = disk.read("depth", MIB, 16, 2)
    print(name, one, small, large)
    assert 0.9 * latency_ms <= one["median_ms"] <= 1.5 * latency_ms + 0.5, one
    for got, block, depth in ((small, KIB8, DEPTH), (large, MIB, 16)):
        rate, kind = expected(name, block, depth)
        assert got["iops"] <= 1.1 * rate, (kind, rate, got)
        if rate * block <= REACHABLE_MIB_S * MIB:
            assert got["iops"] >= 0.8 * rate, (kind, rate, got)
        else:  # io2's 4,000 MiB/s: beyond this machine, yet several times any other shorthand's cap
            assert got["mib_s"] >= REACHABLE_MIB_S / 2, (kind, rate, got)
