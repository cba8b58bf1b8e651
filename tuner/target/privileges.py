"""The privileges a session uses that a role may lack, each with what it costs and the GRANT that fixes it.

Every test here is a privilege some part of a session exercises: the data directory and the system identifier
(how tuner knows it runs on the staging host: :meth:`tuner.target.facts.TargetFacts.local_data_directory`), the
tables the probes read, ``SET track_io_timing`` (the probes' I/O time; a superuser-only setting that PostgreSQL 15
lets a superuser grant: ``GRANT SET ON PARAMETER``, https://www.postgresql.org/docs/15/sql-grant.html), and, on a
writable clone, what the interlock reads to tell where the staging marker comes from
(:func:`tuner.target.facts.marker_origin`). Superuser-only capabilities (pg_buffercache eviction, ALTER SYSTEM
on the knobs tuner writes back) are no GRANT away: ``tuner check`` names them among the checks instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import asyncpg

from tuner.fs import sqlfiles
from tuner.report.preflight import Grant
from tuner.target.facts import TargetFacts

_SQL = str(Path(__file__).parent)
MIN_VERSION = 150000  # has_parameter_privilege and GRANT SET ON PARAMETER

# (column of privileges.sql, privilege, what the session loses without it, GRANT with {role}); every target
_EVERY = (
    ("read_all_settings", "pg_read_all_settings", "the data directory is hidden, so tuner cannot tell it runs on "
     "the staging host: families that empty the page cache or read the relation files are skipped",
     "GRANT pg_read_all_settings TO {role};"),
    ("control_system", "EXECUTE on pg_control_system()", "the system identifier is hidden, so tuner cannot tell it "
     "runs on the staging host, and cannot notice another server answering mid-session",
     "GRANT EXECUTE ON FUNCTION pg_control_system() TO {role};"),
    ("read_tables", "SELECT on the tables (pg_read_all_data)", "the probes cannot read every table, and the "
     "workload is planned only from those they can", "GRANT pg_read_all_data TO {role};"),
    ("set_track_io_timing", "SET on track_io_timing", "probes cannot turn on track_io_timing, so their I/O share "
     "is not measured (times still are)", "GRANT SET ON PARAMETER track_io_timing TO {role};"),
)
# only with [workload] from = "pg_stat_statements": other roles' statements are hidden without it
_STATEMENTS = (
    ("read_all_stats", "pg_read_all_stats", "pg_stat_statements hides the text of other roles' statements, so "
     "the application's statements cannot be ranked or replayed", "GRANT pg_read_all_stats TO {role};"),
)
# only where the interlock must read where the staging marker comes from (a writable clone)
_WRITABLE = (
    ("file_settings", "SELECT on pg_file_settings", "the interlock cannot see the marker's configuration file line",
     "GRANT SELECT ON pg_file_settings TO {role};"),
    ("show_file_settings", "EXECUTE on pg_show_all_file_settings()", "the interlock cannot read pg_file_settings",
     "GRANT EXECUTE ON FUNCTION pg_show_all_file_settings() TO {role};"),
    ("stat_file", "EXECUTE on pg_stat_file(text, boolean)", "the interlock cannot tell whether the configuration "
     "file changed since it was loaded", "GRANT EXECUTE ON FUNCTION pg_stat_file(text, boolean) TO {role};"),
    ("read_file", "EXECUTE on pg_read_file(text, bigint, bigint, boolean)", "the interlock cannot read the "
     "server's command line (postmaster.opts)",
     "GRANT EXECUTE ON FUNCTION pg_read_file(text, bigint, bigint, boolean) TO {role};"),
    ("read_server_files", "pg_read_server_files", "the interlock cannot read configuration files outside the data "
     "directory", "GRANT pg_read_server_files TO {role};"),
)


def missing(row: Mapping[str, Any], *, writable: bool, statements: bool = False) -> list[Grant]:
    """The privileges ``row`` (privileges.sql) lacks, for a hot standby or (``writable``) a writable clone, and
    (``statements``) to read every role's statements in pg_stat_statements; pure."""
    tests = _EVERY + (_STATEMENTS if statements else ()) + (_WRITABLE if writable else ())
    return [Grant(privilege=what, needed_for=why, sql=grant.format(role=row["role"]))
            for column, what, why, grant in tests if not row[column]]


async def check(conn: asyncpg.Connection, facts: TargetFacts, *, statements: bool = False) -> list[Grant] | None:
    """The privileges the connected role lacks (read-only queries; ``statements``: [workload] from =
    "pg_stat_statements"); None where the server is older than 15."""
    if facts.server_version_num < MIN_VERSION:
        return None
    row = await conn.fetchrow(sqlfiles.load(_SQL, "privileges"))
    assert row is not None
    return missing(dict(row), writable=not facts.in_recovery, statements=statements)
