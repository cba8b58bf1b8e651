"""Connection strings read by libpq itself, then handed to asyncpg.

libpq's own parser (``PQconninfoParse``, through psycopg's ``conninfo_to_dict``; psycopg's ``binary`` extra bundles
libpq) reads both forms — ``key=value`` with its quoting and escapes, and ``postgresql://`` URIs with their
percent-encoding and host lists — so a DSN means to tuner what it means to psql. A ``service`` (the DSN's, else
PGSERVICE) is expanded from the service file the way libpq looks it up (https://www.postgresql.org/docs/current/
libpq-pgservice.html): the DSN's own values win over the file's. libpq's environment variables that asyncpg does
not read (PGHOSTADDR, PGREQUIREAUTH, …) count too, below both.

asyncpg stays the driver. The result is checked keyword by keyword (:func:`for_asyncpg`): what asyncpg supports
passes; what libpq would do that asyncpg does anyway passes (``keepalives=0``, ``client_encoding=UTF8``,
``gssencmode=prefer`` …); ``hostaddr`` without ``host`` becomes the host; anything else asyncpg cannot honour is
refused in one sentence naming the keyword — never silently dropped.

libpq's parse errors quote the text they stopped at, which may be a password: only a quoted keyword name is kept
(:func:`scrub`).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from pathlib import Path

from tuner.errors import ConfigError
from tuner.redact import text as redact_text

# libpq keywords asyncpg supports (a URI query parameter each), passed through.
ASYNCPG = (
    "host", "port", "dbname", "user", "password", "passfile", "options", "target_session_attrs",
    "sslmode", "sslcert", "sslkey", "sslrootcert", "sslcrl", "sslpassword", "sslnegotiation",
    "ssl_min_protocol_version", "ssl_max_protocol_version", "krbsrvname", "gsslib",
)
# tuner's own settings take their place: [target] connect_timeout_s, and tuner's application name.
TUNERS_OWN = ("connect_timeout", "application_name", "fallback_application_name")
# libpq keywords with no asyncpg counterpart, accepted where the value asks for what asyncpg does anyway (values
# compared in lower case): it sets no TCP keepalive and no TCP_USER_TIMEOUT, speaks UTF8 and protocol 3.0 only,
# has no channel binding, GSS encryption, load balancing or replication connections, and sends SNI.
AS_ASYNCPG_DOES = {
    "keepalives": ("0",), "tcp_user_timeout": ("0",),
    "client_encoding": ("utf8", "utf-8", "unicode"),
    "channel_binding": ("disable", "prefer"), "gssencmode": ("disable", "prefer"), "gssdelegation": ("0",),
    "sslcompression": ("0",), "requiressl": ("0",), "sslcertmode": ("allow",), "sslsni": ("1",),
    "load_balance_hosts": ("disable",), "replication": ("0", "false", "off", "no"),
    "min_protocol_version": ("3.0",), "max_protocol_version": ("3.0",),
}
_KEEPALIVE_DETAIL = ("keepalives_idle", "keepalives_interval", "keepalives_count")  # moot with keepalives=0
SYSCONFDIR = "/etc/postgresql-common"  # Debian's libpq reads its system-wide pg_service.conf there


@functools.cache
def _libpq_options() -> tuple[tuple[str, str | None], ...]:
    """libpq's keywords with their environment variables, as the bundled libpq lists them (PQconndefaults)."""
    # psycopg takes a second to import on a loaded machine: only what reads a connection string pays for it.
    from psycopg import pq

    return tuple((o.keyword.decode(), o.envvar.decode() if o.envvar else None) for o in pq.Conninfo.get_defaults())


def keywords() -> frozenset[str]:
    return frozenset(k for k, _ in _libpq_options())


def scrub(message: str) -> str:
    """libpq's message, first line, with every quoted fragment that is not a keyword name hidden (it may be a
    password, or a whole URI) and any password left redacted."""
    first = (message.strip().splitlines() or ["libpq refused it"])[0]
    def keep(m: re.Match[str]) -> str:
        word = m.group(1)
        return m.group(0) if word in keywords() or (len(word) == 1 and not word.isalnum()) else '"…"'

    return redact_text(re.sub(r'"([^"]*)"', keep, first))


def parse(dsn: str) -> dict[str, str]:
    """``dsn`` (either form) as libpq reads it: keyword → value, only what it says."""
    if "\x00" in dsn:
        raise ConfigError("the connection string contains a NUL character", hint=HINT)
    import psycopg  # (a second to import: see _libpq_options)
    from psycopg.conninfo import conninfo_to_dict

    try:
        return {k: str(v) for k, v in conninfo_to_dict(dsn).items()}
    except psycopg.Error as exc:
        raise ConfigError(f"the connection string cannot be parsed: libpq says {scrub(str(exc))}",
                          hint=HINT) from None


HINT = "use key=value pairs (host=… dbname=…) or a postgresql:// URI, as psql takes them"


def _service_files(environ: Mapping[str, str]) -> list[Path]:
    user = environ.get("PGSERVICEFILE") or str(Path(environ.get("HOME") or Path.home()) / ".pg_service.conf")
    return [Path(user), Path(environ.get("PGSYSCONFDIR") or SYSCONFDIR) / "pg_service.conf"]


def read_service(name: str, path: Path) -> dict[str, str] | None:
    """Service ``name``'s keywords in the service file ``path`` (None: not there), read as libpq reads it: ``[name]``
    sections of ``keyword=value`` lines, ``#`` comments, no quoting."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    found: dict[str, str] | None = None
    section = None
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            if found is not None:
                return found
            section = line[1:].split("]", 1)[0]
            found = {} if section == name else None
            continue
        if found is None:
            continue
        key, eq, value = line.partition("=")
        key = key.strip()
        if not eq or key not in keywords() or key == "service":
            raise ConfigError(f"the service file {path} has a syntax error at line {number} (in service {name})",
                              hint="each line is keyword=value with a libpq keyword; services do not nest")
        found.setdefault(key, value.strip())
    return found


def resolve(dsn: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """What libpq would connect with, as far as asyncpg must be told: ``dsn``'s keywords over its service's over
    libpq's environment variables asyncpg does not read itself."""
    env = os.environ if environ is None else environ
    given = parse(dsn) if dsn else {}
    out = {k: env[var] for k, var in _libpq_options() if var and k not in ASYNCPG and k != "service" and var in env}
    name = given.pop("service", None) or env.get("PGSERVICE")
    if name:
        for path in _service_files(env):
            if (values := read_service(name, path)) is not None:
                out.update(values)
                break
        else:
            raise ConfigError(f"the connection string names service {name!r}, which no service file defines",
                              hint=f"define [{name}] in ~/.pg_service.conf or PGSERVICEFILE")
    out.update(given)
    return out


def for_asyncpg(params: Mapping[str, str], environ: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """``params`` as asyncpg's URI query: supported keywords kept, tuner's own dropped, libpq-only keywords
    accepted where asyncpg does the same anyway, ``hostaddr`` as the host where no host is given; anything else
    refused with one sentence naming the keyword (:class:`ConfigError`)."""
    env = os.environ if environ is None else environ
    params = dict(params)
    if "hostaddr" in params:
        if params.get("host") or env.get("PGHOST"):
            raise _refused("hostaddr", "beside 'host' (libpq connects to the address and checks the name; asyncpg "
                           "connects to the name)")
        params["host"] = params.pop("hostaddr")
    if params.get("requiressl") == "1" and "sslmode" not in params:
        del params["requiressl"]
        params["sslmode"] = "require"  # libpq's old spelling of it
    moot = params.get("keepalives") == "0"
    kept = []
    for key, value in params.items():
        if key in ASYNCPG:
            kept.append((key, value))
        elif key in TUNERS_OWN or (moot and key in _KEEPALIVE_DETAIL):
            continue
        elif value.lower() not in AS_ASYNCPG_DOES.get(key, ()):
            allowed = AS_ASYNCPG_DOES.get(key)
            # The value is shown only for keywords with allowed values (none of them a secret).
            raise _refused(key, f"= {value!r}" if allowed else "",
                           f"remove it{'; asyncpg does only ' + ', '.join(allowed) if allowed else ''}")
    return kept


def _refused(key: str, detail: str = "", hint: str = "remove it") -> ConfigError:
    what = f"'{key}'{' ' + detail if detail else ''}"
    return ConfigError(f"the connection string uses {what}, which tuner's PostgreSQL driver (asyncpg) cannot honour",
                       hint=f"{hint}; supported: {', '.join(ASYNCPG)}")
