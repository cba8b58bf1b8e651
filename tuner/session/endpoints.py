"""The servers a session may probe, learnt and cleared: connect, read the facts, ask the interlock. One path for
``tuner recommend`` (:mod:`tuner.session.runner`) and ``tuner check`` (:mod:`tuner.session.check`), so that the check clears
exactly what a session would clear and refuses exactly what it would refuse."""

from __future__ import annotations

from typing import Any

from tuner.settings.config import Config
from tuner.errors import RefusedError
from tuner.families.base import Endpoint
from tuner.log import get_logger
from tuner.target import interlock
from tuner.target.connection import connect
from tuner import redact
from tuner.target.facts import TargetFacts, gather
from tuner.target.guard import Guard
from tuner.target.server import Restart

log = get_logger("tuner.endpoints")

WRITES_NEED = (f"it writes, and the target is a hot standby: point tuner at a writable clone marked "
               f"{interlock.MARKER} = '{interlock.MARKER_VALUE}'")


async def learn(cfg: Config, dsn: str | None) -> TargetFacts:
    """The facts of the server behind ``dsn``, read with one connection (read-only queries)."""
    conn = await connect(dsn, timeout_s=cfg.target.connect_timeout_s)
    try:
        return await gather(conn)
    finally:
        await conn.close()


def clear(cfg: Config, dsn: str | None, facts: TargetFacts, restart: Restart | None, *, writable: bool,
          sandbox: bool) -> tuple[Endpoint, interlock.Clearance | None]:
    """The interlock's decision on ``facts`` (pure: nothing is connected or changed). The read-only target must pass
    it (else :class:`RefusedError`); a writable endpoint that does not pass carries the refusal for the families
    that need it. Every later connection and restart goes through the endpoint's :class:`Guard`."""
    if writable and facts.in_recovery:
        return Endpoint(dsn, None, facts, refusal=WRITES_NEED), None
    try:
        # A sandbox's primary is tuner's own, and its own standby streams from it.
        clearance = interlock.check(facts, client_sets_marker=interlock.client_sets_marker(dsn), allow_replicas=sandbox)
    except RefusedError as exc:
        if not writable:
            raise
        return Endpoint(dsn, None, facts, refusal=str(exc)), None
    guard = Guard(dsn, facts, clearance, timeout_s=cfg.target.connect_timeout_s, allow_replicas=sandbox)
    return Endpoint(dsn, _guarded(restart, guard) if restart else None, facts, guard=guard), clearance


async def endpoint(cfg: Config, dsn: str | None, restart: Restart | None, *, writable: bool,
                   sandbox: bool) -> tuple[Endpoint, Any]:
    """Connect, learn the server and check the interlock (:func:`learn`, then :func:`clear`)."""
    return clear(cfg, dsn, await learn(cfg, dsn), restart, writable=writable, sandbox=sandbox)


def _guarded(restart: Restart, guard: Guard) -> Restart:
    """``restart``, only after the guard found the server still what was cleared (a promoted standby is not
    restarted)."""

    async def checked() -> None:
        await guard.check()
        log.debug("restart", dsn=redact.dsn(guard.dsn))
        await restart()

    return checked
