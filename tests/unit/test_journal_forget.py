"""``tuner restore`` on a journal it refuses, and ``tuner restore --forget ENTRY`` for the operator who has looked at
it: one sentence and a hint, never a traceback; --forget drops entries without writing them, under the lock."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .test_journal import fake_sysfs, journal
from .test_journal_check import VICTIM, _doc, alter, sysfs

REPO = Path(__file__).resolve().parents[2]


def tuner(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "TUNER_"))}
    return subprocess.run(
        [sys.executable, "-m", "tuner", "restore", "--state-dir", str(state), *args], capture_output=True, text=True,
        timeout=120, cwd=state.parent, env={**env, "PYTHONPATH": str(REPO)},
    )


def _one_error(proc: subprocess.CompletedProcess[str], code: int, *expected: str) -> None:
    assert proc.returncode == code, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("tuner: error: ") and lines[1].startswith("hint: "), proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    for text in expected:
        assert text in proc.stderr, proc.stderr


def test_a_crafted_entry_is_refused_then_forgotten_entry_by_entry(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text(VICTIM)
    state = tmp_path / "state"
    state.mkdir()
    path = state / "journal.json"
    raw = _doc(alter(), sysfs(f"/sys/block/vda/../../../{victim}"))
    path.write_bytes(raw)
    _one_error(tuner(state), 2, "is damaged: entry 2 path", "hint: look at the file; 'tuner restore --forget 2'")
    assert path.read_bytes() == raw and victim.read_text() == VICTIM
    proc = tuner(state, "--forget", "2")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("forgotten without writing it: 2: sysfs /dev/x victim (original 4096)")
    assert "1 journal entry left" in proc.stderr and victim.read_text() == VICTIM
    assert [c["name"] for c in json.loads(path.read_text())["changes"]] == ["wal_writer_delay"]
    _one_error(tuner(state, "--forget", "7"), 2, "--forget '7' names no entries", "(it has 1)")
    proc = tuner(state, "--forget", "wal_writer_delay")
    assert proc.returncode == 0 and "wal_writer_delay (original 200ms)" in proc.stdout, proc.stderr
    assert not path.exists() and "0 journal entries left" in proc.stderr
    proc = tuner(state, "--forget", "all")
    assert proc.returncode == 0 and "nothing to forget" in proc.stderr


def test_a_damaged_journal_can_only_be_forgotten_whole(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    path = state / "journal.json"
    path.write_bytes(b"\x00\x01\xffnot a journal")
    _one_error(tuner(state), 2, "is damaged: it is not text", "--forget all")
    _one_error(tuner(state, "--forget", "1"), 2, "is damaged: it is not text", "--forget all")
    assert path.exists()
    proc = tuner(state, "--forget", "all")
    assert proc.returncode == 0, proc.stderr
    assert "the whole damaged journal" in proc.stdout and not path.exists()


def test_forget_waits_for_no_one_and_writes_nothing_while_a_session_holds_the_journal(tmp_path: Path) -> None:
    attr = fake_sysfs(tmp_path)
    holder = journal(tmp_path)
    holder.open("busy")
    try:
        holder.set_sysfs(attr, 512, device="/dev/x", name="read_ahead_kb")
        _one_error(tuner(tmp_path / "state", "--forget", "all"), 1, "another tuner", "session busy")
        assert holder.path.exists()
    finally:
        holder.restore()
    assert attr.read_text().strip() == "128"
