"""The interlock, held for the whole session: every connection tuner opens to a server it probes is checked,
and so is the server before every restart. A standby promoted mid-session, a marker removed, or a multi-host
DSN that lands on another server stops the session with :class:`RoleChangedError` (exit 3) before anything
is written to it.
"""

from __future__ import annotations

import asyncpg


from tuner.errors import NoServerOfKind, RoleChangedError
from tuner.log import get_logger
from tuner.target import interlock
from tuner.target.connection import connect
from tuner import redact
from tuner.target import facts as facts_module
from tuner.target.facts import TargetFacts

log = get_logger("tuner.guard")

# One round trip: what the interlock decided on.
_STATE = ("SELECT pg_is_in_recovery() AS in_recovery, current_setting('tuner.role', true) AS marker, "
          "(SELECT count(*) FROM pg_stat_replication) AS replicas")
# A clone's marker must still come from the configuration file line it came from at the start, read as
# facts.gather reads it (pg_file_settings, postmaster.opts: superuser or roles granted them, which the interlock
# required).
_SYSID = "SELECT system_identifier::text FROM pg_control_system()"


class Guard:
    """Connects to one server and checks, on every connection, that it is still what was cleared."""

    def __init__(self, dsn: str | None, facts: TargetFacts, clearance: interlock.Clearance, *,
                 timeout_s: float = 10.0, allow_replicas: bool = False) -> None:
        self.dsn = dsn
        self.mode = clearance.mode
        self.system_identifier = facts.system_identifier
        self.timeout_s = timeout_s
        self.allow_replicas = allow_replicas  # a sandbox's own primary has its own standby
        self.checks = 0

    async def connect(self, *, server_settings: dict[str, str] | None = None,
                      timeout_s: float | None = None) -> asyncpg.Connection:
        """A verified connection. A hot standby is reached only as a standby, even through a multi-host DSN."""
        try:
            conn = await connect(self.dsn, timeout_s=timeout_s or self.timeout_s, server_settings=server_settings,
                                 session_attrs="standby" if self.mode == "hot_standby" else None)
        except NoServerOfKind:
            self._stop(f"{redact.dsn(self.dsn)} is no longer a hot standby (it was promoted, or no standby answers)")
        try:
            await self.verify(conn)
        except BaseException:
            conn.terminate()
            raise
        return conn

    async def check(self) -> None:
        """Verify the server once (before a restart, say)."""
        conn = await self.connect()
        await conn.close()

    async def verify(self, conn: asyncpg.Connection) -> None:
        row = await conn.fetchrow(_STATE)
        assert row is not None
        self.checks += 1
        where = redact.dsn(self.dsn)
        if self.mode == "hot_standby" and not row["in_recovery"]:
            self._stop(f"{where} is no longer a hot standby (it was promoted, or another server answered)")
        if self.mode == "staging_clone":
            origin, _, _ = await facts_module.marker_facts(conn, row["marker"], whole=False)
            if row["marker"] != interlock.MARKER_VALUE or origin != "configuration file":
                self._stop(f"{where} no longer carries {interlock.MARKER} = '{interlock.MARKER_VALUE}' in a "
                           "configuration file (the marker was removed, or another server answered)")
            if row["replicas"] and not self.allow_replicas:
                self._stop(f"{where} has standbys streaming from it now: it is a primary")
        if self.system_identifier is not None:
            try:
                sysid = await conn.fetchval(_SYSID)
            except asyncpg.InsufficientPrivilegeError:
                return
            if sysid != self.system_identifier:
                self._stop(f"{where} is another server now (system identifier {sysid}, "
                           f"not {self.system_identifier})")

    def _stop(self, what: str) -> None:
        log.error("interlock.changed", detail=what)
        raise RoleChangedError(
            f"stopping: {what}; tuner wrote nothing to it after the change and put back what it could",
            hint="check the server's role; `tuner restore` puts back anything the session could not",
        )
