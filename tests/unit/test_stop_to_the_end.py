"""A clean-up awaited with ``to_the_end`` finishes even when the awaiting task is cancelled during it (a SIGTERM
that lands while the sandbox is being removed), and the cancellation still reaches the caller."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from tuner.session.stop import to_the_end

STEPS = ("servers stopped", "loop device detached", "directory removed")


def _cancel_during_cleanup(wait: Callable[[Awaitable[None]], Awaitable[None]]) -> list[str]:
    """Cancel a session's task once its clean-up has done its first step; the steps that were done."""
    steps: list[str] = []

    async def main() -> None:
        first_done = asyncio.Event()

        async def cleanup() -> None:
            for step in STEPS:
                await asyncio.sleep(0.01)
                steps.append(step)
                first_done.set()

        async def session() -> None:
            await wait(cleanup())

        task = asyncio.ensure_future(session())
        await first_done.wait()
        task.cancel()
        await task

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(main())
    return steps


def test_cancelled_during_cleanup_waits_for_it_then_raises() -> None:
    assert _cancel_during_cleanup(to_the_end) == list(STEPS)


def test_shield_alone_leaves_the_cleanup_half_done() -> None:
    """The defect this guards against: asyncio.run cancels the orphaned shielded clean-up."""
    assert _cancel_during_cleanup(asyncio.shield) != list(STEPS)


def test_returns_the_cleanups_value() -> None:
    async def cleanup() -> int:
        return 7

    assert asyncio.run(to_the_end(cleanup())) == 7
