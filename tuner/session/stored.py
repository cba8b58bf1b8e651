"""One session with the store around it — the flow ``tuner recommend`` and the daemon's worker share.

The store is opened first, so that one that cannot be read stops the session before anything is probed (its
:class:`~tuner.store.StoreError` is raised). The session (:func:`tuner.session.runner.recommend`: journal, servers, guard,
families, report, everything put back) holds the store's lock on its target while it probes, and may warm-start
from it. Its report is then saved with its fingerprint; a store that fails at that point is returned, not raised:
the report exists, and the operator must still get it.

It is the session flow's, not the store's: :mod:`tuner.store` sits below the runner and knows nothing of it.
This module imports the session stack (scikit-optimize, scikit-learn, scipy: seconds), so its callers import it
when a session starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tuner.settings.config import Config
from tuner.log import get_logger
from tuner.report.model import Report
from tuner.settings.policy import Policy
from tuner.report.validate import check
from tuner.session.runner import recommend
from tuner.store import SessionSummary, StoreError, open_store, target_history

log = get_logger("tuner.store")


@dataclass(frozen=True)
class StoredSession:
    report: Report
    stored: bool  # saved in the store
    problem: StoreError | None = None  # why it was not saved, when the store failed
    history: list[SessionSummary] | None = None  # the target's stored sessions, newest first, when asked for


async def run_stored(cfg: Config, policy: Policy, *, store: bool = True, kind: str = "recommend",
                     history: bool = False, **session: Any) -> StoredSession:
    """Run one session (``session``: :func:`tuner.session.runner.recommend`'s keywords) and save its report as ``kind``
    in the configured store (none with ``store=False`` or ``[store] enabled = false``). With ``history``, the
    stored sessions of its target come back too (None when they cannot be read: only a report's history section
    needs them)."""
    async with open_store(cfg, check=check, enabled=store) as db:
        report = await recommend(cfg, policy, store=db, **session)
        if db is None:
            return StoredSession(report, stored=False)
        try:
            await db.sessions.save(report, report.target.fingerprint or {}, kind=kind)
        except StoreError as exc:
            return StoredSession(report, stored=False, problem=exc)
        if not history:
            return StoredSession(report, stored=True)
        try:
            return StoredSession(report, stored=True, history=await target_history(db, report))
        except StoreError as exc:  # stored; only the report's history section is missing
            log.warning("store.history", error=str(exc))
            return StoredSession(report, stored=True)
