"""What every store does, on top of four primitives its backend provides (SQLite or PostgreSQL).

Statements are written once, with PostgreSQL's ``$1`` placeholders; the SQLite backend turns them into ``?``.
Every write is one transaction: a session is stored whole or not at all.
"""

from __future__ import annotations

import abc
import contextlib
import hashlib
import json
import math
import uuid
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from tuner import __version__
from tuner.errors import ConfigError, StoreError, TunerError
from tuner.log import get_logger
from tuner.report.model import Report
from tuner.report.validate import check
from tuner.store import schema
from tuner.store.in_force import Decided, in_force
from tuner.store.listing import (Listing, RowProblem, SessionSummary, daemon_run, drift_event, readable_rows,
                                 summary, timestamp, unreadable)
from tuner.store.rows import readable as _readable


log = get_logger("tuner.store")
# What "newest" is ordered by must look like a date: text such as 'not a date' sorts after every ISO timestamp.
DATED = "____-__-__T__:__:__%"


class TargetBusyError(TunerError):
    """Another tuner runs a session on this target right now (exit 1): two sessions on one server would spoil
    each other's measurements and each other's restores."""


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


def target_id(system_identifier: str | None, data_directory: str | None, label: str) -> str:
    """A target's identity: its system identifier and data directory (a clone shares the first, not both)."""
    basis = f"{system_identifier}|{data_directory}" if system_identifier else f"label|{label}"
    return hashlib.sha256(basis.encode()).hexdigest()[:16]


def lock_key(target: str) -> int:
    """A signed 64-bit advisory-lock key for a target id."""
    return int.from_bytes(hashlib.sha256(f"tuner-target|{target}".encode()).digest()[:8], "big", signed=True)


def _iso(ts: datetime) -> str:
    return ts.astimezone(UTC).isoformat(timespec="seconds")


def _iso_us(ts: datetime) -> str:
    """To the microsecond: the daemon's queue is ordered by it (requests within one second keep their order)."""
    return ts.astimezone(UTC).isoformat(timespec="microseconds")


def _num(value: float | None) -> float | None:
    return value if value is None or math.isfinite(value) else None


class Store(abc.ABC):
    """A history of sessions. A backend provides the primitives below; everything else is shared."""

    where: str = "the store"

    # -- primitives -------------------------------------------------------------------------------
    @abc.abstractmethod
    async def _fetch(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        """The rows of one query (PostgreSQL's ``$1`` placeholders)."""

    @abc.abstractmethod
    async def _write(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> None:
        """Run ``statements`` in one transaction."""

    @abc.abstractmethod
    async def _migrate(self, current: int) -> None:
        """Run the migrations after ``current`` in one transaction; a concurrent migrator waits and finds them done."""

    @abc.abstractmethod
    async def _version(self) -> int | None:
        """The stored schema version; None for an empty store."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Let go of the store (a no-op the second time)."""

    @abc.abstractmethod
    def lock_target(self, target: str, label: str) -> contextlib.AbstractAsyncContextManager[None]:
        """Hold this store's lock on ``target`` for a block, or raise :class:`TargetBusyError` naming the holder."""

    # -- schema -----------------------------------------------------------------------------------
    async def prepare(self) -> None:
        """Check the schema version and run the migrations it is missing; a newer schema is refused."""
        version = await self._version()
        if version is not None and version > schema.VERSION:
            raise StoreError(
                f"{self.where} has schema version {version}, newer than this tuner knows ({schema.VERSION})",
                hint="run the newer tuner that wrote it, or give this one another store ([store] path or url), "
                     "or --no-store",
            )
        await self._ready()
        if version is None or version < schema.VERSION:
            await self._migrate(version or 0)

    async def _ready(self) -> None:
        """Settings for a store now known to be tuner's (nothing is changed in a store before that)."""

    # -- writing ----------------------------------------------------------------------------------
    async def save(self, report: Report, fingerprint: dict[str, Any], *, kind: str = "recommend") -> None:
        """Store one session: its target, its trials, its recommendations and its whole report."""
        t = report.target
        label = str(fingerprint.get("label") or t.dsn)
        tid = target_id(t.system_identifier, fingerprint.get("data_directory"), label)
        now = _iso(datetime.now(UTC))
        s = report.session
        stmts: list[tuple[str, Sequence[Any]]] = [
            ("INSERT INTO targets (id, system_identifier, data_directory, label, first_seen, last_seen) "
             "VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT (id) DO UPDATE SET last_seen = $5, label = $4",
             (tid, t.system_identifier, fingerprint.get("data_directory"), label, now)),
            ("INSERT INTO sessions (id, target_id, started_at, duration_s, kind, sandbox, major, server_version, "
             "device_key, policy, seed, probes, tuner_version, fingerprint, report) "
             "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
             (s.id, tid, _iso(s.started_at), s.duration_s, kind, int(t.sandbox), t.server_version_num // 10000,
              t.server_version, fingerprint.get("device_key"), s.policy, s.seed, s.probes, __version__,
              json.dumps(fingerprint, sort_keys=True), report.model_dump_json())),
        ]
        for i, tr in enumerate(report.trials):
            stmts.append((
                "INSERT INTO trials (session_id, seq, family, object, config, value, status, phase, arm, "
                "started_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                (s.id, i, tr.family, tr.object, json.dumps(tr.config, sort_keys=True), _num(tr.value), tr.status,
                 tr.phase, tr.arm, _iso(tr.started_at)),
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
        await self._write(stmts)

    async def record_drift(self, target: str, changes: dict[str, Any], action: str) -> str:
        """Store a drift event (what changed on a target, and what tuner will do about it); returns its id."""
        eid = uuid.uuid4().hex[:12]
        await self._write([(
            "INSERT INTO drift_events (id, target_id, detected_at, changes, action) VALUES ($1, $2, $3, $4, $5)",
            (eid, target, _iso(datetime.now(UTC)), json.dumps(changes, sort_keys=True), action),
        )])
        return eid

    @_readable
    async def drift_events(self, target: str) -> list[dict[str, Any]]:
        rows = await self._fetch(
            "SELECT d.id, d.target_id, '', d.detected_at, d.changes, d.action FROM drift_events d "
            "WHERE d.target_id = $1 ORDER BY d.detected_at", target)
        return [{k: e[k] for k in ("id", "detected_at", "changes", "action")}
                for e in readable_rows(rows, drift_event, self.where, "drift event")]

    async def ensure_target(self, target: str, system_identifier: str | None, data_directory: str | None,
                            label: str) -> None:
        """Record a target the daemon watches before any of its sessions is stored (drift events refer to it)."""
        now = _iso(datetime.now(UTC))
        await self._write([(
            "INSERT INTO targets (id, system_identifier, data_directory, label, first_seen, last_seen) "
            "VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT (id) DO UPDATE SET last_seen = $5",
            (target, system_identifier, data_directory, label, now))])

    @_readable
    async def all_drift_events(self, *, limit: int = 100) -> list[dict[str, Any]]:
        """Drift events of every target, newest first, with the target's label."""
        rows = await self._fetch(
            "SELECT d.id, d.target_id, t.label, d.detected_at, d.changes, d.action FROM drift_events d "
            f"JOIN targets t ON t.id = d.target_id ORDER BY d.detected_at DESC, d.id DESC LIMIT {int(limit)}")
        return readable_rows(rows, drift_event, self.where, "drift event")

    # -- the daemon's runs -------------------------------------------------------------------------
    async def add_run(self, run: dict[str, Any]) -> None:
        """Queue one piece of a daemon's work (a row of ``daemon_runs``; see :mod:`tuner.store.schema`)."""
        await self._write([(
            "INSERT INTO daemon_runs (id, owner, target, target_id, kind, families, knobs, reason, forced, attempt, "
            "requested_at, started_at, ended_at, status, detail) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
            (run["id"], run["owner"], run["target"], run.get("target_id"), run["kind"],
             json.dumps(list(run.get("families", ()))), json.dumps(list(run.get("knobs", ()))), run["reason"],
             int(bool(run.get("forced"))), int(run.get("attempt", 1)),
             run.get("requested_at") or _iso_us(datetime.now(UTC)), run.get("started_at"), run.get("ended_at"),
             run.get("status", "queued"), run.get("detail")))])

    async def update_run(self, run_id: str, *, status: str, detail: str | None = None,
                         target_id: str | None = None, started: bool = False, ended: bool = False) -> None:
        now = _iso(datetime.now(UTC))
        await self._write([(
            "UPDATE daemon_runs SET status = $2, detail = COALESCE($3, detail), target_id = COALESCE($4, target_id), "
            "started_at = CASE WHEN $5 = 1 THEN $7 ELSE started_at END, "
            "ended_at = CASE WHEN $6 = 1 THEN $7 ELSE ended_at END WHERE id = $1",
            (run_id, status, detail, target_id, int(started), int(ended), now))])

    @_readable
    async def runs(self, owner: str, *, status: Iterable[str] = (), target: str | None = None,
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
        rows = await self._fetch(
            "SELECT id, target, target_id, kind, families, knobs, reason, forced, attempt, requested_at, started_at, "
            f"ended_at, status, detail FROM daemon_runs WHERE {' AND '.join(where)} "
            f"ORDER BY requested_at DESC, id DESC LIMIT {int(limit)}", *args)
        return readable_rows(rows, daemon_run, self.where, "daemon run")

    @_readable
    async def accepted(self, target: str) -> list[tuple[str, Any]]:
        """The recommendations in force on a target (its store id), newest first, each as (session id,
        Recommendation), decided from its whole history (:func:`tuner.store.in_force.in_force`)."""
        rows = await self._fetch(
            "SELECT r.session_id, r.seq, r.knob, r.object, r.decision, r.current_value, r.recommended, s.kind, "
            "s.started_at "
            "FROM recommendations r JOIN sessions s ON s.id = r.session_id WHERE s.target_id = $1 "
            "ORDER BY s.started_at DESC, s.id DESC, r.seq", target)
        reports: dict[str, Report] = {}
        out: list[tuple[str, Any]] = []
        for d in in_force(Decided(*r[:-1]) for r in rows if self._dated(r[0], r[-1])):
            if d.session_id not in reports:
                reports[d.session_id] = await self.report(d.session_id)
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

    # -- retention ---------------------------------------------------------------------------------
    FINISHED_RUNS = ("done", "failed", "interrupted")

    async def prune(self, before: datetime, *, dry_run: bool = False) -> dict[str, int]:
        """Remove what is older than ``before``: stored sessions (with their trials and recommendations), drift
        events, and the daemon's finished runs (done, failed, interrupted; queued and deferred work stays).

        Kept whatever their age: per target, its newest session (the warm start's prior) and every session whose
        recommendation is in force (``accepted``: what /v1/recommendations serves and re-validation checks).
        Returns the counts removed (or that would be, with ``dry_run``) and ``kept``: old sessions kept for
        those reasons. One transaction: all of it or nothing."""
        cutoff = _iso(before)
        keep: set[str] = set()
        for (tid,) in await self._fetch("SELECT id FROM targets"):
            newest = await self._fetch(
                f"SELECT id FROM sessions WHERE target_id = $1 AND started_at LIKE '{DATED}' "
                "ORDER BY started_at DESC, id DESC LIMIT 1", tid)
            keep.update(r[0] for r in newest)
            keep.update(sid for sid, _ in await self.accepted(tid))
        old = [r[0] for r in await self._fetch("SELECT id FROM sessions WHERE started_at < $1 ORDER BY id", cutoff)]
        gone = [sid for sid in old if sid not in keep]
        finished = ", ".join(f"'{s}'" for s in self.FINISHED_RUNS)
        counted = [await self._fetch("SELECT COUNT(*) FROM drift_events WHERE detected_at < $1", cutoff),
                   await self._fetch(f"SELECT COUNT(*) FROM daemon_runs WHERE requested_at < $1 AND status IN "
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
            await self._write(stmts)
        return {"sessions": len(gone), "drift_events": int(drift), "daemon_runs": int(runs),
                "kept": len(old) - len(gone)}

    # -- reading ----------------------------------------------------------------------------------
    async def sessions(self, *, target: str | None = None, limit: int = 50) -> list[SessionSummary]:
        """The latest ``limit`` readable sessions (of one target, given its id or a prefix of it), newest first;
        a row that cannot be read is logged and left out (:meth:`listing` has its sentence)."""
        listed = await self.listing(target=target, limit=limit)
        for sentence in listed.unreadable:
            log.warning("store.row_unreadable", error=sentence)
        return listed.sessions

    @_readable
    async def listing(self, *, target: str | None = None, limit: int = 50) -> Listing:
        """The latest ``limit`` sessions, newest first, each row checked (:mod:`tuner.store.listing`): the
        readable ones, and one sentence for each that is not."""
        where, args = "", []
        if target:
            where, args = "WHERE s.target_id LIKE $1", [target.lower() + "%"]
        out: list[SessionSummary] = []
        bad: list[str] = []
        while len(out) < limit:  # a row left out does not take the place of one that can be served
            rows = await self._fetch(
                "SELECT s.id, s.target_id, t.label, s.started_at, s.duration_s, s.kind, s.server_version, s.policy, "
                f"s.probes, s.fingerprint FROM sessions s JOIN targets t ON t.id = s.target_id {where} "
                f"ORDER BY s.started_at DESC, s.id DESC LIMIT {int(limit) - len(out)} OFFSET {len(out) + len(bad)}",
                *args)
            for r in rows:
                recs = await self._fetch(
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
            rows = await self._fetch(f"SELECT id FROM sessions WHERE started_at LIKE '{DATED}' "
                                     "ORDER BY started_at DESC, id DESC LIMIT 1")
            if not rows:
                raise ConfigError(f"{self.where} holds no sessions yet",
                                  hint="run 'tuner recommend' first (it stores every session unless --no-store)")
            return str(rows[0][0])
        if not ref or not all(c in "0123456789abcdef" for c in ref.lower()):
            raise ConfigError(f"{ref!r} is not a session id (12 hexadecimal digits, or a unique prefix of them)",
                              hint="'tuner history' lists the stored sessions")
        rows = await self._fetch("SELECT id FROM sessions WHERE id LIKE $1 ORDER BY id LIMIT 3", ref.lower() + "%")
        if not rows:
            raise ConfigError(f"no stored session starts with {ref}", hint="'tuner history' lists the stored sessions")
        if len(rows) > 1:
            raise ConfigError(f"{ref} names more than one session ({', '.join(r[0] for r in rows)}, …)",
                              hint="give more digits of the session id")
        return str(rows[0][0])

    async def report(self, session_id: str) -> Report:
        rows = await self._fetch("SELECT report FROM sessions WHERE id = $1", session_id)
        if not rows:
            raise ConfigError(f"no stored session {session_id}", hint="'tuner history' lists the stored sessions")
        try:
            return check(Report.model_validate_json(rows[0][0]), where=f"{self.where}: stored session {session_id}")
        except ValidationError as exc:
            raise StoreError(f"{self.where}: the stored report of session {session_id} cannot be read "
                             f"({exc.error_count()} problems, first at {'.'.join(map(str, exc.errors()[0]['loc'])) or 'its top'})",
                             hint="it may have been written by a newer tuner") from None

    @_readable
    async def prior(self, fingerprint: dict[str, Any], family: str, *, exclude: str | None = None) -> StoredPrior | None:
        """The latest stored session that measured ``family`` on a matching target: the same server (system
        identifier, on the same data device where both sessions know it), else the same device model, file
        system and PostgreSQL major. Only that one session's
        trials are returned — times from different sessions are on different scales (data size, cache, day),
        and the optimiser calibrates one prior against today's measurements."""
        sysid, major, device_key = fingerprint.get("system_identifier"), fingerprint.get("major"), \
            fingerprint.get("device_key")
        candidates: list[tuple[str, str]] = []
        if sysid:
            rows = await self._fetch(
                "SELECT s.id, s.started_at FROM sessions s JOIN targets t ON t.id = s.target_id "
                "WHERE t.system_identifier = $1 AND s.id <> $2 AND EXISTS (SELECT 1 FROM trials r WHERE "
                "r.session_id = s.id AND r.family = $3 AND r.status = 'ok') "
                # The same server on another disk is another curve: a known device must match too.
                "AND (s.device_key IS NULL OR $4 = '' OR s.device_key = $4) "
                f"AND s.started_at LIKE '{DATED}' ORDER BY s.started_at DESC LIMIT 1",
                sysid, exclude or "", family, device_key or "")
            candidates += [(r[0], "system identifier") for r in rows]
        if not candidates and device_key and major:
            rows = await self._fetch(
                "SELECT s.id, s.started_at FROM sessions s WHERE s.major = $1 AND s.device_key = $2 AND s.id <> $3 "
                "AND EXISTS (SELECT 1 FROM trials r WHERE r.session_id = s.id AND r.family = $4 AND "
                f"r.status = 'ok') AND s.started_at LIKE '{DATED}' ORDER BY s.started_at DESC LIMIT 1",
                int(major), device_key, exclude or "", family)
            candidates += [(r[0], "device model, file system and PostgreSQL major") for r in rows]
        if not candidates:
            return None
        sid, matched_by = candidates[0]
        rows = await self._fetch(
            # Only the family's own objective: a scaling trial measured another load (another client count)
            "SELECT config, value, phase, arm, object FROM trials WHERE session_id = $1 AND family = $2 "
            "AND status = 'ok' AND phase IN ('search', 'confirm') ORDER BY seq", sid, family)
        observations = [(json.loads(c), float(v), o) for c, v, _, _, o in rows if v is not None]
        confirmed = [(json.loads(c), o) for c, _, phase, arm, o in rows if phase == "confirm" and arm == "candidate"]
        started = (await self._fetch("SELECT started_at FROM sessions WHERE id = $1", sid))[0][0]
        return StoredPrior(sid, started, matched_by, observations, confirmed)


@contextlib.asynccontextmanager
async def no_lock() -> AsyncIterator[None]:
    yield
