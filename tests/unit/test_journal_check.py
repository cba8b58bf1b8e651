"""A journal tuner would not have written is refused whole, with one sentence naming the file, the entry and the
problem, a hint to ``tuner restore --forget``, exit status 2 — and nothing in it is written anywhere.

Each crafted journal looks like one a dead session left in this boot, so older code would act on it."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from tuner.actuate import JournalError, boot_id

from .test_journal import fake_sysfs, journal

VICTIM = "do not overwrite me\n"


def owner() -> dict[str, Any]:
    return {"pid": 1, "start": "0", "host": socket.gethostname(), "boot_id": boot_id(), "session": "crafted",
            "opened_at": "2026-01-01T00:00:00+00:00"}  # pid 1 never started at tick 0: a dead session


def sysfs(path: str, original: Any = "4096", device: str = "/dev/x", **extra: Any) -> dict[str, Any]:
    return {"kind": "sysfs", "path": path, "device": device, "name": Path(path).name, "original": original, **extra}


def alter(name: str = "wal_writer_delay", original: Any = "200ms", **extra: Any) -> dict[str, Any]:
    return {"kind": "alter_system", "name": name, "original": original, "device": "PostgreSQL 1 port 1",
            "dsn": "host=/nonexistent port=1", "system_identifier": "1", "port": 1, "sandbox_dir": None, **extra}


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    """Fake sysfs with device x; a victim file outside it; a directory 'outside' that looks like a device."""
    attr = fake_sysfs(tmp_path)
    victim = tmp_path / "victim"
    victim.write_text(VICTIM)
    outside = tmp_path / "outside" / "queue"
    outside.mkdir(parents=True)
    (outside / "read_ahead_kb").write_text(VICTIM)
    (tmp_path / "sys" / "block" / "evil").symlink_to(tmp_path / "outside")
    (tmp_path / "sys" / "devices" / "virtual" / "block" / "x" / "queue" / "scheduler").write_text(VICTIM)
    return {"attr": attr, "victim": victim, "outside": outside / "read_ahead_kb", "sys": tmp_path / "sys"}


def _refused(tmp_path: Path, tree: dict[str, Path], raw: bytes, *, problem: str, entry: int | None = None) -> None:
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    (state / "journal.json").write_bytes(raw)
    files = {p: p.read_bytes() for p in (tree["attr"], tree["victim"], tree["outside"], state / "journal.json")}
    j = journal(tmp_path)
    with pytest.raises(JournalError) as err:
        j.recover()
    message = str(err.value)
    assert message.startswith(f"the journal {state / 'journal.json'} is damaged: "), message
    assert problem in message and "\n" not in message, message
    assert (f"entry {entry} " in message) if entry else ("entry" not in message), message
    assert err.value.exit_code == 2 and err.value.hint and "--forget" in err.value.hint
    if entry:
        assert f"--forget {entry}" in err.value.hint
    assert {p: p.read_bytes() for p in files} == files  # nothing written, the journal kept as it was
    with pytest.raises(JournalError, match="is damaged"):
        j.open("next")  # a session does not start over it either


def _doc(*changes: Any, **top: Any) -> bytes:
    return json.dumps({"version": 1, "owner": owner(), "changes": list(changes), **top}).encode()


@pytest.mark.parametrize(("make", "problem"), [
    (lambda t: sysfs(f"{t['sys']}/block/x/../../../victim"), "is not a plain absolute path"),
    (lambda t: sysfs(f"{t['sys']}/block/evil/queue/read_ahead_kb", device="/dev/evil"), "outside"),
    (lambda t: sysfs(str(t["victim"])), "is not a block device's queue/read_ahead_kb"),
    (lambda t: sysfs(f"{t['sys']}/block/x/queue/scheduler"), "is not a block device's queue/read_ahead_kb"),
    (lambda t: sysfs(f"{t['sys']}/block/x/queue/read_ahead_kb", device="/dev/vda"), "is not /dev/x"),
    (lambda t: sysfs(f"{t['sys']}/block/x/queue/read_ahead_kb", original="128; reboot"), "is not an integer"),
    (lambda t: sysfs(f"{t['sys']}/block/x/queue/read_ahead_kb", original="12.5"), "is not an integer"),
    (lambda t: sysfs(f"{t['sys']}/block/x/queue/read_ahead_kb", original=True), "is not an integer"),
    (lambda t: sysfs(f"{t['sys']}/block/x/queue/read_ahead_kb", original=str(1 << 40)), "is not an integer from 0"),
    (lambda t: sysfs(f"{t['sys']}/block/x/queue/read_ahead_kb", helper="rm -rf /"), "unknown fields ['helper']"),
    (lambda t: {"kind": "shell", "command": f"cp /dev/null {t['victim']}"}, "unknown kind 'shell'"),
    (lambda t: ["sysfs", str(t["victim"])], "is not an object"),
    (lambda t: alter("archive_command", f"cp %p {t['victim']}"), "setting 'archive_command' is not one tuner"),
    (lambda t: alter(original="10'; DROP TABLE x; --"), "is not a number (with a unit) or a word"),
    (lambda t: alter(port="5432"), "port '5432' is not a port number"),
    (lambda t: alter(system_identifier="1 OR 1=1"), "system_identifier"),
], ids=["dotdot", "symlinked-device", "outside-sys", "other-attribute", "device-mismatch", "shell-value",
        "fraction", "bool", "out-of-range", "unknown-field", "unknown-kind", "not-object", "not-a-wal-setting",
        "quoted-value", "port-type", "sysid"])
def test_a_crafted_entry_is_refused_and_nothing_is_written(tmp_path: Path, tree: dict[str, Path], make: Any,
                                                          problem: str) -> None:
    good = sysfs(str(tree["attr"]), original="128")
    _refused(tmp_path, tree, _doc(good, make(tree)), problem=problem, entry=2)


def test_a_symlink_at_the_attribute_itself_is_refused(tmp_path: Path, tree: dict[str, Path]) -> None:
    queue = tmp_path / "sys" / "devices" / "virtual" / "block" / "x" / "queue"
    (queue / "read_ahead_kb").unlink()
    (queue / "read_ahead_kb").symlink_to(tree["victim"])
    tree["attr"] = tree["victim"]
    _refused(tmp_path, tree, _doc(sysfs(f"{tree['sys']}/block/x/queue/read_ahead_kb")), problem="leads to", entry=1)


@pytest.mark.parametrize(("raw", "problem"), [
    (b"\x7fELF\x02\x01\x01\x00\xff\xfe\x00\x00garbage", "it is not text"),
    (b"", "it is empty"),
    (b'{"version": 1, "owner": {"pid": 1}, "changes": [{"kind": "sysfs", "pa', "it is not complete JSON"),
    (json.dumps({"version": 2, "owner": owner(), "changes": []}).encode(), "format version is 2"),
    (json.dumps({"owner": owner(), "changes": []}).encode(), "format version is None"),
    (json.dumps([1, 2]).encode(), "not a JSON object"),
    (json.dumps({"version": 1, "owner": {**owner(), "pid": "1"}, "changes": []}).encode(), "owner's 'pid' is '1'"),
    (json.dumps({"version": 1, "owner": owner(), "changes": {"0": {}}}).encode(), "it has no list of changes"),
    (json.dumps({"version": 1, "changes": []}).encode(), "it names no owner"),
], ids=["binary", "empty", "truncated", "version-2", "no-version", "list", "owner-types", "changes-type", "no-owner"])
def test_a_damaged_journal_is_refused_whole(tmp_path: Path, tree: dict[str, Path], raw: bytes, problem: str) -> None:
    _refused(tmp_path, tree, raw, problem=problem)


def test_a_real_journal_cut_short_is_refused(tmp_path: Path, tree: dict[str, Path]) -> None:
    raw = _doc(sysfs(str(tree["attr"]), original="128"), alter())
    _refused(tmp_path, tree, raw[: len(raw) // 2], problem="it is not complete JSON")


def test_what_tuner_writes_passes_its_own_checks(tmp_path: Path, tree: dict[str, Path]) -> None:
    """The /sys/block/DEV and /sys/devices/… forms of a device, a device that is gone, and this machine's disks."""
    from tuner.actuate.sysfs import SYS_ROOT, path_problem

    real = tree["sys"] / "devices" / "virtual" / "block" / "x" / "queue" / "read_ahead_kb"
    assert path_problem(str(real), tree["sys"]) is None
    assert path_problem(str(tree["sys"] / "block" / "gone" / "queue" / "read_ahead_kb"), tree["sys"]) is None
    for attr in Path("/sys/block").glob("*/queue/read_ahead_kb"):
        assert path_problem(str(attr), SYS_ROOT) is None
        assert path_problem(str(attr.resolve()), SYS_ROOT) is None
    j = journal(tmp_path)
    j.open("s")
    j.set_sysfs(tree["attr"], 512, device="/dev/x", name="read_ahead_kb")
    assert j.read() is not None  # what it wrote, it reads back
    j.restore()
    with pytest.raises(JournalError, match="refusing to change /dev/evil"):
        j.open("t")
        j.set_sysfs(tmp_path / "sys" / "block" / "evil" / "queue" / "read_ahead_kb", 512, device="/dev/evil",
                    name="read_ahead_kb")
    assert tree["outside"].read_text() == VICTIM
    j.restore()
