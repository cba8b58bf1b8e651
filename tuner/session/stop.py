"""A stop request (SIGTERM, SIGINT, SIGHUP) as a flag the session checks between probes.

Signal handlers only set the flag and cancel the session's task (Patroni's rule: handlers do nothing else). The
cancellation stops whatever is awaited at once; the flag makes sure the session also stops at the next probe
boundary if a library ever swallows that cancellation — so a stop is never lost.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class StopRequested(asyncio.CancelledError):
    """Raised at a probe boundary once a stop was requested."""


class Stop:
    def __init__(self) -> None:
        self.signal: int | None = None
        self.reason: str | None = None  # why, when it is not a signal (the daemon: a maintenance window closed)

    @property
    def requested(self) -> bool:
        return self.signal is not None

    def request(self, signum: int, reason: str | None = None) -> None:
        if self.signal is None:
            self.reason = reason
        self.signal = self.signal or signum

    def check(self) -> None:
        """Raise :class:`StopRequested` if a stop was requested."""
        if self.signal is not None:
            raise StopRequested(f"stopped: {self.reason}" if self.reason
                                else f"stopped by {signal.Signals(self.signal).name}")

    def reset(self) -> None:
        self.signal = None
        self.reason = None


STOP = Stop()  # the process's one stop flag: there is one session per process


async def to_the_end(cleanup: Coroutine[Any, Any, T]) -> T:
    """Await a clean-up (a sandbox's teardown) to its end even when the awaiting task is cancelled meanwhile — a
    SIGTERM that lands during the teardown. ``asyncio.shield`` alone is not enough: the cancelled task returns at
    once, ``asyncio.run`` then cancels every task still running, the shielded teardown among them, and the
    sandbox is left half removed. Here the cancelled task waits for the teardown, then re-raises."""
    task = asyncio.ensure_future(cleanup)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await task  # the signal handler cancels once; a second signal does not interrupt this
        raise
