"""Your own query's SET statements on a real PostgreSQL 15 standby: ``SET enable_indexscan = off;`` makes a range
over the (physically ordered) aid plan as the bitmap heap scan the seed thread's gp2 query is, in the probe itself,
and the next query, without the SET, plans as the planner likes again (an index scan)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tuner.probes import workload
from tuner.probes.cache import CacheControl
from tuner.probes.coldprobe import ColdProbe
from tuner.target.connection import connect

from tuner.session.runner import recommend
from tuner.settings.config import Config
from tuner.settings.policy import load_policy

from .conftest import Running, sandbox_servers, tuner_env
from .test_per_query_session import _POLICY, _QUERIES

RANGE = "SELECT count(filler) FROM pgbench_accounts WHERE aid BETWEEN 1000 AND 4000"


def _probe(r: Running, *entries: str) -> ColdProbe:
    async def queries() -> list[workload.ProbeQuery]:
        conn = await connect(r.sandbox.dsn("standby"))
        try:
            return await workload.plan(conn, custom=entries, relations=1, pages_fraction=0.12)
        finally:
            await conn.close()

    cache = CacheControl(restart=r.sandbox.restart_standby, os_method="drop_caches")
    return ColdProbe(dsn=r.sandbox.dsn("standby"), queries=r.run(queries()), cache=cache, statement_timeout_s=60,
                     min_cold_read_fraction=0.5, require_bitmap=True)


def test_without_the_set_the_range_is_not_a_bitmap_heap_scan(sandbox15: Running) -> None:
    trial = sandbox15.run(_probe(sandbox15, RANGE)({"effective_io_concurrency": 16}))
    assert trial.status == "rejected" and trial.reason == "custom query 1 did not run as a bitmap heap scan", \
        trial.reason


def test_with_its_set_the_range_runs_as_a_bitmap_heap_scan(sandbox15: Running) -> None:
    trial = sandbox15.run(_probe(sandbox15, f"SET enable_indexscan = off; {RANGE}")({"effective_io_concurrency": 16}))
    assert trial.status == "ok", trial.reason
    # The heap's blocks counted are the bitmap heap scan's own (an index scan's would count the index's as well).
    assert trial.cache and trial.cache.heap_read > 0 and trial.query_ms["custom query 1"] > 0


def test_the_next_query_does_not_inherit_the_set(sandbox15: Running) -> None:
    probe = _probe(sandbox15, f"SET enable_indexscan = off; {RANGE}", RANGE)
    assert [q.as_run for q in probe.queries] == [f"SET enable_indexscan = off; {RANGE}", RANGE]
    trial = sandbox15.run(probe({"effective_io_concurrency": 16}))
    # The first passed the plan check, the second (the same query without the SET) did not.
    assert trial.status == "rejected" and trial.reason == "custom query 2 did not run as a bitmap heap scan", \
        trial.reason


def test_a_setting_the_server_refuses_fails_the_trial_with_its_message(sandbox15: Running) -> None:
    trial = sandbox15.run(_probe(sandbox15, f"SET random_page_cost = -3; {RANGE}")({"effective_io_concurrency": 16}))
    assert trial.status == "failed" and "random_page_cost" in (trial.reason or ""), trial.reason


def test_a_querys_settings_are_put_back_to_the_probes_own_not_reset(sandbox15: Running) -> None:
    q = workload.ProbeQuery("custom query 1", RANGE, None, "custom", plan=None,
                            settings=(("max_parallel_workers_per_gather", "2"), ("work_mem", "64MB")))

    async def run() -> tuple[list[str], list[str]]:
        conn = await connect(sandbox15.sandbox.dsn("standby"))
        try:
            await conn.execute("SET max_parallel_workers_per_gather = 0")  # as the probe's session sets it
            show = "SELECT current_setting('max_parallel_workers_per_gather'), current_setting('work_mem')"
            async with workload.own_settings(conn, q):
                inside = list(await conn.fetchrow(show))
            return inside, list(await conn.fetchrow(show))
        finally:
            await conn.close()

    inside, after = sandbox15.run(run())
    assert inside == ["2", "64MB"] and after == ["0", "4MB"]


def test_a_session_runs_the_query_with_its_set_and_its_report_shows_the_set(base_dir: Path, tmp_path: Path) -> None:
    """Through ``tuner recommend --sandbox``: on 15 the concurrency family rejects a probe whose query is not a
    bitmap heap scan, so every search probe being ok says the SET was in force for the range; the report names the
    query with its SET."""
    (tmp_path / "policy.toml").write_text(_POLICY)
    entries = (f"SET enable_indexscan = off; {RANGE}", _QUERIES[0])
    (tmp_path / "tuner.toml").write_text("[workload]\nqueries = [\n" + "".join(f"  {json.dumps(q)},\n" for q in entries)
                                         + "]\n")
    proc = subprocess.run(
        [sys.executable, "-m", "tuner", "recommend", "--sandbox", "--scale", "2", "--family", "concurrency",
         "--config", str(tmp_path / "tuner.toml"), "--policy", str(tmp_path / "policy.toml"), "--format", "json"],
        capture_output=True, text=True, cwd=tmp_path, timeout=900,
        env=tuner_env(tmp_path / "state", TUNER_SANDBOX__BASE_DIR=str(base_dir)),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    [fam] = doc["families"]
    assert fam["status"] == "done", fam
    assert fam["workload"] == list(entries)
    first, second = (s["text"] for s in fam["statements"])  # shortened to a line where long
    assert first.startswith("SET enable_indexscan = off; SELECT") and entries[0].startswith(first.rstrip("…"))
    assert second == entries[1]
    search = [t for t in doc["trials"] if t["phase"] == "search"]
    assert search and all(t["status"] == "ok" for t in search), [(t["status"], t["reason"]) for t in search]


def test_tuner_check_says_which_query_the_server_refuses_and_shows_its_sets(sandbox15: Running, tmp_path: Path) -> None:
    entry = f"SET random_page_cost = -3; {RANGE}"
    proc = subprocess.run([sys.executable, "-m", "tuner", "check", "--dsn", sandbox15.sandbox.dsn("standby"),
                           "--family", "concurrency", "--format", "json"],
                          env=tuner_env(tmp_path / "state", TUNER_WORKLOAD__QUERIES=json.dumps([entry])),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    [plan] = json.loads(proc.stdout)["families"]
    assert not plan["runs"] and plan["workload"] == [entry], plan
    assert plan["reason"].startswith("custom query 1 fails on the target: -3 is outside the valid range for "
                                     'parameter "random_page_cost"'), plan["reason"]


def test_the_readahead_family_probes_your_queries_on_their_device_and_hands_eic_on(sandbox15: Running,
                                                                                  tmp_path: Path) -> None:
    """Your queries are the read path's one workload: readahead searches with eic on them (a bitmap heap scan, by
    its SET) on the device their table lives on — no generated sequential scan added — and hands eic to its owner."""
    query = "SET enable_indexscan = off; SELECT count(filler) FROM pgbench_accounts WHERE aid BETWEEN 1000 AND 60000"
    cfg = Config.model_validate({"tuner": {"state_dir": str(tmp_path / "state")}, "workload": {"queries": [query]}})
    report = sandbox15.run(recommend(cfg, load_policy("default"), use_sandbox=True,
                                     families=("readahead", "concurrency"), budget=3,
                                     where=sandbox_servers(sandbox15.sandbox)))
    fams = {f.family: f for f in report.families}
    ra, cc = fams["readahead"], fams["concurrency"]
    assert ra.status == "done", (ra.reason, [(t.status, t.reason) for t in report.trials])
    assert len(ra.workload) == 1 and "enable_indexscan" in ra.workload[0] and "BETWEEN 1000 AND 60000" in ra.workload[0]
    ra_trials = [t for t in report.trials if t.family == "readahead" and t.status == "ok"]
    assert ra_trials and all("effective_io_concurrency" in t.config for t in ra_trials)  # searched as a pair
    assert all("seq_scan_ms" not in t.metrics for t in ra_trials), ra_trials[0].metrics
    assert cc.status == "done" and "by the readahead family" in cc.reason, cc.reason
