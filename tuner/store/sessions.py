"""Stored sessions: each session's target, trials, recommendations and whole report, saved in one transaction;
listed newest first (``tuner history``, the daemon's page and API), found by id or prefix, and read back.

A report read back is checked like user input before anything uses it (a shared ``[store] url`` is written by
every tuner of a fleet); the check is given by whoever opens the store (:class:`ReportCheck`:
:func:`tuner.report.validate.check`), so the store itself knows nothing of what a report may say.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import ValidationError

from tuner import __version__
from tuner.errors import ConfigError, StoreError
from tuner.log import get_logger
from tuner.report.model import Report
from tuner.store.backend import DATED, Repository, StoreBackend, iso, now
from tuner.store.rows import Listing, RowProblem, SessionSummary, readable, summary, unreadable
from tuner.store.targets import target_id

log = get_logger("tuner.store")


class ReportCheck(Protocol):
    """What a stored report must pass to be read back: the report itself, or an error naming ``where``."""

    def __call__(self, report: Report, *, where: str) -> Report: ...


def _num(value: float | None) -> float | None:
    return value if value is None or math.isfinite(value) else None


class Sessions(Repository):
    """The stored sessions, their trials and recommendations."""

    def __init__(self, db: StoreBackend, check: ReportCheck) -> None:
        super().__init__(db)
        self._check = check

    async def save(self, report: Report, fingerprint: dict[str, Any], *, kind: str = "recommend") -> None:
        """Store one session: its target, its trials, its recommendations and its whole report."""
        t = report.target
        label = str(fingerprint.get("label") or t.dsn)
        tid = target_id(t.system_identifier, fingerprint.get("data_directory"), label)
        s = report.session
        stmts: list[tuple[str, Sequence[Any]]] = [
            ("INSERT INTO targets (id, system_identifier, data_directory, label, first_seen, last_seen) "
             "VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT (id) DO UPDATE SET last_seen = $5, label = $4",
             (tid, t.system_identifier, fingerprint.get("data_directory"), label, now())),
            ("INSERT INTO sessions (id, target_id, started_at, duration_s, kind, sandbox, major, server_version, "
             "device_key, policy, seed, probes, tuner_version, fingerprint, report) "
             "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
             (s.id, tid, iso(s.started_at), s.duration_s, kind, int(t.sandbox), t.server_version_num // 10000,
              t.server_version, fingerprint.get("device_key"), s.policy, s.seed, s.probes, __version__,
              json.dumps(fingerprint, sort_keys=True), report.model_dump_json())),
        ]
        for i, tr in enumerate(report.trials):
            stmts.append((
                "INSERT INTO trials (session_id, seq, family, object, config, value, status, phase, arm, "
                "started_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                (s.id, i, tr.family, tr.object, json.dumps(tr.config, sort_keys=True), _num(tr.value), tr.status,
                 tr.phase, tr.arm, iso(tr.started_at)),
            ))
        for i, r in enumerate(report.recommendations):
            e = r.effect
            near = r.near_optimal or (None, None)
            stmts.append((
                "INSERT INTO recommendations (session_id, seq, knob, scope, object, current_value, recommended, "
                "decision, improvement, ci_low, ci_high, n_pairs, near_low, near_high, reason) "
                "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
                (s.id, i, r.knob, r.scope, r.object, str(r.current), str(r.recommended), r.decision,
                 e.improvement if e else None, e.ci95[0] if e else None, e.ci95[1] if e else None,
                 e.n_pairs if e else None, near[0], near[1], r.reason),
            ))
        await self.db.write(stmts)

    async def newest(self, *, target: str | None = None, limit: int = 50) -> list[SessionSummary]:
        """The latest ``limit`` readable sessions (of one target, given its id or a prefix of it), newest first;
        a row that cannot be read is logged and left out (:meth:`listing` has its sentence)."""
        listed = await self.listing(target=target, limit=limit)
        for sentence in listed.unreadable:
            log.warning("store.row_unreadable", error=sentence)
        return listed.sessions

    @readable
    async def listing(self, *, target: str | None = None, limit: int = 50) -> Listing:
        """The latest ``limit`` sessions, newest first, each row checked (:mod:`tuner.store.rows`): the
        readable ones, and one sentence for each that is not."""
        where, args = "", []
        if target:
            where, args = "WHERE s.target_id LIKE $1", [target.lower() + "%"]
        out: list[SessionSummary] = []
        bad: list[str] = []
        while len(out) < limit:  # a row left out does not take the place of one that can be served
            rows = await self.db.fetch(
                "SELECT s.id, s.target_id, t.label, s.started_at, s.duration_s, s.kind, s.server_version, s.policy, "
                f"s.probes, s.fingerprint FROM sessions s JOIN targets t ON t.id = s.target_id {where} "
                f"ORDER BY s.started_at DESC, s.id DESC LIMIT {int(limit) - len(out)} OFFSET {len(out) + len(bad)}",
                *args)
            for r in rows:
                recs = await self.db.fetch(
                    "SELECT knob, object, current_value, recommended, decision, improvement, ci_low, ci_high, "
                    "near_low, near_high FROM recommendations WHERE session_id = $1 ORDER BY seq", r[0])
                try:
                    out.append(summary(r, recs))
                except RowProblem as problem:
                    bad.append(unreadable(self.where, r[0], problem))
            if not rows:
                break
        return Listing(out, bad)

    async def resolve(self, ref: str | None) -> str:
        """A session id from ``ref``: a whole id, a unique prefix of one, or None/``latest`` for the newest."""
        if ref is None or ref == "latest":
            rows = await self.db.fetch(f"SELECT id FROM sessions WHERE started_at LIKE '{DATED}' "
                                       "ORDER BY started_at DESC, id DESC LIMIT 1")
            if not rows:
                raise ConfigError(f"{self.where} holds no sessions yet",
                                  hint="run 'tuner recommend' first (it stores every session unless --no-store)")
            return str(rows[0][0])
        if not ref or not all(c in "0123456789abcdef" for c in ref.lower()):
            raise ConfigError(f"{ref!r} is not a session id (12 hexadecimal digits, or a unique prefix of them)",
                              hint="'tuner history' lists the stored sessions")
        rows = await self.db.fetch("SELECT id FROM sessions WHERE id LIKE $1 ORDER BY id LIMIT 3", ref.lower() + "%")
        if not rows:
            raise ConfigError(f"no stored session starts with {ref}", hint="'tuner history' lists the stored sessions")
        if len(rows) > 1:
            raise ConfigError(f"{ref} names more than one session ({', '.join(r[0] for r in rows)}, …)",
                              hint="give more digits of the session id")
        return str(rows[0][0])

    async def report(self, session_id: str) -> Report:
        """A stored session's whole report, checked (:class:`ReportCheck`)."""
        rows = await self.db.fetch("SELECT report FROM sessions WHERE id = $1", session_id)
        if not rows:
            raise ConfigError(f"no stored session {session_id}", hint="'tuner history' lists the stored sessions")
        try:
            report = Report.model_validate_json(rows[0][0])
        except ValidationError as exc:
            raise StoreError(f"{self.where}: the stored report of session {session_id} cannot be read "
                             f"({exc.error_count()} problems, first at {'.'.join(map(str, exc.errors()[0]['loc'])) or 'its top'})",
                             hint="it may have been written by a newer tuner") from None
        return self._check(report, where=f"{self.where}: stored session {session_id}")
