"""Values that cross boundaries (probe → session → store → report): frozen pydantic models."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

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

    config: dict[str, int]
    value: float | None = Field(description="execution_time_ms summed over the workload; None unless status is ok")
    status: Literal["ok", "failed", "rejected"]
    phase: Literal["search", "confirm"]
    arm: Literal["baseline", "candidate"] | None = None
    cache: CacheEvidence | None = None
    reason: str | None = None
    started_at: datetime
    duration_s: float


class EffectOut(_Frozen):
    metric: str
    improvement: float
    ci95: tuple[float, float]
    decision_ci: tuple[float, float] = Field(description="the wider interval the sequential rule decided on")
    n_pairs: int
    p_value: float
    looks: int
    method: str


class RecommendationOut(_Frozen):
    knob: str
    scope: Literal["system", "tablespace", "device"]
    object: str | None
    current: int
    recommended: int
    near_optimal: tuple[int, int] | None
    decision: Literal["change", "keep"]
    reason: str
    effect: EffectOut | None
    apply_sql: str | None
    rollback_sql: str | None
    requires: Literal["reload", "restart"]


class FamilyOutcome(_Frozen):
    family: str
    status: Literal["done", "skipped", "failed"]
    reason: str
    workload: list[str] = Field(default_factory=list)
    stop_reason: str | None = None
    optimiser: str | None = None
    cache: str | None = Field(default=None, description="how the cache was made cold for this family's probes")


class TargetOut(_Frozen):
    server_version_num: int
    server_version: str
    in_recovery: bool
    system_identifier: str | None
    mode: str
    dsn: str
    sandbox: bool


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
    recommendations: list[RecommendationOut]
    trials: list[Trial]
