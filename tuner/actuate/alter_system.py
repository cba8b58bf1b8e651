"""The ``alter_system`` actuator: a setting written into the staging server's ``postgresql.auto.conf`` with
ALTER SYSTEM.

The journal entry keeps the line the file had for the setting (or that it had none) and the server's identity
(system identifier, port); restoring connects (the recorded DSN without its password, or ``--dsn``), checks the
identity and the interlock — a primary shares its system identifier and port with its standbys and clones, so
only a writable server marked ``tuner.role = 'staging'`` is written to —, writes the old line back (``ALTER
SYSTEM SET`` / ``RESET``) and reloads. A restart-level setting (``wal_buffers``) is back in the file at once and
in force after the server's next restart; the session itself restarts it.

The same actuator journals tuner's scratch schema on that server (kind ``scratch_schema``): recorded before the WAL
family creates it, dropped by the session — or, after a crash, by the restore — only if it still carries tuner's
own comment (:mod:`tuner.probes.walload`).

The replay family changes a hot standby: an entry with ``standby: true`` was written on one (ALTER SYSTEM works in
recovery) and is written back only on a hot standby with that identity — never on a writable server, which a
promoted standby or its primary (same system identifier) would be. Its pause of WAL replay is journaled too (kind
``replay_pause``, recorded before ``pg_wal_replay_pause()``): restoring it resumes replay if the standby is still
paused, so a crashed session never leaves a standby behind its primary.

Only the knob catalogue's WAL, replay and concurrency settings are journaled (the concurrency family writes
``io_workers`` and ``io_method`` this way on PostgreSQL 18), and a journal entry naming any other setting, or a
value that is not a plain number (with a unit) or word, is refused when the journal is read (:func:`entry_problem`).

Other entries go back on a hot standby only when it is tuner's own sandbox standby: the entry names the sandbox
and the server's data directory lies inside it. Any other standby is refused, as before.
"""

from __future__ import annotations

import asyncio
import re
import threading
from pathlib import Path
from typing import Any

from tuner.actuate.entry import NOT_SET, JournalError, Restored
from tuner.errors import RefusedError, TunerError
from tuner.redact import LIBPQ_SPACE
from tuner.sandbox.own import is_own_sandbox

_AUTO_CONF = "postgresql.auto.conf"
FIELDS = {"kind", "name", "original", "device", "dsn", "system_identifier", "port", "sandbox_dir", "recorded_at",
          "standby"}
_VALUE = re.compile(r"-?\d{1,15}(\.\d{1,6})?([eE][+-]?\d{1,3})?\s*[A-Za-z]{0,3}|[A-Za-z0-9_]{1,32}")


def strip_password(dsn: str | None) -> str | None:
    """The DSN without any password (the journal must not hold secrets; libpq's passfile supplies it)."""
    if not dsn:
        return dsn
    if re.match(r"postgres(?:ql)?://", dsn, flags=re.IGNORECASE):
        dsn = re.sub(r"(postgres(?:ql)?://[^:/@?]*):[^@/?]*@", r"\1@", dsn, flags=re.IGNORECASE)
        # The password and sslpassword parameters go; every other parameter stays.
        base, _, query = dsn.partition("?")
        kept = [p for p in query.split("&") if p and p.split("=", 1)[0].lower() not in ("password", "sslpassword")]
        dsn = base + ("?" + "&".join(kept) if kept else "")
        return dsn.rstrip("?&")
    # the value runs to libpq's end of it (redact.LIBPQ_SPACE): a U+00A0 inside a password is part of it
    sp = f"[{LIBPQ_SPACE}]"
    return re.sub(rf"{sp}*\b(?:ssl)?password{sp}*={sp}*('(?:[^'\\]|\\.)*'|[^{LIBPQ_SPACE}]+)", "", dsn,
                  flags=re.IGNORECASE).strip(LIBPQ_SPACE)


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _ident(name: str) -> str:
    if not name.replace("_", "").replace(".", "").isalnum():
        raise JournalError(f"not a setting name: {name!r}")
    return name


def settings() -> list[str]:
    """The settings this actuator writes: every catalogue knob that ALTER SYSTEM can set (a device's readahead
    is the kernel's, written through sysfs)."""
    from tuner.knobs import catalog

    return catalog.load().names(scope="system")


SCRATCH_SCHEMA = "tuner_scratch"
REPLAY = "wal_replay"  # the name of a replay_pause entry


def entry_problem(change: dict[str, Any]) -> str | None:
    """Why an ``alter_system`` or ``scratch_schema`` journal entry is not one this actuator wrote (or may write
    back), or None."""
    name, original = change.get("name"), change.get("original")
    if change.get("standby") is not None and not isinstance(change.get("standby"), bool):
        return f"standby {change.get('standby')!r} is not true or false"
    if change.get("kind") == "scratch_schema":
        if name != SCRATCH_SCHEMA or original is not None:
            return f"names schema {name!r} (original {original!r}), not tuner's own {SCRATCH_SCHEMA}"
    elif change.get("kind") == "replay_pause":
        if name != REPLAY or original is not None or change.get("standby") is not True:
            return f"names {name!r} (original {original!r}), not a hot standby's paused {REPLAY}"
    elif name not in settings():
        return f"setting {name!r} is not one tuner changes with ALTER SYSTEM ({', '.join(settings())})"
    if original is not None and not (isinstance(original, str) and _VALUE.fullmatch(original)):
        return f"{name} value {original!r} is not a number (with a unit) or a word"
    for key, types in (("dsn", str), ("system_identifier", str), ("sandbox_dir", str), ("device", str)):
        if change.get(key) is not None and not isinstance(change.get(key), types):
            return f"{key} {change.get(key)!r} is not text"
    sysid, port = change.get("system_identifier"), change.get("port")
    if sysid is not None and not sysid.isdigit():
        return f"system_identifier {sysid!r} is not a number"
    if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536):
        return f"port {port!r} is not a port number"
    return None


async def _auto_conf_line(conn: Any, name: str) -> str | None:
    """The value ``postgresql.auto.conf`` sets for ``name``, or None if it has no line for it."""
    row = await conn.fetchrow(
        "SELECT setting FROM pg_file_settings WHERE name = $1 AND sourcefile LIKE '%/postgresql.auto.conf' "
        "ORDER BY seqno DESC LIMIT 1", name)
    return None if row is None else row["setting"]


async def alter(conn: Any, name: str, value: str | None) -> None:
    """``ALTER SYSTEM SET name = value``, or ``ALTER SYSTEM RESET name`` for None (the caller reloads)."""
    if value is None:
        await conn.execute(f"ALTER SYSTEM RESET {_ident(name)}")
    else:
        await conn.execute(f"ALTER SYSTEM SET {_ident(name)} = {_literal(value)}")


async def alter_entry(
    conn: Any, name: str, *, dsn: str | None, system_identifier: str | None, port: int | None,
    sandbox_dir: str | None, standby: bool = False,
) -> dict[str, Any]:
    """The journal entry for ``name`` before it is first changed: its line in postgresql.auto.conf, and the server
    (``standby``: a hot standby, written back only on one)."""
    entry = {
        "kind": "alter_system", "name": name, "original": await _auto_conf_line(conn, name),
        "device": f"PostgreSQL {system_identifier or '?'} port {port}", "dsn": strip_password(dsn),
        "system_identifier": system_identifier, "port": port, "sandbox_dir": sandbox_dir,
    }
    return {**entry, "standby": True} if standby else entry


def replay_entry(*, dsn: str | None, system_identifier: str | None, port: int | None,
                 sandbox_dir: str | None) -> dict[str, Any]:
    """The journal entry for a pause of a hot standby's WAL replay, recorded before ``pg_wal_replay_pause()``."""
    return {
        "kind": "replay_pause", "name": REPLAY, "original": None, "standby": True,
        "device": f"PostgreSQL {system_identifier or '?'} port {port} (hot standby)", "dsn": strip_password(dsn),
        "system_identifier": system_identifier, "port": port, "sandbox_dir": sandbox_dir,
    }


def scratch_entry(*, dsn: str | None, system_identifier: str | None, port: int | None,
                  sandbox_dir: str | None) -> dict[str, Any]:
    """The journal entry for tuner's scratch schema, recorded before it is created."""
    return {
        "kind": "scratch_schema", "name": SCRATCH_SCHEMA, "original": None,
        "device": f"PostgreSQL {system_identifier or '?'} port {port}", "dsn": strip_password(dsn),
        "system_identifier": system_identifier, "port": port, "sandbox_dir": sandbox_dir,
    }


async def drop_scratch(conn: Any, change: dict[str, Any], dsn: str | None = None) -> Restored:
    """Drop tuner's scratch schema over ``conn`` if the server is the marked staging clone and the schema is tuner's
    own (a schema of that name without tuner's comment is the user's: left alone)."""
    from tuner.probes import walload

    await require_staging_clone(conn, change, dsn)
    existed = await walload.drop(conn)
    return Restored("schema", SCRATCH_SCHEMA, "tuner's" if existed else NOT_SET, NOT_SET,
                    "restored" if existed else "already at the original value")


async def resume_replay(conn: Any, change: dict[str, Any]) -> Restored:
    """Resume WAL replay over ``conn`` if the server is a hot standby whose replay is paused (else nothing)."""
    await require_standby(conn, change)
    state = await conn.fetchval("SELECT pg_get_wal_replay_pause_state()")  # 14+; the replay family needs 15
    if state == "not paused":
        return Restored("WAL replay", REPLAY, state, "not paused", "already at the original value")
    await conn.execute("SELECT pg_wal_replay_resume()")
    return Restored("WAL replay", REPLAY, state, "not paused", "restored")


async def put_back(conn: Any, change: dict[str, Any], dsn: str | None = None) -> Restored:
    """Put one entry of this actuator back over ``conn``: an ALTER SYSTEM line, the scratch schema dropped, or a
    standby's WAL replay resumed."""
    if change.get("kind") == "scratch_schema":
        return await drop_scratch(conn, change, dsn)
    if change.get("kind") == "replay_pause":
        return await resume_replay(conn, change)
    return await write_back(conn, change, dsn)


async def require_standby(conn: Any, change: dict[str, Any]) -> None:
    """Raise :class:`RefusedError` unless ``conn`` reaches a hot standby: an entry written on one is never written
    to a writable server (its primary shares the system identifier; a promoted standby is a primary now)."""
    from tuner.target.facts import gather

    facts = await gather(conn)
    if not facts.in_recovery:
        raise RefusedError(f"the server reached (system {facts.system_identifier}) is writable, not the hot standby "
                           f"tuner changed ({change.get('device')})")


async def require_staging_clone(conn: Any, change: dict[str, Any], dsn: str | None) -> None:
    """Raise :class:`RefusedError` unless ``conn`` reaches a writable server marked as a staging clone: the
    interlock, as a session applies it. ``dsn`` is what ``conn`` was opened with (a marker the client sets itself
    does not count)."""
    from tuner.target import interlock
    from tuner.target.facts import gather

    facts = await gather(conn, whole=False)  # putting back follows tuner's own ALTER SYSTEM and reloads
    where = f"the server reached (system {facts.system_identifier})"
    if facts.in_recovery:
        if is_own_sandbox(facts.data_directory, change.get("sandbox_dir")):
            return  # tuner's own throwaway standby (the concurrency family's io_workers / io_method)
        raise RefusedError(f"{where} is a hot standby, not the staging clone tuner changed")
    try:
        interlock.check(facts, client_sets_marker=interlock.client_sets_marker(dsn or change.get("dsn")),
                        allow_replicas=bool(change.get("sandbox_dir")))
    except RefusedError as exc:
        why = str(exc).removeprefix("refusing to probe: ")
        raise RefusedError(f"the interlock refused {where}: {why}", hint=exc.hint) from None


async def write_back(conn: Any, change: dict[str, Any], dsn: str | None = None) -> Restored:
    """Put an ``alter_system`` entry's original line back over ``conn`` (the caller reloads), if the server is a
    marked staging clone — or, for an entry written on a hot standby, a hot standby — (else :class:`RefusedError`,
    nothing written). ``dsn``: what ``conn`` was opened with."""
    if change.get("standby"):
        await require_standby(conn, change)
    else:
        await require_staging_clone(conn, change, dsn)
    name, original = change["name"], change.get("original")
    was = await _auto_conf_line(conn, name)
    await alter(conn, name, None if original is None else str(original))
    shown = NOT_SET if original is None else str(original)
    if was == original:
        return Restored(_AUTO_CONF, name, was, shown, "already at the original value")
    return Restored(_AUTO_CONF, name, NOT_SET if was is None else was, shown, "restored")


SERVER_KINDS = ("alter_system", "scratch_schema", "replay_pause")


def server_key(change: dict[str, Any]) -> tuple[Any, ...]:
    """Which server an entry of this actuator was written on: entries with one key are restored over one
    connection."""
    return tuple(repr(change.get(k)) for k in ("dsn", "system_identifier", "port", "sandbox_dir"))


def restore_server_entries(changes: list[dict[str, Any]], dsn: str | None) -> list[Restored | Exception]:
    """Restore entries written on one server (one :func:`server_key`), in the order given, over one connection
    and with one reload — from synchronous code (recovery, signal paths): a private event loop in a thread, so it
    works whether or not the caller's loop is running or being cancelled. Each entry's outcome is its
    :class:`Restored` or the exception that kept it from being put back."""
    out: list[Restored | Exception | None] = [None] * len(changes)
    live = []
    for i, change in enumerate(changes):
        sandbox_dir = change.get("sandbox_dir")
        if sandbox_dir and not Path(sandbox_dir).exists():
            out[i] = Restored(_AUTO_CONF, change["name"], None, str(change.get("original")),
                              "dropped: the sandbox it belonged to is gone")
        else:
            live.append(i)
    box: dict[str, Any] = {}

    async def run() -> None:
        from tuner.target.connection import connect

        first = changes[live[0]]
        used = dsn or first.get("dsn")
        conn = await connect(used, timeout_s=10)
        try:
            sysid = await conn.fetchval("SELECT system_identifier::text FROM pg_control_system()")
            port = int(await conn.fetchval("SELECT current_setting('port')"))
            if sysid != first.get("system_identifier") or port != first.get("port"):
                raise JournalError(
                    f"the server reached ({sysid}, port {port}) is not the one tuner changed "
                    f"({first.get('system_identifier')}, port {first.get('port')})",
                    hint="run 'tuner restore --dsn …' with the staging server's connection string",
                )
            for i in live:
                try:
                    out[i] = await put_back(conn, changes[i], used)
                except Exception as exc:  # noqa: BLE001 - one entry's failure; the others are still put back
                    out[i] = _journal_error(changes[i], exc)
            await conn.execute("SELECT pg_reload_conf()")
        finally:
            await conn.close()

    def target() -> None:
        try:
            asyncio.run(run())
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    if live:
        t = threading.Thread(target=target, name="tuner-journal-restore")
        t.start()
        t.join()
    if "error" in box:
        if not isinstance(box["error"], Exception):
            raise box["error"]
        for i in live:
            if out[i] is None:
                out[i] = _journal_error(changes[i], box["error"])
    return [o for o in out if o is not None]


def _journal_error(change: dict[str, Any], err: Exception) -> Exception:
    if isinstance(err, RefusedError):
        return err
    if isinstance(err, TunerError):
        return JournalError(str(err), hint=err.hint)
    return JournalError(f"could not restore {change['name']} on the staging server: {err}")
