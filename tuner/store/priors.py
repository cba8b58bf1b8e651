"""Priors for a warm start: what the latest stored session on a matching target measured for one family."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tuner.store.backend import DATED, Repository
from tuner.store.rows import readable


@dataclass(frozen=True)
class StoredPrior:
    """What an earlier session measured for one family, to start a new search from (a warm start)."""

    session_id: str
    started_at: str
    matched_by: str  # "system identifier" or "device model, file system and PostgreSQL major"
    trials: list[tuple[dict[str, int], float, str | None]]  # (config, ms, object): every successful trial
    candidates: list[tuple[dict[str, int], str | None]]  # what it confirmed against its baseline, in order

    @property
    def observations(self) -> list[tuple[dict[str, int], float]]:
        return [(c, v) for c, v, _ in self.trials]

    @property
    def previous(self) -> dict[str, int] | None:
        """The configuration that session confirmed last (its winner), if any."""
        return self.candidates[-1][0] if self.candidates else None

    def for_knobs(self, knobs: Iterable[str], *, object: str | None = None) -> dict[str, Any]:
        """``build_optimiser``'s warm-start arguments for a search over exactly ``knobs`` (and, given ``object``,
        on that object only — a readahead search's device): the observations of those knobs (a screen's trials
        carry another knob and are left out) and the last winner among them."""
        want = set(knobs)

        def mine(c: dict[str, int], o: str | None) -> bool:
            return set(c) == want and (object is None or o == object)

        return {"prior": [(c, v) for c, v, o in self.trials if mine(c, o)],
                "previous": next((c for c, o in reversed(self.candidates) if mine(c, o)), None)}


class Priors(Repository):
    """The stored trials a search starts from."""

    @readable
    async def find(self, fingerprint: dict[str, Any], family: str, *,
                   exclude: str | None = None) -> StoredPrior | None:
        """The latest stored session that measured ``family`` on a matching target: the same server (system
        identifier, on the same data device where both sessions know it), else the same device model, file
        system and PostgreSQL major. Only that one session's
        trials are returned — times from different sessions are on different scales (data size, cache, day),
        and the optimiser calibrates one prior against today's measurements."""
        sysid, major, device_key = fingerprint.get("system_identifier"), fingerprint.get("major"), \
            fingerprint.get("device_key")
        candidates: list[tuple[str, str]] = []
        if sysid:
            rows = await self.db.fetch(
                "SELECT s.id, s.started_at FROM sessions s JOIN targets t ON t.id = s.target_id "
                "WHERE t.system_identifier = $1 AND s.id <> $2 AND EXISTS (SELECT 1 FROM trials r WHERE "
                "r.session_id = s.id AND r.family = $3 AND r.status = 'ok') "
                # The same server on another disk is another curve: a known device must match too.
                "AND (s.device_key IS NULL OR $4 = '' OR s.device_key = $4) "
                f"AND s.started_at LIKE '{DATED}' ORDER BY s.started_at DESC LIMIT 1",
                sysid, exclude or "", family, device_key or "")
            candidates += [(r[0], "system identifier") for r in rows]
        if not candidates and device_key and major:
            rows = await self.db.fetch(
                "SELECT s.id, s.started_at FROM sessions s WHERE s.major = $1 AND s.device_key = $2 AND s.id <> $3 "
                "AND EXISTS (SELECT 1 FROM trials r WHERE r.session_id = s.id AND r.family = $4 AND "
                f"r.status = 'ok') AND s.started_at LIKE '{DATED}' ORDER BY s.started_at DESC LIMIT 1",
                int(major), device_key, exclude or "", family)
            candidates += [(r[0], "device model, file system and PostgreSQL major") for r in rows]
        if not candidates:
            return None
        sid, matched_by = candidates[0]
        rows = await self.db.fetch(
            # Only the family's own objective: a scaling trial measured another load (another client count)
            "SELECT config, value, phase, arm, object FROM trials WHERE session_id = $1 AND family = $2 "
            "AND status = 'ok' AND phase IN ('search', 'confirm') ORDER BY seq", sid, family)
        observations = [(json.loads(c), float(v), o) for c, v, _, _, o in rows if v is not None]
        confirmed = [(json.loads(c), o) for c, _, phase, arm, o in rows if phase == "confirm" and arm == "candidate"]
        started = (await self.db.fetch("SELECT started_at FROM sessions WHERE id = $1", sid))[0][0]
        return StoredPrior(sid, started, matched_by, observations, confirmed)
