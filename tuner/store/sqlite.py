"""The default store's back-end: one SQLite file in the state directory (``tuner.db``), WAL mode, one writer at a time."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import sqlite3
import stat
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tuner.errors import StoreError
from tuner.store import migrations
from tuner.store.backend import StoreBackend, no_lock

_PLACEHOLDER = re.compile(r"\$\d+")
FILE_NAME = "tuner.db"


def _sqlite(sql: str, args: Sequence[Any]) -> tuple[str, list[Any]]:
    """PostgreSQL's numbered placeholders as SQLite's ``?`` (a number may repeat: the arguments follow)."""
    numbers = [int(m.group()[1:]) for m in _PLACEHOLDER.finditer(sql)]
    return _PLACEHOLDER.sub("?", sql), [args[n - 1] for n in numbers]


class SqliteBackend(StoreBackend):
    def __init__(self, path: Path) -> None:
        self.path = path
        self.where = f"the store {path}"
        self._db: sqlite3.Connection | None = None
        self._absent = False
        self._lock = threading.Lock()  # one statement or transaction at a time on the shared connection

    def open(self) -> SqliteBackend:
        """Open the store if it exists. A store that does not exist yet is created by the first write, not here:
        a run that fails before it has anything to store leaves nothing behind."""
        if not self.path.exists() and not self.path.is_symlink():
            self._absent = True
            return self
        with contextlib.suppress(OSError):
            mode = self.path.stat().st_mode
            if not stat.S_ISREG(mode):  # a FIFO would hang SQLite's open; a directory is no store either
                what = "a directory" if stat.S_ISDIR(mode) else "not a regular file (a pipe, socket or device)"
                raise StoreError(f"{self.where} is {what}",
                                 hint="give tuner a file of its own ([store] path), or run with --no-store")
            if self.path.stat().st_size == 0:
                # An empty file (a touch, a crash before SQLite wrote its header) is an empty store like an
                # absent one: created by the first write, never initialised by a reader (history, show, diff).
                self._absent = True
                return self
        return self._open(fresh=False)

    async def prepare(self) -> None:
        if not self._absent:
            await super().prepare()

    def _open(self, *, fresh: bool) -> SqliteBackend:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            if fresh:  # private from the start: reports name hosts, devices and settings
                with contextlib.suppress(FileExistsError):  # another tuner created it a moment ago
                    os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600))
            # A file that is not a database must be refused, not overwritten: uri mode=rw never creates one.
            # check_same_thread off: queries run in a worker thread (one at a time, under self._lock), so a write's
            # fsync or a wait for another writer never holds the daemon's event loop (/metrics, the watchdog).
            self._db = sqlite3.connect(f"file:{self.path}?mode=rw", uri=True, timeout=30, isolation_level=None,
                                       check_same_thread=False)
            self._db.execute("PRAGMA foreign_keys = ON")
        except sqlite3.DatabaseError as exc:
            self._close_quietly()
            raise self._error(exc) from None
        except OSError as exc:
            self._close_quietly()
            raise StoreError(f"{self.where} cannot be opened: {exc.strerror or exc}",
                             hint="check the state directory's permissions, or run with --no-store") from None
        return self

    def _close_quietly(self) -> None:
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise StoreError(f"{self.where} is closed")
        return self._db

    def _error(self, exc: sqlite3.Error) -> StoreError:
        """One sentence for an SQLite error, by its result code (https://www.sqlite.org/rescode.html): a file that
        cannot be written or a full disk is said as such — the store itself is healthy, moving it aside would
        lose its history for nothing."""
        name = str(getattr(exc, "sqlite_errorname", "") or "")
        if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in str(exc):
            return StoreError(f"{self.where} stayed locked by another writer for 30 s",
                              hint="another tuner is writing to it; try again")
        if name.startswith(("SQLITE_READONLY", "SQLITE_PERM", "SQLITE_CANTOPEN", "SQLITE_AUTH")):
            return StoreError(f"{self.where} cannot be written: it or its directory is read-only or not permitted "
                              f"({exc})", hint="check the state directory's mount and permissions, or run with "
                                               "--no-store; nothing in the store was changed")
        if name.startswith("SQLITE_FULL"):
            return StoreError(f"{self.where} cannot be written: the disk is full",
                              hint="free space on the state directory's file system, or run with --no-store; "
                                   "nothing in the store was changed")
        if name.startswith("SQLITE_IOERR"):
            return StoreError(f"{self.where} cannot be read or written: an I/O error ({exc})",
                              hint="check the disk (dmesg), or run with --no-store")
        return StoreError(f"{self.where} is damaged or not a tuner store ({exc})",
                          hint="move it aside (tuner starts a new one) or run with --no-store; nothing in it was "
                               "changed")

    async def _ready(self) -> None:
        try:
            mode = self._conn().execute("PRAGMA journal_mode = WAL").fetchone()
        except sqlite3.Error as exc:
            raise self._error(exc) from None
        if mode and str(mode[0]).lower() != "wal":
            raise StoreError(f"{self.where} cannot use write-ahead logging (journal mode {mode[0]})",
                             hint="put the state directory on a local file system")

    async def _create(self) -> None:
        self._open(fresh=True)
        self._absent = False
        await super().prepare()

    async def fetch(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        if self._absent:
            return []  # an empty store
        q, a = _sqlite(sql, args)
        return await asyncio.to_thread(self._fetch_now, q, a)

    def _fetch_now(self, q: str, a: list[Any]) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return [tuple(r) for r in self._conn().execute(q, a).fetchall()]
            except sqlite3.Error as exc:
                raise self._error(exc) from None

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE``: one writer at a time, a second waits), rolled back on any
        error; SQLite's errors become one sentence."""
        db = self._conn()
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                if db.in_transaction:  # SQLite rolls back by itself after some errors (SQLITE_FULL, SQLITE_IOERR)
                    with contextlib.suppress(sqlite3.Error):  # the first error is the one to tell
                        db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise self._error(exc) from None

    async def write(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> None:
        if self._absent:
            await self._create()
        await asyncio.to_thread(self._write_now, [_sqlite(sql, args) for sql, args in statements])

    def _write_now(self, statements: list[tuple[str, list[Any]]]) -> None:
        with self._lock, self._transaction() as db:
            for sql, args in statements:
                db.execute(sql, args)

    async def _version(self) -> int | None:
        tables = {r[0] for r in await self.fetch("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if migrations.META not in tables:
            if tables:
                raise StoreError(f"{self.where} is an SQLite database but not a tuner store (it has tables "
                                 f"{', '.join(sorted(tables)[:3])}…)",
                                 hint="give tuner its own file ([store] path), or run with --no-store")
            return None
        rows = await self.fetch(f"SELECT value FROM {migrations.META} WHERE key = 'schema_version'")
        if not rows or not str(rows[0][0]).isdigit():
            raise StoreError(f"{self.where} has no readable schema version",
                             hint="move it aside (tuner starts a new one) or run with --no-store")
        return int(rows[0][0])

    async def _migrate(self, current: int) -> None:
        with self._lock, self._transaction() as db:  # a second migrator waits, then finds the work done
            current = self._locked_version(db)
            for version in range(current + 1, migrations.VERSION + 1):
                for stmt in migrations.MIGRATIONS[version - 1]:
                    db.execute(stmt)
            db.execute(*_sqlite(f"INSERT INTO {migrations.META} (key, value) VALUES ('schema_version', $1) "
                                "ON CONFLICT (key) DO UPDATE SET value = $1", (str(migrations.VERSION),)))

    @staticmethod
    def _locked_version(db: sqlite3.Connection) -> int:
        if not db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (migrations.META,)).fetchall():
            return 0
        row = db.execute(f"SELECT value FROM {migrations.META} WHERE key = 'schema_version'").fetchone()
        return int(row[0]) if row else 0

    async def close(self) -> None:
        with self._lock:
            self._close_quietly()

    def lock_target(self, target: str, label: str) -> contextlib.AbstractAsyncContextManager[None]:
        # One host, one state directory: the journal's lock already keeps a second session away.
        return no_lock()
