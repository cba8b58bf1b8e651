"""The back-end of a shared store in PostgreSQL (``[store] url``): the daemons of many staging hosts keep one history, and an
advisory lock per target keeps two of them from probing one server at the same time.

Everything lives in the schema ``tuner`` of the given database (created on first use). The target lock is a
session-level ``pg_try_advisory_lock`` on the store connection: it is released when the session ends, and by the
server itself if the tuner holding it dies or loses its connection.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import AsyncIterator, Sequence
from typing import Any

import asyncpg

from tuner.errors import StoreError, TargetError
from tuner.store import migrations
from tuner.store.backend import StoreBackend, TargetBusyError
from tuner.store.targets import lock_key
from tuner.target.connection import connect
from tuner import redact

SCHEMA = "tuner"
_MIGRATE_LOCK = 0x7475_6E65_7200_0001  # "tuner\0\0\1": one migrator at a time across the fleet


class PostgresBackend(StoreBackend):
    def __init__(self, url: str, *, timeout_s: float = 10.0) -> None:
        self.url = url
        self.where = f"the store at {' '.join(redact.dsn(url).split())}"
        self.timeout_s = timeout_s
        self._conn: asyncpg.Connection | None = None

    async def open(self) -> PostgresBackend:
        name = f"tuner {socket.gethostname()} pid {os.getpid()}"[:63]
        try:
            self._conn = await connect(self.url, timeout_s=self.timeout_s,
                                       server_settings={"application_name": name, "search_path": SCHEMA})
        except TargetError as exc:
            raise StoreError(f"{self.where} cannot be reached: {exc}",
                             hint="check [store] url, or run with --no-store") from None
        return self

    def _c(self) -> asyncpg.Connection:
        if self._conn is None or self._conn.is_closed():
            raise StoreError(f"{self.where} is no longer connected", hint="check the store's server")
        return self._conn

    def _error(self, exc: BaseException) -> StoreError:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if isinstance(exc, (OSError, asyncpg.exceptions.ConnectionDoesNotExistError,
                            asyncpg.exceptions.InterfaceError)) or self._conn is None or self._conn.is_closed():
            return StoreError(f"{self.where} went away ({text})", hint="check the store's server")
        return StoreError(f"{self.where} failed: {text}", hint="check the store's server and its permissions")

    async def fetch(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        try:
            return [tuple(r) for r in await self._c().fetch(sql, *args, timeout=self.timeout_s * 3)]
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError) as exc:
            raise self._error(exc) from None

    async def write(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> None:
        conn = self._c()
        try:
            async with conn.transaction():
                for sql, args in statements:
                    await conn.execute(sql, *args, timeout=self.timeout_s * 3)
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError) as exc:
            raise self._error(exc) from None

    async def _version(self) -> int | None:
        rows = await self.fetch("SELECT to_regclass($1) IS NOT NULL", f"{SCHEMA}.{migrations.META}")
        if not rows[0][0]:
            return None
        rows = await self.fetch(f"SELECT value FROM {SCHEMA}.{migrations.META} WHERE key = 'schema_version'")
        if not rows or not str(rows[0][0]).isdigit():
            raise StoreError(f"{self.where} has no readable schema version in {SCHEMA}.{migrations.META}",
                             hint="drop the schema 'tuner' there (tuner creates it again), or run with --no-store")
        return int(rows[0][0])

    async def _migrate(self, current: int) -> None:
        conn = self._c()
        try:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATE_LOCK)
                await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
                found = await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", f"{SCHEMA}.{migrations.META}")
                if found:
                    current = int(await conn.fetchval(
                        f"SELECT value FROM {SCHEMA}.{migrations.META} WHERE key = 'schema_version'") or 0)
                else:
                    current = 0
                if current > migrations.VERSION:
                    raise StoreError(f"{self.where} has schema version {current}, newer than this tuner knows "
                                     f"({migrations.VERSION})", hint="run the newer tuner, or --no-store")
                for version in range(current + 1, migrations.VERSION + 1):
                    for stmt in migrations.MIGRATIONS[version - 1]:
                        await conn.execute(stmt)
                await conn.execute(f"INSERT INTO {SCHEMA}.{migrations.META} (key, value) VALUES ('schema_version', $1) "
                                   "ON CONFLICT (key) DO UPDATE SET value = $1", str(migrations.VERSION))
        except StoreError:
            raise
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError) as exc:
            raise self._error(exc) from None

    async def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                await self._conn.close(timeout=5)
            self._conn = None

    @contextlib.asynccontextmanager
    async def lock_target(self, target: str, label: str) -> AsyncIterator[None]:
        key = lock_key(target)
        got = (await self.fetch("SELECT pg_try_advisory_lock($1)", key))[0][0]
        if not got:
            rows = await self.fetch(
                "SELECT a.application_name, a.client_addr::text, a.backend_start FROM pg_locks l "
                "JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted "
                "AND l.objsubid = 1 AND l.objid::text::bigint = ($1::bigint & 4294967295) "
                "AND l.classid::text::bigint = (($1::bigint >> 32) & 4294967295)",
                key)
            who = f" ({rows[0][0] or 'another tuner'}{' from ' + rows[0][1] if rows[0][1] else ''})" if rows else ""
            raise TargetBusyError(
                f"another tuner is running a session on {label}{who}; two sessions on one server would spoil each "
                "other's measurements",
                hint="wait for it to finish ('tuner history' shows it when it is done)")
        try:
            yield
        finally:
            if self._conn is not None and not self._conn.is_closed():
                with contextlib.suppress(Exception):
                    await self._conn.execute("SELECT pg_advisory_unlock($1)", key, timeout=self.timeout_s)
