"""An entry is on disk before its change is made: when the journal cannot be written (here a full 64 kB tmpfs),
the change is not made, the journal in memory does not change, and the error is one sentence — also for the
next probe, which must not find the entry "already journaled" and change the device with nothing on disk."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tuner.actuate import Journal, JournalError, SysfsWriter

from .test_journal import fake_sysfs, writer


@contextlib.contextmanager
def tiny_tmpfs(where: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    where.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)


def fill(directory: Path) -> Path:
    """Fill the file system of ``directory`` to the last block; returns the filler (delete it to free space)."""
    filler = directory / "filler"
    with filler.open("wb", buffering=0) as fh:
        while True:
            try:
                fh.write(b"\0" * 4096)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break
        with contextlib.suppress(OSError):
            while fh.write(b"\0"):
                pass
    return filler


class SpyWriter(SysfsWriter):
    """The real writer, counting its writes."""

    def __init__(self, base: SysfsWriter) -> None:
        super().__init__(base.helper_command)
        self.sys_root = base.sys_root
        self.writes: list[tuple[Path, str]] = []

    def write(self, path: Path, value: str, *, device: str = "") -> None:
        self.writes.append((path, value))
        super().write(path, value, device=device)


def test_a_sysfs_change_is_not_made_when_its_entry_cannot_be_written(tmp_path: Path) -> None:
    attr = fake_sysfs(tmp_path)
    spy = SpyWriter(writer(tmp_path))
    with tiny_tmpfs(tmp_path / "state") as state:
        j = Journal(state, writer=spy)
        j.open("full")
        filler = fill(state)
        for value in (512, 1024):  # the second probe must not skip the record the first one could not write
            with pytest.raises(JournalError, match="could not write the journal .* so /dev/x read_ahead_kb was not "
                                                   "changed") as err:
                j.set_sysfs(attr, value, device="/dev/x", name="read_ahead_kb")
            assert "\n" not in str(err.value) and err.value.hint
            assert spy.writes == [] and attr.read_text().strip() == "128"
            assert j.changes() == [] and not j.path.exists()
            assert [p.name for p in state.iterdir() if p.name.startswith(".journal")] == []  # no temporary left
        filler.unlink()  # space again: the same session journals, then changes
        j.set_sysfs(attr, 512, device="/dev/x", name="read_ahead_kb")
        assert spy.writes == [(attr, "512")] and len(j.changes()) == 1 and j.path.exists()
        [r] = j.restore()
        assert r.action == "restored" and attr.read_text().strip() == "128"


class FakeConn:
    """Enough of an asyncpg connection for the ALTER SYSTEM actuator: no line in postgresql.auto.conf."""

    def __init__(self) -> None:
        self.executed: list[str] = []

    async def fetchrow(self, sql: str, *args: Any) -> None:
        return None

    async def execute(self, sql: str, *args: Any) -> str:
        self.executed.append(sql)
        return "ALTER SYSTEM"


def test_an_alter_system_is_not_made_when_its_entry_cannot_be_written(tmp_path: Path) -> None:
    conn = FakeConn()
    with tiny_tmpfs(tmp_path / "state") as state:
        j = Journal(state)
        j.open("full")
        fill(state)
        for _ in range(2):
            with pytest.raises(JournalError, match="wal_writer_delay was not changed"):
                asyncio.run(j.alter_system(conn, "wal_writer_delay", "10", dsn="host=/tmp", system_identifier="1",
                                           port=5432))
            assert conn.executed == [] and j.changes() == []
        j.restore()
