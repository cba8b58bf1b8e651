"""Values that cross boundaries (probe → session → store → report): frozen pydantic models."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

SCHEMA_VERSION = 1


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CacheEvidence(_Frozen):
    """What the probe's own counters say about the cache state it ran in (summed over its queries)."""

    shared_read: int
    shared_hit: int
    heap_read: int
    heap_hit: int
    io_read_time_ms: float | None
    method: str


class Trial(_Frozen):
    """One probe: one configuration, one run of the workload, one measured value (or a failure)."""

    config: dict[str, int | str]
    value: float | None = Field(
        description="the family's objective, lower is better: execution_time_ms summed over the workload "
        "(concurrency, readahead), ms per transaction (wal) or ms to replay the WAL stream (replay); None unless "
        "status is ok")
    status: Literal["ok", "failed", "rejected"]
    phase: Literal["search", "confirm", "scaling"] = Field(
        description="search: a probe the optimiser asked for; confirm: one arm of a paired confirmation; scaling: "
        "a measurement at another load than the family's probes (the WAL family's throughput per client count), "
        "which is neither a search observation nor evidence for a decision (reports before it stored these as "
        "search)")
    arm: Literal["baseline", "candidate"] | None = None
    cache: CacheEvidence | None = None
    reason: str | None = None
    started_at: datetime
    duration_s: float
    metrics: dict[str, float] = Field(
        default_factory=dict,
        description="per-scan figures: seq_scan_ms, bitmap_scan_ms, seq_scan_mb_s (MB/s read from disk); I/O "
        "evidence: stat_io_reads, stat_io_hits (16+), stat_io_bytes_per_read (18+), io_workers_running and EXPLAIN "
        "(IO)'s <scan>_io_count, _io_waits, _prefetch_distance_max/_avg, _io_size_avg_blocks (19+); the data "
        "device's counters over the scans: disk_reads, disk_read_iops, disk_read_mib_s, disk_read_kib_per_request, "
        "disk_reads_in_flight, disk_read_latency_ms, disk_busy_share, disk_window_s",
    )
    family: str | None = Field(default=None, description="the family whose probe this was")
    object: str | None = Field(
        default=None, description="what the probe's knobs applied to besides the server: for readahead, the "
        "directories on the probed device (data directory, pg_wal, tablespace NAME)")


class EffectOut(_Frozen):
    metric: str
    improvement: float
    ci95: tuple[float, float]
    decision_ci: tuple[float, float] = Field(description="the wider interval the sequential rule decided on")
    n_pairs: int
    p_value: float
    looks: int
    method: str


class HostCommands(_Frozen):
    """How to apply a device-scope recommendation on the host, persist it, and take it back."""

    apply_blockdev: str = Field(description="blockdev --setra counts 512-byte sectors: 2 x read_ahead_kb")
    apply_sysfs: str
    rollback_blockdev: str
    rollback_sysfs: str
    udev_rule: str = Field(description="a rule that persists the value across reboots and re-plugs")
    udev_rule_file: str


class DeviceRef(_Frozen):
    """The block device a device-scope recommendation is about, as the host commands need it."""

    node: str = Field(description="/dev/NAME")
    name: str
    sysfs_path: str = Field(description="/sys/block/NAME/queue/read_ahead_kb")
    match: dict[str, str] = Field(description="udev keys that match this device by its most stable attribute")


class Recommendation(_Frozen):
    """One knob's recommendation as data. SQL, host commands and config-management formats are rendered from
    it at output time (tuner/emit/); the JSON report carries ``apply_sql``, ``rollback_sql`` and ``host``
    too, computed when it is written."""

    knob: str
    scope: Literal["system", "tablespace", "device"]
    object: str | None
    current: int | str
    recommended: int | str
    source: str = Field(
        default="default",
        description="where today's value comes from: pg_settings.source (default, configuration file, ...); "
        "'server' for a tablespace that uses the server's value; 'kernel' for a device")
    near_optimal: tuple[int, int] | None = Field(
        description="the smallest and largest value the measurements cannot tell apart from the best by more "
        "than the policy's minimum effect, at its confidence (95 % by default): measured values by their own readings, values between them by "
        "the model; widened to the noise the confirmation measured, and cut short of today's value after a change")
    plateau: bool = Field(
        default=False, description="measured values at least a factor of four apart lie level with the best "
        "across near_optimal; the recommendation is then the smallest such value that was measured")
    searched: tuple[int, int] | None = Field(default=None, description="the range the search covered: the "
                                             "policy's, within the knob's own limits on this server")
    at_edge: Literal["lower", "upper"] | None = Field(
        default=None, description="the recommended value is the lowest or highest value searched: the optimum "
        "may lie beyond it")
    edge_is_limit: bool = Field(default=False, description="at_edge's bound is the knob's own limit on this "
                                "server, so no policy can widen the search there")
    decision: Literal["change", "keep"]
    reason: str
    effect: EffectOut | None
    requires: Literal["reload", "restart", "reopen"] = Field(
        description="reload: pg_reload_conf(); restart: a server restart; reopen (readahead): files opened "
        "afterwards use it, so restart PostgreSQL (or recycle its connections) to reach every backend"
    )
    run_on: Literal["target", "primary", "host"] = Field(
        default="target",
        description="target: ALTER SYSTEM on each server; primary: ALTER TABLESPACE (replicates); host: as root",
    )
    together_with: list[str] = Field(
        default_factory=list, description="other knobs confirmed in the same paired trials: apply them together"
    )
    device: DeviceRef | None = None

    @model_validator(mode="before")
    @classmethod
    def _range_facts(cls, data: Any) -> Any:
        """A near-optimal range given as the optimiser's ``KnobRange`` brings its facts along (``searched``, the
        knob's limits, ``plateau``); where the searched range is known, ``at_edge`` follows from the
        recommended value. Fields given explicitly win."""
        if not isinstance(data, dict):
            return data
        near = data.get("near_optimal")
        out = dict(data)
        limits = (False, False)
        if near is not None and hasattr(near, "searched"):
            out["near_optimal"] = (int(near[0]), int(near[1]))
            out.setdefault("searched", near.searched)
            out.setdefault("plateau", bool(near.plateau))
            limits = near.limits
        searched, value = out.get("searched"), out.get("recommended")
        if searched is not None and isinstance(value, int) and "at_edge" not in data:
            edge = "upper" if value >= searched[1] else "lower" if value <= searched[0] else None
            out["at_edge"] = edge
            if edge is not None and "edge_is_limit" not in data:
                out["edge_is_limit"] = bool(limits[1] if edge == "upper" else limits[0])
        return out


class FamilyOutcome(_Frozen):
    family: str
    status: Literal["done", "skipped", "failed"]
    reason: str
    workload: list[str] = Field(default_factory=list)
    stop_reason: str | None = None
    optimiser: str | None = None
    cache: str | None = Field(default=None, description="how the cache was made cold for this family's probes")
    warm_start: str | None = Field(
        default=None, description="the stored session the search started from, and how its trials were used "
        "(None: a cold start)")


class DeviceOut(_Frozen):
    """A block device under the target's directories, what it holds, and what the readahead family measured."""

    device: str | None  # /dev/NAME, None when the directory has no tunable device
    description: str
    roles: list[str]
    read_ahead_kb: int | None  # before tuner touched it
    status: Literal["probed", "skipped", "not tunable"]
    reason: str
    raw_read_mb_s: float | None = Field(default=None, description="O_DIRECT reads of a relation file (like dd)")
    seq_scan_mb_s_current: float | None = Field(default=None, description="median over confirmation trials")
    seq_scan_mb_s_recommended: float | None = None
    efficiency_current: float | None = Field(default=None, description="seq scan MB/s / raw MB/s")
    efficiency_recommended: float | None = None


class WalContentionOut(_Frozen):
    """Where load backends spent their time at one client count (share of sampled backend states)."""

    clients: int
    rows_per_tx: int
    tps: float | None
    wal_insert_wait_share: float | None = Field(description="LWLock WALInsert: the 8 compiled-in insertion locks")
    wal_write_wait_share: float | None = Field(description="LWLock WALWrite and IO WALWrite/WalWrite")
    wal_sync_wait_share: float | None = Field(description="IO WALSync/WalSync: flushing WAL to disk")
    wal_buf_mapping_wait_share: float | None = None
    p95_latency_ms: float | None = None


class WalScalingOut(_Frozen):
    """Throughput at one client count and transaction size: context for the decision, never evidence for it."""

    clients: int
    rows_per_tx: int
    tps_current: float | None
    tps_recommended: float | None = Field(description="None when nothing was recommended to change")
    readings: int = Field(default=1, ge=1, description="load runs behind each TPS value: one, not repeated")
    reading_s: float | None = Field(default=None, description="measured seconds of each run (after its warm-up); "
                                    "None in reports written before it was carried")


class ReplayPointOut(_Frozen):
    """The replay rate measured at one maintenance_io_concurrency value (median over its ok probes)."""

    maintenance_io_concurrency: int
    mb_per_s: float = Field(description="MB of WAL replayed per second (pg_wal_lsn_diff over the catch-up time)")
    pages_per_s: float
    n: int


class ReplayOut(_Frozen):
    """What the replay family measured: the standby's catch-up over a fixed WAL stream of random-page updates."""

    maintenance_io_concurrency_current: int
    maintenance_io_concurrency_recommended: int
    mb_per_s_current: float | None = Field(description="median over the probes at today's value")
    mb_per_s_recommended: float | None = Field(description="median over the probes at the recommended value")
    wal_mb: float | None = Field(description="WAL of one probe's stream (median)")
    pages: int = Field(description="heap pages the stream updates, one row each, in a fixed random order")
    table_mb: float
    recovery_prefetch: str
    method: str = Field(description="how the stream was made and the standby's caches emptied")
    curve: list[ReplayPointOut] = Field(default_factory=list)


class IoRegimeOut(_Frozen):
    """What limited one workload's reads, from the data directory's block device counters around each probe
    (tuner.probes.diskstat; the classification in tuner.core.regime). Figures are medians over the probes that
    describe today's settings (the confirmation's baseline arm, else every probe with a reading)."""

    family: str | None = Field(description="the family whose probes were read (None: no reading at all)")
    regime: Literal["latency", "iops", "throughput", "cpu", "unmeasured"]
    sentence: str = Field(description="the line the table, the HTML report and the API show")
    device: str | None = Field(default=None, description="kernel names of the devices read, joined by + "
                                  "(loop3; vda+loop5 with a tablespace on loop5)")
    probes: int = Field(default=0, description="probes with a device reading")
    read_iops: float | None = None
    read_mib_s: float | None = None
    kib_per_read: float | None = None
    reads_in_flight: float | None = Field(default=None, description="read ticks over wall time (Little's law)")
    read_latency_ms: float | None = None
    busy_share: float | None = Field(default=None, description="io_ticks over wall time: part of the time with "
                                     "any request in flight")
    peak_read_iops: float | None = Field(default=None, description="the highest IOPS of any probe")
    cap_iops: float | None = Field(default=None, description="the read IOPS cap the reads ran at")
    cap_mib_s: float | None = Field(default=None, description="the read MiB/s cap the reads ran at")
    cap_source: Literal["profile", "inferred"] | None = Field(
        default=None, description="profile: the sandbox's device profile; inferred: rate flat across probes "
        "whose reads in flight differed")


class TargetOut(_Frozen):
    server_version_num: int
    server_version: str
    in_recovery: bool
    system_identifier: str | None
    mode: str
    dsn: str
    sandbox: bool
    fingerprint: dict[str, Any] | None = Field(
        default=None, description="what the session ran against: versions, system identifier, data device, the "
        "tuned settings and their sources (the store matches warm starts on it)")


class SessionOut(_Frozen):
    id: str
    started_at: datetime
    duration_s: float
    probes: int
    policy: str
    seed: int
    cache: str
    host: str
    kernel: str


class Report(_Frozen):
    schema_version: int = SCHEMA_VERSION
    target: TargetOut
    session: SessionOut
    families: list[FamilyOutcome]
    recommendations: list[Recommendation]
    devices: list[DeviceOut] = Field(default_factory=list)
    restored: list[str] = Field(default_factory=list, description="what tuner changed on the host and put back")
    wal_contention: list[WalContentionOut] = Field(default_factory=list)
    wal_scaling: list[WalScalingOut] = Field(default_factory=list)
    wal_summary: str | None = Field(default=None, description="what the insertion-lock evidence implies")
    replay: ReplayOut | None = Field(default=None, description="the replay family's catch-up rates")
    trials: list[Trial]
    # The decision policy's values, carried so that a reader (the HTML report's minimum-effect line) need not
    # recover them from the reasons' prose. Optional: reports written before they were carried still load.
    min_effect: float | None = Field(default=None, description="the improvement ratio a change had to clear")
    alpha: float | None = Field(default=None, description="the error rate of the sequential confirmation")
    # Optional and additive like the two above: reports written before them still load.
    device_profile: str | None = Field(default=None, description="the emulated disk a sandbox session ran on "
                                       "(--device, e.g. iops=3000); None for a real target")
    io_regime: list[IoRegimeOut] = Field(default_factory=list, description="what limited each workload's reads")
