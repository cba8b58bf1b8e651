"""What ``tuner check`` finds, as data: each safety and capability check, each family's plan, the privileges
missing with the GRANT that fixes each, and the session's estimated size. Rendered by the command line as a
table or JSON; filled by :mod:`tuner.session.check` and the families' ``preflight`` hooks."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Status = Literal["ok", "warn", "fail", "skip"]
LIVE_SESSION = "live session"  # the check that names a running session


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Check(_Frozen):
    """One check: ok (the session can do it), warn (it runs, with less), skip (a part is skipped), fail (the
    session stops: only the interlock fails)."""

    name: str
    status: Status
    detail: str
    fix: str | None = None


class Grant(_Frozen):
    """A privilege the role lacks, what it costs the session, and the statement that fixes it."""

    privilege: str
    needed_for: str
    sql: str


class FamilyPlan(_Frozen):
    family: str
    runs: bool
    reason: str  # why it is skipped, or what it will do
    workload: list[str] = Field(default_factory=list)
    checks: list[Check] = Field(default_factory=list)
    # Seconds one probe of the family's workload took in the check (one read-only run); None: not timed.
    probe_s: float | None = None
    # Its probes start cold (a restart or eviction, a page-cache drop); False: a family that generates its own load.
    cold: bool = True


class ColdStart(_Frozen):
    """What a session does before each cold probe, as the check found it: restart the server (shared buffers
    cannot be evicted here) and empty the OS page cache with drop_caches — and one of each timed on the target."""

    restart: bool
    drop: bool
    seconds: float | None = None  # one restart and one drop, timed on the target; None: not timed


class Estimate(_Frozen):
    probes_low: int
    probes_high: int
    duration_low_s: float | None
    duration_high_s: float | None
    how: str
    restarts_low: int = 0
    restarts_high: int = 0
    drops_low: int = 0
    drops_high: int = 0
    cold_start_s: float | None = None  # one restart + drop as timed on the target (None: not timed)
    duration_s: float | None = None  # the likeliest duration: the geometric mean of low and high


class Preflight(_Frozen):
    target: str
    server_version: str | None
    mode: str | None  # the interlock's clearance (hot_standby, staging_clone); None: refused or not reached
    checks: list[Check]
    families: list[FamilyPlan]
    missing: list[Grant]
    estimate: Estimate | None
    changed_nothing: str = "tuner check ran read-only queries and changed nothing on the server or the host"

    @property
    def refused(self) -> bool:
        return any(c.status == "fail" for c in self.checks)

    @property
    def busy(self) -> bool:
        """Another tuner's session holds the state directory now: a session started now would be refused."""
        return any(c.name == LIVE_SESSION for c in self.checks)
