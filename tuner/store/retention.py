"""Retention: what ``tuner prune`` removes from the store, and what it keeps whatever its age."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from tuner.store.accepted import Accepted
from tuner.store.backend import DATED, Repository, StoreBackend, iso
from tuner.store.runs import FINISHED


class Retention(Repository):
    """Old history removed, in one transaction."""

    def __init__(self, db: StoreBackend, accepted: Accepted) -> None:
        super().__init__(db)
        self._accepted = accepted

    async def prune(self, before: datetime, *, dry_run: bool = False) -> dict[str, int]:
        """Remove what is older than ``before``: stored sessions (with their trials and recommendations), drift
        events, and the daemon's finished runs (done, failed, interrupted; queued and deferred work stays).

        Kept whatever their age: per target, its newest session (the warm start's prior) and every session whose
        recommendation is in force (``accepted``: what /v1/recommendations serves and re-validation checks).
        Returns the counts removed (or that would be, with ``dry_run``) and ``kept``: old sessions kept for
        those reasons. One transaction: all of it or nothing."""
        fetch = self.db.fetch
        cutoff = iso(before)
        keep: set[str] = set()
        for (tid,) in await fetch("SELECT id FROM targets"):
            newest = await fetch(
                f"SELECT id FROM sessions WHERE target_id = $1 AND started_at LIKE '{DATED}' "
                "ORDER BY started_at DESC, id DESC LIMIT 1", tid)
            keep.update(r[0] for r in newest)
            keep.update(sid for sid, _ in await self._accepted.find(tid))
        old = [r[0] for r in await fetch("SELECT id FROM sessions WHERE started_at < $1 ORDER BY id", cutoff)]
        gone = [sid for sid in old if sid not in keep]
        finished = ", ".join(f"'{s}'" for s in FINISHED)
        counted = [await fetch("SELECT COUNT(*) FROM drift_events WHERE detected_at < $1", cutoff),
                   await fetch(f"SELECT COUNT(*) FROM daemon_runs WHERE requested_at < $1 AND status IN "
                               f"({finished})", cutoff)]
        drift, runs = (rows[0][0] if rows else 0 for rows in counted)  # an empty store has no rows at all
        if not dry_run and (gone or drift or runs):
            stmts: list[tuple[str, Sequence[Any]]] = []
            for sid in gone:  # children first: SQLite enforces no ON DELETE CASCADE without a pragma
                stmts += [("DELETE FROM trials WHERE session_id = $1", (sid,)),
                          ("DELETE FROM recommendations WHERE session_id = $1", (sid,)),
                          ("DELETE FROM sessions WHERE id = $1", (sid,))]
            stmts += [("DELETE FROM drift_events WHERE detected_at < $1", (cutoff,)),
                      (f"DELETE FROM daemon_runs WHERE requested_at < $1 AND status IN ({finished})", (cutoff,))]
            await self.db.write(stmts)
        return {"sessions": len(gone), "drift_events": int(drift), "daemon_runs": int(runs),
                "kept": len(old) - len(gone)}
