"""Restoring goes on past a failure: every entry is tried, each failure is reported with its reason, and the
entries that failed stay in the journal for ``tuner restore`` (the others are gone from it)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tuner.actuate import JournalError

from .test_journal import crash, fake_sysfs, journal, writer
from .test_journal_durable import FakeConn

FAIL_Y = ("case {device} in /dev/y) echo 'device or resource busy' >&2; exit 1;; esac; "
          "printf '%s\\n' {value} > {path}")


def test_the_end_of_session_restore_goes_on_past_a_failure_and_keeps_what_failed(tmp_path: Path) -> None:
    x, y = fake_sysfs(tmp_path, "128", "x"), fake_sysfs(tmp_path, "256", "y")
    j = journal(tmp_path)
    j.open("s")
    j.set_sysfs(x, 512, device="/dev/x", name="read_ahead_kb")
    j.set_sysfs(y, 512, device="/dev/y", name="read_ahead_kb")
    j.writer = writer(tmp_path, FAIL_Y)  # /dev/y, the last change and so the first put back, fails
    failed, restored = j.restore()
    assert (failed.object, failed.action, failed.ok) == ("/dev/y", "failed", False)
    assert "device or resource busy" in (failed.reason or "") and "NOT put back to 256" in failed.sentence()
    assert (restored.object, restored.action) == ("/dev/x", "restored") and x.read_text().strip() == "128"
    doc = json.loads(j.path.read_text())
    assert [c["device"] for c in doc["changes"]] == ["/dev/y"] and doc["owner"]["ended_at"]
    # The next session refuses to start over what it could not put back (and leaves the file as it is) ...
    j.writer = writer(tmp_path, FAIL_Y)
    with pytest.raises(JournalError, match="could not be put back, first /dev/y"):
        j.open("next")
    assert [c["device"] for c in json.loads(j.path.read_text())["changes"]] == ["/dev/y"]
    # ... and once the cause is gone, 'tuner restore' finishes the job.
    [r] = journal(tmp_path).recover()
    assert r.action == "restored" and y.read_text().strip() == "256" and not j.path.exists()


class BrokenConn(FakeConn):
    async def fetchrow(self, sql: str, *args: Any) -> None:
        raise ConnectionResetError("connection was closed in the middle of operation")


def test_the_sessions_own_alter_system_restore_goes_on_past_a_failure(tmp_path: Path) -> None:
    j = journal(tmp_path)
    j.open("wal")
    for name in ("wal_writer_delay", "wal_writer_flush_after"):
        asyncio.run(j.alter_system(FakeConn(), name, "10", dsn="host=/nonexistent port=1", system_identifier="1",
                                   port=1))
    done = asyncio.run(j.restore_system(BrokenConn()))
    assert [(r.name, r.action) for r in done] == [("wal_writer_flush_after", "failed"), ("wal_writer_delay", "failed")]
    assert all("connection was closed" in (r.reason or "") for r in done)
    assert len(json.loads(j.path.read_text())["changes"]) == 2
    # The end of the session tries again over a fresh connection; that fails too, and both stay for later.
    done = j.restore()
    assert [r.action for r in done] == ["failed", "failed"] and all(r.reason for r in done)
    assert len(json.loads(j.path.read_text())["changes"]) == 2
    crash(j)
