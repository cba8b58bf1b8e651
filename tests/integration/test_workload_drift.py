"""Issue #56 item 5 on a real server: PostgreSQL 15 with pg_stat_statements in shared_preload_libraries. Mix A is
run and observed; after pg_stat_statements_reset() a very different mix B is run and observed — the comparison
reports a workload drift that re-probes; mix B once more after a reset: no drift."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tuner.daemon.drift import action, compare
from tuner.daemon.service import Daemon
from tuner.daemon.watch import follows_statements
from tuner.sandbox.binaries import Binaries
from tuner.settings.config_load import load_config
from tuner.target.connection import connect
from tuner.target.fingerprint import observe

from .conftest import StoreServer

# Tables far larger than shared_buffers (1 MB): every scan reads its blocks into shared buffers again, so each
# statement's shared_blks_read grows with every run.
_TABLES = ("a1", "a2", "b1", "b2", "b3")
_MIX_A = ("SELECT count(*) FROM a1 WHERE x > 10", "SELECT count(*) FROM a2 WHERE x < 500",
          "SELECT max(x) FROM a1")
_MIX_B = ("SELECT count(*) FROM b1 WHERE x > 10", "SELECT sum(x) FROM b2", "SELECT min(x) FROM b3",
          "SELECT count(*) FROM b2 WHERE x % 7 = 0")


@pytest.fixture(scope="module")
def server(pg15: Binaries) -> Iterator[StoreServer]:
    srv = StoreServer(pg15)
    try:
        srv.stop()
        with (srv.data / "postgresql.conf").open("a") as fh:
            fh.write("shared_preload_libraries = 'pg_stat_statements'\nshared_buffers = 1MB\n")
        srv.start()
        asyncio.run(_sql(srv.url("postgres"), "CREATE EXTENSION pg_stat_statements", *(
            f"CREATE TABLE {t} AS SELECT g AS x, repeat('y', 200) AS filler FROM generate_series(1, 20000) g"
            for t in _TABLES)))
        yield srv
    finally:
        srv.remove()


async def _sql(dsn: str, *statements: str) -> None:
    conn = await connect(dsn)
    try:
        for s in statements:
            await conn.execute(s)
    finally:
        await conn.close()


def _run(server: StoreServer, mix: tuple[str, ...], times: int = 3) -> dict[str, Any]:
    """Reset pg_stat_statements, run ``mix`` ``times`` over, and observe the server with its statements."""
    dsn = server.url("postgres")

    async def go() -> dict[str, Any]:
        await _sql(dsn, "SELECT pg_stat_statements_reset()", *(mix * times))
        return await observe(dsn, timeout_s=30, statements=True)

    return asyncio.run(go())


def test_a_different_mix_is_a_workload_drift_and_the_same_mix_is_none(server: StoreServer) -> None:
    a = _run(server, _MIX_A)
    top_a = a["statements"]["top"]
    # The mix's three scans read nearly everything; the catalogue reads of the connections (the drift check's own
    # among them) make up the rest of the top 5.
    big_a = {q for q, share in top_a.items() if share > 0.2}
    assert len(big_a) == 3 and a["statements"]["blocks_read"] > 0, a["statements"]
    assert sum(top_a[q] for q in big_a) > 0.9 and sum(top_a.values()) <= 1.0

    b = _run(server, _MIX_B)
    big_b = {q for q, share in b["statements"]["top"].items() if share > 0.1}
    assert len(big_b) == 4 and not big_b & big_a, b["statements"]
    [change] = compare(a, b)
    assert change.kind == "workload"
    said = re.fullmatch(r"workload changed: (\d) of the top 5 statements are new \(the read I/O shares moved by "
                        r"([01]\.\d\d), more than 0\.3\)", change.sentence())
    assert said and int(said[1]) >= 4 and float(said[2]) > 0.9, change.sentence()
    act = action([change], {})
    assert act.kind == "reprobe" and act.families == ("concurrency", "readahead")
    assert "workload changed" in act.reason

    again = _run(server, _MIX_B)
    assert compare(b, again) == [], compare(b, again)


def test_without_statements_asked_for_or_without_the_extension_nothing_is_read(server: StoreServer) -> None:
    dsn = server.url("postgres")
    assert "statements" not in asyncio.run(observe(dsn, timeout_s=30))
    plain = server.url("tunerstore")  # a database without CREATE EXTENSION: no view to read
    assert asyncio.run(observe(plain, timeout_s=30, statements=True))["statements"] is None


def test_the_daemons_drift_check_records_a_workload_change_and_queues_a_reprobe(server: StoreServer,
                                                                                 tmp_path: Path) -> None:
    """The daemon's own drift check (DriftWatch, with its SQLite store) on a target that follows its statements:
    the first check takes the baseline, a new mix is one drift event whose action re-probes, and the run is queued."""
    state = tmp_path / "state"
    state.mkdir()
    (tmp_path / "tuner.toml").write_text(f'[tuner]\nstate_dir = "{state}"\nfamilies = ["concurrency"]\n'
                                         f'[target]\ndsn = "{server.url("postgres")}"\n')
    d = Daemon(load_config(tmp_path / "tuner.toml", environ={}))
    [target] = d.targets.values()
    # [workload] from = "pg_stat_statements" comes with item 1 of issue #56 (WorkloadConfig is not edited here): the
    # field set as the drift check reads it (tuner.daemon.watch.follows_statements).
    target.cfg = target.cfg.model_copy(update={"workload": target.cfg.workload.model_copy(
        update={"queries_from": "pg_stat_statements"})})
    assert follows_statements(target.cfg)
    dsn = server.url("postgres")

    async def go() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        await _sql(dsn, "SELECT pg_stat_statements_reset()", *(_MIX_A * 3))
        await d.watch.check(target.name)  # the baseline
        await d.watch.check(target.name)  # the same workload: nothing
        await _sql(dsn, "SELECT pg_stat_statements_reset()", *(_MIX_B * 3))
        await d.watch.check(target.name)
        async with d.worker.store() as db:
            return await db.drift_events.recent(), await db.runs.find(d.state.owner, target=target.name)

    events, runs = asyncio.run(go())
    [event] = events
    assert list(event["changes"]) == ["workload:top"], event
    assert event["action"].startswith("reprobe: Re-probe concurrency, readahead, as the statements that "
                                        "read the most"), event
    assert "workload changed: " in event["action"]
    [run] = runs
    assert run["kind"] == "reprobe" and run["reason"].startswith("drift: ") and run["status"] == "queued", run
    assert list(run["families"]) == ["concurrency"], run  # the target's, of the two that read the workload
