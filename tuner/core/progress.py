"""How a session reports its progress (a terminal bar, the daemon's log, nothing): a protocol and the silent
default. Its own module so that what only passes a progress along (the family context) does not import the
search loops and the optimiser stack behind them."""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    def phase(self, name: str, total: int | None) -> None: ...
    def advance(self, text: str) -> None: ...


class NullProgress:
    def phase(self, name: str, total: int | None) -> None:
        return None

    def advance(self, text: str) -> None:
        return None
