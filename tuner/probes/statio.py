"""pg_stat_io (16+) around a probe's workload: how many blocks its client backend read and found in shared buffers,
and from 18, how many bytes each read carried — whether read combining happened (PostgreSQL 18 release notes:
pg_stat_io gains read_bytes, write_bytes and extend_bytes, and op_bytes goes, since I/O sizes now vary).

The counters are the server's, for every client backend: on tuner's own sandbox the probe is the only client; on a
staging clone another client's reads would count too, which is why the figures are evidence beside EXPLAIN's
counters and never the objective. A backend's counts reach pg_stat_io when it flushes them — at idle, at once after
``pg_stat_force_next_flush()`` (PostgreSQL 15+, "Monitoring Statistics Functions") — so each mark forces a flush
first.
"""

from __future__ import annotations

from pathlib import Path

import asyncpg

from tuner.fs import sqlfiles

_SQL = str(Path(__file__).parent)
FIRST = 160000  # pg_stat_io is new in 16
BYTES = 180000  # read_bytes is new in 18
POOL = 190000  # 19's I/O worker pool sizes itself


class StatIo:
    """Reads, hits and read bytes over one probe's sessions: :meth:`start` when a session opens, :meth:`stop`
    when its workload is done (it ends the session's transaction)."""

    def __init__(self, server_version_num: int) -> None:
        self.query = None if server_version_num < FIRST else \
            sqlfiles.load(_SQL, "stat_io_180000" if server_version_num >= BYTES else "stat_io_160000")
        self._start: tuple[float, float, float | None] | None = None
        self.reads = self.hits = 0.0
        self.read_bytes: float | None = None
        self.pool = sqlfiles.load(_SQL, "io_workers_running_190000") if server_version_num >= POOL else None
        self.workers_running: float | None = None  # the most I/O workers seen right after a session's workload

    async def _mark(self, conn: asyncpg.Connection) -> tuple[float, float, float | None]:
        await conn.execute("SELECT pg_stat_force_next_flush()")  # flushed when the backend goes idle after it
        row = await conn.fetchrow(self.query)
        assert row is not None
        return float(row["reads"]), float(row["hits"]), None if row["read_bytes"] is None else float(row["read_bytes"])

    async def start(self, conn: asyncpg.Connection) -> None:
        if self.query is not None:
            try:
                self._start = await self._mark(conn)
            except asyncpg.InsufficientPrivilegeError:  # evidence, not the measurement: the trial goes on without
                self.query = self.pool = None

    async def stop(self, conn: asyncpg.Connection) -> None:
        if self.query is None or self._start is None:
            return
        await conn.execute("ROLLBACK")  # the probe's read-only transaction: its counts flush only outside one
        reads, hits, read_bytes = await self._mark(conn)
        if self.pool is not None:
            self.workers_running = max(self.workers_running or 0.0, float(await conn.fetchval(self.pool)))
        self.reads += reads - self._start[0]
        self.hits += hits - self._start[1]
        if read_bytes is not None and self._start[2] is not None:
            self.read_bytes = (self.read_bytes or 0.0) + read_bytes - self._start[2]
        self._start = None

    def metrics(self) -> dict[str, float]:
        """``stat_io_reads``, ``stat_io_hits``, (18+) ``stat_io_bytes_per_read`` and (19+) ``io_workers_running``;
        empty before 16."""
        if self.query is None:
            return {}
        out = {"stat_io_reads": self.reads, "stat_io_hits": self.hits}
        if self.read_bytes is not None and self.reads > 0:
            out["stat_io_bytes_per_read"] = round(self.read_bytes / self.reads, 1)
        if self.workers_running is not None:
            out["io_workers_running"] = self.workers_running
        return out
