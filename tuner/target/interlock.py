"""The safety interlock: a pure decision on gathered facts. It never changes anything.

Probing is allowed on a hot standby (``pg_is_in_recovery()``), or on a writable instance whose
configuration carries ``tuner.role = 'staging'`` — a custom setting an operator adds on purpose.
Everything else, above all a primary, is refused.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote
from typing import Literal

from tuner.errors import ConfigError, RefusedError
from tuner.target import pgoptions
from tuner.target.facts import TargetFacts

MARKER = "tuner.role"
MARKER_VALUE = "staging"

HOW_TO_MARK = (
    f"to tune a writable staging clone, add the line  {MARKER} = '{MARKER_VALUE}'  to its postgresql.conf "
    "(or a file it includes) and reload it (SELECT pg_reload_conf()); or point tuner at a hot standby"
)


@dataclass(frozen=True)
class Clearance:
    mode: Literal["hot_standby", "staging_clone"]
    reason: str


def client_sets_marker(dsn: str | None, environ: Mapping[str, str] | None = None) -> bool:
    """True if the client side would set any ``tuner.*`` setting itself: the resolved connection parameters'
    ``options`` (the DSN's, its service's — also with an empty DSN and PGSERVICE) or PGOPTIONS
    (:func:`pgoptions.client_options`), read after libpq's and the server's unescaping (``tuner.r\\ole`` is
    ``tuner.role`` to the server), or the marker's name anywhere in the DSN or those options. PostgreSQL hides a
    placeholder setting's source (it is not in pg_settings), so no server-side query can tell a value the client
    sent from the file's same value: this check is what does."""
    env = os.environ if environ is None else environ
    try:
        sent = pgoptions.client_options(dsn, env)
    except ConfigError:
        return True  # (no connection is made with a DSN libpq cannot read; should one get here, nothing is known)
    text = unquote(f"{dsn or ''} {sent}").lower()
    return "tuner.role" in text or any("tuner." in name for name in pgoptions.setting_names(sent))


def check(facts: TargetFacts, *, client_sets_marker: bool = False, allow_replicas: bool = False) -> Clearance:
    """Return the clearance to probe, or raise :class:`RefusedError` with one sentence and how to fix it.

    The marker counts only when its value in force comes from a configuration file (:func:`facts.marker_origin`):
    ``ALTER DATABASE … SET`` and ``ALTER ROLE … SET`` replicate to the primary, and a connection's own options
    (``options=-c tuner.role=staging``, PGOPTIONS, a URI parameter) prove nothing about the server.
    """
    if facts.in_recovery:
        return Clearance("hot_standby", "the server is a hot standby (pg_is_in_recovery() is true)")
    marker = (facts.staging_marker or "").strip()
    if not marker:
        raise RefusedError(
            f"refusing to probe: the server (PostgreSQL {facts.server_version}, database {facts.database}) "
            f"is writable — a primary — and its configuration does not carry {MARKER} = '{MARKER_VALUE}'",
            hint=HOW_TO_MARK,
        )
    if marker != MARKER_VALUE:
        raise RefusedError(
            f"refusing to probe: the server is writable and {MARKER} is '{marker}', not '{MARKER_VALUE}'",
            hint=HOW_TO_MARK,
        )
    if client_sets_marker:
        raise RefusedError(
            f"refusing to probe: {MARKER} is set by this connection's own options (DSN or PGOPTIONS), "
            "not by the server's configuration", hint=HOW_TO_MARK)
    if facts.marker_in_role_settings:
        raise RefusedError(
            f"refusing to probe: {MARKER} is set with ALTER DATABASE/ROLE … SET on this server, which replicates to "
            "the primary; only a configuration file may carry the marker",
            hint="ALTER DATABASE … RESET tuner.role / ALTER ROLE … RESET tuner.role; " + HOW_TO_MARK)
    if facts.replicas and not allow_replicas:
        raise RefusedError(
            f"refusing to probe: the server is writable and {facts.replicas} standby(s) stream WAL from it — it is "
            "a primary, whatever its configuration says", hint="point tuner at a hot standby, or at a clone that "
            "no standby follows")
    source = facts.marker_setting_source
    if source == "postgresql.auto.conf":
        raise RefusedError(
            f"refusing to probe: {MARKER} is set only with ALTER SYSTEM (postgresql.auto.conf), which one command "
            "run on the primary by mistake would do too",
            hint="put the line into the clone's postgresql.conf (or a file it includes) and reload; then "
                 "ALTER SYSTEM RESET tuner.role")
    if source == "named postgresql.auto.conf":
        raise RefusedError(
            f"refusing to probe: {MARKER} is set in {facts.marker_source}, an included file named like the one "
            "ALTER SYSTEM writes but outside the data directory; tuner does not take the marker from a file of "
            "that name, which may be a link to ALTER SYSTEM's own",
            hint="move the line into postgresql.conf or an included file with another name, and reload")
    if source == "hidden":
        raise RefusedError(
            f"refusing to probe: the server is writable and role {facts.user} may not read pg_file_settings and the "
            f"files behind it, so tuner cannot check that {MARKER} comes from a configuration file",
            hint=f"GRANT SELECT ON pg_file_settings TO {facts.user}; GRANT EXECUTE ON FUNCTION "
                 f"pg_show_all_file_settings(), pg_stat_file(text, boolean), pg_read_file(text, bigint, bigint, "
                 f"boolean) TO {facts.user}; GRANT pg_read_server_files TO {facts.user}; (or connect as a superuser)",
        )
    if source == "not reloaded":
        shows = f": {facts.config_unloaded}" if facts.config_unloaded else ""
        raise RefusedError(
            f"refusing to probe: the server is writable and its configuration files changed since it last loaded "
            f"them{shows} (a {MARKER} line may have been added or changed but not reloaded)",
            hint="reload the server's configuration (SELECT pg_reload_conf()) and check pg_file_settings; "
                 + HOW_TO_MARK)
    if source == "command line":
        raise RefusedError(
            f"refusing to probe: the server's command line sets {MARKER} (postmaster.opts), which outranks every "
            "configuration file: whatever the files say, the marker in force is not theirs",
            hint="start the server without -c tuner.role (e.g. remove it from the service's options); " + HOW_TO_MARK)
    if source != "configuration file":
        raise RefusedError(
            f"refusing to probe: the server is writable and {MARKER} = '{MARKER_VALUE}' does not come from a "
            "configuration file (ALTER DATABASE/ROLE … SET replicate to the primary; a connection's own options "
            "prove nothing about the server)",
            hint=HOW_TO_MARK,
        )
    where = f" ({facts.marker_source})" if facts.marker_source else ""
    return Clearance("staging_clone", f"the server is writable and marked {MARKER} = '{MARKER_VALUE}'{where}")


