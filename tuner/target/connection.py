"""Connections with libpq conventions: a DSN or URI, PG* environment variables, the service and password files.

A DSN is read by libpq's own parser and checked keyword by keyword before anything connects
(:mod:`tuner.target.conninfo`), then handed to asyncpg as one URI. ``connect_timeout`` and ``application_name``
give way to ``[target] connect_timeout_s`` and tuner's own name; a keyword asyncpg cannot honour is refused with
one sentence naming it, never silently dropped — ``keepalives`` or ``require_auth`` may matter to someone.

Passwords never reach a log line or an error message: use :func:`tuner.redact.dsn` for anything printed, and errors say
where a DSN is wrong (a keyword, libpq's own message with every quoted fragment but keyword names hidden), never
what it says there.
"""

from __future__ import annotations

import asyncio
import os
import urllib.parse
import warnings
from collections.abc import Iterable, Mapping

import asyncpg

from tuner.errors import ConfigError, NoServerOfKind, TargetError
from tuner.target import conninfo
from tuner import redact
from tuner.log import get_logger

log = get_logger("tuner.connection")

SESSION_ATTRS = ("any", "primary", "standby", "prefer-standby", "read-write", "read-only")
_SSLMODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
_DSN_HINT = conninfo.HINT
_NO_HOST = "a host that is no host name: longer than 253 characters, or a part between dots empty or longer than 63"
_HOST_HINT = "give a host name, an IP address or a socket directory"


def _bad(message: str, hint: str = _DSN_HINT) -> ConfigError:
    return ConfigError(f"the connection string {message}", hint=hint)


def _check_values(pairs: Iterable[tuple[str, str]], environ: Mapping[str, str]) -> list[tuple[str, str]]:
    """Values asyncpg cannot work with, refused before anything connects (libpq checks them only when it connects).
    An empty entry in a port list is libpq's default port (PGPORT, else 5432), written out for asyncpg."""
    kept = []
    for key, value in pairs:
        if key == "port" and value:
            default = environ.get("PGPORT") or "5432"
            ports = [p or default for p in value.split(",")]
            if not all(p.isdigit() and 1 <= int(p) <= 65535 for p in ports):
                raise _bad("has a port that is not a number from 1 to 65535")
            value = ",".join(ports)
        if key == "host" and value and "" in value.split(","):
            raise _bad("has an empty entry in its host list", hint="separate hosts with single commas: host=a,b")
        if key == "host" and not all(_resolvable(h) for h in value.split(",")):
            raise _bad(f"has {_NO_HOST}", hint=_HOST_HINT)
        if key == "target_session_attrs" and value not in SESSION_ATTRS:
            raise _bad(f"has an unknown target_session_attrs (one of: {', '.join(SESSION_ATTRS)})")
        if key == "sslmode" and value not in _SSLMODES:
            raise _bad(f"has an unknown sslmode (one of: {', '.join(_SSLMODES)})")
        kept.append((key, value))
    if not any(k == "host" for k, _ in kept) and not all(_resolvable(h) for h in environ.get("PGHOST", "").split(",")
                                                          if h):
        raise ConfigError(f"PGHOST has {_NO_HOST}", hint=_HOST_HINT)  # (asyncpg reads PGHOST itself)
    return kept


def _resolvable(host: str) -> bool:
    """Whether a host entry can be looked up at all: a socket directory, an address, or a name whose IDNA form
    (what the resolver is asked, RFC 5890) has parts of 1-63 characters and at most 253 in all."""
    if host.startswith(("/", "@")) or ":" in host:  # a socket directory, an abstract socket, an IPv6 address
        return True
    try:
        ascii_name = host.rstrip(".").encode("idna")
    except UnicodeError:
        return False
    return 0 < len(ascii_name) <= 253


def to_uri(dsn: str, environ: Mapping[str, str] | None = None) -> str:
    """``dsn`` (either form, read by libpq: :mod:`tuner.target.conninfo`) as the URI asyncpg is given: every
    keyword as a query parameter. Raises :class:`ConfigError` with one sentence that never shows a password."""
    env = os.environ if environ is None else environ
    pairs = _check_values(conninfo.for_asyncpg(conninfo.resolve(dsn, env), env), env)
    return "postgresql://?" + urllib.parse.urlencode(pairs, quote_via=urllib.parse.quote)


def server_address(dsn: str | None, environ: Mapping[str, str] | None = None) -> str:
    """Where ``dsn`` leads, as one comparable string: its hosts and ports (the database, user and options left out —
    one server, whatever database a session uses). The PG* environment fills what the DSN leaves out."""
    env = os.environ if environ is None else environ
    parts = urllib.parse.urlsplit(to_uri(dsn, env)) if dsn else urllib.parse.urlsplit("postgresql://")
    query = dict(urllib.parse.parse_qsl(parts.query))
    netloc = parts.netloc.rsplit("@", 1)[-1]
    hosts = [h for h in netloc.split(",") if h] if netloc else []
    if not hosts:
        names = (query.get("host") or env.get("PGHOST") or "/var/run/postgresql").split(",")
        ports = (query.get("port") or env.get("PGPORT") or "5432").split(",")
        hosts = [f"{n}:{ports[min(i, len(ports) - 1)]}" for i, n in enumerate(names)]
    else:
        port = query.get("port") or env.get("PGPORT") or "5432"
        hosts = [h if ":" in h.lstrip("[").split("]")[-1] else f"{h}:{port}" for h in hosts]
    return ",".join(sorted(urllib.parse.unquote(h).lower() for h in hosts))


def check_dsn(dsn: str | None) -> None:
    """Raise :class:`ConfigError` if ``dsn`` cannot be used (for the configuration's checks)."""
    if dsn:
        to_uri(dsn)


def _secrets(uri: str | None) -> list[str]:
    """The passwords in a checked URI (userinfo, ``password``, ``sslpassword``), to scrub from error messages."""
    if not uri:
        return []
    parts = urllib.parse.urlsplit(uri)
    found = [parts.password or "", urllib.parse.unquote(parts.password or "")]
    found += [v for k, v in urllib.parse.parse_qsl(parts.query) if k in ("password", "sslpassword")]
    return [s for s in found if len(s) >= 3]


def _scrub(text: str, secrets: list[str]) -> str:
    for s in secrets:
        text = text.replace(s, "***")
    return text


async def connect(
    dsn: str | None,
    *,
    timeout_s: float = 10.0,
    server_settings: Mapping[str, str] | None = None,
    session_attrs: str | None = None,
) -> asyncpg.Connection:
    """Open one connection. Every failure becomes a :class:`TargetError` (or a :class:`ConfigError` for a DSN
    that cannot work) with one sentence and a hint.

    ``session_attrs`` (one of :data:`SESSION_ATTRS`) forces libpq's ``target_session_attrs``, whatever the DSN or
    ``PGTARGETSESSIONATTRS`` say: with several hosts, the connection lands only on a server of that kind."""
    if session_attrs is not None and session_attrs not in SESSION_ATTRS:
        raise ValueError(f"session_attrs must be one of {', '.join(SESSION_ATTRS)}, not {session_attrs!r}")
    settings = {"application_name": "tuner", **(server_settings or {})}
    # The PG* environment alone (no DSN) is read by libpq's rules too: a service, libpq-only variables.
    given = to_uri(dsn or "")
    uri = None if given == "postgresql://?" else given
    where = " ".join(redact.dsn(dsn).split()) if dsn else "the server the PG* environment names"
    secrets = _secrets(uri)
    try:
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            conn = await asyncpg.connect(uri, timeout=timeout_s, server_settings=settings,
                                         target_session_attrs=session_attrs)
        for w in said:  # the driver's warnings (a passfile it cannot read, …) as a log line, not a stack of text
            log.warning("connect.warning", detail=_scrub(str(w.message), secrets))
        return conn
    except asyncpg.InvalidPasswordError:
        raise TargetError(
            f"authentication failed for {where}",
            hint="check the user and password (PGPASSWORD, ~/.pgpass or the DSN)",
        ) from None
    except asyncpg.InvalidCatalogNameError as exc:
        raise TargetError(f"{where}: {_scrub(str(exc), secrets)}", hint="check the database name in the DSN") from None
    except asyncpg.PostgresError as exc:
        raise TargetError(f"{where} refused the connection: {_scrub(str(exc), secrets)}") from None
    except asyncpg.exceptions.TargetServerAttributeNotMatched:
        raise NoServerOfKind(f"no server in {where} is a {session_attrs or 'matching'} server",
                          hint="check the host list and target_session_attrs") from None
    except (OSError, asyncio.TimeoutError) as exc:
        reason = "timed out" if isinstance(exc, asyncio.TimeoutError) else (exc.strerror or str(exc))
        raise TargetError(
            f"could not connect to {where}: {_scrub(reason, secrets)}",
            hint="is the server running, and do --dsn / [target] dsn / PGHOST and PGPORT point at it?",
        ) from None
    except ValueError as exc:  # asyncpg's own checks (e.g. PGPORT, PGSSLMODE), with the PG* environment
        raise ConfigError(f"invalid connection settings: {_scrub(str(exc), secrets)}",
                          hint="check the DSN and the PG* environment variables") from None
    except (asyncpg.InterfaceError, asyncpg.exceptions.InternalClientError) as exc:
        raise TargetError(f"could not connect to {where}: {_scrub(str(exc), secrets)}") from None
