"""io_method = io_uring on a real server that cannot run it: Debian's 18 (built with liburing) whose postmaster may
open only 100 files. PostgreSQL 18 sets up one ring — a file descriptor — per process slot before it starts, so it
stops with "could not setup io_uring queue: Too many open files", while worker and sync start under the same limit.
tuner names that blocker from /proc before spending a restart, and when the restart is made anyway (a limit set
after the check, say), it puts postgresql.auto.conf back and starts the server again itself."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from tuner.errors import TunerError
from tuner.hostfacts import iouring
from tuner.target.connection import connect
from tuner.sandbox import Binaries

from .conftest import Running, _own_dir, running, standby_method_knobs

FEW_FILES = 100  # fewer than the ~127 process slots of a default configuration; worker and sync start with it


@pytest.fixture(scope="module")
def sandbox18_uring(pg18_debian: Binaries) -> Iterator[Running]:
    for path in _own_dir("tuner-sb18u-"):
        yield from running(path, scale=1, binaries=pg18_debian)


def test_a_server_that_cannot_start_with_io_uring_is_named_put_back_and_started_again(
        sandbox18_uring: Running, tmp_path: Path) -> None:
    sb = sandbox18_uring.sandbox
    dsn = sb.dsn("standby")
    auto_conf = sb.standby_dir / "postgresql.auto.conf"
    before = auto_conf.read_bytes()
    pg_ctl = str(sb.binaries.bin_dir / "pg_ctl")
    starts: list[str] = []

    async def restart_with_few_files() -> None:
        """The standby's restart, as tuner's sandbox makes it, under a lower open-files limit (prlimit(1))."""
        starts.append(auto_conf.read_text())
        await asyncio.to_thread(sb._run, [
            "prlimit", f"--nofile={FEW_FILES}:{FEW_FILES}", pg_ctl, "-D", str(sb.standby_dir), "-l",
            str(sb.standby_dir / "server.log"), "-w", "-t", "120", "-m", "fast", "-o", f"-p {sb.standby_port}",
            "restart"])

    async def settings() -> dict[str, str]:
        conn = await connect(dsn)
        try:
            rows = await conn.fetch("SELECT name, setting FROM pg_settings WHERE name = ANY($1::text[])",
                                    ["io_method", *iouring.SLOT_SETTINGS])
            return {r["name"]: r["setting"] for r in rows}
        finally:
            await conn.close()

    async def scenario() -> tuple[str | None, str, str]:
        await restart_with_few_files()  # the server as an operator's unit file might run it
        now = await settings()
        assert now["io_method"] == "worker"
        stopped = iouring.blocker(iouring.read_facts(("sync", "worker", "io_uring"), sb.standby_dir, now))
        system, journal, _port = await standby_method_knobs(sb, tmp_path / "state", restart_with_few_files)
        assert await system.apply({"io_method": "io_uring"}) == ["io_method"]
        with pytest.raises(TunerError) as err:
            await system.restart()
        assert (await settings())["io_method"] == "worker"  # up again, as it was, without a hand
        assert auto_conf.read_bytes() == before
        with pytest.raises(TunerError) as again:  # refused at once: no second failing restart
            await system.apply({"io_method": "io_uring"})
        restored = journal.restore()
        assert [r.action for r in restored] == ["already at the original value"], restored
        return stopped, str(err.value), str(again.value)

    try:
        stopped, message, again = sandbox18_uring.run(scenario())
    finally:  # the standby back under the sandbox's own limits
        sandbox18_uring.run(sb.restart_standby())
    assert stopped is not None and f"may open {FEW_FILES} files (RLIMIT_NOFILE)" in stopped, stopped
    assert "the server did not start with io_method = io_uring" in message, message
    assert "Too many open files" in message and "tuner started the server again" in message, message
    assert again == message
    assert len(starts) == 3 and "io_uring" in starts[1] and "io_uring" not in starts[2]  # the failed one, then back
