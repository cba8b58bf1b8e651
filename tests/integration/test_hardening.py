"""Findings of the hardening review, each against a real staging clone: a user's own schema named like tuner's
scratch schema is left alone, a custom workload query cannot write, and a run that measured nothing says so."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tuner.target.connection import connect

from .conftest import Clone, clone_env

FAULTS = Path(__file__).parent.parent / "fixtures" / "policies" / "good" / "faults.toml"


_env = clone_env


def _sql(clone: Clone, *statements: str) -> list[object]:
    async def run() -> list[object]:
        conn = await connect(clone.dsn)
        try:
            return [await conn.fetchval(s) for s in statements]
        finally:
            await conn.close()

    return clone.running.run(run())


def _recommend(clone: Clone, tmp_path: Path, family: str, **env: str) -> subprocess.CompletedProcess[str]:
    restart = env.pop("restart", "yes") == "yes"
    return subprocess.run(
        [sys.executable, "-m", "tuner", "recommend", "--dsn", clone.dsn, "--family", family, "--policy", str(FAULTS),
         "--format", "json"], capture_output=True, text=True, cwd=tmp_path, timeout=600,
        env=_env(clone, tmp_path / "state", restart=restart, **env))


def test_a_schema_named_like_the_scratch_schema_that_tuner_did_not_create_is_left_alone(
    clone: Clone, tmp_path: Path,
) -> None:
    _sql(clone, "CREATE SCHEMA tuner_scratch", "CREATE TABLE tuner_scratch.keep (x int)",
         "INSERT INTO tuner_scratch.keep VALUES (42)")
    try:
        out = _recommend(clone, tmp_path, "wal")
        assert out.returncode == 0, out.stderr[-2000:]
        [fam] = json.loads(out.stdout)["families"]
        assert fam["status"] == "skipped" and "tuner did not create it" in fam["reason"], fam
        assert _sql(clone, "SELECT x FROM tuner_scratch.keep") == [42]
    finally:
        _sql(clone, "DROP SCHEMA tuner_scratch CASCADE")


def test_a_custom_workload_query_cannot_write(clone: Clone, tmp_path: Path) -> None:
    [rows] = _sql(clone, "SELECT count(*) FROM events")
    writer = ("WITH d AS (DELETE FROM events WHERE k BETWEEN 0 AND 5000 RETURNING id) "
              "SELECT count(*) FROM d")
    out = _recommend(clone, tmp_path, "concurrency", TUNER_WORKLOAD__QUERIES=json.dumps([writer]))
    assert _sql(clone, "SELECT count(*) FROM events") == [rows]
    doc = json.loads(out.stdout)
    assert doc["trials"] and all(t["status"] == "failed" and "read-only transaction" in t["reason"]
                                 for t in doc["trials"]), [(t["status"], t["reason"]) for t in doc["trials"]]
    assert out.returncode == 4 and "nothing could be measured" in out.stderr


def test_a_readahead_run_whose_every_probe_was_rejected_says_nothing_was_measured(clone: Clone, tmp_path: Path) -> None:
    # No restart command: shared buffers cannot be emptied, and the table is in them already.
    _sql(clone, "CREATE EXTENSION IF NOT EXISTS pg_prewarm", "SELECT pg_prewarm('events')",
         "SELECT pg_prewarm('events_k')")
    try:
        out = _recommend(clone, tmp_path, "readahead", restart="no")
        assert out.returncode == 4, out.stderr[-2000:]
        doc = json.loads(out.stdout)
        [fam] = doc["families"]
        assert fam["status"] == "failed", fam
        assert "nothing could be measured" in fam["reason"] and "restart_command" in fam["reason"]
        assert {t["status"] for t in doc["trials"]} == {"rejected"}
        assert clone.disk.read_ahead_kb() == 0
        assert not (tmp_path / "state" / "journal.json").exists()
    finally:
        _sql(clone, "DROP EXTENSION pg_prewarm")
