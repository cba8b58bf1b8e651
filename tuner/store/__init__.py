"""Memory: every session tuner runs, its target's fingerprint, trials, recommendations with their decisions, and
drift events — in SQLite in the state directory (the default), or in a PostgreSQL database that a fleet shares
(``[store] url``). ``tuner history``, ``tuner show`` and ``tuner diff`` read it; warm starts learn from it.

    async with open_store(cfg, check=check) as store:  # None when the store is off ([store] enabled = false)
        await store.sessions.save(report, fingerprint)
        prior = await store.priors.find(fingerprint, family.name)

A :class:`Store` is one back-end (:mod:`~tuner.store.backend`: the connection, its SQL dialect, the schema and its
migrations, transactions, the per-target lock; :mod:`~tuner.store.sqlite` or :mod:`~tuner.store.postgres`) and the
repositories a reader asks for, each over that back-end. A report read back is checked by the ``check`` its opener
gives (:func:`tuner.report.validate.check`). Nothing here renders: what ``tuner history`` and ``tuner diff`` print is
:mod:`tuner.emit.history` and :mod:`tuner.emit.diff`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from tuner.errors import StoreError
from tuner.store.accepted import Accepted
from tuner.store.backend import StoreBackend, TargetBusyError
from tuner.store.drift_events import DriftEvents
from tuner.store.priors import Priors, StoredPrior
from tuner.store.retention import Retention
from tuner.store.rows import SessionSummary
from tuner.store.runs import DaemonRuns
from tuner.store.sessions import ReportCheck, Sessions
from tuner.store.targets import Targets, lock_key, target_id

if TYPE_CHECKING:
    from tuner.settings.config import Config
    from tuner.report.model import Report

__all__ = [
    "ReportCheck", "SessionSummary", "Store", "StoreBackend", "StoreError", "StoredPrior", "TargetBusyError",
    "lock_key", "open_store", "store_location", "target_history", "target_id",
]


class Store:
    """One store: its back-end and the repositories over it. Every write is one transaction of the back-end."""

    def __init__(self, backend: StoreBackend, *, check: ReportCheck) -> None:
        self.backend = backend  # where, prepare(), close(), lock_target(target, label)
        self.sessions = Sessions(backend, check)  # save, listing, newest, resolve, report (checked by ``check``)
        self.priors = Priors(backend)  # the warm start's trials
        self.accepted = Accepted(backend, self.sessions)  # what is in force on a target
        self.targets = Targets(backend)  # a watched target, before its first session
        self.drift_events = DriftEvents(backend)
        self.runs = DaemonRuns(backend)  # the daemon's queue and what became of each run
        self.retention = Retention(backend, self.accepted)  # tuner prune


def store_location(cfg: Config) -> str:
    """Where the store is, for messages (a URL without its password)."""
    if cfg.store.url:
        from tuner import redact

        return redact.dsn(cfg.store.url)
    return str(_sqlite_path(cfg))


def _sqlite_path(cfg: Config) -> Path:
    from tuner.settings.config import resolve_path, state_dir
    from tuner.store.sqlite import FILE_NAME

    return resolve_path(cfg, cfg.store.path) if cfg.store.path else state_dir(cfg) / FILE_NAME


@contextlib.asynccontextmanager
async def open_store(cfg: Config, *, check: ReportCheck, enabled: bool = True) -> AsyncIterator[Store | None]:
    """The configured store, its schema checked (and migrated forward) — or None when storing is off. ``check``
    is what a report read back from it must pass (:func:`tuner.report.validate.check`)."""
    if not enabled or not cfg.store.enabled:
        yield None
        return
    backend: StoreBackend
    if cfg.store.url:
        from tuner.store.postgres import PostgresBackend

        backend = await PostgresBackend(cfg.store.url, timeout_s=cfg.target.connect_timeout_s).open()
    else:
        from tuner.store.sqlite import SqliteBackend

        backend = SqliteBackend(_sqlite_path(cfg)).open()
    try:
        await backend.prepare()
        yield Store(backend, check=check)
    finally:
        await backend.close()


async def target_history(store: Store, report: Report, *,
                         unreadable: Callable[[str], None] | None = None) -> list[SessionSummary] | None:
    """The stored sessions of ``report``'s target, newest first (None where the report is not among them); each
    row that cannot be read is left out and its sentence logged — or given to ``unreadable``."""
    fp = report.target.fingerprint or {}
    target = target_id(report.target.system_identifier, fp.get("data_directory"),
                       str(fp.get("label") or report.target.dsn))
    if unreadable is None:
        history = await store.sessions.newest(target=target)
    else:
        listed = await store.sessions.listing(target=target)
        for sentence in listed.unreadable:
            unreadable(sentence)
        history = listed.sessions
    return history if any(s.id == report.session.id for s in history) else None
