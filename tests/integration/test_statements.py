"""[workload] from = "pg_stat_statements" on a real PostgreSQL 15 primary + hot standby with pg_stat_statements in
shared_preload_libraries: a known mix run on the standby is ranked as its blocks read say, the statements that
cannot be replayed are left out with one sentence, a write read from the primary (stats_dsn) is left out as a write,
and a short session replays the kept statements (parameters filled, plans checked) as the read path's workload."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tuner.emit import query_lines
from tuner.emit.json import to_json as render_json
from tuner.probes import statements
from tuner.sandbox import Binaries
from tuner.session.runner import recommend
from tuner.settings.config import Config, WorkloadConfig
from tuner.settings.policy import load_policy
from tuner.target.connection import connect

from .conftest import Running, _own_dir, execute, running, sandbox_servers, tuner_env
from .test_check import recipe
from .test_per_query_session import _POLICY

BIG = "SELECT count(ctid) FROM pgbench_accounts WHERE abalance BETWEEN {lo} AND {hi}"  # a sparse bitmap heap scan
SMALL = "SELECT count(ctid) FROM pgbench_accounts WHERE bid = 1 AND abalance BETWEEN 3000000 AND 3020000"
INDEX = "SELECT filler FROM pgbench_accounts WHERE aid = 4242"  # an index scan: no read-path knob acts on it
NO_IO = "SELECT 40 + 2"


def _with_statements(binaries: Binaries, *extra: str) -> Iterator[Running]:
    """A small sandbox whose servers load pg_stat_statements, the extension created on the primary (it
    replicates), and the mix (with ``extra``) run on the standby from cold shared buffers."""
    for path in _own_dir("tuner-sbstat-"):
        for r in running(path, scale=1, binaries=binaries,
                         settings={"shared_preload_libraries": "pg_stat_statements", "track_io_timing": "on"}):
            sb = r.sandbox
            r.run(execute(sb.dsn("primary"), "CREATE EXTENSION pg_stat_statements"))
            r.run(_replayed_to_standby(sb.dsn("primary"), sb.dsn("standby")))
            r.run(sb.restart_standby())  # cold shared buffers: the mix reads from the OS
            r.run(execute(sb.dsn("standby"), "SELECT pg_stat_statements_reset()",
                          *[BIG.format(lo=lo, hi=lo + 100000) for lo in (0, 1000000, 2000000)],
                          SMALL, INDEX, NO_IO, *extra))
            r.run(execute(sb.dsn("primary"), "SELECT pg_stat_statements_reset()",
                          "UPDATE pgbench_branches SET bbalance = bbalance + 1 WHERE bid = 1",
                          BIG.format(lo=0, hi=100000)))
            yield r


@pytest.fixture(scope="module")
def stats15(pg15: Binaries) -> Iterator[Running]:
    yield from _with_statements(pg15)


@pytest.fixture(scope="module")
def stats17(provided: Callable[[int], Binaries]) -> Iterator[Running]:
    """PostgreSQL 17: shared_blk_read_time, EXPLAIN (GENERIC_PLAN), and sequential scans on read streams."""
    yield from _with_statements(provided(17), "SELECT max(filler) FROM pgbench_accounts")


async def _replayed_to_standby(primary: str, standby: str) -> None:
    conn = await connect(primary)
    try:
        lsn = await conn.fetchval("SELECT pg_current_wal_lsn()")
    finally:
        await conn.close()
    conn = await connect(standby)
    try:
        for _ in range(600):
            if await conn.fetchval("SELECT pg_last_wal_replay_lsn() >= $1", lsn):
                return
            await asyncio.sleep(0.1)
        raise AssertionError("the standby did not replay CREATE EXTENSION")
    finally:
        await conn.close()


def _blocks(running: Running, dsn: str) -> dict[int, int]:
    async def read() -> dict[int, int]:
        conn = await connect(dsn)
        try:
            rows = await conn.fetch("SELECT queryid, sum(shared_blks_read)::bigint AS b FROM pg_stat_statements "
                                    "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                                    "GROUP BY queryid")
            return {r["queryid"]: r["b"] for r in rows}
        finally:
            await conn.close()
    return running.run(read())


def _show(running: Running, tmp_path: Path, *args: str, **env: str) -> dict[str, Any]:
    dsn = env.pop("TUNER_TARGET__DSN", running.sandbox.dsn("standby"))
    proc = subprocess.run([sys.executable, "-m", "tuner", "workload", "show", "--dsn", dsn, "--format", "json", *args],
                          env=tuner_env(tmp_path / "state", **env), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_workload_show_ranks_the_standbys_statements_as_their_blocks_read_say(stats15: Running, tmp_path: Path) -> None:
    shown = _show(stats15, tmp_path, "--statements", "5", "--share", "1")
    rows = {" ".join(r["text"].split()): r for r in shown["statements"]}
    big = rows["SELECT count(ctid) FROM pgbench_accounts WHERE abalance BETWEEN $1 AND $2"]
    small = rows["SELECT count(ctid) FROM pgbench_accounts WHERE bid = $1 AND abalance BETWEEN $2 AND $3"]
    blocks = _blocks(stats15, stats15.sandbox.dsn("standby"))
    assert big["blocks_read"] == blocks[big["queryid"]] > small["blocks_read"] == blocks[small["queryid"]] > 0
    assert shown["ranked_by"] == "read_time"  # track_io_timing is on
    assert big["rank"] < small["rank"]
    # Both replayed, filled from the statistics, weighted by their shares of the read I/O.
    assert big["replayed"] and small["replayed"], (big, small)
    assert "$" not in big["sql"] and "BETWEEN" in big["sql"]
    assert big["weight"] > small["weight"] and abs(big["weight"] + small["weight"] - 1) < 1e-6
    assert abs(shown["covered"] - big["share"] - small["share"]) < 1e-3
    # Left out, each with one sentence: the index scan (no read-path knob acts on it), the statement without I/O.
    index = rows["SELECT filler FROM pgbench_accounts WHERE aid = $1"]
    assert not index["replayed"] and index["reason"].startswith("its plan has no scan the read-path settings act on")
    no_io = rows["SELECT $1 + $2"]
    assert not no_io["replayed"] and no_io["reason"].startswith("no read I/O")
    # tuner's own queries of the system catalogs (the interlock's, the ranking's) are not the operator's workload.
    assert not any("pg_catalog" in t or "pg_settings" in t or "pg_stat_statements s" in t for t in rows), list(rows)


def test_a_write_read_on_the_primary_over_stats_dsn_is_left_out_as_a_write(stats15: Running, tmp_path: Path) -> None:
    shown = _show(stats15, tmp_path, TUNER_WORKLOAD__STATS_DSN=stats15.sandbox.dsn("primary"))
    assert shown["read_from"] != "the target"
    rows = {" ".join(r["text"].split()): r for r in shown["statements"]}
    write = rows["UPDATE pgbench_branches SET bbalance = bbalance + $1 WHERE bid = $2"]
    assert not write["replayed"] and write["reason"] == "writes"
    # The primary's own read is replayed on the standby.
    assert rows["SELECT count(ctid) FROM pgbench_accounts WHERE abalance BETWEEN $1 AND $2"]["replayed"]


def test_without_the_extension_the_reason_and_the_fix_are_one_sentence(stats15: Running, tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "tuner", "workload", "show", "--dsn",
                           stats15.sandbox.dsn("standby").replace("@/postgres?", "@/template1?")],
                          env=tuner_env(tmp_path / "state"), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "pg_stat_statements is not installed in database template1" in proc.stderr
    assert "CREATE EXTENSION pg_stat_statements" in proc.stderr and "Traceback" not in proc.stderr


def test_a_session_replays_the_statements_as_the_read_paths_workload(stats15: Running, tmp_path: Path) -> None:
    cfg = Config.model_validate({"tuner": {"state_dir": str(tmp_path / "state")},
                                 "workload": {"from": "pg_stat_statements", "statements": 2, "share": 1.0}})
    assert cfg.workload.queries_from == "pg_stat_statements"
    report = stats15.run(recommend(cfg, load_policy("default"), use_sandbox=True, families=("concurrency",),
                                   budget=3, where=sandbox_servers(stats15.sandbox, own_device=False)))
    [fam] = report.families
    assert fam.status == "done", (fam.reason, fam.cache, [(t.status, t.reason) for t in report.trials])
    assert report.workload == "pg_stat_statements"
    # The two replayable statements, filled: no $n left, and every probe measured them cold.
    assert len(fam.workload) == 2 and not any("$" in sql for sql in fam.workload), fam.workload
    assert all(t.status == "ok" for t in report.trials if t.phase == "search"), [t.reason for t in report.trials]
    assert len(report.trials) >= 3
    # The report names what it replayed (fingerprint, share) and what it left out, each with its reason.
    assert {s.queryid for s in fam.statements} and all(s.queryid and s.share for s in fam.statements), fam.statements
    reasons = {" ".join(lo.text.split()): lo.reason for lo in report.left_out}
    assert reasons["SELECT $1 + $2"].startswith("no read I/O"), reasons
    assert reasons["SELECT filler FROM pgbench_accounts WHERE aid = $1"].startswith("beyond the budget of 2"), reasons


def test_the_selection_keeps_the_shares_and_the_normalised_text(stats15: Running) -> None:
    async def select() -> statements.Selection:
        conn = await connect(stats15.sandbox.dsn("standby"))
        try:
            return await statements.select(conn, WorkloadConfig(statements=1, share=1.0), server_version_num=150000,
                                           statement_timeout_s=30)
        finally:
            await conn.close()
    sel = stats15.run(select())
    [q] = sel.queries
    assert q.name == f"q{q.queryid}" and q.weight == 1.0 and q.kind == "statement" and q.plan is None
    assert q.text is not None and "$1" in q.text and q.share is not None and 0 < q.share <= 1
    assert q.relation == "pgbench_accounts" and q.scans == ("Bitmap Heap Scan",)
    small = [lo for lo in sel.left_out if "bid = $1" in lo.text]
    assert small and small[0].reason.startswith("beyond the budget of 1 statement")


def test_tuner_check_says_the_extension_is_readable_and_shows_the_replayed_statements(
        stats15: Running, tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "tuner", "check", "--dsn", stats15.sandbox.dsn("standby"),
                           "--family", "concurrency", "--format", "json"],
                          env=tuner_env(tmp_path / "state", TUNER_WORKLOAD__FROM="pg_stat_statements",
                                        TUNER_WORKLOAD__SHARE="1"),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout)
    [check] = [c for c in found["checks"] if c["name"] == "pg_stat_statements"]
    assert check["status"] == "ok" and "ranked by read time" in check["detail"], check
    [plan] = found["families"]
    assert plan["runs"] and len(plan["workload"]) == 2 and not any("$" in q for q in plan["workload"]), plan


def test_the_readahead_family_probes_the_same_statements_and_hands_eic_on(stats15: Running, tmp_path: Path) -> None:
    cfg = Config.model_validate({"tuner": {"state_dir": str(tmp_path / "state")},
                                 "workload": {"from": "pg_stat_statements", "statements": 2, "share": 1.0}})
    report = stats15.run(recommend(cfg, load_policy("default"), use_sandbox=True,
                                   families=("readahead", "concurrency"), budget=3,
                                   where=sandbox_servers(stats15.sandbox)))
    fams = {f.family: f for f in report.families}
    ra, cc = fams["readahead"], fams["concurrency"]
    assert ra.status == "done", (ra.reason, [(t.status, t.reason) for t in report.trials])
    # The statements on the sandbox's own device, effective_io_concurrency searched with readahead on them (both
    # are bitmap heap scans) and handed to its owner, which has nothing more to probe.
    assert len(ra.workload) == 2 and not any("$" in sql for sql in ra.workload), ra.workload
    assert cc.status == "done" and "by the readahead family" in cc.reason, cc.reason
    assert {r.knob for r in report.recommendations} >= {"read_ahead_kb", "effective_io_concurrency"}


def test_on_17_read_time_is_shared_blk_read_time_and_a_sequential_scan_is_replayed(
        stats17: Running, tmp_path: Path) -> None:
    shown = _show(stats17, tmp_path, "--statements", "5", "--share", "1")
    assert shown["ranked_by"] == "read_time"  # pg_stat_statements 1.11's shared_blk_read_time, read
    rows = {" ".join(r["text"].split()): r for r in shown["statements"]}
    seq = rows["SELECT max(filler) FROM pgbench_accounts"]
    assert seq["replayed"] and seq["read_time_ms"] > 0, seq["reason"]
    # GENERIC_PLAN (16+): the filled range plans with the generic plan's bitmap heap scan.
    big = rows["SELECT count(ctid) FROM pgbench_accounts WHERE abalance BETWEEN $1 AND $2"]
    assert big["replayed"] and "$" not in big["sql"], big["reason"]
    assert rows["SELECT filler FROM pgbench_accounts WHERE aid = $1"]["reason"].startswith("its plan has no scan")


def test_the_least_privilege_role_needs_pg_read_all_stats_to_see_the_applications_statements(
        stats15: Running, tmp_path: Path) -> None:
    sb = stats15.sandbox
    stats15.run(execute(sb.dsn("primary"), *recipe("tuner on a hot standby")))
    stats15.run(_replayed_to_standby(sb.dsn("primary"), sb.dsn("standby")))
    as_tuner = sb.dsn("standby").replace("postgres@", "tuner@")
    before = _show(stats15, tmp_path, "--statements", "5", "--share", "1", TUNER_TARGET__DSN=as_tuner)
    # The mix ran as postgres: to this role its text is hidden, one group left out with the grant that fixes it.
    assert not any(r["replayed"] for r in before["statements"]), before["statements"]
    assert any(r["queryid"] is None and "pg_read_all_stats" in r["reason"] for r in before["statements"])
    stats15.run(execute(sb.dsn("primary"), *recipe("tuner replaying pg_stat_statements, in addition to the grants above")))
    stats15.run(_replayed_to_standby(sb.dsn("primary"), sb.dsn("standby")))
    after = _show(stats15, tmp_path, "--statements", "5", "--share", "1", TUNER_TARGET__DSN=as_tuner)
    rows = {" ".join(r["text"].split()): r for r in after["statements"]}
    assert rows["SELECT count(ctid) FROM pgbench_accounts WHERE abalance BETWEEN $1 AND $2"]["replayed"]


def test_on_17_a_session_replays_a_bitmap_and_a_sequential_statement(stats17: Running, tmp_path: Path) -> None:
    cfg = Config.model_validate({"tuner": {"state_dir": str(tmp_path / "state")},
                                 "workload": {"from": "pg_stat_statements", "statements": 2, "share": 1.0}})
    report = stats17.run(recommend(cfg, load_policy("default"), use_sandbox=True, families=("concurrency",),
                                   budget=3, where=sandbox_servers(stats17.sandbox, own_device=False)))
    [fam] = report.families
    assert fam.status == "done", (fam.reason, [(t.status, t.reason) for t in report.trials])
    # The two that read the most, as they are: no generated sequential scan is added to the operator's statements.
    assert len(fam.workload) == 2 and "max(filler)" in " ".join(fam.workload), fam.workload
    assert all(t.status == "ok" for t in report.trials if t.phase == "search"), [t.reason for t in report.trials]


def test_a_confirmed_session_on_the_statements_reports_each_statements_interval(
        stats15: Running, tmp_path: Path) -> None:
    (tmp_path / "quick.toml").write_text(_POLICY)
    cfg = Config.model_validate({"tuner": {"state_dir": str(tmp_path / "state")},
                                 "workload": {"from": "pg_stat_statements", "statements": 2, "share": 1.0}})
    report = stats15.run(recommend(cfg, load_policy(str(tmp_path / "quick.toml")), use_sandbox=True,
                                   families=("concurrency",), where=sandbox_servers(stats15.sandbox, own_device=False)))
    [fam] = report.families
    assert fam.status == "done", (fam.reason, [(t.status, t.reason) for t in report.trials])
    named = {s.name: s for s in fam.statements}
    assert len(named) == 2 and all(s.queryid and s.share and "$" in s.text for s in named.values()), named
    # Every ok probe timed each replayed statement under the name the report gives it.
    ok = [t for t in report.trials if t.status == "ok"]
    assert ok and all(set(t.query_ms) == set(named) for t in ok), [t.query_ms for t in ok]
    confirm = [t for t in ok if t.phase == "confirm"]
    [rec] = report.recommendations
    assert rec.current == 1 and rec.effect is not None and rec.effect.n_pairs == 4, rec
    # One line per replayed statement: its fingerprint, its share of the read I/O, today vs the recommendation, an
    # interval of its own.
    [group] = query_lines.groups(report)
    assert sorted(line.name for line in group.lines) == sorted(named)
    for line in group.lines:
        s = named[line.name]
        assert line.queryid == s.queryid and line.share == s.share and line.share_of == "read I/O"
        lo, hi = line.ci95
        assert lo <= line.improvement <= hi and line.n_pairs == 4
        times = sorted(t.query_ms[line.name] for t in confirm if t.arm == "baseline")
        assert times[0] <= line.today_ms <= times[-1] and line.recommended_ms > 0
        assert f"queryid {s.queryid}" in query_lines.sentence(line)
    doc = json.loads(render_json(report))
    [jgroup] = doc["per_query"]
    assert {q["queryid"] for q in jgroup["queries"]} == {s.queryid for s in named.values()}
    # The left-out statements, each with its reason.
    reasons = {" ".join(lo.text.split()): lo.reason for lo in report.left_out}
    assert reasons["SELECT $1 + $2"].startswith("no read I/O"), reasons
    assert reasons["SELECT filler FROM pgbench_accounts WHERE aid = $1"].startswith("beyond the budget of 2"), reasons
    assert any("SELECT $1 + $2" in line for line in doc["left_out_lines"]), doc["left_out_lines"]
