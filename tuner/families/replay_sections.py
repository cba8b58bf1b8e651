"""What the replay family owns of the policy and the report: its WAL stream (the policy's ``[replay]`` table)
and the standby's catch-up rates (the report's ``replay``)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from tuner.settings.config import Section
from tuner.report.model import ReportSection, _Frozen
from tuner.probes.replayload import ReplayPointOut


class Policy(Section):
    """The replay family's WAL stream: one-row updates of ``pages`` heap pages of a scratch table larger than the
    standby's shared buffers, in a fixed random order, replayed by the standby from a cold cache."""

    pages: int = Field(default=8000, ge=100, le=1_000_000,
                       description="heap pages the stream updates, one row each (~140 bytes of WAL per page)")
    table_shared_buffers: float = Field(
        default=2.0, ge=1.1, le=64, description="the scratch table's size, as a multiple of the standby's shared_buffers")
    filler_shared_buffers: float = Field(
        default=3.0, ge=1.0, le=64,
        description="the table read on the standby before each probe to push the stream's pages out of its shared "
        "buffers, as a multiple of shared_buffers")
    max_scratch_mb: int = Field(default=4096, ge=16, le=1_048_576,
                                description="the family is skipped when the scratch table and the filler need more")
    catch_up_timeout_s: float = Field(default=120, gt=0, le=3600,
                                      description="a probe fails when replay has not caught up by then")


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


class Report(ReportSection):
    """The replay family's catch-up rates."""

    replay: ReplayOut | None = Field(default=None, description="the replay family's catch-up rates")

    def table(self) -> list[Any]:
        r = self.replay
        if r is None:
            return []

        def rate(v: float | None) -> str:
            return "-" if v is None else f"{v:.2f}"

        return [f"replay: {rate(r.mb_per_s_current)} MB/s of WAL at maintenance_io_concurrency = "
                f"{r.maintenance_io_concurrency_current} today, {rate(r.mb_per_s_recommended)} MB/s at "
                f"{r.maintenance_io_concurrency_recommended} (recommended); {r.pages} random pages per "
                f"{rate(r.wal_mb)} MB stream; recovery_prefetch = {r.recovery_prefetch}"]
