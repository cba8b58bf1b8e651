"""The change journal: every persistent change tuner makes is written here *before* it is made.

One JSON file, ``<state_dir>/journal.json``, rewritten atomically (temporary file, fsync, rename, fsync of the
directory). It names its owner (pid, the process's start time — so a recycled pid is not mistaken for a live
tuner — host and session) and, per changed object, the value it had before tuner first touched it. Restoring
writes those values back, checks them, and removes the entries; an empty journal is deleted.

* one tuner at a time: a session holds ``<state_dir>/journal.lock`` (:mod:`.lock`) from its start to its end,
  and ``tuner restore`` while it works; a second one is refused with one sentence;
* an entry is on disk before its change is made: when the journal cannot be written (a full disk), the change is
  not made and the session ends with one sentence;
* at the end of a session, on SIGINT and SIGTERM: the session restores its own entries, every one it can; what
  fails stays in the journal (and is reported) for ``tuner restore``;
* after a crash (SIGKILL, power loss): the next ``tuner`` start finds the journal of a session that is gone and
  restores it before doing anything else; ``tuner restore`` does the same on demand;
* after a reboot: a kernel setting such as ``read_ahead_kb`` did not survive it, so that entry is dropped, not
  written (the device may even have another name now) — the journal records the boot it was written in;
* a journal tuner would not have written (damaged, or crafted: :mod:`.journal_check`) is refused whole, nothing in it
  written; ``tuner restore --forget N|all`` drops entries an operator has dealt with by hand.

Kinds of entry, each written and put back by its actuator: ``sysfs`` (:mod:`tuner.actuate.sysfs`, a block device's
queue attribute under /sys) and ``alter_system`` (:mod:`tuner.actuate.alter_system`, a line of the staging
server's ``postgresql.auto.conf``, written back only on a marked staging clone — or, for a line written on a hot
standby, only on that hot standby), with ``scratch_schema`` and ``replay_pause`` (a hot standby's paused WAL replay,
resumed) from the same actuator.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import stat
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tuner.fs import trust
from tuner.actuate import journal_check
from tuner.actuate.alter_system import alter, alter_entry, put_back, replay_entry, scratch_entry
from tuner.actuate.batch import batches, restore_batch
from tuner.actuate.entry import JournalError, JournalInvalid, Restored, not_restored
from tuner.actuate.journal_lock import JournalLock
from tuner.actuate.owner import boot_id, owner_alive, process_start
from tuner.actuate.sysfs import SysfsWriter, sysfs_entry, value_problem
from tuner.errors import ConfigError
from tuner.fs.atomic import atomic_write
from tuner.log import get_logger

log = get_logger("tuner.journal")

JOURNAL_NAME = "journal.json"
FORMAT_VERSION = journal_check.FORMAT_VERSION
SAVE_EVERY_S = 1.0  # a restore rewrites the journal at most this often (and at its end)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class Journal:
    """The journal of one state directory. A session ``open()``s it (taking the lock), ``record()``s before each
    change, and ``restore()``s at the end (releasing the lock); ``recover()`` restores what a dead session left."""

    def __init__(self, state_dir: Path, *, writer: SysfsWriter | None = None) -> None:
        self.state_dir = state_dir
        self.path = state_dir / JOURNAL_NAME
        self.writer = writer or SysfsWriter()
        self._lock = JournalLock(state_dir)
        self._doc: dict[str, Any] | None = None  # ours, while a session holds the journal

    # -- the lock -----------------------------------------------------------------------------------
    @contextlib.contextmanager
    def locked(self, purpose: str) -> Iterator[None]:
        """Hold the lock for the block (already held by this journal: kept, and not released after it)."""
        if self._lock.held:
            yield
            return
        self._lock.acquire(purpose)
        try:
            yield
        finally:
            self._lock.release()

    def live_holder(self) -> str | None:
        """The live tuner (pid and purpose) that holds this state directory now, None when none does."""
        return self._lock.live_holder()

    # -- reading ------------------------------------------------------------------------------------
    def _raw(self, *, acted_on: bool = True) -> bytes | None:
        """The journal's bytes, or None; one that is ``acted_on`` must be tuner's own (:mod:`tuner.fs.trust`): a
        journal another user could have planted or changed would have root write what that user chose."""
        try:
            # Without blocking, checked on the descriptor: a FIFO in the journal's place must not hang restore.
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (os.O_NOFOLLOW if acted_on else 0))
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise JournalError(f"cannot read the journal {self.path}: {exc.strerror or exc}") from None
            raise JournalInvalid(f"the journal {self.path} is a symbolic link, which tuner never writes; nothing was "
                                 "restored", hint=journal_check.untrusted_hint()) from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise JournalInvalid(f"the journal {self.path} is not a regular file (a directory, pipe or device); "
                                     "nothing was restored", hint=journal_check.forget_hint())
            why = (trust.problem(os.fstat(fd), trusted={os.geteuid()}) or trust.directories_above(self.path)
                   if acted_on else None)
            if why:
                raise JournalInvalid(f"the journal {self.path} may have been written by another user ({why}); "
                                     "nothing was restored", hint=journal_check.untrusted_hint())
            with os.fdopen(os.dup(fd), "rb") as fh:
                return fh.read()
        except OSError as exc:
            raise JournalError(f"cannot read the journal {self.path}: {exc.strerror or exc}") from None
        finally:
            os.close(fd)

    def read(self) -> dict[str, Any] | None:
        """The journal on disk, checked entry by entry (:mod:`.journal_check`), or None if there is none."""
        raw = self._raw()
        if raw is None:
            return None
        doc = journal_check.parse(self.path, raw)
        journal_check.check(self.path, doc, self.writer.sys_root)
        return doc

    def listing(self) -> list[str]:
        """The entries on disk, numbered as ``--forget`` counts them (the file's format checked, not its entries)."""
        raw = self._raw()
        changes = [] if raw is None else journal_check.parse(self.path, raw)["changes"]
        return [f"{n}: {journal_check.describe(c)}" for n, c in enumerate(changes, 1)]

    def _write(self, doc: dict[str, Any]) -> None:
        atomic_write(self.path, json.dumps(doc, indent=2) + "\n", dir_mode=0o700)

    def _save(self, doc: dict[str, Any]) -> None:
        """Write what is left to restore (delete the file when nothing is). A failure is logged, not raised: the
        entries on disk then name values already put back, which a later restore finds in place."""
        try:
            if doc["changes"]:
                self._write(doc)
            else:
                with contextlib.suppress(FileNotFoundError):
                    self.path.unlink()
        except OSError as exc:
            log.warning("journal.save_failed", journal=str(self.path), error=exc.strerror or str(exc))

    # -- a session's own journal --------------------------------------------------------------------
    def open(self, session: str) -> list[Restored]:
        """Take the journal for this session, after restoring what a dead session left (returned). Raises a
        :class:`JournalError` when another tuner holds it, or when what was left cannot all be put back."""
        self._lock.acquire(f"session {session}")
        try:
            recovered = self.recover()
            failed = [r for r in recovered if not r.ok]
            if failed:
                raise JournalError(
                    f"{len(failed)} change(s) an earlier session left in {self.path} could not be put back, first "
                    f"{failed[0].sentence()}",
                    hint="fix the cause and run 'tuner restore' (it retries them) before a new session",
                )
        except BaseException:
            self._lock.release()
            raise
        self._doc = {
            "version": FORMAT_VERSION,
            "owner": {
                "pid": os.getpid(), "start": process_start(os.getpid()), "host": socket.gethostname(),
                "boot_id": boot_id(), "session": session, "opened_at": _now(),
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
        """Journal one entry (the original value of ``obj``'s setting), durably, before the change is made. If it
        cannot be written, neither the journal in memory nor the object changes: the error says so."""
        doc = self._held()
        entry = {**change, "recorded_at": _now()}
        problem = journal_check.entry_problem(entry, self.writer.sys_root)
        if problem:
            raise JournalError(f"internal error: refusing to change {obj} {change.get('name')}: its entry {problem}")
        updated = {**doc, "changes": [*doc["changes"], entry]}
        try:
            self._write(updated)
        except OSError as exc:
            raise JournalError(
                f"could not write the journal {self.path} ({exc.strerror or exc}), so {obj} {change['name']} was "
                "not changed",
                hint="free space in the state directory ([tuner] state_dir) or make it writable, then run tuner again",
            ) from None
        self._doc = updated
        log.info("journal.record", object=obj, name=change["name"], original=change["original"], journal=str(self.path))

    def set_sysfs(self, path: Path, value: int | str, *, device: str, name: str) -> None:
        """Change a sysfs attribute: journal its original value first (once per path), then write."""
        doc = self._held()
        problem = value_problem(name, value)
        if problem:
            raise JournalError(f"internal error: refusing to write {path}: {problem}")
        if not any(c["kind"] == "sysfs" and c["path"] == str(path) for c in doc["changes"]):
            self._record(sysfs_entry(path, device=device, name=name), obj=device)
        self.writer.write(path, str(value), device=device)

    async def alter_system(
        self, conn: object, name: str, value: str, *, dsn: str | None, system_identifier: str | None,
        port: int | None, sandbox_dir: str | None = None, standby: bool = False,
    ) -> None:
        """``ALTER SYSTEM SET name = value`` on the target: journal the line postgresql.auto.conf had first.

        The caller reloads (or restarts) the server. ``conn`` is an asyncpg connection (superuser); ``standby``:
        it reaches a hot standby (the entry is then written back only on a hot standby)."""
        doc = self._held()
        if not any(c["kind"] == "alter_system" and c["name"] == name and bool(c.get("standby")) == standby
                   for c in doc["changes"]):
            entry = await alter_entry(conn, name, dsn=dsn, system_identifier=system_identifier, port=port,
                                      sandbox_dir=sandbox_dir, standby=standby)
            self._record(entry, obj="postgresql.auto.conf")
        await alter(conn, name, str(value))

    async def alter_system_and_reload(
        self, connect: Callable[[], Awaitable[Any]], changes: Mapping[str, str], *, dsn: str | None,
        system_identifier: str | None, port: int | None, sandbox_dir: str | None = None,
    ) -> None:
        """``alter_system`` for each of ``changes`` over one new connection (``connect()``), then
        ``pg_reload_conf()``; the connection is closed whatever happens. A restart-level setting still needs the
        caller's restart."""
        conn = await connect()
        try:
            for name, value in changes.items():
                await self.alter_system(conn, name, value, dsn=dsn, system_identifier=system_identifier, port=port,
                                        sandbox_dir=sandbox_dir)
            await conn.execute("SELECT pg_reload_conf()")
        finally:
            await conn.close()

    def replay_pause(self, *, dsn: str | None, system_identifier: str | None, port: int | None,
                     sandbox_dir: str | None = None) -> None:
        """Journal that the caller is about to pause a hot standby's WAL replay (once a session): restoring the entry
        resumes replay if it is still paused — after a crash too."""
        if not any(c["kind"] == "replay_pause" for c in self._held()["changes"]):
            self._record(replay_entry(dsn=dsn, system_identifier=system_identifier, port=port,
                                      sandbox_dir=sandbox_dir), obj="WAL replay")

    def scratch_schema(self, *, dsn: str | None, system_identifier: str | None, port: int | None,
                       sandbox_dir: str | None = None) -> None:
        """Journal tuner's scratch schema on the staging server before the caller creates it (once a session)."""
        if not any(c["kind"] == "scratch_schema" for c in self._held()["changes"]):
            self._record(scratch_entry(dsn=dsn, system_identifier=system_identifier, port=port,
                                       sandbox_dir=sandbox_dir), obj="schema")

    async def restore_system(self, conn: object, *, standby: bool = False) -> list[Restored]:
        """Put back this session's entries on the staging server over ``conn`` — ALTER SYSTEM lines, the scratch
        schema — and drop them from the journal (the caller reloads or restarts); with ``standby``, the entries
        written on a hot standby instead (ALTER SYSTEM lines, its paused replay). Used by the session itself, so
        the server is restored before it moves on. An entry that fails (or that the interlock refuses) is reported
        and stays in the journal."""
        if self._doc is None:
            return []
        done = []
        kinds = ("alter_system", "scratch_schema", "replay_pause")
        for change in [c for c in reversed(self._doc["changes"])
                       if c["kind"] in kinds and bool(c.get("standby")) == standby]:
            try:
                done.append(await put_back(conn, change))
            except Exception as exc:  # noqa: BLE001 - reported; the entry stays for the end of the session
                done.append(not_restored(change, exc))
            else:
                self._doc["changes"].remove(change)
                self._save(self._doc)
        return done

    def restore(self) -> list[Restored]:
        """Put back everything this session changed, then release the journal (and its lock)."""
        if self._doc is None:
            self._lock.release()
            return []
        try:
            return self._restore(self._doc)
        finally:
            self._doc = None
            self._lock.release()

    # -- recovery -----------------------------------------------------------------------------------
    def owner(self) -> dict[str, Any] | None:
        doc = self.read()
        return None if doc is None else dict(doc.get("owner") or {})

    def recover(self, *, force: bool = False, dsn: str | None = None) -> list[Restored]:
        """Restore a journal left by a session that is gone, under the lock. A live owner is another running
        tuner: refused."""
        with self.locked("restore"):
            doc = self.read()
            if doc is None:
                return []
            owner = doc["owner"]
            if not force and owner_alive(owner) and not owner.get("ended_at") and owner.get("pid") != os.getpid():
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
        """Restore every entry (last change first; one server's entries together, over one connection), past
        failures: each failure is reported as a :class:`Restored` that is not ``ok``, and its entry stays in the
        journal for ``tuner restore``.

        The journal is rewritten once per batch (every :data:`SAVE_EVERY_S` or so, and at the end), not per entry: each
        rewrite is the whole file with an fsync, so per entry a journal of n entries cost n rewrites (200,000
        entries: 11 restored in 60 s). An entry put back but still listed after a crash is put back again by the
        next restore, which finds its value in place."""
        done: list[Restored] = []
        same_boot = (doc.get("owner") or {}).get("boot_id") == boot_id()
        changes = list(doc["changes"])
        left = {id(c) for c in changes}  # still listed: not yet put back, or failed
        last_save = time.monotonic()
        for batch in batches(changes[::-1]):
            restored = restore_batch(self.writer, batch, same_boot=same_boot, dsn=dsn)
            for change, r in zip(batch, restored, strict=True):
                if r.ok:
                    left.discard(id(change))
                done.append(r)
                log.info("journal.restore", object=r.object, name=r.name, was=r.was, restored_to=r.restored_to,
                         action=r.action, reason=r.reason)
            if time.monotonic() - last_save >= SAVE_EVERY_S:
                doc["changes"] = [c for c in changes if id(c) in left]
                self._save(doc)
                last_save = time.monotonic()
        doc["changes"] = [c for c in changes if id(c) in left]
        changed = len(doc["changes"]) != len(changes) or not changes
        if doc["changes"] and doc["owner"].get("pid") == os.getpid() and not doc["owner"].get("ended_at"):
            doc["owner"] = {**doc["owner"], "ended_at": _now()}  # our session is over: what is left is for later
            changed = True
        if changed:
            self._save(doc)  # removes the file when nothing is left (one that listed nothing, too)
        return done

    # -- an operator's decisions --------------------------------------------------------------------
    def forget(self, which: str) -> list[str]:
        """Drop entry ``which`` (its number from 1, its device, path or setting name, or ``all``) without writing
        it; return what was dropped. Under the lock; a damaged journal can only be dropped whole."""
        with self.locked("restore --forget"):
            raw = self._raw(acted_on=which != "all")  # dropping a file acts on nothing in it
            if raw is None:
                raise ConfigError(f"nothing to forget: there is no journal in {self.state_dir}")
            if which == "all":
                try:
                    changes = journal_check.parse(self.path, raw)["changes"]
                    dropped = [f"{n}: {journal_check.describe(c)}" for n, c in enumerate(changes, 1)]
                except JournalError as exc:
                    dropped = [f"the whole damaged journal ({exc})"]
                doc: dict[str, Any] = {"changes": []}
            else:
                doc = journal_check.parse(self.path, raw)
                number = self._entry_number(which, doc["changes"])
                dropped = [f"{number}: {journal_check.describe(doc['changes'].pop(number - 1))}"]
            try:
                if doc["changes"]:
                    self._write(doc)
                else:
                    self.path.unlink()
            except OSError as exc:
                raise JournalError(f"could not rewrite the journal {self.path}: {exc.strerror or exc}") from None
            log.warning("journal.forget", journal=str(self.path), dropped=dropped)
            return dropped

    def _entry_number(self, which: str, changes: list[Any]) -> int:
        """The number (from 1) of the one entry ``which`` names: by number, device, path or setting name."""
        if which.isdigit() and 1 <= int(which) <= len(changes):
            return int(which)
        matches = [n for n, c in enumerate(changes, 1)
                   if isinstance(c, dict) and which in (c.get("device"), c.get("path"), c.get("name"))]
        if len(matches) != 1:
            raise ConfigError(
                f"--forget {which!r} names {'no' if not matches else len(matches)} entries of {self.path} "
                f"(it has {len(changes)})",
                hint="give an entry's number (from 1, in the file's order), or all",
            )
        return matches[0]
