"""The change journal: every persistent change tuner makes is written here *before* it is made.

One JSON file, ``<state_dir>/journal.json``, rewritten atomically (temporary file, fsync, rename, fsync of the
directory). It names its owner (pid, the process's start time — so a recycled pid is not mistaken for a live
tuner — host and session) and, per changed object, the value it had before tuner first touched it. Restoring
writes those values back, checks them, and removes the entries; an empty journal is deleted.

* at the end of a session, on SIGINT and SIGTERM: the session restores its own entries;
* after a crash (SIGKILL, power loss): the next ``tuner`` start finds a journal whose owner is gone and restores
  it before doing anything else; ``tuner restore`` does the same on demand;
* after a reboot: a kernel setting such as ``read_ahead_kb`` did not survive it, so that entry is dropped, not
  written (the device may even have another name now) — the journal records the boot it was written in.

Kinds of entry:

* ``sysfs`` — a file under /sys, e.g. ``queue/read_ahead_kb``; written directly as root, or through the configured
  privileged helper command;
* ``alter_system`` — a setting written into the staging server's ``postgresql.auto.conf`` with ALTER SYSTEM. The
  entry keeps the line the file had for it (or that it had none) and the server's identity (system identifier,
  port); restoring connects (the recorded DSN without its password, or ``--dsn``), checks the identity, writes the
  old line back (``ALTER SYSTEM SET`` / ``RESET``) and reloads. A restart-level setting (``wal_buffers``) is back
  in the file at once and in force after the server's next restart; the session itself restarts it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shlex
import socket
import subprocess
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tuner.errors import TunerError
from tuner.files import atomic_write
from tuner.log import get_logger

log = get_logger("tuner.journal")

JOURNAL_NAME = "journal.json"
FORMAT_VERSION = 1
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


class JournalError(TunerError):
    """The journal could not be read, written or restored."""


def default_state_dir() -> Path:
    """``/var/lib/tuner`` for root (a system service), else ``$XDG_STATE_HOME/tuner`` (``~/.local/state/tuner``)."""
    if os.geteuid() == 0:
        return Path("/var/lib/tuner")
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "tuner"


def strip_password(dsn: str | None) -> str | None:
    """The DSN without any password (the journal must not hold secrets; libpq's passfile supplies it)."""
    if not dsn:
        return dsn
    dsn = re.sub(r"(postgres(?:ql)?://[^:/@]*):[^@]*@", r"\1@", dsn, flags=re.IGNORECASE)
    return re.sub(r"\s*password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)", "", dsn, flags=re.IGNORECASE).strip()


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _ident(name: str) -> str:
    if not name.replace("_", "").replace(".", "").isalnum():
        raise JournalError(f"not a setting name: {name!r}")
    return name


def boot_id() -> str | None:
    try:
        return BOOT_ID.read_text().strip()
    except OSError:
        return None


def process_start(pid: int) -> str | None:
    """The start time of ``pid`` in clock ticks since boot (field 22 of /proc/PID/stat), or None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after its closing parenthesis.
    return stat.rsplit(")", 1)[1].split()[19]


def owner_alive(owner: dict[str, Any]) -> bool:
    if owner.get("host") != socket.gethostname() or owner.get("boot_id") != boot_id():
        return False
    pid = owner.get("pid")
    return isinstance(pid, int) and process_start(pid) == owner.get("start")


@dataclass(frozen=True)
class Restored:
    """One entry put back (or dropped), for the user: what, from what, to what, and how."""

    object: str
    name: str
    was: str | None  # the value found before restoring
    restored_to: str
    action: str  # "restored", "already at the original value", "dropped: …"

    def sentence(self) -> str:
        if self.action == "restored":
            return f"{self.object}: {self.name} {self.was} -> {self.restored_to} (restored)"
        if self.action.startswith("dropped"):
            return f"{self.object}: {self.name} {self.action} (original {self.restored_to})"
        return f"{self.object}: {self.name} is {self.restored_to}, {self.action}"


def _atomic_write_json(path: Path, doc: dict[str, Any]) -> None:
    atomic_write(path, json.dumps(doc, indent=2) + "\n", dir_mode=0o700)


class SysfsWriter:
    """Writes a sysfs attribute: through the helper command when one is configured, else directly.

    The helper is a command line with ``{path}``, ``{device}`` and ``{value}`` placeholders, for example
    ``sudo -n /usr/local/sbin/tuner-sysfs {path} {value}``; each placeholder is shell-quoted.
    """

    def __init__(self, helper_command: str | None = None) -> None:
        self.helper_command = helper_command

    def can_write(self, path: Path) -> bool:
        return self.helper_command is not None or os.access(path, os.W_OK)

    def write(self, path: Path, value: str, *, device: str = "") -> None:
        if self.helper_command is None:
            try:
                path.write_text(f"{value}\n")
            except OSError as exc:
                raise JournalError(
                    f"could not write {value} to {path}: {exc.strerror or exc}",
                    hint="run tuner as root, or set [readahead] helper_command to a privileged helper",
                ) from None
        else:
            cmd = self.helper_command.format(
                path=shlex.quote(str(path)), device=shlex.quote(device), value=shlex.quote(value)
            )
            proc = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=60)
            if proc.returncode != 0:
                detail = (proc.stderr or proc.stdout).strip().splitlines()
                raise JournalError(
                    f"the readahead helper command failed for {path}: "
                    f"{detail[-1] if detail else 'exit ' + str(proc.returncode)}",
                    hint="check [readahead] helper_command (it gets {path}, {device} and {value})",
                )
        found = path.read_text().strip()
        if found != value:
            raise JournalError(f"wrote {value} to {path}, but it reads {found}")


class Journal:
    """The journal of one state directory. A session ``open()``s it, ``record()``s before each change, and
    ``restore()``s at the end; ``recover()`` restores what a dead session left."""

    def __init__(self, state_dir: Path, *, writer: SysfsWriter | None = None) -> None:
        self.state_dir = state_dir
        self.path = state_dir / JOURNAL_NAME
        self.writer = writer or SysfsWriter()
        self._doc: dict[str, Any] | None = None  # ours, while a session holds the journal

    # -- reading ------------------------------------------------------------------------------------
    def read(self) -> dict[str, Any] | None:
        """The journal on disk, or None if there is none."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise JournalError(f"cannot read the journal {self.path}: {exc.strerror or exc}") from None
        try:
            doc = json.loads(text)
            if not isinstance(doc, dict) or not isinstance(doc.get("changes"), list):
                raise ValueError("not a tuner journal")
        except ValueError as exc:
            raise JournalError(
                f"the journal {self.path} is damaged ({exc})",
                hint="inspect it, restore by hand what it lists, then remove it",
            ) from None
        return doc

    # -- a session's own journal --------------------------------------------------------------------
    def open(self, session: str) -> list[Restored]:
        """Take the journal for this session, after restoring what a dead session left (returned)."""
        recovered = self.recover()
        start = process_start(os.getpid())
        self._doc = {
            "version": FORMAT_VERSION,
            "owner": {
                "pid": os.getpid(), "start": start, "host": socket.gethostname(), "boot_id": boot_id(),
                "session": session, "opened_at": datetime.now(UTC).isoformat(timespec="seconds"),
            },
            "changes": [],
        }
        return recovered

    @property
    def is_open(self) -> bool:
        return self._doc is not None

    def changes(self) -> list[dict[str, Any]]:
        return list(self._doc["changes"]) if self._doc else []

    def set_sysfs(self, path: Path, value: int | str, *, device: str, name: str) -> None:
        """Change a sysfs attribute: journal its original value first (once per path), then write."""
        if self._doc is None:
            raise JournalError("internal error: the journal is not open for this session")
        value = str(value)
        if not any(c["kind"] == "sysfs" and c["path"] == str(path) for c in self._doc["changes"]):
            try:
                original = path.read_text().strip()
            except OSError as exc:
                raise JournalError(f"cannot read {path}: {exc.strerror or exc}") from None
            self._doc["changes"].append({
                "kind": "sysfs", "path": str(path), "device": device, "name": name, "original": original,
                "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
            })
            _atomic_write_json(self.path, self._doc)
            log.info("journal.record", object=device, name=name, original=original, journal=str(self.path))
        self.writer.write(path, value, device=device)

    async def alter_system(
        self, conn: object, name: str, value: str, *, dsn: str | None, system_identifier: str | None,
        port: int | None, sandbox_dir: str | None = None,
    ) -> None:
        """``ALTER SYSTEM SET name = value`` on the target: journal the line postgresql.auto.conf had first.

        The caller reloads (or restarts) the server. ``conn`` is an asyncpg connection (superuser)."""
        if self._doc is None:
            raise JournalError("internal error: the journal is not open for this session")
        if not any(c["kind"] == "alter_system" and c["name"] == name for c in self._doc["changes"]):
            row = await conn.fetchrow(  # type: ignore[attr-defined]
                "SELECT setting FROM pg_file_settings WHERE name = $1 AND sourcefile LIKE '%/postgresql.auto.conf' "
                "ORDER BY seqno DESC LIMIT 1", name)
            self._doc["changes"].append({
                "kind": "alter_system", "name": name, "original": None if row is None else row["setting"],
                "device": f"PostgreSQL {system_identifier or '?'} port {port}", "dsn": strip_password(dsn),
                "system_identifier": system_identifier, "port": port, "sandbox_dir": sandbox_dir,
                "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
            })
            _atomic_write_json(self.path, self._doc)
            log.info("journal.record", object="postgresql.auto.conf", name=name,
                     original=None if row is None else row["setting"], journal=str(self.path))
        await conn.execute(f"ALTER SYSTEM SET {_ident(name)} = {_literal(str(value))}")  # type: ignore[attr-defined]

    async def restore_system(self, conn: object) -> list[Restored]:
        """Write back this session's ALTER SYSTEM entries over ``conn`` and drop them from the journal (the caller
        reloads or restarts). Used by the session itself, so the server is restored before it moves on."""
        if self._doc is None:
            return []
        done = []
        for change in [c for c in reversed(self._doc["changes"]) if c["kind"] == "alter_system"]:
            done.append(await _write_back(conn, change))
            self._doc["changes"].remove(change)
            _atomic_write_json(self.path, self._doc)
        if not self._doc["changes"]:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        return done

    def restore(self) -> list[Restored]:
        """Put back everything this session changed, then release the journal."""
        if self._doc is None:
            return []
        try:
            return self._restore(self._doc)
        finally:
            self._doc = None

    # -- recovery -----------------------------------------------------------------------------------
    def owner(self) -> dict[str, Any] | None:
        doc = self.read()
        return None if doc is None else dict(doc.get("owner") or {})

    def recover(self, *, force: bool = False, dsn: str | None = None) -> list[Restored]:
        """Restore a journal left by a session that is gone. A live owner is another running tuner: refused."""
        doc = self.read()
        if doc is None:
            return []
        owner = doc.get("owner") or {}
        if not force and owner_alive(owner) and owner.get("pid") != os.getpid():
            raise JournalError(
                f"another tuner (pid {owner.get('pid')}, session {owner.get('session')}) holds the journal "
                f"{self.path}; it restores its own changes when it ends",
                hint=f"wait for it, or stop it with kill -TERM {owner.get('pid')}",
            )
        if doc["changes"]:
            log.warning("journal.recover", journal=str(self.path), session=owner.get("session"),
                        owner_pid=owner.get("pid"), changes=len(doc["changes"]))
        return self._restore(doc, dsn=dsn)

    def _restore(self, doc: dict[str, Any], *, dsn: str | None = None) -> list[Restored]:
        """Restore every entry (last change first); keep the ones that failed in the journal and raise."""
        done: list[Restored] = []
        failed: list[tuple[dict[str, Any], str]] = []
        same_boot = (doc.get("owner") or {}).get("boot_id") == boot_id()
        for change in reversed(list(doc["changes"])):
            try:
                done.append(self._restore_one(change, same_boot=same_boot, dsn=dsn))
            except (JournalError, OSError) as exc:
                failed.append((change, str(exc)))
            else:
                doc["changes"].remove(change)
                if doc["changes"]:
                    _atomic_write_json(self.path, doc)
        if failed:
            _atomic_write_json(self.path, doc)
            first, why = failed[0]
            raise JournalError(
                f"could not restore {len(failed)} change(s) from {self.path}, first {first.get('device')} "
                f"{first.get('name')} = {first.get('original')}: {why}",
                hint="fix the cause and run 'tuner restore' (the journal keeps what is not restored yet)",
            )
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        for r in done:
            log.info("journal.restore", object=r.object, name=r.name, was=r.was, restored_to=r.restored_to, action=r.action)
        return done

    def _restore_one(self, change: dict[str, Any], *, same_boot: bool, dsn: str | None = None) -> Restored:
        kind = change.get("kind")
        if kind == "alter_system":
            return _restore_system_sync(change, dsn)
        if kind != "sysfs":
            raise JournalError(f"unknown kind of journal entry: {kind!r}")
        path, original = Path(change["path"]), str(change["original"])
        obj, name = change.get("device") or str(path), change.get("name") or path.name
        if not same_boot:
            return Restored(obj, name, None, original, "dropped: the machine rebooted since, which reset it")
        if not path.exists():
            return Restored(obj, name, None, original, "dropped: the device is gone")
        was = path.read_text().strip()
        if was == original:
            return Restored(obj, name, was, original, "already at the original value")
        self.writer.write(path, original, device=obj)
        return Restored(obj, name, was, original, "restored")


async def _write_back(conn: Any, change: dict[str, Any]) -> Restored:
    name, original = change["name"], change.get("original")
    row = await conn.fetchrow(
        "SELECT setting FROM pg_file_settings WHERE name = $1 AND sourcefile LIKE '%/postgresql.auto.conf' "
        "ORDER BY seqno DESC LIMIT 1", name)
    was = None if row is None else row["setting"]
    if original is None:
        await conn.execute(f"ALTER SYSTEM RESET {_ident(name)}")
    else:
        await conn.execute(f"ALTER SYSTEM SET {_ident(name)} = {_literal(str(original))}")
    shown = "(not set)" if original is None else str(original)
    if was == original:
        return Restored("postgresql.auto.conf", name, was, shown, "already at the original value")
    return Restored("postgresql.auto.conf", name, "(not set)" if was is None else was, shown, "restored")


def _restore_system_sync(change: dict[str, Any], dsn: str | None) -> Restored:
    """Restore one ALTER SYSTEM entry from synchronous code (recovery, signal paths): a private event loop in a
    thread, so it works whether or not the caller's loop is running or being cancelled."""
    sandbox_dir = change.get("sandbox_dir")
    if sandbox_dir and not Path(sandbox_dir).exists():
        return Restored("postgresql.auto.conf", change["name"], None, str(change.get("original")),
                        "dropped: the sandbox it belonged to is gone")
    box: dict[str, Any] = {}

    async def run() -> Restored:
        from tuner.target.connection import connect

        conn = await connect(dsn or change.get("dsn"), timeout_s=10)
        try:
            sysid = await conn.fetchval("SELECT system_identifier::text FROM pg_control_system()")
            port = int(await conn.fetchval("SELECT current_setting('port')"))
            if sysid != change.get("system_identifier") or port != change.get("port"):
                raise JournalError(
                    f"the server reached ({sysid}, port {port}) is not the one tuner changed "
                    f"({change.get('system_identifier')}, port {change.get('port')})",
                    hint="run 'tuner restore --dsn …' with the staging server's connection string",
                )
            restored = await _write_back(conn, change)
            await conn.execute("SELECT pg_reload_conf()")
            return restored
        finally:
            await conn.close()

    def target() -> None:
        try:
            box["ok"] = asyncio.run(run())
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    t = threading.Thread(target=target, name="tuner-journal-restore")
    t.start()
    t.join()
    if "error" in box:
        err = box["error"]
        if isinstance(err, TunerError):
            raise JournalError(str(err), hint=err.hint)
        raise JournalError(f"could not restore {change['name']} on the staging server: {err}")
    return box["ok"]
