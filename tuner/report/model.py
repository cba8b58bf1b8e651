"""Values that cross boundaries (probe → session → store → report): frozen pydantic models."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal, Self

from pydantic import (BaseModel, ConfigDict, Field, SerializationInfo, SerializeAsAny, SerializerFunctionWrapHandler,
                      model_serializer, model_validator)

from tuner.report import by_family
from tuner.report.near import NearRange

SCHEMA_VERSION = 1


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, data: Any) -> Any:
        """JSON ``true`` where a number belongs is refused: pydantic's lax mode reads a bool as 1 (its conversion
        table), and a report that says ``"schema_version": true`` or ``"current": true`` was not written by tuner.
        Strict mode would also refuse what a session hands over (numpy's integers), so only bools are refused."""
        if isinstance(data, Mapping):
            for name, info in cls.model_fields.items():
                if _wants_number(info.annotation) and _has_bool(data.get(name)):
                    raise ValueError(f"{name} is true or false where a number belongs")
        return data


def _wants_number(annotation: Any) -> bool:
    """Whether a field's type (or a type inside it: a union, a tuple, a dict's values) is int or float, not bool."""
    if annotation in (int, float):
        return True
    return any(_wants_number(a) for a in getattr(annotation, "__args__", ()) if a is not bool)


def _has_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return True
    if isinstance(value, Mapping):
        return any(isinstance(v, bool) for v in value.values())
    return isinstance(value, (list, tuple)) and any(isinstance(v, bool) for v in value)


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
    query_ms: dict[str, float] = Field(
        default_factory=dict, description="each query's own execution time (ms) in an ok probe of a scan workload, "
        "by the query's name: the per-query lines of a confirmation are computed from them")
    family: str | None = Field(default=None, description="the family whose probe this was")
    object: str | None = Field(
        default=None, description="what the probe's knobs applied to besides the server: for readahead, the "
        "directories on the probed device (data directory, pg_wal, tablespace NAME)")


class QueryEffect(_Frozen):
    """One query's own part of a paired confirmation: its times in the two arms and its own paired interval, by
    the same test as the whole workload's (:mod:`tuner.core.per_query`)."""

    name: str = Field(description="the query's name in the workload (its identity: FamilyOutcome.statements)")
    baseline_ms: float = Field(description="median execution time in the baseline arm (today's values)")
    candidate_ms: float = Field(description="median execution time in the candidate arm (the recommendation)")
    time_share: float = Field(description="its share of the workload's execution time in the baseline arm")
    improvement: float = Field(description="geometric mean of its paired ratios baseline/candidate")
    ci95: tuple[float, float]
    decision_ci: tuple[float, float]
    n_pairs: int


class EffectOut(_Frozen):
    metric: str
    improvement: float
    ci95: tuple[float, float]
    decision_ci: tuple[float, float] = Field(description="the wider interval the sequential rule decided on")
    n_pairs: int
    p_value: float
    looks: int
    method: str
    queries: list[QueryEffect] = Field(default_factory=list)  # each query's own, in a multi-query workload


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
        """A near-optimal range given as a :class:`NearRange` brings its facts along (``searched``, the knob's
        limits, ``plateau``); where the searched range is known, ``at_edge`` follows from the recommended value.
        Fields given explicitly win."""
        if not isinstance(data, dict):
            return data
        near = data.get("near_optimal")
        out = dict(data)
        limits = (False, False)
        if isinstance(near, NearRange):
            out["near_optimal"] = near.as_pair()
            out.setdefault("searched", near.searched)
            out.setdefault("plateau", near.plateau)
            limits = near.limits
        searched, value = out.get("searched"), out.get("recommended")
        if searched is not None and isinstance(value, int) and "at_edge" not in data:
            edge = "upper" if value >= searched[1] else "lower" if value <= searched[0] else None
            out["at_edge"] = edge
            if edge is not None and "edge_is_limit" not in data:
                out["edge_is_limit"] = bool(limits[1] if edge == "upper" else limits[0])
        return out


class StatementOut(_Frozen):
    """A query of a family's workload, as the per-query lines name it."""

    name: str
    queryid: int | None = Field(default=None, description="pg_stat_statements' fingerprint, where it came from there")
    text: str = Field(description="the statement, on one line and shortened")
    share: float | None = Field(default=None, description="its share of the workload's read I/O (None: not known)")
    weight: float = Field(default=1.0, description="its weight in the probe's value")


class LeftOutStatement(_Frozen):
    """A statement of the workload that was not probed, and why (writes, no I/O, cannot be replayed, too slow)."""

    queryid: int | None
    text: str
    share: float | None
    reason: str


class FamilyOutcome(_Frozen):
    family: str
    status: Literal["done", "skipped", "failed"]
    reason: str
    workload: list[str] = Field(default_factory=list)
    statements: list[StatementOut] = Field(default_factory=list)  # the workload's queries, by name
    stop_reason: str | None = None
    optimiser: str | None = None
    cache: str | None = Field(default=None, description="how the cache was made cold for this family's probes")
    warm_start: str | None = Field(
        default=None, description="the stored session the search started from, and how its trials were used "
        "(None: a cold start)")


class ReportSection(_Frozen):
    """A family's own part of the report: the model a family declares as its ``report_section``. Its fields are
    top-level keys of the JSON report (``devices``, ``wal_scaling``, ...: readers depend on them), written flat
    beside the shared ones and split back among the families when a report is read (:mod:`tuner.report.by_family`). A
    section equal to its defaults is no section: the report keeps none, and writes the defaults' keys."""

    def table(self) -> list[Any]:
        """What the terminal report shows of this section, in order: lines (str) and rich renderables."""
        return []

    def confirmed(self) -> list[tuple[str, EffectOut]]:
        """Effects the section confirmed that no recommendation carries (a combination), titled: per-query lines."""
        return []

    def trial_objects(self) -> dict[str, str]:
        """Names of objects in recommendations (a device) mapped to the name the family's trials give the same
        place (the directories on it), so a report's reader can pair the two."""
        return {}

    @classmethod
    def of(cls, report: Report, family: str) -> Self:
        """``family``'s section of ``report`` (its defaults when the report has none)."""
        found = report.sections.get(family)
        return found if isinstance(found, cls) else cls()


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
    binding: Literal["latency", "iops", "throughput"] | None = Field(
        default=None, description="which of the emulated volume's limits held the reads (tuner.core.regime.binding): "
        "a cap they ran at, else the per-read latency; None without a profile's limit, or when the CPU held them")


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
    restored: list[str] = Field(default_factory=list, description="what tuner changed on the host and put back")
    trials: list[Trial]
    # The decision policy's values, carried so that a reader (the HTML report's minimum-effect line) need not
    # recover them from the reasons' prose. Optional: reports written before they were carried still load.
    min_effect: float | None = Field(default=None, description="the improvement ratio a change had to clear")
    alpha: float | None = Field(default=None, description="the error rate of the sequential confirmation")
    # Optional and additive like the two above: reports written before them still load.
    device_profile: str | None = Field(default=None, description="the emulated disk a sandbox session ran on "
                                       "(--device, e.g. iops=3000); None for a real target")
    io_regime: list[IoRegimeOut] = Field(default_factory=list, description="what limited each workload's reads")
    workload: Literal["generated", "yours", "pg_stat_statements"] | None = Field(
        default=None, description="whose queries the scan probes ran: generated by tuner on the largest relations, "
        "yours ([workload] queries), or your statements that read the most, replayed from pg_stat_statements "
        "([workload] from); a family that generates its own load (WAL inserts) does so either way. "
        "None: a report written before it was carried")
    left_out: list[LeftOutStatement] = Field(default_factory=list)  # the workload's statements not probed, and why
    # Per family, its own section (see ReportSection). Not a key of the JSON report: the sections' fields are.
    sections: dict[str, SerializeAsAny[ReportSection]] = Field(default_factory=dict, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _sections_from_keys(cls, data: Any) -> Any:
        """The families' keys (flat, as the JSON report has them, or as ``sections``) into their sections."""
        if not isinstance(data, dict):
            return data
        out = by_family.sectioned(cls.__name__, data, cls.model_fields, "report", by_field=True, every=False, under=())
        out["sections"] = {f: s for f, s in out["sections"].items() if s != type(s)()}  # a default one is none
        return out

    @model_serializer(mode="wrap")
    def _sections_flat(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> dict[str, Any]:
        """The sections' fields as top-level keys after the recommendations, every registered family's (its
        defaults where it wrote nothing), so a report has the same keys whichever families ran."""
        data = handler(self)
        present: dict[str, BaseModel] = dict(self.sections)
        for family, model in by_family.types("report").items():
            present.setdefault(family, model())
        flat: dict[str, Any] = {}
        for section in present.values():
            flat.update(section.model_dump(mode=info.mode))
        out: dict[str, Any] = {}
        for key, value in data.items():
            out[key] = value
            if key == "recommendations":
                out.update(flat)
        return out

    def section(self, family: str) -> ReportSection | None:
        """``family``'s section, None when it wrote none."""
        return self.sections.get(family)
