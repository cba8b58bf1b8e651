"""The replay family's wait for the standby before it starts: as long as replay advances it waits, however long a
backlog takes on a loaded host (the WAL family's load written just before); only a replay that stops advancing
for ``stall_s`` fails. Pure logic: the backlog and the clock are given."""

from __future__ import annotations

import asyncio

import pytest

from tuner.errors import ProbeError
from tuner.probes.replayload import until_caught_up


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, s: float) -> None:
        self.now += s


def _wait(backlog: list[float], *, stall_s: float) -> float:
    clock = _Clock()
    left = iter(backlog)

    async def behind() -> float:
        return next(left)

    return asyncio.run(until_caught_up(behind, stall_s=stall_s, interval_s=10.0, clock=clock, sleep=clock.sleep))


def test_a_backlog_that_keeps_shrinking_is_waited_for_past_the_stall_limit() -> None:
    # 40 polls 10 s apart: 400 s of replay, over three times the 120 s a stall may last.
    assert _wait([4e8 - i * 1e7 for i in range(40)] + [0.0], stall_s=120) == pytest.approx(400.0)


def test_a_replay_that_stops_advancing_fails_after_the_stall_limit() -> None:
    backlog = [3e8, 2e8] + [2e8] * 20
    with pytest.raises(ProbeError, match=r"did not advance for 120 s, 200\.0 MB short"):
        _wait(backlog, stall_s=120)


def test_a_standby_already_caught_up_is_not_waited_for() -> None:
    assert _wait([0.0], stall_s=120) == 0.0
    assert _wait([-5.0], stall_s=120) == 0.0  # replayed past the LSN already
