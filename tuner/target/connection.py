"""Connections with libpq conventions: a DSN or URI, PG* environment variables, the passfile.

Both DSN forms are checked before anything connects (:func:`check_dsn`) and handed to asyncpg as one URI. The
keywords asyncpg supports are used (``options`` is sent to the server as libpq sends it); ``connect_timeout``
and ``application_name`` give way to ``[target] connect_timeout_s`` and tuner's own name; any other keyword is
refused with one sentence, never silently dropped — ``keepalives`` or ``require_auth`` may matter to someone.

Passwords never reach a log line or an error message: use :func:`redact` for anything printed, and errors say
where a DSN is wrong (a position, a known keyword), never what it says there.
"""

from __future__ import annotations

import asyncio
import re
import urllib.parse
import warnings
from collections.abc import Iterable, Mapping

import asyncpg

from tuner.errors import ConfigError, NoServerOfKind, TargetError
from tuner.redact import text as redact_text
from tuner.log import get_logger

log = get_logger("tuner.connection")

_URI_SCHEMES = ("postgres://", "postgresql://")

# libpq keywords asyncpg supports; SUPPORTED lists them for hints.
SUPPORTED = (
    "host", "port", "dbname", "user", "password", "passfile", "options", "service", "target_session_attrs",
    "sslmode", "sslcert", "sslkey", "sslrootcert", "sslcrl", "sslpassword", "sslnegotiation",
    "ssl_min_protocol_version", "ssl_max_protocol_version", "krbsrvname", "gsslib",
)
_IGNORED = ("connect_timeout", "application_name", "fallback_application_name")
# libpq keywords asyncpg does not support: named when refused (an unknown word might be part of a password).
_LIBPQ_ONLY = (
    "hostaddr", "require_auth", "channel_binding", "client_encoding", "keepalives", "keepalives_idle",
    "keepalives_interval", "keepalives_count", "tcp_user_timeout", "replication", "gssencmode", "requiressl",
    "sslcompression", "sslcertmode", "sslcrldir", "sslsni", "sslkeylogfile", "requirepeer", "min_protocol_version",
    "max_protocol_version", "gssdelegation", "load_balance_hosts", "servicefile", "scram_client_key",
    "scram_server_key", "oauth_issuer", "oauth_client_id", "oauth_client_secret", "oauth_scope",
)
SESSION_ATTRS = ("any", "primary", "standby", "prefer-standby", "read-write", "read-only")
_SSLMODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
_DSN_HINT = "use key=value pairs (host=… dbname=…) or a postgresql:// URI; see 'tuner recommend --help'"


def redact(dsn: str | None) -> str:
    """The DSN with any password replaced by ``***``."""
    if not dsn:
        return "(PG* environment)"
    return redact_text(dsn)


def _bad(message: str, hint: str = _DSN_HINT) -> ConfigError:
    return ConfigError(f"the connection string {message}", hint=hint)


def _keyword_pairs(dsn: str) -> list[tuple[str, str]]:
    """A libpq keyword/value string (``host=x port=5432 dbname='my db'``) as pairs; values are unquoted."""
    pairs: list[tuple[str, str]] = []
    key_re = re.compile(r"([A-Za-z_]\w*)\s*=\s*")
    pos, n, after = 0, len(dsn), "its start"
    while True:
        while pos < n and dsn[pos].isspace():
            pos += 1
        if pos >= n:
            return pairs
        m = key_re.match(dsn, pos)
        if not m:
            raise _bad(f"cannot be parsed at character {pos + 1} (after {after}): expected keyword=value")
        key, pos = m.group(1), m.end()
        quoted = pos < n and dsn[pos] == "'"
        pos += quoted
        value: list[str] = []
        while pos < n and (quoted or not dsn[pos].isspace()) and not (quoted and dsn[pos] == "'"):
            if dsn[pos] == "\\" and pos + 1 < n:
                pos += 1
            value.append(dsn[pos])
            pos += 1
        if quoted:
            if pos >= n:
                raise _bad(f"has an unterminated quoted value{_for(key)}", hint="close the value with a single quote")
            pos += 1
        pairs.append((key, "".join(value)))
        after = f"'{key}'" if _known(key) else f"character {pos}"


def _known(key: str) -> bool:
    return key in SUPPORTED or key in _IGNORED or key in _LIBPQ_ONLY


def _for(key: str) -> str:
    return f" for '{key}'" if _known(key) else ""


def _check_pairs(pairs: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Refuse keywords asyncpg cannot honour and values that cannot work; drop the ignored ones."""
    kept = []
    for number, (key, value) in enumerate(pairs, 1):
        if key in _IGNORED:
            continue
        if key not in SUPPORTED:
            if key not in _LIBPQ_ONLY:
                raise _bad(f"has an unknown keyword (keyword {number})", hint=f"supported: {', '.join(SUPPORTED)}")
            raise _bad(f"uses '{key}', which tuner's PostgreSQL driver (asyncpg) does not support",
                       hint=f"remove it; supported: {', '.join(SUPPORTED)}")
        if key == "port" and value:
            if not all(p.isdigit() and 1 <= int(p) <= 65535 for p in value.split(",")):
                raise _bad("has a port that is not a number from 1 to 65535")
        if key == "host" and value and "" in value.split(","):
            raise _bad("has an empty entry in its host list", hint="separate hosts with single commas: host=a,b")
        if key == "target_session_attrs" and value not in SESSION_ATTRS:
            raise _bad(f"has an unknown target_session_attrs (one of: {', '.join(SESSION_ATTRS)})")
        if key == "sslmode" and value not in _SSLMODES:
            raise _bad(f"has an unknown sslmode (one of: {', '.join(_SSLMODES)})")
        kept.append((key, value))
    return kept


def _uri_hosts(netloc: str) -> None:
    hostspec = netloc.rpartition("@")[2]
    if not hostspec:
        return
    specs = hostspec.split(",")
    if "" in specs:
        raise _bad("has an empty entry in its host list", hint="separate hosts with single commas: h1,h2")
    ports = [s.rpartition("]")[2].partition(":")[2] if s.startswith("[") else s.partition(":")[2] for s in specs]
    if not all(not p or (p.isdigit() and 1 <= int(p) <= 65535) for p in ports):
        raise _bad("has a port that is not a number from 1 to 65535")


def to_uri(dsn: str) -> str:
    """Check ``dsn`` (either form) and return it as the URI asyncpg is given. Raises :class:`ConfigError`."""
    if "\x00" in dsn:
        raise _bad("contains a NUL character")
    if not dsn.startswith(_URI_SCHEMES):
        query = _check_pairs(_keyword_pairs(dsn))
        return "postgresql://?" + urllib.parse.urlencode(query, quote_via=urllib.parse.quote)
    try:
        parts = urllib.parse.urlsplit(dsn)
    except ValueError:
        raise _bad("is not a valid URI (check the host and port part)") from None
    _uri_hosts(parts.netloc)
    try:
        pairs = urllib.parse.parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError:
        raise _bad("has a malformed query string: expected ?key=value&key=value") from None
    query = _check_pairs(pairs)
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query, quote_via=urllib.parse.quote)))


def server_address(dsn: str | None, environ: Mapping[str, str] | None = None) -> str:
    """Where ``dsn`` leads, as one comparable string: its hosts and ports (the database, user and options left out —
    one server, whatever database a session uses). The PG* environment fills what the DSN leaves out."""
    import os

    env = os.environ if environ is None else environ
    parts = urllib.parse.urlsplit(to_uri(dsn)) if dsn else urllib.parse.urlsplit("postgresql://")
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
    uri = to_uri(dsn) if dsn else None
    where = " ".join(redact(dsn).split()) if dsn else "the server the PG* environment names"
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
