"""What a store's back-end provides (SQLite or PostgreSQL): a connection, its SQL dialect, the schema and its
migrations, transactions, and the per-target lock. The repositories (:mod:`tuner.store.sessions` and its siblings)
are written once on top of it.

Statements are written once, with PostgreSQL's ``$1`` placeholders; the SQLite back-end turns them into ``?``.
Every write is one transaction: a session is stored whole or not at all. Timestamps are ISO 8601 UTC text (they
sort as text: :mod:`tuner.store.migrations`).
"""

from __future__ import annotations

import abc
import contextlib
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any

from tuner.errors import StoreError, TunerError
from tuner.store import migrations

# What "newest" is ordered by must look like a date: text such as 'not a date' sorts after every ISO timestamp.
DATED = "____-__-__T__:__:__%"


class TargetBusyError(TunerError):
    """Another tuner runs a session on this target right now (exit 1): two sessions on one server would spoil
    each other's measurements and each other's restores."""


def iso(ts: datetime) -> str:
    """A timestamp as the store keeps it: UTC, to the second."""
    return ts.astimezone(UTC).isoformat(timespec="seconds")


def iso_us(ts: datetime) -> str:
    """To the microsecond: the daemon's queue is ordered by it (requests within one second keep their order)."""
    return ts.astimezone(UTC).isoformat(timespec="microseconds")


def now() -> str:
    return iso(datetime.now(UTC))


class StoreBackend(abc.ABC):
    """One store's connection: :class:`~tuner.store.sqlite.SqliteBackend` or
    :class:`~tuner.store.postgres.PostgresBackend`. A new back-end implements the abstract methods below (queries in
    PostgreSQL's dialect, one transaction per ``write``, the schema's version and its migrations, the target lock);
    ``prepare`` is shared, and every repository works on it unchanged."""

    where: str = "the store"

    @abc.abstractmethod
    async def fetch(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        """The rows of one query (PostgreSQL's ``$1`` placeholders)."""

    @abc.abstractmethod
    async def write(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> None:
        """Run ``statements`` in one transaction."""

    @abc.abstractmethod
    async def _migrate(self, current: int) -> None:
        """Run the migrations after ``current`` in one transaction; a concurrent migrator waits and finds them done."""

    @abc.abstractmethod
    async def _version(self) -> int | None:
        """The stored schema version; None for an empty store."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Let go of the store (a no-op the second time)."""

    @abc.abstractmethod
    def lock_target(self, target: str, label: str) -> contextlib.AbstractAsyncContextManager[None]:
        """Hold this store's lock on ``target`` for a block, or raise :class:`TargetBusyError` naming the holder."""

    async def prepare(self) -> None:
        """Check the schema version and run the migrations it is missing; a newer schema is refused."""
        version = await self._version()
        if version is not None and version > migrations.VERSION:
            raise StoreError(
                f"{self.where} has schema version {version}, newer than this tuner knows ({migrations.VERSION})",
                hint="run the newer tuner that wrote it, or give this one another store ([store] path or url), "
                     "or --no-store",
            )
        await self._ready()
        if version is None or version < migrations.VERSION:
            await self._migrate(version or 0)

    async def _ready(self) -> None:
        """Settings for a store now known to be tuner's (nothing is changed in a store before that)."""


class Repository:
    """What a reader asks the store for, over one back-end (the rows it reads are checked: :mod:`tuner.store.rows`)."""

    def __init__(self, db: StoreBackend) -> None:
        self.db = db

    @property
    def where(self) -> str:
        return self.db.where


@contextlib.asynccontextmanager
async def no_lock() -> AsyncIterator[None]:
    yield
