"""What the WAL family owns of the policy and the report: its load (the policy's ``[wal]`` table) and its
throughput and contention measurements (the report's ``wal_contention``, ``wal_scaling`` and ``wal_summary``)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from tuner.settings.config import Section
from tuner.emit.terminal import TextTable
from tuner.report.model import ReportSection, _Frozen
from tuner.settings.policy import VALUES_MAX


class Policy(Section):
    """The wal family's load: concurrent autocommitted INSERTs into tuner's scratch table (10 rows per transaction,
    OLTP-like, or 1000, bulk loading: see ``tuner.probes.walload``)."""

    clients: int = Field(default=8, ge=1, le=256, description="connections of the search and confirmation probes")
    rows_per_tx: int = Field(default=10, ge=1, le=100000, description="rows per transaction of those probes")
    duration_s: float = Field(default=2.0, gt=0, le=600, description="measured time per probe")
    warmup_s: float = Field(default=0.5, ge=0, le=600, description="load before the measurement starts")
    scaling_clients: tuple[int, ...] = Field(default=(1, 2, 4, 8, 16), max_length=VALUES_MAX,
                                             description="client counts of the curve (1 to 256 each)")
    scaling_rows_per_tx: tuple[int, ...] = Field(default=(10, 1000), max_length=VALUES_MAX,
                                                 description="transaction shapes of the curve (1 to 100000 each)")
    wal_compression: tuple[str, ...] = Field(
        default=("lz4", "zstd", "pglz"), max_length=VALUES_MAX,
        description="screened against today's value: the first this build offers",
    )
    wal_buffers: tuple[int, ...] = Field(
        default=(8192,), max_length=VALUES_MAX,
        description="wal_buffers (8 kB pages) screened when restarts are allowed: the first not in force",
    )

    @model_validator(mode="after")
    def _sane(self) -> Policy:
        if not self.scaling_clients or not self.scaling_rows_per_tx:
            raise ValueError("scaling_clients and scaling_rows_per_tx need at least one value each")
        if not all(1 <= c <= 256 for c in self.scaling_clients):
            raise ValueError("scaling_clients must each be 1 to 256")
        if not all(1 <= r <= 100000 for r in self.scaling_rows_per_tx):
            raise ValueError("scaling_rows_per_tx must each be 1 to 100000")
        if not all(-1 <= b <= 262143 for b in self.wal_buffers):
            raise ValueError("wal_buffers must each be -1 to 262143 (8 kB pages, PostgreSQL's range)")
        return self


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
    wal_fsyncs_per_tx: float | None = Field(default=None, description="WAL fsyncs per transaction over the point "
                                            "(pg_stat_wal / pg_stat_io): 1 / commits per flush; None before #55")


class WalScalingOut(_Frozen):
    clients: int
    rows_per_tx: int
    tps_current: float | None
    tps_recommended: float | None = Field(description="None when nothing was recommended to change")
    readings: int = Field(default=1, ge=1, description="load runs behind each TPS value: one, not repeated")
    reading_s: float | None = Field(default=None, description="measured seconds of each run (after its warm-up); "
                                    "None in reports written before it was carried")
    fsyncs_per_tx_recommended: float | None = Field(default=None, description="WAL fsyncs per transaction under "
                                                    "the recommended settings (None when not measured)")


class Report(ReportSection):
    """TPS and where load backends waited, per client count and transaction shape, and what that implies."""

    wal_contention: list[WalContentionOut] = Field(default_factory=list)
    wal_scaling: list[WalScalingOut] = Field(default_factory=list)
    wal_summary: str | None = Field(default=None, description="what the insertion-lock evidence implies")

    def table(self) -> list[Any]:
        out: list[Any] = []
        if self.wal_scaling:
            def pct(v: float | None) -> str:
                return "-" if v is None else f"{v:.0%}"

            # Numbers never wrap; the headers may, at their spaces ("TPS" over "recommended").
            columns = ("clients", "rows/tx", "TPS today", "TPS recommended", "insert locks", "WAL write", "WAL sync")
            rows = tuple((str(sc.clients), str(sc.rows_per_tx), f"{sc.tps_current:.0f}" if sc.tps_current else "-",
                          f"{sc.tps_recommended:.0f}" if sc.tps_recommended else "-", pct(co.wal_insert_wait_share),
                          pct(co.wal_write_wait_share), pct(co.wal_sync_wait_share))
                         for sc, co in zip(self.wal_scaling, self.wal_contention, strict=False))
            out.append(TextTable("WAL scaling: TPS and where load backends waited (today's settings)", columns, rows,
                                 wraps=columns, right=True))
        if self.wal_summary:
            out.append(self.wal_summary)
        return out
