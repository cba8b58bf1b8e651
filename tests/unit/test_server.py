"""restart_command as tuner runs it: its failure and its time limit are one sentence each, and a command that hangs
is killed with its whole process group."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from tuner.errors import TunerError
from tuner.target.server import restart_command


def test_a_failing_restart_command_is_one_sentence_with_its_last_line() -> None:
    with pytest.raises(TunerError, match="restart_command failed: pg_ctl: no server running"):
        asyncio.run(restart_command("echo starting; echo 'pg_ctl: no server running' >&2; exit 1")())


def test_a_restart_command_that_hangs_is_killed_after_its_time_limit(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    t0 = time.monotonic()
    with pytest.raises(TunerError, match="did not finish within 0.5 s; it was killed"):
        asyncio.run(restart_command(f"sleep 60 & echo $! > {pidfile}; wait", timeout_s=0.5)())
    assert time.monotonic() - t0 < 10
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # the whole group went, the background sleep too
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        if "State:\tZ" in Path(f"/proc/{child}/status").read_text():
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"pid {child} outlived its restart command")
