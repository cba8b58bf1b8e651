"""The replay family against real PostgreSQL: a primary marked staging with its streaming hot standby (PostgreSQL 15,
kept for the module so the standby can be inspected afterwards), and one ``tuner recommend --sandbox`` on 18."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tuner.settings.config import Config
from tuner.families.replay_sections import Report as ReplayReport
from tuner.settings.policy import load_policy
from tuner.session.runner import recommend
from tuner.target.connection import connect
from tuner.sandbox import Binaries, Sandbox
from tuner.target.server import Servers

from .conftest import Running, _own_dir, execute, processes_under, running, sandbox_servers, tuner_env

QUICK = Path(__file__).parent.parent / "fixtures" / "policies" / "good" / "replay_quick.toml"


@pytest.fixture(scope="module")
def pair(pg15: Binaries) -> Iterator[Running]:
    """A PostgreSQL 15 primary marked staging and its hot standby, for this module only."""
    for base in _own_dir("tuner-replay-"):
        yield from running(base, scale=1, binaries=pg15, staging_primary=True)


def _where(sb: Sandbox) -> Servers:
    return sandbox_servers(sb, own_device=False)


def _cfg(tmp_path: Path) -> Config:
    return Config.model_validate({"tuner": {"state_dir": str(tmp_path / "state")}})


async def _standby_state(sb: Sandbox) -> dict[str, Any]:
    """What must be as before on the standby: its postgresql.auto.conf, the setting and its source, replay running."""
    s = await connect(sb.dsn("standby"))
    try:
        row = await s.fetchrow("SELECT setting, source FROM pg_settings WHERE name = 'maintenance_io_concurrency'")
        paused = await s.fetchval("SELECT pg_get_wal_replay_pause_state()")
    finally:
        await s.close()
    return {"auto_conf": (sb.standby_dir / "postgresql.auto.conf").read_bytes(), "setting": tuple(row),  # type: ignore[arg-type]
            "pause_state": paused}


async def _replay_advances(sb: Sandbox, timeout_s: float = 20) -> bool:
    """The standby replays WAL the primary writes now."""
    p, s = await connect(sb.dsn("primary")), await connect(sb.dsn("standby"))
    try:
        await p.execute("CREATE TABLE IF NOT EXISTS replay_probe_check (i int); INSERT INTO replay_probe_check VALUES (1)")
        lsn = await p.fetchval("SELECT pg_current_wal_lsn()::text")
        for _ in range(int(timeout_s * 10)):
            if await s.fetchval("SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn", lsn):
                return True
            await asyncio.sleep(0.1)
        return False
    finally:
        await p.execute("DROP TABLE IF EXISTS replay_probe_check")
        await p.close()
        await s.close()


async def _scratch_schemas(sb: Sandbox) -> int:
    p = await connect(sb.dsn("primary"))
    try:
        return int(await p.fetchval("SELECT count(*) FROM pg_namespace WHERE nspname = 'tuner_scratch'"))
    finally:
        await p.close()


def test_replay_decides_with_a_ci_and_leaves_the_standby_replaying_as_it_was(pair: Running, tmp_path: Path) -> None:
    sb = pair.sandbox
    # A value an operator had set on the standby before: tuner must put its line back byte for byte.
    pair.run(execute(sb.dsn("standby"), "ALTER SYSTEM SET maintenance_io_concurrency = 12", "SELECT pg_reload_conf()"))
    try:
        before = pair.run(_standby_state(sb))
        assert before["setting"] == ("12", "configuration file") and before["pause_state"] == "not paused"
        report = pair.run(recommend(_cfg(tmp_path), load_policy(str(QUICK)), use_sandbox=True, families=("replay",),
                                    where=_where(sb)))
        after = pair.run(_standby_state(sb))
    finally:
        pair.run(execute(sb.dsn("standby"), "ALTER SYSTEM RESET maintenance_io_concurrency", "SELECT pg_reload_conf()"))
    [fam] = report.families
    assert fam.status == "done" and "recovery_prefetch = try" in fam.reason, fam
    [rec] = report.recommendations
    assert (rec.knob, rec.current, rec.source, rec.run_on, rec.requires) == (
        "maintenance_io_concurrency", 12, "configuration file", "target", "reload")
    if rec.effect is not None:  # confirmed: a decision with its interval (or keep, with that evidence)
        assert rec.effect.metric == "replay_ms" and rec.effect.ci95[0] <= rec.effect.improvement <= rec.effect.ci95[1]
        assert {t.arm for t in report.trials if t.phase == "confirm"} == {"baseline", "candidate"}
    else:
        assert rec.decision == "keep" and rec.recommended == rec.current
    rp = ReplayReport.of(report, "replay").replay  # the family's own section of the report
    assert rp is not None and rp.maintenance_io_concurrency_current == 12
    assert rp.maintenance_io_concurrency_recommended == rec.recommended
    assert rp.mb_per_s_current and rp.mb_per_s_recommended and rp.wal_mb and rp.recovery_prefetch == "try"
    # The physics behind it: with prefetching off (0) replay waits for every read; today's 12 overlaps them.
    by = {p.maintenance_io_concurrency: p.mb_per_s for p in rp.curve}
    assert 0 in by and by[0] < by[12], by
    ok = [t for t in report.trials if t.status == "ok"]
    assert len(ok) >= 5 and all(t.cache is not None and t.cache.heap_read >= 0.9 * rp.pages for t in ok)
    assert all(t.metrics["wal_bytes"] < 2048 * rp.pages for t in ok)  # no full-page images in the stream
    # The standby as it was: replaying, its setting and postgresql.auto.conf untouched, no scratch schema, no journal.
    assert after == before
    assert pair.run(_replay_advances(sb))
    assert pair.run(_scratch_schemas(sb)) == 0
    assert not (tmp_path / "state" / "journal.json").exists()
    assert any(line.startswith("postgresql.auto.conf: maintenance_io_concurrency") for line in report.restored)


def test_a_standby_without_recovery_prefetch_is_skipped_with_the_reason(pair: Running, tmp_path: Path) -> None:
    sb = pair.sandbox
    pair.run(execute(sb.dsn("standby"), "ALTER SYSTEM SET recovery_prefetch = off", "SELECT pg_reload_conf()"))
    try:
        report = pair.run(recommend(_cfg(tmp_path), load_policy(str(QUICK)), use_sandbox=True, families=("replay",),
                                    where=_where(sb)))
    finally:
        pair.run(execute(sb.dsn("standby"), "ALTER SYSTEM RESET recovery_prefetch", "SELECT pg_reload_conf()"))
    [fam] = report.families
    assert fam.status == "skipped" and fam.reason.startswith("recovery_prefetch is off on the standby"), fam
    assert report.trials == [] and report.recommendations == [] and report.section("replay") is None
    assert pair.run(_scratch_schemas(sb)) == 0


def test_a_session_cancelled_while_replay_is_paused_leaves_the_standby_replaying(pair: Running,
                                                                                 tmp_path: Path) -> None:
    """SIGTERM cancels the session task; here the test cancels it, the moment the standby's replay is paused."""
    sb = pair.sandbox
    before = pair.run(_standby_state(sb))

    async def cancel_when_paused() -> bool:
        task = asyncio.create_task(recommend(_cfg(tmp_path), load_policy(str(QUICK)), use_sandbox=True,
                                             families=("replay",), where=_where(sb)))
        s = await connect(sb.dsn("standby"))
        try:
            while not task.done():
                if await s.fetchval("SELECT pg_get_wal_replay_pause_state()") == "paused":
                    task.cancel()
                    break
                await asyncio.sleep(0.005)
        finally:
            await s.close()
        try:
            await task
        except asyncio.CancelledError:
            return True
        return False

    assert pair.run(cancel_when_paused()), "the session ended before the standby's replay was paused"
    assert pair.run(_standby_state(sb)) == before
    assert pair.run(_replay_advances(sb))
    assert pair.run(_scratch_schemas(sb)) == 0
    assert not (tmp_path / "state" / "journal.json").exists()


def test_tuner_restore_resumes_replay_and_puts_back_the_line_a_killed_session_left(pair: Running,
                                                                                   tmp_path: Path) -> None:
    sb = pair.sandbox
    state = tmp_path / "state"
    before = pair.run(_standby_state(sb))
    dsn = sb.dsn("standby")
    script = (
        "import asyncio, os\n"
        "from pathlib import Path\n"
        "from tuner.actuate import Journal\n"
        "from tuner.target.connection import connect\n"
        "async def main():\n"
        f"    j = Journal(Path({str(state)!r})); j.open('killed')\n"
        f"    c = await connect({dsn!r})\n"
        "    who = dict(system_identifier=await c.fetchval('SELECT system_identifier::text FROM pg_control_system()'),\n"
        f"               port=int(await c.fetchval('SHOW port')), sandbox_dir={str(sb.root)!r})\n"
        f"    await j.alter_system(c, 'maintenance_io_concurrency', '64', dsn={dsn!r}, standby=True, **who)\n"
        "    await c.execute('SELECT pg_reload_conf()')\n"
        f"    j.replay_pause(dsn={dsn!r}, **who)\n"
        "    await c.execute('SELECT pg_wal_replay_pause()')\n"
        "    os._exit(0)  # no restore: as if SIGKILLed\n"
        "asyncio.run(main())\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    assert b"maintenance_io_concurrency = '64'" in (sb.standby_dir / "postgresql.auto.conf").read_bytes()
    assert pair.run(_standby_state(sb))["pause_state"] != "not paused"
    proc = subprocess.run([sys.executable, "-m", "tuner", "restore"], capture_output=True, text=True, cwd=tmp_path,
                          timeout=60, env=tuner_env(state), check=False)
    assert proc.returncode == 0, proc.stderr
    assert "WAL replay: wal_replay" in proc.stdout and "(restored)" in proc.stdout, proc.stdout
    assert "postgresql.auto.conf: maintenance_io_concurrency 64 -> (not set) (restored)" in proc.stdout
    assert pair.run(_standby_state(sb)) == before
    assert pair.run(_replay_advances(sb))
    assert not (state / "journal.json").exists()


def test_replay_on_a_postgresql_18_sandbox(base_dir: Path, tmp_path: Path, pg18: Binaries) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tuner", "recommend", "--sandbox", "--scale", "1", "--family", "replay",
         "--policy", str(QUICK), "--format", "json"],
        capture_output=True, text=True, cwd=tmp_path, timeout=900, check=False,
        env=tuner_env(tmp_path / "state", TUNER_SANDBOX__BASE_DIR=str(base_dir),
                      TUNER_SANDBOX__BIN_DIR=str(pg18.bin_dir)),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["target"]["server_version_num"] // 10000 == 18
    [fam] = doc["families"]
    assert fam["status"] == "done", fam
    [rec] = doc["recommendations"]
    assert rec["knob"] == "maintenance_io_concurrency" and rec["current"] == 16  # the PG 18 default
    if rec["effect"] is not None:
        lo, hi = rec["effect"]["ci95"]
        assert lo <= rec["effect"]["improvement"] <= hi
    rp = doc["replay"]
    assert rp["mb_per_s_current"] > 0 and rp["mb_per_s_recommended"] > 0 and rp["wal_mb"] > 0
    assert any(line.startswith("WAL replay: wal_replay") for line in doc["restored"])
    assert any(line.startswith("postgresql.auto.conf: maintenance_io_concurrency") for line in doc["restored"])
    assert not (tmp_path / "state" / "journal.json").exists()
    assert not list(base_dir.iterdir()) and not processes_under(base_dir)
