"""Issue 44, item 9: what tuner reads back from its store and journal is checked like user input.

- a stored row with bad JSON or a wrong type is one sentence (exit 2; a listing leaves the row out and says so),
  not "unexpected error";
- a 0-byte tuner.db is an empty store: a reader (history) leaves it as it is;
- a store that cannot be written (read-only) or a full disk is said as such, not as "damaged … move it aside";
- a deeply nested journal is one sentence, and ``restore --forget all`` drops it;
- a restore rewrites the journal once per batch, not once per entry (the speed is in
  benchmarks/journal_restore.py; here only the number of rewrites is counted)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from tuner.actuate import Journal, SysfsWriter
from tuner.actuate import journal as journal_module
from tuner.store import StoreError
from tuner.store.sqlite import SqliteBackend

from .test_store import _cli, _opened, make_report, save

BAD_ROWS = [
    ("UPDATE sessions SET fingerprint = '{not json'", "history"),
    ("UPDATE sessions SET duration_s = 'slow'", "history"),
    ("UPDATE sessions SET probes = 'many'", "history"),
    ("UPDATE sessions SET report = '{\"target\": 1}'", "show"),
    ("UPDATE sessions SET report = '" + "[" * 5000 + "'", "show"),
    ("UPDATE recommendations SET seq = 7", "prune"),
    ("UPDATE trials SET config = '{oops'", "prior"),
]


@pytest.mark.parametrize("sql, reader", BAD_ROWS)
def test_a_stored_row_with_bad_json_or_types_is_one_sentence(tmp_path: Path, sql: str, reader: str) -> None:
    db = tmp_path / "tuner.db"
    save(db, make_report("a1aaaaaaaaaa"))
    con = sqlite3.connect(db)
    with con:
        con.execute(sql)
    con.close()
    if reader == "prior":
        async def go() -> Any:
            store = await _opened(db)
            try:
                return await store.priors.find({"system_identifier": "7001"}, "concurrency")
            finally:
                await store.backend.close()

        with pytest.raises(StoreError, match="cannot read|cannot be read"):
            asyncio.run(go())
        return
    args = {"history": ("history",), "show": ("show", "a1"), "prune": ("prune", "--older-than", "1d")}[reader]
    r = _cli(*args, state=tmp_path)
    if reader == "history":  # a listing leaves the row out, says so in one sentence, and lists the rest (#59)
        assert r.exit_code == 0 and "stored session a1aaaaaaaaaa left out:" in r.output, r.output
        assert "unexpected" not in r.output
        return
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert lines[0].startswith("tuner: error: ") and len(lines) <= 2 and "unexpected" not in r.output, r.output


def test_a_zero_byte_store_is_not_initialised_by_a_reader(tmp_path: Path) -> None:
    db = tmp_path / "tuner.db"
    db.touch()
    for args in (("history",), ("show",), ("prune", "--older-than", "1d", "--dry-run")):
        r = _cli(*args, state=tmp_path)
        assert "Traceback" not in r.output and "unexpected" not in r.output, r.output
        assert db.stat().st_size == 0, args  # not initialised
        assert not (tmp_path / "tuner.db-wal").exists()
    save(db, make_report("a1aaaaaaaaaa"))  # the first write makes it a store
    assert "a1aaaaaaaaaa" in _cli("history", state=tmp_path).output


def _write_error(tmp_path: Path, pragma: str) -> StoreError:
    db = tmp_path / "tuner.db"
    save(db, make_report("a1aaaaaaaaaa"))

    async def go() -> None:
        store = await _opened(db)
        try:
            assert isinstance(store.backend, SqliteBackend) and store.backend._db is not None
            con = store.backend._db
            if pragma == "full":  # SQLite's own SQLITE_FULL: the file may not grow past the pages it has
                pages = con.execute("PRAGMA page_count").fetchone()[0]
                con.execute(f"PRAGMA max_page_count = {pages}")
            else:  # SQLITE_READONLY, as a read-only mount gives it
                con.execute("PRAGMA query_only = 1")
            big = make_report("b2bbbbbbbbbb", values={i: 1000.0 + i for i in range(1, 400)})
            await store.sessions.save(big, big.target.fingerprint or {})
        finally:
            await store.backend.close()

    with pytest.raises(StoreError) as err:
        asyncio.run(go())
    return err.value


def test_a_full_disk_is_said_as_such_not_as_damage(tmp_path: Path) -> None:
    err = _write_error(tmp_path, "full")
    assert "the disk is full" in str(err) and "damaged" not in str(err) and "move it aside" not in (err.hint or "")


def test_a_read_only_store_is_said_as_such_not_as_damage(tmp_path: Path) -> None:
    err = _write_error(tmp_path, "readonly")
    assert "read-only" in str(err) and "damaged" not in str(err) and "move it aside" not in (err.hint or "")


def _state_with(tmp_path: Path, raw: bytes) -> Path:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "journal.json").write_bytes(raw)
    return state


@pytest.mark.parametrize("raw", [
    b"[" * 100_000 + b"]" * 100_000,
    b'{"version": 1, "owner": {}, "changes": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
    b'{"version": ' + b"9" * 20_000 + b"}",
])
def test_a_deeply_nested_journal_is_one_sentence_and_forget_all_drops_it(tmp_path: Path, raw: bytes) -> None:
    state = _state_with(tmp_path, raw)
    r = _cli("restore", state=state)
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert lines[0].startswith("tuner: error: the journal") and "damaged" in lines[0] and len(lines) <= 2
    assert (state / "journal.json").read_bytes() == raw  # nothing changed
    f = _cli("restore", "--forget", "all", state=state)
    assert f.exit_code == 0, f.output
    assert not (state / "journal.json").exists()


def test_a_restore_rewrites_the_journal_per_batch_not_per_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    entries = 3000
    sys_root = tmp_path / "sys"
    (sys_root / "block").mkdir(parents=True)
    doc = {"version": 1, "owner": {"pid": 1, "start": "1", "host": "elsewhere", "boot_id": "another-boot",
                                   "session": "s", "opened_at": "2026-01-01T00:00:00+00:00"},
           "changes": [{"kind": "sysfs", "path": f"{sys_root}/block/d{i}/queue/read_ahead_kb", "device": f"/dev/d{i}",
                        "name": "read_ahead_kb", "original": "128"} for i in range(entries)]}
    state = _state_with(tmp_path, json.dumps(doc).encode())
    writes = []
    real = journal_module.atomic_write
    monkeypatch.setattr(journal_module, "atomic_write", lambda *a, **k: (writes.append(1), real(*a, **k))[1])
    t = time.monotonic()
    done = Journal(state, writer=SysfsWriter(sys_root=sys_root)).recover()
    elapsed = time.monotonic() - t
    assert len(done) == entries and not (state / "journal.json").exists()
    # One rewrite per SAVE_EVERY_S at most (the last one is the file's removal, not a write).
    assert len(writes) <= elapsed / journal_module.SAVE_EVERY_S + 1 < entries
