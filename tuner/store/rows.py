"""Stored rows read as untrusted input: a store is a file or a shared database that something other than this tuner
may have written (by hand, another program, a half-finished migration). Each row is checked where it is read — a
date that is not one, a number out of range or not finite, JSON that is not an object — and a row that fails is one
sentence (shown by ``tuner history``, logged by the daemon) while every other row is still served; a reader that
meets a row it cannot decode at all says so in one :class:`StoreError` sentence (:func:`readable`), never an
unexpected error."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ParamSpec, TypeVar

from tuner.errors import StoreError
from tuner.log import get_logger

log = get_logger("tuner.store")
T = TypeVar("T")
P = ParamSpec("P")
R = TypeVar("R")
RUN_KEYS = ("id", "target", "target_id", "kind", "families", "knobs", "reason", "forced", "attempt", "requested_at",
            "started_at", "ended_at", "status", "detail")

MAX_COUNT = 2**31 - 1  # probes: what a session can have run (the policy's budget is far below)
MAX_DURATION_S = 10 * 365 * 86400.0


class RowProblem(ValueError):
    """A stored row holds what tuner never writes: one sentence, naming the column and a prefix of the value."""


@dataclass(frozen=True)
class SessionSummary:
    """One stored session, as ``tuner history`` lists it."""

    id: str
    target_id: str
    target: str
    started_at: str
    duration_s: float
    kind: str
    server_version: str
    policy: str
    probes: int
    decisions: list[dict[str, Any]] = field(default_factory=list)
    fingerprint: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Listing:
    """The readable sessions, newest first, and a sentence for each stored row that is not (and was left out)."""

    sessions: list[SessionSummary]
    unreadable: list[str]


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def timestamp(value: Any, column: str = "started_at") -> str:
    """A stored timestamp as tuner writes it (ISO 8601), else :class:`RowProblem`."""
    try:
        if isinstance(value, str) and len(value) <= 40:
            datetime.fromisoformat(value)
            return value
    except ValueError:
        pass
    raise RowProblem(f"its {column} {_shown(value)} is not a date")


def _number(value: Any, column: str, *, optional: bool = False, high: float = math.inf) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an integer beyond a float's range
            number = math.inf
        if math.isfinite(number) and abs(number) <= high:
            return number
    raise RowProblem(f"its {column} {_shown(value)} is not a finite number" +
                     ("" if high == math.inf else f" of at most {high:.0f}"))


def _text(value: Any, column: str) -> str:
    if isinstance(value, str):
        return value
    raise RowProblem(f"its {column} {_shown(value)} is not text")


def decision(row: tuple[Any, ...]) -> dict[str, Any]:
    """One recommendation row (knob, object, current, recommended, decision, improvement, ci_low, ci_high,
    near_low, near_high) as the listing carries it."""
    k, o, c, rec, d, imp, lo, hi, nl, nh = row
    imp, lo, hi = (_number(v, f"recommendation's {n}", optional=True) for n, v in
                   (("improvement", imp), ("ci_low", lo), ("ci_high", hi)))
    return {"knob": _text(k, "recommendation's knob"), "object": o, "current": c, "recommended": rec,
            "decision": _text(d, "recommendation's decision"), "improvement": imp,
            "ci95": None if lo is None or hi is None else [lo, hi], "near_optimal": None if nl is None else [nl, nh]}


def summary(row: tuple[Any, ...], decisions: list[tuple[Any, ...]]) -> SessionSummary:
    """A session's row (id, target_id, label, started_at, duration_s, kind, server_version, policy, probes,
    fingerprint) and its recommendation rows, checked; :class:`RowProblem` for what tuner never writes."""
    sid, tid, label, started, duration, kind, version, policy, probes, fingerprint = row
    count = _number(probes, "probes", high=MAX_COUNT)
    if count != int(count or 0) or (count or 0) < 0:
        raise RowProblem(f"its probes {_shown(probes)} is not a count")
    fp = _json(fingerprint, "fingerprint", dict)
    return SessionSummary(
        id=_text(sid, "id"), target_id=_text(tid, "target_id"), target=_text(label, "target label"),
        started_at=timestamp(started), duration_s=abs(_number(duration, "duration_s", high=MAX_DURATION_S) or 0.0),
        kind=_text(kind, "kind"), server_version=_text(version, "server_version"), policy=_text(policy, "policy"),
        probes=int(count or 0), decisions=[decision(r) for r in decisions], fingerprint=fp)


def unreadable(where: str, session_id: Any, problem: RowProblem) -> str:
    """The sentence for a session row left out of a listing."""
    return f"{where}: stored session {_shown(session_id).strip(chr(39))} left out: {problem}"


def _json(value: Any, column: str, kind: type) -> Any:
    try:
        parsed = json.loads(value)
    except (TypeError, ValueError, RecursionError):
        parsed = None
    if not isinstance(parsed, kind):
        raise RowProblem(f"its {column} {_shown(value)} is not a JSON {'object' if kind is dict else 'array'}")
    return parsed


def daemon_run(row: tuple[Any, ...]) -> dict[str, Any]:
    """A row of the daemon's queue (:data:`RUN_KEYS`), checked."""
    out = dict(zip(RUN_KEYS, row, strict=True))
    out["families"], out["knobs"] = _json(out["families"], "families", list), _json(out["knobs"], "knobs", list)
    timestamp(out["requested_at"], "requested_at")
    for column in ("started_at", "ended_at"):
        if out[column] is not None:
            timestamp(out[column], column)
    out["forced"] = bool(out["forced"])
    return out


def drift_event(row: tuple[Any, ...]) -> dict[str, Any]:
    """A drift event's row (id, target_id, label, detected_at, changes, action), checked."""
    eid, tid, label, detected, changes, action = row
    return {"id": eid, "target_id": tid, "target": label, "detected_at": timestamp(detected, "detected_at"),
            "changes": _json(changes, "changes", dict), "action": _text(action, "action")}


def readable_rows(rows: Iterable[tuple[Any, ...]], read: Callable[[tuple[Any, ...]], T], where: str,
                  what: str) -> list[T]:
    """Each row read by ``read``; one that holds what tuner never writes is logged (one sentence) and left out."""
    out = []
    for row in rows:
        try:
            out.append(read(row))
        except RowProblem as problem:
            log.warning("store.row_unreadable", error=f"{where}: {what} {_shown(row[0])} left out: {problem}")
    return out


def readable(method: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Wrap a store's reader: the decoding errors of its rows become one StoreError naming the store."""
    @functools.wraps(method)
    async def read(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await method(*args, **kwargs)
        except (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError) as exc:
            where = getattr(args[0], "where", "the store") if args else "the store"
            raise StoreError(f"{where} holds a row tuner cannot read ({type(exc).__name__} in {method.__name__}: "
                             "bad JSON or a wrong type)",
                             hint="the store was changed by something other than tuner; move it aside (tuner "
                                  "starts a new one) or run with --no-store") from None
    return read
