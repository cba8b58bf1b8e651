"""One tuner at a time holds the journal: a second one — another process, as in real life — is refused with one
sentence, before it restores, records or changes anything; the lock dies with its holder, even by SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tuner.actuate import JournalError

from .test_journal import crash, fake_sysfs, journal

REPO = Path(__file__).resolve().parents[2]


OPEN_SECOND = (
    "try:\n"
    "    j.open('second')\n"
    "    j.set_sysfs(Path(sys.argv[1]), 4096, device='/dev/x', name='read_ahead_kb')\n"
    "except JournalError as e:\n"
    "    print(e); sys.exit(7)\n"
)


def test_a_second_session_in_another_process_is_refused_before_it_changes_anything(tmp_path: Path) -> None:
    attr = fake_sysfs(tmp_path)
    first = journal(tmp_path)
    first.open("first")  # nothing changed yet: no journal file, only the lock
    second = subprocess.run(
        [sys.executable, "-c", _script(tmp_path) + OPEN_SECOND, str(attr)], capture_output=True, text=True,
        timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert second.returncode == 7, second.stderr
    assert f"another tuner (pid {os.getpid()}, session first)" in second.stdout
    assert len(second.stdout.strip().splitlines()) == 1  # one sentence
    assert attr.read_text().strip() == "128" and not first.path.exists()
    first.set_sysfs(attr, 512, device="/dev/x", name="read_ahead_kb")
    [r] = first.restore()  # ends the session and releases the lock
    assert r.action == "restored"
    again = subprocess.run(
        [sys.executable, "-c", _script(tmp_path) + OPEN_SECOND + "j.restore()\n", str(attr)], capture_output=True,
        text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert attr.read_text().strip() == "128" and not first.path.exists()


def _script(tmp_path: Path) -> str:
    return (
        "import sys\n"
        "from pathlib import Path\n"
        "from tuner.actuate import Journal, JournalError, SysfsWriter\n"
        f"w = SysfsWriter(); w.sys_root = Path({str(tmp_path / 'sys')!r})\n"
        f"j = Journal(Path({str(tmp_path / 'state')!r}), writer=w)\n"
    )


def test_tuner_restore_is_refused_while_a_session_holds_the_journal(tmp_path: Path) -> None:
    attr = fake_sysfs(tmp_path)
    holder = journal(tmp_path)
    holder.open("busy")
    holder.set_sysfs(attr, 512, device="/dev/x", name="read_ahead_kb")
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "tuner", "restore", "--force", "--state-dir", str(tmp_path / "state")],
            capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        assert proc.returncode == 1, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert lines[0].startswith("tuner: error: another tuner (pid") and "session busy" in lines[0]
        assert lines[1].startswith("hint: ") and len(lines) == 2 and "Traceback" not in proc.stderr
        assert json.loads(holder.path.read_text())["changes"][0]["original"] == "128"  # the file is untouched
        assert attr.read_text().strip() == "512"
    finally:
        holder.restore()
    assert attr.read_text().strip() == "128"


def test_the_lock_dies_with_its_holder_and_not_with_the_programs_it_started(tmp_path: Path) -> None:
    """SIGKILL leaves no stale lock; a program the session started (a server, a helper) does not inherit it."""
    attr = fake_sysfs(tmp_path)
    holder = subprocess.Popen(
        [sys.executable, "-c", _script(tmp_path) + (
            "import subprocess, time\n"
            "j.open('killed')\n"
            "j.set_sysfs(Path(sys.argv[1]), 4096, device='/dev/x', name='read_ahead_kb')\n"
            "child = subprocess.Popen(['sleep', '60'])\n"
            "print(child.pid, flush=True)\n"
            "time.sleep(60)\n"
        ), str(attr)],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    child = None
    try:
        assert holder.stdout is not None
        child = int(holder.stdout.readline())
        with pytest.raises(JournalError, match="another tuner"):
            journal(tmp_path).open("meanwhile")
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        assert attr.read_text().strip() == "4096" and Path(f"/proc/{child}").exists()
        j = journal(tmp_path)
        [r] = j.open("next")  # the child still runs, the lock is free: the dead session's change is put back
        assert r.action == "restored" and attr.read_text().strip() == "128"
        j.restore()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=30)
        if child is not None:
            os.kill(child, signal.SIGKILL)


def test_two_journal_objects_in_one_process_exclude_each_other_too(tmp_path: Path) -> None:
    first = journal(tmp_path)
    first.open("a")
    with pytest.raises(JournalError, match="another tuner"):
        journal(tmp_path).open("b")
    crash(first)
    journal(tmp_path).open("c")
