"""What limits a workload's reads — tune or provision? — from the data device's counters around each probe.

Pure: trials in (their ``disk_*`` metrics, :mod:`tuner.probes.diskstat`), one :class:`IoRegimeOut` per family's
workload out. The regimes, asked in this order:

1. **IOPS-bound / throughput-bound at a known cap** — the sandbox's device profile names it (``iops=N``,
   ``mbps=N``): the upper quartile of today's probes ran at :data:`AT_CAP` of it or more (a probe's window also
   holds stretches with no read in flight — planning, building the bitmap, the executor's own work — so its
   average understates the rate the reads were held to: iops=3000 gave 2,209-3,336 IOPS per probe). blk-throttle holds a bio back *before* it reaches
   the loop device's queue (block/blk-throttle.c), so the loop's counters show the rate pinned at the cap with short
   per-read latency and little in flight: only the profile can tell that apart from an idle device.
2. **Saturated, cap inferred** — on a real volume the cap is the provider's and unknown, but it shows: the rate
   stays flat (within :data:`FLAT`, 90th over 10th percentile) across probes whose reads in flight differ by
   :data:`DEEPER` or more. By Little's law (in flight = IOPS × latency) a flat rate under a deeper queue means
   each read waited longer: the queue is at the device, not in the workload. IOPS flat: IOPS-bound; MiB/s flat
   while IOPS moved (request sizes differed): throughput-bound. The cap is the 90th percentile of the rate.
3. **CPU-bound** — the device had nothing in flight for more than half the time (busy share below
   :data:`BUSY`) and the probes with :data:`DEEPER` times today's reads in flight did not read faster by
   :data:`FLAT` (median): the reads are not what the workload waits
   for. (mbps=125 under a load average of 19: eic 1 kept the device busy 28 % of the time at ~1,900 IOPS, yet
   eic 64 read at 7,700-15,900 — one read at a time, each wait added to the CPU's work: not CPU-bound.)
4. **Latency-bound** — not at a cap, and either busy or outrun by probes with more reads at once: each read's
   wait is the limit. Where probes with more reads in flight were faster, more reads at once raise the rate
   (they say by how much); where none had clearly more in flight, or those that had were not faster, the line
   says that instead of promising room for more concurrency.

On a volume with more than one limit (a cloud shorthand, ``gp3``: 800 µs per read, 3,000 IOPS, 125 MiB/s) the line
also names the one that binds (:func:`binding`): a cap the reads ran at, else the per-read latency — one read at a
time on gp3 reaches ~1,000 IOPS, a third of the cap, so "keep eic 1 on an IOPS-capped volume" is not what the
volume says.

Figures describe today's settings: the confirmation's baseline-arm probes, else the probes at today's values (a value
kept on a measured plateau has no confirmation), else every probe with a reading.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from tuner.sandbox.device.profile import DeviceProfile
from tuner.report.model import IoRegimeOut, Trial
from tuner.probes.diskstat import BUSY as BUSY_KEY
from tuner.probes.diskstat import IN_FLIGHT, IOPS, KIB_PER_READ, LATENCY_MS, MIB_S, READS

# Reads ran within 20 % of a known cap: the issue's own tolerance for naming a cap.
AT_CAP = 0.8
# A rate whose 90th percentile is within 25 % of its 10th is flat: cold probes vary 7-14 % (CV) on this machine
# (docs/results.md), so a real difference in rate shows beyond that.
FLAT = 1.25
# Reads in flight that differ by 2x or more across probes: the workload asked for clearly more at once.
DEEPER = 2.0
# A device with nothing in flight for more than half the time is not what the reads wait for.
BUSY = 0.5
# Fewer reads than this in a probe say nothing about the device (a probe that found its pages cached).
MIN_READS = 50
MIN_POINTS_TO_INFER = 4
LIMIT_NAMES = {"latency": "the latency", "iops": "the IOPS cap", "throughput": "the throughput cap"}
ADVICE_IOPS = "no setting raises that; larger requests (readahead, io_combine_limit) or a faster volume would"
ADVICE_MIB = ("no setting raises that; reading fewer bytes would (a smaller readahead where it fetches pages the "
              "scan does not need, prefetch hints for exactly the pages it needs), or a faster volume")


def assess(trials: Sequence[Trial], *, profile: DeviceProfile | None = None, device: str | None = None,
           absent: str | None = None, today: Mapping[str, Any] | None = None) -> list[IoRegimeOut]:
    """The regime of each family's workload whose probes carry device readings, in the order they ran.

    ``absent`` is why there is no reading at all (tuner not on the server's host): then one ``unmeasured`` entry
    says so, if anything was probed. ``profile`` is the sandbox's emulated disk (its caps are known). ``today``:
    today's values by knob, so that a session that kept today's value without a confirmation (on a measured
    plateau) is described by its probes at today's values, not by every probe."""
    if absent is not None:
        return [IoRegimeOut(family=None, regime="unmeasured", sentence=absent)] if trials else []
    groups: dict[str, list[Trial]] = {}
    for t in trials:
        if t.status == "ok" and t.metrics.get(READS, 0) >= MIN_READS and IOPS in t.metrics:
            groups.setdefault(t.family or "", []).append(t)
    return [classify(family or None, points, profile=profile, device=device, today=today)
            for family, points in groups.items()]


Limit = Literal["latency", "iops", "throughput"]


def binding(profile: DeviceProfile | None, iops: float, mib_s: float) -> Limit | None:
    """Which of an emulated volume's limits held reads that ran at ``iops`` and ``mib_s`` (pure): the cap they
    reached (:data:`AT_CAP` of it; of two, the one more used), else the per-read latency the profile adds (``latency=``,
    ``hdd``) — the reads were not held back, each one's wait set the rate. None when the profile names no limit
    (local, ram: the machine's own disk or memory, whatever limits it)."""
    if profile is None:
        return None
    used: dict[Limit, float] = {}
    if profile.read_iops:
        used["iops"] = iops / profile.read_iops
    if profile.read_mbps:
        used["throughput"] = mib_s / profile.read_mbps
    if used and max(used.values()) >= AT_CAP:
        return max(used, key=lambda k: used[k])
    return "latency" if profile.latency_us is not None or profile.hdd else None


def limits_phrase(profile: DeviceProfile, bound: str, iops: float, mib_s: float) -> str:
    """The clause that names the binding limit among a volume's several (empty for a volume with one limit: the
    line already names it), with how much of each cap the reads used."""
    limits = ([f"{profile.latency_us / 1000:g} ms per read"] if profile.latency_us is not None else []) + \
             (["one spindle's seek"] if profile.hdd else []) + \
             ([f"{profile.read_iops:,} IOPS"] if profile.read_iops else []) + \
             ([f"{profile.read_mbps:,} MiB/s"] if profile.read_mbps else [])
    if len(limits) < 2:
        return ""
    used = ([f"{iops / profile.read_iops:.0%} of the IOPS cap"] if profile.read_iops and bound != "iops" else []) + \
           ([f"{mib_s / profile.read_mbps:.0%} of the throughput cap"] if profile.read_mbps and bound != "throughput"
            else [])
    return (f"; of {profile.shorthand or 'the volume'}'s limits ({', '.join(limits)}), {LIMIT_NAMES[bound]} binds"
            + (f" (the reads used {' and '.join(used)})" if used else ""))


def _q(values: Sequence[float], p: float) -> float:
    """The p-quantile by linear interpolation (statistics.quantiles needs two values or more)."""
    s = sorted(values)
    k = (len(s) - 1) * p
    lo = int(k)
    return s[lo] + (s[min(lo + 1, len(s) - 1)] - s[lo]) * (k - lo)


def _spread(values: Sequence[float]) -> float:
    low = _q(values, 0.1)
    return _q(values, 0.9) / low if low > 0 else float("inf")


def _med(points: Sequence[Trial], key: str) -> float | None:
    values = [t.metrics[key] for t in points if key in t.metrics]
    return statistics.median(values) if values else None


def classify(family: str | None, points: Sequence[Trial], *, profile: DeviceProfile | None = None,
             device: str | None = None, today: Mapping[str, Any] | None = None) -> IoRegimeOut:
    """One workload's regime from its probes (each with a device reading; see the module's rules)."""
    today_points = (
        [t for t in points if t.phase == "confirm" and t.arm == "baseline"]
        or [t for t in points if today and any(k in t.config for k in today)
            and all(t.config[k] == v for k, v in today.items() if k in t.config)]
        or list(points))
    m = {k: _med(today_points, k) for k in (IOPS, MIB_S, KIB_PER_READ, IN_FLIGHT, LATENCY_MS, BUSY_KEY)}
    iops, mib, busy = m[IOPS] or 0.0, m[MIB_S] or 0.0, m[BUSY_KEY] or 0.0
    peak = max(t.metrics[IOPS] for t in points)
    # Probes that had clearly more reads in flight than today's (DEEPER x), and the median rate they reached.
    deeper_points = [t for t in points if t.metrics.get(IN_FLIGHT, 0.0) >= DEEPER * (m[IN_FLIGHT] or 0.0)
                     and t.metrics.get(IN_FLIGHT, 0.0) > 0]
    deeper_iops = [t.metrics[IOPS] for t in deeper_points]
    # (the median: a short window under blk-throttle can catch a burst above the cap — 4,074 IOPS at iops=3000)
    deeper_rate = statistics.median(deeper_iops) if deeper_iops else 0.0
    outran = deeper_rate >= FLAT * max(iops, 1e-9)
    # The fields every outcome shares (typed by IoRegimeOut, which validates them).
    base: dict[str, Any] = dict(
        family=family, device=device, probes=len(points), read_iops=round(iops, 1), read_mib_s=round(mib, 2),
        kib_per_read=_r(m[KIB_PER_READ]), reads_in_flight=_r(m[IN_FLIGHT], 2),
        read_latency_ms=_r(m[LATENCY_MS], 3), busy_share=round(busy, 3), peak_read_iops=round(peak, 1))
    # The binding limit, by the rates today's probes held (the upper quartile, as rule 1 reads a cap).
    top_iops = _q([t.metrics[IOPS] for t in today_points], 0.75)
    top_mib = _q([t.metrics.get(MIB_S, 0.0) for t in today_points], 0.75)
    bound = binding(profile, top_iops, top_mib)
    names = limits_phrase(profile, bound, top_iops, top_mib) if profile is not None and bound else ""
    each = (f"{m[KIB_PER_READ]:,.0f} KiB per read, {m[LATENCY_MS]:.2f} ms each"
            if m[KIB_PER_READ] is not None and m[LATENCY_MS] is not None else "no read completed")
    at = f"{iops:,.0f} IOPS and {mib:,.1f} MiB/s ({each})"

    # 1. A cap the profile names, reached.
    if profile is not None:
        ratios = []
        if profile.read_iops:
            ratios.append((_q([t.metrics[IOPS] for t in today_points], 0.75) / profile.read_iops, "iops"))
        if profile.read_mbps:
            ratios.append((_q([t.metrics[MIB_S] for t in today_points], 0.75) / profile.read_mbps, "throughput"))
        if ratios and max(ratios)[0] >= AT_CAP:
            kind = max(ratios)[1]
            if kind == "iops":
                return IoRegimeOut(**base, regime="iops", cap_iops=float(profile.read_iops or 0), cap_source="profile",
                                   binding=bound,
                                   sentence=f"reads ran at {at}, at the device's cap of {profile.read_iops:,} IOPS "
                                   f"(profile {profile.described}){names}: {ADVICE_IOPS}")
            return IoRegimeOut(**base, regime="throughput", cap_mib_s=float(profile.read_mbps or 0),
                               cap_source="profile", binding=bound,
                               sentence=f"reads ran at {at}, at the device's cap of {profile.read_mbps:,} MiB/s "
                               f"(profile {profile.described}){names}: {ADVICE_MIB}")

    # 2. Saturation without a known cap: the rate stays flat while the queue deepens.
    if len(points) >= MIN_POINTS_TO_INFER and busy >= BUSY:
        rates = {k: [t.metrics[k] for t in points] for k in (IOPS, MIB_S)}
        depth = [t.metrics.get(IN_FLIGHT, 0.0) for t in points]
        deeper = _spread(depth) >= DEEPER
        span = f"{_q(depth, 0.1):.1f} to {_q(depth, 0.9):.1f} reads in flight"
        if deeper and _spread(rates[IOPS]) <= FLAT:
            cap = _q(rates[IOPS], 0.9)
            return IoRegimeOut(**base, regime="iops", cap_iops=round(cap, 1), cap_source="inferred",
                               sentence=f"reads ran at {at}, flat from {span}: the device's ceiling is about "
                               f"{cap:,.0f} IOPS; {ADVICE_IOPS}")
        if deeper and _spread(rates[MIB_S]) <= FLAT:
            cap = _q(rates[MIB_S], 0.9)
            return IoRegimeOut(**base, regime="throughput", cap_mib_s=round(cap, 2), cap_source="inferred",
                               sentence=f"reads ran at {at}, flat from {span}: the device's ceiling is about "
                               f"{cap:,.1f} MiB/s; {ADVICE_MIB}")

    # 3. The device mostly idle, and no probe read much faster.
    if busy < BUSY and not outran:
        return IoRegimeOut(**base, regime="cpu",
                           sentence=f"the device had reads in flight only {busy:.0%} of the time, at {at}: the "
                           "workload waits on the CPU, not on the disk; I/O settings can gain little here, a faster "
                           "CPU or fewer pages to read would")

    # 4. Busy, not at a cap: each read's wait is the limit.
    more = f"; probes with more reads in flight ran at {deeper_rate:,.0f} IOPS (median)" if outran else ""
    if more and profile is not None and profile.read_iops and deeper_rate >= AT_CAP * profile.read_iops:
        more += f", up to the device's cap of {profile.read_iops:,} (profile {profile.described})"
    deeper_mib = statistics.median(t.metrics.get(MIB_S, 0.0) for t in deeper_points) if deeper_points else 0.0
    if more and profile is not None and profile.read_mbps and deeper_mib >= AT_CAP * profile.read_mbps:
        more += (f", {deeper_mib:,.0f} MiB/s: up to the device's cap of {profile.read_mbps:,} MiB/s "
                 f"(profile {profile.described})")
    if not outran:
        # Nothing measured says more reads at once would help: no probe had DEEPER x today's reads in flight (a
        # warm start that stayed near today's value), or those that had were not faster (rates too uneven for
        # rule 2). Say what was measured, not a remedy (hdd, warm: "room for more concurrency" was wrong there).
        seen = (f"probes with {DEEPER:.0f}x as many reads in flight or more ran at {deeper_rate:,.0f} IOPS (median), "
                "not faster: more reads at once did not raise the rate here" if deeper_points else
                f"no probe had {DEEPER:.0f}x as many reads in flight, so whether more at once would raise the rate "
                "was not measured")
        return IoRegimeOut(**base, regime="latency", binding=bound,
                           sentence=f"reads ran at {at} with {m[IN_FLIGHT] or 0:.1f} in flight on average, not at a "
                           f"known cap{names}: each read's wait is the limit; {seen}")
    return IoRegimeOut(**base, regime="latency", binding=bound,
                       sentence=f"reads ran at {at} with {m[IN_FLIGHT] or 0:.1f} in flight on average, not at a "
                       f"cap{names}: latency-bound, with room for more concurrency — more reads at once "
                       f"(effective_io_concurrency; io_method and io_workers on 18) raise the rate{more}")


def _r(x: float | None, digits: int = 1) -> float | None:
    return None if x is None else round(x, digits)
