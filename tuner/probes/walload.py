"""A WAL load point: N concurrent connections inserting R rows per transaction into tuner's scratch table for a
fixed time, with what the server says about where the time went.

* throughput (TPS) and commit latency percentiles, measured by the clients (a transaction is one autocommitted
  ``INSERT … SELECT FROM generate_series(1, R)``: seed 003's shapes are R = 10 and R = 1000);
* wait events of the load backends, sampled every ``sample_interval_s`` from ``pg_stat_activity`` and counted by
  kind — insertion locks (``WALInsert``), the WAL write lock and WAL writes (``WALWrite`` / ``WalWrite``), WAL
  flushes (``WALSync`` / ``WalSync``), buffer mapping (``WALBufMapping``) — names matched case-insensitively, since
  PostgreSQL 17 camel-cases IO wait names (reference/pg-io-facts.md §3.3);
* ``pg_stat_wal`` deltas (14+: records, full-page images, bytes, wal_buffers_full).

The scratch table is TRUNCATEd and a CHECKPOINT taken before each point, so every point starts alike.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

import asyncpg

from tuner.target.connection import connect

SCHEMA = "tuner_scratch"
TABLE = f"{SCHEMA}.wal_probe"
APP = "tuner-wal-load"

# (wait_event_type, wait_event) lower-cased -> kind. Older names (wal_insert, WALWriteLock …) included.
_WAIT_KINDS = {
    ("lwlock", "walinsert"): "insert", ("lwlock", "wal_insert"): "insert", ("lwlocktranche", "wal_insert"): "insert",
    ("lwlock", "walwrite"): "write", ("lwlock", "walwritelock"): "write", ("lwlocknamed", "walwritelock"): "write",
    ("io", "walwrite"): "write", ("io", "walinitwrite"): "write",
    ("io", "walsync"): "sync", ("io", "walinitsync"): "sync",
    ("lwlock", "walbufmapping"): "buf_mapping", ("lwlock", "walbufmappinglock"): "buf_mapping",
}


def wait_kind(event_type: str | None, event: str | None) -> str:
    """The kind of one sampled wait: insert, write, sync, buf_mapping, other, or cpu (not waiting)."""
    if not event_type:
        return "cpu"
    return _WAIT_KINDS.get((event_type.lower(), (event or "").lower()), "other")


@dataclass(frozen=True)
class LoadResult:
    clients: int
    rows_per_tx: int
    duration_s: float
    transactions: int
    errors: int
    latencies_ms: tuple[float, ...] = field(repr=False)
    waits: Mapping[str, int] = field(default_factory=dict)  # kind -> backend samples
    wal: Mapping[str, float] = field(default_factory=dict)  # pg_stat_wal deltas

    @property
    def tps(self) -> float:
        return self.transactions / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def ms_per_tx(self) -> float:
        """Wall time per transaction of the whole system (1000 / TPS): the value the optimiser minimises."""
        return 1000.0 / self.tps if self.tps > 0 else float("inf")

    def latency_pct(self, q: float) -> float | None:
        if not self.latencies_ms:
            return None
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]

    def share(self, kind: str) -> float | None:
        total = sum(self.waits.values())
        return None if total == 0 else self.waits.get(kind, 0) / total

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {"tps": round(self.tps, 2), "clients": self.clients, "rows_per_tx": self.rows_per_tx}
        for q, name in ((0.5, "p50_latency_ms"), (0.95, "p95_latency_ms"), (0.99, "p99_latency_ms")):
            v = self.latency_pct(q)
            if v is not None:
                out[name] = round(v, 3)
        for kind in ("insert", "write", "sync", "buf_mapping"):
            s = self.share(kind)
            if s is not None:
                out[f"wal_{kind}_wait_share"] = round(s, 4)
        for k, v in self.wal.items():
            out[k if k.startswith("wal_") else f"wal_{k}"] = v
        return out


async def prepare(conn: asyncpg.Connection) -> None:
    """Create the scratch schema and table (dropped again by :func:`drop`)."""
    await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
    await conn.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (id bigint, client int, payload text)")


async def drop(conn: asyncpg.Connection) -> None:
    await conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")


async def _wal_stats(conn: asyncpg.Connection) -> dict[str, float] | None:
    try:
        row = await conn.fetchrow("SELECT wal_records, wal_fpi, wal_bytes, wal_buffers_full FROM pg_stat_wal")
    except (asyncpg.UndefinedTableError, asyncpg.UndefinedColumnError):
        return None
    return None if row is None else {k: float(row[k]) for k in row.keys()}


async def run(
    dsn: str | None,
    *,
    clients: int,
    rows_per_tx: int,
    duration_s: float,
    warmup_s: float,
    settings: Mapping[str, str] | None = None,
    sample_interval_s: float = 0.1,
    connect_timeout_s: float = 10.0,
) -> LoadResult:
    """One load point. ``settings`` are SET in every load connection (session knobs)."""
    admin = await connect(dsn, timeout_s=connect_timeout_s)
    conns: list[asyncpg.Connection] = []
    try:
        await admin.execute(f"TRUNCATE {TABLE}")
        await admin.execute("CHECKPOINT")
        for _ in range(clients):
            c = await connect(dsn, timeout_s=connect_timeout_s, server_settings={"application_name": APP})
            conns.append(c)
            for name, value in (settings or {}).items():
                await c.execute(f"SET {name} = '{value}'")
        sql = f"INSERT INTO {TABLE} SELECT g, $1, repeat('w', 100) FROM generate_series(1, {int(rows_per_tx)}) g"
        phase = {"measuring": False, "stop": False}
        latencies: list[float] = []
        errors = [0]

        async def client(i: int, c: asyncpg.Connection) -> int:
            n = 0
            while not phase["stop"]:
                t0 = time.perf_counter()
                try:
                    await c.execute(sql, i)
                except asyncpg.PostgresError:
                    errors[0] += 1
                    continue
                if phase["measuring"] and not phase["stop"]:
                    latencies.append((time.perf_counter() - t0) * 1000)
                    n += 1
            return n

        waits: Counter[str] = Counter()

        async def sampler() -> None:
            while not phase["stop"]:
                if phase["measuring"]:
                    rows = await admin.fetch(
                        "SELECT wait_event_type, wait_event FROM pg_stat_activity "
                        "WHERE application_name = $1 AND state = 'active'", APP)
                    for r in rows:
                        waits[wait_kind(r["wait_event_type"], r["wait_event"])] += 1
                await asyncio.sleep(sample_interval_s)

        tasks = [asyncio.create_task(client(i, c)) for i, c in enumerate(conns)]
        sampling = asyncio.create_task(sampler())
        try:
            await asyncio.sleep(warmup_s)
            before = await _wal_stats(admin)
            phase["measuring"] = True
            t0 = time.perf_counter()
            await asyncio.sleep(duration_s)
            phase["stop"] = True
            elapsed = time.perf_counter() - t0
            counts = await asyncio.gather(*tasks)
            await sampling
            after = await _wal_stats(admin)
        finally:
            phase["stop"] = True
            for t in (*tasks, sampling):
                t.cancel()
        wal = {k: after[k] - before[k] for k in after} if before and after else {}
        return LoadResult(
            clients=clients, rows_per_tx=rows_per_tx, duration_s=elapsed, transactions=sum(counts),
            errors=errors[0], latencies_ms=tuple(latencies), waits=dict(waits), wal=wal,
        )
    finally:
        for c in conns:
            c.terminate()
        await admin.close()


def median_tps(results: list[LoadResult]) -> float:
    return statistics.median(r.tps for r in results)
