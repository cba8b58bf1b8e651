"""The change journal on a tree of plain files standing in for sysfs (``SysfsWriter(sys_root=…)``; the journal
writes nothing outside a block device's queue in it); real sysfs and SIGKILL are in the integration tests.

:func:`fake_sysfs` and :func:`journal` are shared with the other ``test_journal_*`` modules."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tuner.actuate import Journal, JournalError, SysfsWriter, owner_alive, process_start


def fake_sysfs(tmp_path: Path, value: str = "128", name: str = "x") -> Path:
    """``<tmp>/sys/block/NAME`` → ``../devices/virtual/block/NAME``, as sysfs has it; returns its read_ahead_kb."""
    root = tmp_path / "sys"
    queue = root / "devices" / "virtual" / "block" / name / "queue"
    queue.mkdir(parents=True)
    (root / "block").mkdir(exist_ok=True)
    (root / "block" / name).symlink_to(Path("..") / "devices" / "virtual" / "block" / name)
    f = queue / "read_ahead_kb"
    f.write_text(value + "\n")
    return root / "block" / name / "queue" / "read_ahead_kb"


def journal(tmp_path: Path, helper_command: str | None = None) -> Journal:
    """A journal in ``<tmp>/state`` whose sysfs is ``<tmp>/sys``."""
    return Journal(tmp_path / "state", writer=writer(tmp_path, helper_command))


def writer(tmp_path: Path, helper_command: str | None = None) -> SysfsWriter:
    w = SysfsWriter(helper_command)
    w.sys_root = tmp_path / "sys"  # an attribute, not an argument: these tests also run against older code
    return w


def crash(j: Journal) -> None:
    """What SIGKILL does to a session in this process: the kernel drops its lock, nothing is restored."""
    lock = getattr(j, "_lock", None)
    if lock is not None:
        lock.release()


def _attr(tmp_path: Path, value: str = "128") -> Path:
    return fake_sysfs(tmp_path, value)


def test_the_original_value_is_journaled_before_the_change(tmp_path: Path) -> None:
    attr = _attr(tmp_path)
    j = journal(tmp_path)
    j.open("s1")
    assert not j.path.exists()  # nothing changed yet, nothing written
    j.set_sysfs(attr, 512, device="/dev/x", name="read_ahead_kb")
    doc = json.loads(j.path.read_text())
    assert doc["owner"]["pid"] == os.getpid() and doc["owner"]["session"] == "s1"
    assert [(c["device"], c["original"]) for c in doc["changes"]] == [("/dev/x", "128")]
    assert attr.read_text().strip() == "512"


def test_a_second_change_keeps_the_first_original(tmp_path: Path) -> None:
    attr = _attr(tmp_path)
    j = journal(tmp_path)
    j.open("s1")
    j.set_sysfs(attr, 512, device="/dev/x", name="read_ahead_kb")
    j.set_sysfs(attr, 0, device="/dev/x", name="read_ahead_kb")
    [entry] = json.loads(j.path.read_text())["changes"]
    assert entry["original"] == "128"
    [r] = j.restore()
    assert r.sentence() == "/dev/x: read_ahead_kb 0 -> 128 (restored)"
    assert attr.read_text().strip() == "128" and not j.path.exists()


def test_a_journal_of_a_dead_session_is_restored_at_the_next_open(tmp_path: Path) -> None:
    attr = _attr(tmp_path)
    state = tmp_path / "state"
    script = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from tuner.actuate import Journal\n"
        "from tuner.actuate import SysfsWriter\n"
        f"w = SysfsWriter(); w.sys_root = Path({str(tmp_path / 'sys')!r})\n"
        f"j = Journal(Path({str(state)!r}), writer=w); j.open('dead')\n"
        f"j.set_sysfs(Path({str(attr)!r}), 4096, device='/dev/x', name='read_ahead_kb')\n"
        "os._exit(0)  # no restore: like SIGKILL\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True)
    assert attr.read_text().strip() == "4096"
    j = journal(tmp_path)
    [r] = j.open("next")
    assert r.action == "restored" and attr.read_text().strip() == "128" and not j.path.exists()


def test_a_live_owner_is_refused(tmp_path: Path) -> None:
    attr = _attr(tmp_path)
    holder = journal(tmp_path)
    holder.open("live")
    holder.set_sysfs(attr, 512, device="/dev/x", name="read_ahead_kb")
    doc = json.loads(holder.path.read_text())
    doc["owner"]["pid"] = os.getppid()  # a live process that is not us
    doc["owner"]["start"] = process_start(os.getppid())
    holder.path.write_text(json.dumps(doc))
    with pytest.raises(JournalError, match="another tuner"):
        journal(tmp_path).recover(force=True)  # the lock: --force does not get past a session that holds it
    crash(holder)  # a live owner without the lock (a tuner from before the lock)
    with pytest.raises(JournalError, match="another tuner"):
        journal(tmp_path).recover()
    assert attr.read_text().strip() == "512"  # untouched
    assert journal(tmp_path).recover(force=True)[0].action == "restored"


def test_a_recycled_pid_is_not_a_live_owner() -> None:
    me = {"pid": os.getpid(), "start": process_start(os.getpid())}
    import socket

    from tuner.actuate import boot_id

    alive = {**me, "host": socket.gethostname(), "boot_id": boot_id()}
    assert owner_alive(alive)
    assert not owner_alive({**alive, "start": "1"})  # same pid, another process
    assert not owner_alive({**alive, "boot_id": "another-boot"})


def test_after_a_reboot_kernel_settings_are_dropped_not_written(tmp_path: Path) -> None:
    attr = _attr(tmp_path)
    j = journal(tmp_path)
    j.open("before-reboot")
    j.set_sysfs(attr, 512, device="/dev/x", name="read_ahead_kb")
    doc = json.loads(j.path.read_text())
    doc["owner"]["boot_id"] = "an-earlier-boot"
    j.path.write_text(json.dumps(doc))
    crash(j)
    [r] = journal(tmp_path).recover()
    assert r.action.startswith("dropped") and attr.read_text().strip() == "512"
    assert not j.path.exists()


def test_a_damaged_journal_is_one_sentence(tmp_path: Path) -> None:
    (tmp_path / "journal.json").write_text("{not json")
    with pytest.raises(JournalError, match="damaged") as err:
        Journal(tmp_path).recover()
    assert err.value.exit_code == 2 and err.value.hint and "--forget all" in err.value.hint


def test_a_failed_restore_keeps_the_entry_for_later(tmp_path: Path) -> None:
    attr = _attr(tmp_path)
    j = journal(tmp_path)
    j.open("s")
    j.set_sysfs(attr, 512, device="/dev/x", name="read_ahead_kb")
    j.writer = writer(tmp_path, "echo 'permission denied' >&2; exit 1")
    [failed] = j.restore()
    assert failed.action == "failed" and "permission denied" in (failed.reason or "") and not failed.ok
    assert json.loads(j.path.read_text())["changes"][0]["original"] == "128"
    assert attr.read_text().strip() == "512"
    [r] = journal(tmp_path).recover(force=True)  # fixed: 'tuner restore' finishes the job
    assert r.action == "restored" and attr.read_text().strip() == "128"


def test_the_helper_command_gets_quoted_placeholders(tmp_path: Path) -> None:
    target = tmp_path / "with space"
    target.write_text("1\n")
    log = tmp_path / "log"
    w = SysfsWriter(helper_command=f"echo {{device}} {{value}} >> {log}; printf '%s\\n' {{value}} > {{path}}")
    w.write(target, "64", device="/dev/a b")
    assert log.read_text().strip() == "/dev/a b 64" and target.read_text().strip() == "64"


def test_a_journal_that_lists_nothing_is_removed(tmp_path: Path) -> None:
    j = journal(tmp_path)
    j.path.parent.mkdir()
    owner = {"pid": 1, "start": "0", "host": "elsewhere", "session": "s"}
    j.path.write_text(json.dumps({"version": 1, "owner": owner, "changes": []}))
    assert j.recover() == [] and not j.path.exists()


@pytest.mark.parametrize("dsn, kept", [
    ("host=x password=abc dbname=y sslpassword=k", "host=x dbname=y"),
    ("host=x password='a b' port=5", "host=x port=5"),
    ("postgresql://u:pw@h:5/db?password=z&sslmode=require&host=/tmp", "postgresql://u@h:5/db?sslmode=require&host=/tmp"),
    ("postgresql://u@h/db?sslmode=require&password=z", "postgresql://u@h/db?sslmode=require"),
    ("postgresql://u@h/db?sslpassword=q&password=z&port=1", "postgresql://u@h/db?port=1"),
])
def test_the_journal_keeps_a_dsn_without_its_secrets_and_with_everything_else(dsn: str, kept: str) -> None:
    from tuner.actuate.alter_system import strip_password

    assert strip_password(dsn) == kept
