"""A WAL load point: N concurrent connections inserting R rows per transaction into tuner's scratch table for a
fixed time, with what the server says about where the time went.

* throughput (TPS) and commit latency percentiles, measured by the clients (a transaction is one autocommitted
  ``INSERT … SELECT FROM generate_series(1, R)``: R = 10 is OLTP-like, R = 1000 bulk loading — the two workloads
  of Heikki Linnakangas's WAL insertion scaling tests, pgsql-hackers "XLogInsert scaling, revisited", 2012-09);
* wait events of the load backends, sampled every ``sample_interval_s`` from ``pg_stat_activity`` and counted by
  kind — insertion locks (``WALInsert``), the WAL write lock and WAL writes (``WALWrite`` / ``WalWrite``), WAL
  flushes (``WALSync`` / ``WalSync``), buffer mapping (``WALBufMapping``) — names matched case-insensitively, since
  PostgreSQL 17 generates wait event names from ``wait_event_names.txt`` and camel-cases the IO ones (``WALSync``
  became ``WalSync``; postgres commit fa88928470, 2023-07-05), while LWLock names kept their case;
* ``pg_stat_wal`` deltas (14+: records, full-page images, bytes, wal_buffers_full) and WAL writes and fsyncs
  (``pg_stat_io`` on 18+, ``pg_stat_wal`` on 14-17), over the whole point including its warm-up, per transaction.
  Backends flush these statistics lazily, so they are read after the load connections have exited.

The scratch table is TRUNCATEd and a CHECKPOINT taken before each point, so every point starts alike.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

import asyncpg

from tuner.errors import ProbeError
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


# Written on the scratch schema when tuner creates it: tuner writes into, and drops, only a schema that carries it.
OWN_MARK = "tuner scratch schema: created and dropped by the WAL probes of tuner"


async def _schema_comment(conn: asyncpg.Connection) -> tuple[bool, str | None]:
    row = await conn.fetchrow("SELECT obj_description(oid, 'pg_namespace') AS comment FROM pg_namespace "
                              "WHERE nspname = $1", SCHEMA)
    return (row is not None, row["comment"] if row is not None else None)


async def prepare(conn: asyncpg.Connection) -> None:
    """Create the scratch schema and table (dropped again by :func:`drop`). A schema of that name that tuner did not
    create is the user's: :class:`ProbeError`, and nothing is written."""
    await check_own(conn)
    async with conn.transaction():  # the schema never exists without tuner's comment
        await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        await conn.execute(f"COMMENT ON SCHEMA {SCHEMA} IS '{OWN_MARK}'")
        await conn.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (id bigint, client int, payload text)")


async def check_own(conn: asyncpg.Connection) -> None:
    """:class:`ProbeError` if a schema named like tuner's scratch schema exists and tuner did not create it."""
    exists, comment = await _schema_comment(conn)
    if exists and comment != OWN_MARK:
        raise ProbeError(f"a schema named {SCHEMA} exists and tuner did not create it: tuner will not write into it "
                         "or drop it", hint=f"rename that schema; tuner creates and drops its own {SCHEMA}")


async def drop(conn: asyncpg.Connection) -> bool:
    """Drop the scratch schema — only tuner's own (see :func:`prepare`). True if it was there and dropped."""
    exists, comment = await _schema_comment(conn)
    if exists and comment == OWN_MARK:
        await conn.execute(f"DROP SCHEMA {SCHEMA} CASCADE")
        return True
    return False


async def _wal_stats(conn: asyncpg.Connection) -> dict[str, float] | None:
    """Cumulative WAL counters: pg_stat_wal (14+) for records, FPIs, bytes, wal_buffers_full; WAL writes and
    fsyncs from pg_stat_io's ``wal`` rows on 18+, where they moved, else from pg_stat_wal (14-17)."""
    try:
        row = await conn.fetchrow("SELECT wal_records, wal_fpi, wal_bytes, wal_buffers_full FROM pg_stat_wal")
    except (asyncpg.UndefinedTableError, asyncpg.UndefinedColumnError):
        return None
    if row is None:
        return None
    out = {k: float(row[k]) for k in row.keys()}
    try:
        io = await conn.fetchrow("SELECT count(*) AS n, coalesce(sum(writes), 0) AS writes, "
                                 "coalesce(sum(fsyncs), 0) AS fsyncs FROM pg_stat_io WHERE object = 'wal'")
        if io is not None and io["n"] == 0:  # 16-17 have pg_stat_io, but no wal rows yet
            io = None
    except (asyncpg.UndefinedTableError, asyncpg.UndefinedColumnError, asyncpg.InvalidTextRepresentationError):
        io = None
    if io is not None:
        out.update(wal_writes=float(io["writes"]), wal_fsyncs=float(io["fsyncs"]))
    else:
        try:
            old = await conn.fetchrow("SELECT wal_write, wal_sync FROM pg_stat_wal")
        except asyncpg.UndefinedColumnError:
            old = None
        if old is not None:
            out.update(wal_writes=float(old["wal_write"]), wal_fsyncs=float(old["wal_sync"]))
    return out


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
    connector: Callable[..., Awaitable[asyncpg.Connection]] | None = None,
) -> LoadResult:
    """One load point. ``settings`` are SET in every load connection (session knobs). ``connector`` opens
    checked connections (the session's guard; keyword ``server_settings``); else ``connect(dsn)``."""

    async def open_one(**server_settings: str) -> asyncpg.Connection:
        if connector is not None:
            return await connector(server_settings=server_settings or None)
        return await connect(dsn, timeout_s=connect_timeout_s, server_settings=server_settings or None)

    admin = await open_one()
    conns: list[asyncpg.Connection] = []
    try:
        await admin.execute(f"TRUNCATE {TABLE}")
        await admin.execute("CHECKPOINT")
        for _ in range(clients):
            c = await open_one(application_name=APP)
            conns.append(c)
            for name, value in (settings or {}).items():
                await c.execute(f"SET {name} = '{value}'")
        sql = f"INSERT INTO {TABLE} SELECT g, $1, repeat('w', 100) FROM generate_series(1, {int(rows_per_tx)}) g"
        phase = {"measuring": False, "stop": False}
        latencies: list[float] = []
        errors = [0]

        committed = [0]  # every transaction, warm-up included (the statistics deltas cover them all)

        async def client(i: int, c: asyncpg.Connection) -> int:
            n = 0
            while not phase["stop"]:
                t0 = time.perf_counter()
                try:
                    await c.execute(sql, i)
                except asyncpg.PostgresError:
                    errors[0] += 1
                    continue
                committed[0] += 1
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

        before = await _wal_stats(admin)
        tasks = [asyncio.create_task(client(i, c)) for i, c in enumerate(conns)]
        sampling = asyncio.create_task(sampler())
        try:
            await asyncio.sleep(warmup_s)
            phase["measuring"] = True
            t0 = time.perf_counter()
            await asyncio.sleep(duration_s)
            phase["stop"] = True
            elapsed = time.perf_counter() - t0
            counts = await asyncio.gather(*tasks)
            await sampling
        finally:
            phase["stop"] = True
            for t in (*tasks, sampling):
                t.cancel()
        # A backend flushes its statistics when it exits: close the load connections, wait until they are gone.
        await asyncio.gather(*(c.close(timeout=5) for c in conns), return_exceptions=True)
        conns.clear()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and await admin.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", APP):
            await asyncio.sleep(0.05)
        after = await _wal_stats(admin)
        wal: dict[str, float] = {}
        if before and after and committed[0]:
            wal = {k: round(after[k] - before[k], 1) for k in after if k in before}
            wal.update({f"{k}_per_tx": round((after[k] - before[k]) / committed[0], 2)
                        for k in ("wal_bytes", "wal_records", "wal_fsyncs") if k in after and k in before})
        return LoadResult(
            clients=clients, rows_per_tx=rows_per_tx, duration_s=elapsed, transactions=sum(counts),
            errors=errors[0], latencies_ms=tuple(latencies), waits=dict(waits), wal=wal,
        )
    finally:
        for c in conns:
            c.terminate()
        await admin.close()
