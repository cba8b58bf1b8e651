"""Drift events: what changed on a target between two of the daemon's looks, and what tuner did about it."""

from __future__ import annotations

import json
import uuid
from typing import Any

from tuner.store.backend import Repository, now
from tuner.store.rows import drift_event, readable, readable_rows


class DriftEvents(Repository):
    """The stored drift events."""

    async def record(self, target: str, changes: dict[str, Any], action: str) -> str:
        """Store a drift event (what changed on a target, and what tuner will do about it); returns its id."""
        eid = uuid.uuid4().hex[:12]
        await self.db.write([(
            "INSERT INTO drift_events (id, target_id, detected_at, changes, action) VALUES ($1, $2, $3, $4, $5)",
            (eid, target, now(), json.dumps(changes, sort_keys=True), action),
        )])
        return eid

    @readable
    async def find(self, target: str) -> list[dict[str, Any]]:
        """One target's drift events, oldest first."""
        rows = await self.db.fetch(
            "SELECT d.id, d.target_id, '', d.detected_at, d.changes, d.action FROM drift_events d "
            "WHERE d.target_id = $1 ORDER BY d.detected_at", target)
        return [{k: e[k] for k in ("id", "detected_at", "changes", "action")}
                for e in readable_rows(rows, drift_event, self.where, "drift event")]

    @readable
    async def recent(self, *, limit: int = 100) -> list[dict[str, Any]]:
        """Drift events of every target, newest first, with the target's label."""
        rows = await self.db.fetch(
            "SELECT d.id, d.target_id, t.label, d.detected_at, d.changes, d.action FROM drift_events d "
            f"JOIN targets t ON t.id = d.target_id ORDER BY d.detected_at DESC, d.id DESC LIMIT {int(limit)}")
        return readable_rows(rows, drift_event, self.where, "drift event")
