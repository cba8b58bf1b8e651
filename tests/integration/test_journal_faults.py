"""The journal's ALTER SYSTEM restore against real PostgreSQL 15: it writes back only on a writable server marked
tuner.role = 'staging' (the interlock). A primary shares its system identifier and port with its clones, and a
hot standby shares the identifier, so a journal (or ``--dsn``) that reaches one of them is refused: nothing is
written, the entry stays, and ``tuner restore`` says why in one sentence. Every case leaves postgresql.auto.conf and
pg_settings as they were."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tuner.actuate import Journal, boot_id
from tuner.target import connection
from tuner.target.connection import connect

from .conftest import Clone, Running, wait_for

KNOB = "wal_writer_flush_after"
REPO = Path(__file__).resolve().parents[2]


def _env(state: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "TUNER_"))}
    return {**env, "TUNER_TUNER__STATE_DIR": str(state), "PYTHONPATH": str(REPO)}


def _restore(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tuner", "restore", *args], capture_output=True, text=True,
                          cwd=state.parent, timeout=120, env=_env(state))


def _server(running: Running, dsn: str) -> dict[str, Any]:
    """What must not change: the knob as pg_settings shows it, and the server's identity for a journal entry."""
    async def read() -> dict[str, Any]:
        conn = await connect(dsn)
        try:
            row = await conn.fetchrow("SELECT setting, source, sourcefile, pending_restart FROM pg_settings "
                                      "WHERE name = $1", KNOB)
            return {"pg_settings": dict(row),
                    "sysid": await conn.fetchval("SELECT system_identifier::text FROM pg_control_system()"),
                    "port": int(await conn.fetchval("SHOW port"))}
        finally:
            await conn.close()

    return running.run(read())


def _left_by_a_dead_session(running: Running, dsn: str, data_dir: Path, state: Path,
                            original: str | None) -> tuple[Path, bytes, dict[str, Any]]:
    """A journal as a SIGKILLed session leaves it: one ALTER SYSTEM entry for the server at ``dsn``. Returns the
    journal, and what must not change: postgresql.auto.conf's bytes, and the knob as pg_settings shows it."""
    before, server = (data_dir / "postgresql.auto.conf").read_bytes(), _server(running, dsn)
    assert KNOB.encode() not in before
    state.mkdir()
    path = state / "journal.json"
    path.write_text(json.dumps({
        "version": 1,
        "owner": {"pid": 1, "start": "0", "host": socket.gethostname(), "boot_id": boot_id(), "session": "killed",
                  "opened_at": "2026-01-01T00:00:00+00:00"},
        "changes": [{"kind": "alter_system", "name": KNOB, "original": original,
                     "device": f"PostgreSQL {server['sysid']} port {server['port']}", "dsn": dsn,
                     "system_identifier": server["sysid"], "port": server["port"], "sandbox_dir": None}],
    }))
    return path, before, server


def _refused(proc: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert f"postgresql.auto.conf: {KNOB}" not in proc.stdout  # nothing restored
    [line] = proc.stdout.strip().splitlines()
    assert "NOT put back to 4096 (refused: " in line and "the journal keeps it" in line, line
    for text in expected:
        assert text in line, line
    err = [line for line in proc.stderr.strip().splitlines() if not line.startswith("{")]  # not the JSON log
    assert len(err) == 2 and err[0].startswith("tuner: error: 1 of 1 journal entries were not put back")
    assert err[1].startswith("hint:") and "Traceback" not in proc.stderr


# An original of 4096, which the server does not have: any write back would show in postgresql.auto.conf.

def test_the_alter_system_restore_refuses_a_primary_that_is_not_marked(sandbox15: Running, tmp_path: Path) -> None:
    sb = sandbox15.sandbox
    dsn = sb.dsn("primary")
    journal, before, server = _left_by_a_dead_session(sandbox15, dsn, sb.primary_dir, tmp_path / "state", "4096")
    entry = journal.read_bytes()

    _refused(_restore(journal.parent), "the interlock refused the server reached", "is writable — a primary —")
    # A marker the client sets itself (DSN options) is not the server's configuration: refused too.
    _refused(_restore(journal.parent, "--dsn", dsn + "&options=-c%20tuner.role%3Dstaging"),
             "set by this connection's own options")
    assert (sb.primary_dir / "postgresql.auto.conf").read_bytes() == before and _server(sandbox15, dsn) == server
    assert journal.read_bytes() == entry  # kept for a later 'tuner restore' (or --forget)

    # A session does not start over it either: it would overwrite the entry.
    proc = subprocess.run([sys.executable, "-m", "tuner", "recommend", "--dsn", sb.dsn("standby"), "--family",
                           "concurrency", "--budget", "3"], capture_output=True, text=True, cwd=tmp_path,
                          timeout=300, env=_env(journal.parent))
    assert proc.returncode == 1 and "could not be put back" in proc.stderr and "Traceback" not in proc.stderr
    assert journal.read_bytes() == entry

    forget = _restore(journal.parent, "--forget", "1")
    assert forget.returncode == 0 and f"alter_system PostgreSQL {server['sysid']}" in forget.stdout, forget.stderr
    assert not journal.exists() and (sb.primary_dir / "postgresql.auto.conf").read_bytes() == before


def test_the_alter_system_restore_refuses_a_hot_standby(sandbox15: Running, tmp_path: Path) -> None:
    sb = sandbox15.sandbox
    dsn = sb.dsn("standby")
    journal, before, server = _left_by_a_dead_session(sandbox15, dsn, sb.standby_dir, tmp_path / "state", "4096")
    _refused(_restore(journal.parent), "is a hot standby")
    assert (sb.standby_dir / "postgresql.auto.conf").read_bytes() == before and _server(sandbox15, dsn) == server
    assert journal.exists()


def test_the_alter_system_restore_writes_on_the_marked_clone(clone: Clone, tmp_path: Path) -> None:
    sb = clone.running.sandbox
    auto_conf = sb.primary_dir / "postgresql.auto.conf"
    journal, before, server = _left_by_a_dead_session(clone.running, clone.dsn, sb.primary_dir, tmp_path / "state",
                                                      None)

    async def change() -> None:  # what the killed session did after journaling
        conn = await connect(clone.dsn)
        try:
            await conn.execute(f"ALTER SYSTEM SET {KNOB} = '4096'")
            await conn.execute("SELECT pg_reload_conf()")
        finally:
            await conn.close()

    clone.running.run(change())
    assert KNOB.encode() in auto_conf.read_bytes()
    proc = _restore(journal.parent)
    assert proc.returncode == 0, proc.stderr
    assert f"postgresql.auto.conf: {KNOB} 4096 -> (not set) (restored)" in proc.stdout
    assert auto_conf.read_bytes() == before and not journal.exists()
    # pg_reload_conf() only signals the postmaster: a new backend sees the reloaded value a moment later.
    assert wait_for(lambda: _server(clone.running, clone.dsn) == server, 10), _server(clone.running, clone.dsn)


BATCH = ("wal_writer_flush_after", "commit_siblings", "wal_writer_delay")


def test_one_servers_entries_are_restored_over_one_connection(clone: Clone, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #59 item 7: a restore connected once per entry (20,000 entries, ~1,300 in 120 s); a server's entries
    now go back over one connection, with one reload. Counted at the real connect, on the real marked clone."""
    sb = clone.running.sandbox
    auto_conf = sb.primary_dir / "postgresql.auto.conf"
    journal, before, _ = _left_by_a_dead_session(clone.running, clone.dsn, sb.primary_dir, tmp_path / "state", None)
    doc = json.loads(journal.read_text())
    doc["changes"] = [{**doc["changes"][0], "name": name} for name in BATCH]
    journal.write_text(json.dumps(doc))

    async def change() -> None:  # what the killed session did after journaling
        conn = await connect(clone.dsn)
        try:
            for name, value in zip(BATCH, ("4096", "7", "300ms"), strict=True):
                await conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
        finally:
            await conn.close()

    clone.running.run(change())
    connects = []
    real = connection.connect

    async def counted(*args: Any, **kw: Any) -> Any:
        connects.append(args)
        return await real(*args, **kw)

    monkeypatch.setattr(connection, "connect", counted)
    done = Journal(journal.parent).recover()

    assert [r.action for r in done] == ["restored"] * 3, done
    assert len(connects) == 1
    assert auto_conf.read_bytes() == before and not journal.exists()
