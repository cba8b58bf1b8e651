"""The recommendations in force on a target, as the store holds them: its recommendation rows decided by
:func:`tuner.store.in_force.in_force`, each read back from its session's (checked) report."""

from __future__ import annotations

from typing import Any

from tuner.errors import StoreError
from tuner.log import get_logger
from tuner.report.model import Recommendation, Report
from tuner.store.backend import Repository, StoreBackend
from tuner.store.in_force import Decided, in_force
from tuner.store.rows import RowProblem, readable, timestamp, unreadable
from tuner.store.sessions import Sessions

log = get_logger("tuner.store")


class Accepted(Repository):
    """What is in force: what /v1/recommendations serves, re-validation checks and the plateau rule keeps."""

    def __init__(self, db: StoreBackend, sessions: Sessions) -> None:
        super().__init__(db)
        self._sessions = sessions

    @readable
    async def find(self, target: str) -> list[tuple[str, Recommendation]]:
        """The recommendations in force on a target (its store id), newest first, each as (session id,
        Recommendation), decided from its whole history (:func:`tuner.store.in_force.in_force`)."""
        rows = await self.db.fetch(
            "SELECT r.session_id, r.seq, r.knob, r.object, r.decision, r.current_value, r.recommended, s.kind, "
            "s.started_at "
            "FROM recommendations r JOIN sessions s ON s.id = r.session_id WHERE s.target_id = $1 "
            "ORDER BY s.started_at DESC, s.id DESC, r.seq", target)
        reports: dict[str, Report] = {}
        out: list[tuple[str, Recommendation]] = []
        for d in in_force(Decided(*r[:-1]) for r in rows if self._dated(r[0], r[-1])):
            if d.session_id not in reports:
                reports[d.session_id] = await self._sessions.report(d.session_id)
            recs = reports[d.session_id].recommendations
            if not (0 <= d.seq < len(recs) and recs[d.seq].knob == d.knob):
                raise StoreError(f"{self.where}: session {d.session_id}'s stored report and its recommendation rows "
                                 "disagree", hint="the store was changed by something other than tuner; "
                                                  "'tuner show SESSION' shows what the report says")
            out.append((d.session_id, recs[d.seq]))
        return out

    def _dated(self, session_id: str, started_at: Any) -> bool:
        """Whether a session's started_at is a date: one that is not would sort as the newest session and decide
        what is in force, so it is logged and left out."""
        try:
            timestamp(started_at)
        except RowProblem as problem:
            log.warning("store.row_unreadable", error=unreadable(self.where, session_id, problem))
            return False
        return True
