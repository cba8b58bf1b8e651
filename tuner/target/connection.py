"""Connections with libpq conventions: a DSN or URI, PG* environment variables, the passfile.

Passwords never reach a log line: use :func:`redact` for anything printed.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Mapping

import asyncpg

from tuner.errors import ConfigError, TargetError

_PASSWORD_KV = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)
_PASSWORD_URI = re.compile(r"(postgres(?:ql)?://[^:/@]*:)([^@]*)(@)", re.IGNORECASE)


def redact(dsn: str | None) -> str:
    """The DSN with any password replaced by ``***``."""
    if not dsn:
        return "(PG* environment)"
    dsn = _PASSWORD_URI.sub(r"\1***\3", dsn)
    return _PASSWORD_KV.sub(r"\1***", dsn)


def _keyword_dsn_to_kwargs(dsn: str) -> dict[str, str]:
    """Parse a libpq keyword/value string (``host=x port=5432 dbname=y``) into asyncpg keywords."""
    out: dict[str, str] = {}
    pattern = re.compile(r"\s*(\w+)\s*=\s*('(?:[^'\\]|\\.)*'|\S*)")
    pos = 0
    while pos < len(dsn):
        m = pattern.match(dsn, pos)
        if not m:
            raise ConfigError(
                f"cannot parse the connection string near '{dsn[pos:pos + 20]}'",
                hint="use key=value pairs (host=… dbname=…) or a postgresql:// URI",
            )
        key, value = m.group(1), m.group(2)
        if value.startswith("'"):
            value = value[1:-1].replace("\\'", "'").replace("\\\\", "\\")
        out[key] = value
        pos = m.end()
    mapping = {"dbname": "database", "sslmode": "ssl", "connect_timeout": None, "application_name": None}
    kwargs: dict[str, str] = {}
    for key, value in out.items():
        target = mapping.get(key, key)
        if target is not None:
            kwargs[target] = value
    return kwargs


def sets_marker_from_client(dsn: str | None, environ: Mapping[str, str] | None = None) -> bool:
    """True if the client side (DSN options or PGOPTIONS) would set ``tuner.role`` itself."""
    env = os.environ if environ is None else environ
    text = f"{dsn or ''} {env.get('PGOPTIONS', '')}"
    return "tuner.role" in text.replace("%2E", ".").replace("%2e", ".")


async def connect(
    dsn: str | None,
    *,
    timeout_s: float = 10.0,
    server_settings: Mapping[str, str] | None = None,
    session_attrs: str | None = None,
) -> asyncpg.Connection:
    """Open one connection. Every failure becomes a :class:`TargetError` with one sentence and a hint.
    ``session_attrs`` forces libpq's ``target_session_attrs`` (e.g. "standby"), whatever the DSN says."""
    settings = {"application_name": "tuner", **(server_settings or {})}
    kwargs: dict[str, object] = {}
    if dsn and not dsn.startswith(("postgres://", "postgresql://")):
        kwargs.update(_keyword_dsn_to_kwargs(dsn))
        dsn = None
    if session_attrs is not None:
        kwargs["target_session_attrs"] = session_attrs
    where = redact(dsn) if dsn else "the configured server"
    try:
        return await asyncpg.connect(dsn, timeout=timeout_s, server_settings=settings, **kwargs)  # type: ignore[arg-type]
    except asyncpg.InvalidPasswordError:
        raise TargetError(
            f"authentication failed for {where}",
            hint="check the user and password (PGPASSWORD, ~/.pgpass or the DSN)",
        ) from None
    except asyncpg.InvalidCatalogNameError as exc:
        raise TargetError(f"{where}: {exc}", hint="check the database name in the DSN") from None
    except asyncpg.PostgresError as exc:
        raise TargetError(f"{where} refused the connection: {exc}") from None
    except (OSError, asyncio.TimeoutError) as exc:
        reason = "timed out" if isinstance(exc, asyncio.TimeoutError) else (exc.strerror or str(exc))
        raise TargetError(
            f"could not connect to {where}: {reason}",
            hint="is the server running, and do --dsn / [target] dsn / PGHOST and PGPORT point at it?",
        ) from None
    except ValueError as exc:  # asyncpg's DSN parser
        raise ConfigError(f"invalid connection string: {exc}", hint="see 'tuner recommend --help' for DSN forms") from None
