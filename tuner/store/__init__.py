"""Memory: every session tuner runs, its target's fingerprint, trials, recommendations with their decisions, and
drift events — in SQLite in the state directory (the default), or in a PostgreSQL database that a fleet shares
(``[store] url``). ``tuner history``, ``tuner show`` and ``tuner diff`` read it; warm starts learn from it.

    async with open_store(cfg) as store:      # None when the store is off (--no-store, [store] enabled = false)
        ...
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from tuner.store.base import StoredPrior, SessionSummary, Store, StoreError, TargetBusyError, lock_key, target_id

if TYPE_CHECKING:
    from tuner.settings.config import Config
    from tuner.report.model import Report

__all__ = [
    "StoredPrior", "SessionSummary", "Store", "StoreError", "TargetBusyError", "lock_key", "open_store",
    "store_location", "target_history", "target_id",
]


def store_location(cfg: Config) -> str:
    """Where the store is, for messages (a URL without its password)."""
    if cfg.store.url:
        from tuner.redact import dsn as redact

        return redact(cfg.store.url)
    return str(_sqlite_path(cfg))


def _sqlite_path(cfg: Config) -> Path:
    from tuner.settings.config import resolve_path, state_dir
    from tuner.store.sqlite import FILE_NAME

    return resolve_path(cfg, cfg.store.path) if cfg.store.path else state_dir(cfg) / FILE_NAME


@contextlib.asynccontextmanager
async def open_store(cfg: Config, *, enabled: bool = True) -> AsyncIterator[Store | None]:
    """The configured store, its schema checked (and migrated forward) — or None when storing is off."""
    if not enabled or not cfg.store.enabled:
        yield None
        return
    store: Store
    if cfg.store.url:
        from tuner.store.postgres import PostgresStore

        store = await PostgresStore(cfg.store.url, timeout_s=cfg.target.connect_timeout_s).open()
    else:
        from tuner.store.sqlite import SqliteStore

        store = SqliteStore(_sqlite_path(cfg)).open()
    try:
        await store.prepare()
        yield store
    finally:
        await store.close()


async def target_history(store: Store, report: Report, *,
                         unreadable: Callable[[str], None] | None = None) -> list[SessionSummary] | None:
    """The stored sessions of ``report``'s target, newest first (None where the report is not among them); each
    row that cannot be read is left out and its sentence logged — or given to ``unreadable``."""
    fp = report.target.fingerprint or {}
    target = target_id(report.target.system_identifier, fp.get("data_directory"),
                       str(fp.get("label") or report.target.dsn))
    if unreadable is None:
        history = await store.sessions(target=target)
    else:
        listed = await store.listing(target=target)
        for sentence in listed.unreadable:
            unreadable(sentence)
        history = listed.sessions
    return history if any(s.id == report.session.id for s in history) else None
