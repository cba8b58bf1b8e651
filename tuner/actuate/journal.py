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

Kinds of entry, each written and put back by its actuator: ``sysfs`` (:mod:`tuner.actuate.sysfs`, a file under
/sys) and ``alter_system`` (:mod:`tuner.actuate.alter_system`, a line of the staging server's
``postgresql.auto.conf``).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tuner.actuate.alter_system import alter, alter_entry, restore_alter_system, write_back
from tuner.actuate.entry import JournalError, Restored
from tuner.actuate.sysfs import SysfsWriter, restore_sysfs, sysfs_entry
from tuner.files import atomic_write
from tuner.log import get_logger

log = get_logger("tuner.journal")

JOURNAL_NAME = "journal.json"
FORMAT_VERSION = 1
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


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


def _atomic_write_json(path: Path, doc: dict[str, Any]) -> None:
    atomic_write(path, json.dumps(doc, indent=2) + "\n", dir_mode=0o700)


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

    def _held(self) -> dict[str, Any]:
        if self._doc is None:
            raise JournalError("internal error: the journal is not open for this session")
        return self._doc

    def _record(self, change: dict[str, Any], *, obj: str) -> None:
        """Journal one entry (the original value of ``obj``'s setting), durably, before the change is made."""
        doc = self._held()
        doc["changes"].append({**change, "recorded_at": datetime.now(UTC).isoformat(timespec="seconds")})
        _atomic_write_json(self.path, doc)
        log.info("journal.record", object=obj, name=change["name"], original=change["original"], journal=str(self.path))

    def set_sysfs(self, path: Path, value: int | str, *, device: str, name: str) -> None:
        """Change a sysfs attribute: journal its original value first (once per path), then write."""
        doc = self._held()
        if not any(c["kind"] == "sysfs" and c["path"] == str(path) for c in doc["changes"]):
            self._record(sysfs_entry(path, device=device, name=name), obj=device)
        self.writer.write(path, str(value), device=device)

    async def alter_system(
        self, conn: object, name: str, value: str, *, dsn: str | None, system_identifier: str | None,
        port: int | None, sandbox_dir: str | None = None,
    ) -> None:
        """``ALTER SYSTEM SET name = value`` on the target: journal the line postgresql.auto.conf had first.

        The caller reloads (or restarts) the server. ``conn`` is an asyncpg connection (superuser)."""
        doc = self._held()
        if not any(c["kind"] == "alter_system" and c["name"] == name for c in doc["changes"]):
            entry = await alter_entry(conn, name, dsn=dsn, system_identifier=system_identifier, port=port,
                                      sandbox_dir=sandbox_dir)
            self._record(entry, obj="postgresql.auto.conf")
        await alter(conn, name, str(value))

    async def restore_system(self, conn: object) -> list[Restored]:
        """Write back this session's ALTER SYSTEM entries over ``conn`` and drop them from the journal (the caller
        reloads or restarts). Used by the session itself, so the server is restored before it moves on."""
        if self._doc is None:
            return []
        done = []
        for change in [c for c in reversed(self._doc["changes"]) if c["kind"] == "alter_system"]:
            done.append(await write_back(conn, change))
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
            return restore_alter_system(change, dsn)
        if kind == "sysfs":
            return restore_sysfs(self.writer, change, same_boot=same_boot)
        raise JournalError(f"unknown kind of journal entry: {kind!r}")
