"""The daemon's runs: every session or re-validation it was asked for, queued until its window, then running,
then how it ended (a row of ``daemon_runs``: :mod:`tuner.store.migrations`)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from tuner.store.backend import Repository, iso_us, now
from tuner.store.rows import daemon_run, readable, readable_rows

FINISHED = ("done", "failed", "interrupted")  # what retention may remove; queued and deferred work stays


class DaemonRuns(Repository):
    """One row per piece of a daemon's work; daemons that share a store see only their own (``owner``)."""

    async def add(self, run: dict[str, Any]) -> None:
        """Queue one piece of a daemon's work."""
        await self.db.write([(
            "INSERT INTO daemon_runs (id, owner, target, target_id, kind, families, knobs, reason, forced, attempt, "
            "requested_at, started_at, ended_at, status, detail) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
            (run["id"], run["owner"], run["target"], run.get("target_id"), run["kind"],
             json.dumps(list(run.get("families", ()))), json.dumps(list(run.get("knobs", ()))), run["reason"],
             int(bool(run.get("forced"))), int(run.get("attempt", 1)),
             run.get("requested_at") or iso_us(datetime.now(UTC)), run.get("started_at"), run.get("ended_at"),
             run.get("status", "queued"), run.get("detail")))])

    async def update(self, run_id: str, *, status: str, detail: str | None = None,
                     target_id: str | None = None, started: bool = False, ended: bool = False) -> None:
        """A run's new status (and detail, store id of its target); ``started``/``ended``: stamped now."""
        await self.db.write([(
            "UPDATE daemon_runs SET status = $2, detail = COALESCE($3, detail), target_id = COALESCE($4, target_id), "
            "started_at = CASE WHEN $5 = 1 THEN $7 ELSE started_at END, "
            "ended_at = CASE WHEN $6 = 1 THEN $7 ELSE ended_at END WHERE id = $1",
            (run_id, status, detail, target_id, int(started), int(ended), now()))])

    @readable
    async def find(self, owner: str, *, status: Iterable[str] = (), target: str | None = None,
                   limit: int = 100) -> list[dict[str, Any]]:
        """One daemon's runs, newest first (``status``: only those)."""
        wanted = list(status)
        where, args = ["owner = $1"], [owner]
        if wanted:
            where.append("status IN (" + ", ".join(f"${i + 2}" for i in range(len(wanted))) + ")")
            args += wanted
        if target:
            args.append(target)
            where.append(f"target = ${len(args)}")
        rows = await self.db.fetch(
            "SELECT id, target, target_id, kind, families, knobs, reason, forced, attempt, requested_at, started_at, "
            f"ended_at, status, detail FROM daemon_runs WHERE {' AND '.join(where)} "
            f"ORDER BY requested_at DESC, id DESC LIMIT {int(limit)}", *args)
        return readable_rows(rows, daemon_run, self.where, "daemon run")
