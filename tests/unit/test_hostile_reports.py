"""Issue #44, the report half of the hostile-input suite: crafted report.json files, reports planted in the store,
report paths that are not files, and helper_command templates, each run through the real command line in every
format it can be asked for. Whatever the input, tuner answers 0 or 2 with one sentence on stderr (and at most a
hint), no traceback, nothing written where it refused, and — where it wrote — only the output it was asked for,
with no raw control character in it. The store a case reads is in the working directory, so "nothing changed on
disk" covers it too: a reader never rewrites the store.

``CASES`` is a list of (name, case), summed with tests/unit/test_hostile_inputs.py's for the issue's count.
"""

from __future__ import annotations

import contextlib
import copy
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.unit.hostile import case_inputs
from tests.unit.test_hostile_inputs import REPO, Case, _run, _tree, directory, fifo, prepare
from tests.unit.test_hostile_output import _raw_unsafe
from tests.unit.test_store import save
from tuner.emit import FORMATS
from tuner.emit.json import parse
from tuner.report.file import MAX_REPORT_BYTES

FIXTURE = REPO / "tests" / "fixtures" / "reports" / "sandbox-all-families.json"
PWNED = "/bin/touch PWNED"


def _base() -> dict[str, Any]:
    """A real sandbox session's report, its readahead recommendation turned into a change (so the device formats
    write a rule) — what tuner itself could have written."""
    data = json.loads(FIXTURE.read_text())
    data["recommendations"][0]["decision"] = "change"
    return data


def _ra(data: dict[str, Any]) -> dict[str, Any]:
    return data["recommendations"][0]


def _eic(data: dict[str, Any]) -> dict[str, Any]:
    return data["recommendations"][1]


def _wal_compression(data: dict[str, Any]) -> dict[str, Any]:
    return next(r for r in data["recommendations"] if r["knob"] == "wal_compression")


def _set(where: Callable[[dict[str, Any]], dict[str, Any]], **fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda data: where(data).update(fields)


def _match(match: dict[str, str]) -> Callable[[dict[str, Any]], None]:
    return lambda data: _ra(data)["device"].update(match=match)


def _device(**fields: str) -> Callable[[dict[str, Any]], None]:
    return lambda data: _ra(data)["device"].update(fields)


def _top(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda data: data.update(fields)


def _session(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda data: data["session"].update(fields)


def _duplicate(data: dict[str, Any]) -> None:
    data["recommendations"].append(copy.deepcopy(_eic(data)) | {"recommended": 64})


def _tablespace(name: str) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        data["recommendations"].append(copy.deepcopy(_eic(data)) | {
            "scope": "tablespace", "object": name, "source": "server", "run_on": "primary", "recommended": 64})
    return change


# name -> (how the report is changed, the exit status, a substring of the sentence)
VARIANTS: dict[str, tuple[Callable[[dict[str, Any]], None], int, str]] = {
    # item 1: a udev rule that runs a program, and other device matches tuner never writes
    "udev-program": (_match({"PROGRAM": PWNED}), 2, "the key 'PROGRAM'"),
    "udev-import-program": (_match({"IMPORT{program}": PWNED}), 2, "the key 'IMPORT{program}'"),
    "udev-run": (_match({"RUN": PWNED}), 2, "the key 'RUN'"),
    "udev-run-program": (_match({"RUN{program}": PWNED}), 2, "the key 'RUN{program}'"),
    "udev-key-smuggles-a-run": (_match({'ATTR{serial}=="x", RUN+="/bin/touch PWNED", ATTR{serial}': "x"}), 2,
                                "which tuner never writes"),
    "udev-program-beside-a-real-key": (_match({"ATTR{serial}": "SN1", "PROGRAM": PWNED}), 2, "the key 'PROGRAM'"),
    "udev-value-newline": (_match({"ATTR{serial}": 'x\nRUN+="/bin/touch PWNED"'}), 2, "line break"),
    "udev-kernel-glob": (_match({"KERNEL": "sd*"}), 2, "is not the device's own name"),
    "udev-no-match": (_match({}), 2, "(none) together"),
    "device-node-elsewhere": (_device(node="/dev/sda"), 2, "device.node"),
    "device-sysfs-elsewhere": (_device(sysfs_path="/sys/block/loop0/queue/scheduler"), 2, "device.sysfs_path"),
    "device-name-path": (_device(name="../../etc"), 2, "device.name"),
    "device-on-a-server-setting": (lambda d: _eic(d).update(device=copy.deepcopy(_ra(d)["device"])), 2,
                                   "only a device's readahead has one"),
    # item 6: knobs and values tuner never writes
    "knob-archive-command": (_set(_eic, knob="archive_command", recommended=PWNED), 2, "'archive_command' is not"),
    "knob-ssl-passphrase-command": (_set(_eic, knob="ssl_passphrase_command", recommended=PWNED), 2,
                                    "'ssl_passphrase_command'"),
    "knob-shared-preload-libraries": (_set(_eic, knob="shared_preload_libraries", recommended="evil"), 2,
                                      "'shared_preload_libraries'"),
    "knob-listen-addresses": (_set(_eic, knob="listen_addresses", recommended="*"), 2, "'listen_addresses'"),
    "knob-durability": (_set(_eic, knob="fsync", recommended="off"), 2, "durability setting"),
    "knob-case-variant": (_set(_eic, knob="Effective_IO_Concurrency"), 2, "'Effective_IO_Concurrency'"),
    "knob-twice": (_duplicate, 2, "repeats effective_io_concurrency"),
    "knob-not-on-this-version": (_set(_eic, knob="io_method", current="sync", recommended="worker"), 2,
                                 "does not exist on a server of version"),
    "value-newline": (_set(_wal_compression, decision="change", recommended="on\narchive_command = 'touch PWNED'"),
                      2, "is not a value of wal_compression"),
    "value-out-of-range": (_set(_eic, recommended=5000), 2, "range 0..1000"),
    "value-text-for-an-integer": (_set(_eic, recommended="256"), 2, "is not an integer"),
    "together-with-archive-command": (_set(_eic, together_with=["archive_command"]), 2, "together_with"),
    "source-newline": (_set(_eic, source="configuration file\n# x"), 2, ".source"),
    "schema-version-99": (_top(schema_version=99), 2, "schema_version 99"),
    "schema-version-0": (_top(schema_version=0), 2, "schema_version 0"),
    "session-host-newline": (_session(host="h1\nALTER SYSTEM SET archive_command = 'x';"), 2, "session.host"),
    "session-id-path": (_session(id="../../../etc/x"), 2, "session.id"),
    "unknown-field": (_set(_eic, apply_now=True), 2, "not a tuner report"),
    # what tuner writes, outside text and all: written, every consumer's quoting intact
    "genuine": (lambda d: None, 0, "wrote"),
    "tablespace-sql-injection": (_tablespace("'; DROP DATABASE prod; --"), 0, "wrote"),
    "tablespace-jinja-and-yaml": (_tablespace("{{ lookup('pipe', 'touch PWNED') }}: - !!python/object"), 0,
                                  "wrote"),
    "reason-newlines-and-shell": (_set(_eic, reason="x\n$(touch PWNED)\nRUN+=\"x\"\n\x1b[2J"), 0, "wrote"),
    "backing-file-metacharacters": (_match({"KERNEL": "loop*", "ATTR{loop/backing_file}": '/x/a"b|c*[d]$(e)'}),
                                    0, "wrote"),
}


def _report_file(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        data = _base()
        change(data)
        path.write_text(json.dumps(data))
    return make


def _store_with(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    """A tuner.db holding one session whose stored report was then tampered with in the database (a shared
    [store] url is written by every tuner of a fleet)."""
    def make(path: Path) -> None:
        genuine = parse(json.dumps(_base()))  # as the store keeps it: without the rendered keys
        save(path, genuine)
        data = json.loads(genuine.model_dump_json())
        change(data)
        with contextlib.closing(sqlite3.connect(path)) as db, db:
            db.execute("UPDATE sessions SET report = ?", (json.dumps(data),))
    return make


def _export(fmt: str, source: str = "r.json") -> list[str]:
    return ["export", "--format", fmt, "--from", source, "--output", "out"]


CASES: list[tuple[str, Case]] = []
for _name, (_change, _code, _expect) in VARIANTS.items():
    for _fmt in FORMATS:
        CASES.append((f"{_name}-{_fmt}", Case(_export(_fmt), _code, _expect, files={"r.json": _report_file(_change)},
                                              input=_name)))
for _name in ("udev-program", "udev-import-program", "knob-archive-command", "knob-twice", "schema-version-99",
              "value-newline", "session-host-newline", "genuine", "tablespace-sql-injection"):
    _change, _code, _expect = VARIANTS[_name]
    for _args in (["show", "--format", "json"], ["show", "--format", "sql", "--output", "out"],
                  ["export", "--format", "udev", "--output", "out"], ["export", "--format", "conf"]):
        CASES.append((f"store-{_name}-{_args[0]}-{_args[2]}", Case([*_args, "--state-dir", "."],
                                                                 _code, "" if _code == 0 else _expect,
                                                                 files={"tuner.db": _store_with(_change)},
                                                                 input=f"store-{_name}")))


def _sparse(size: int) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        with path.open("wb") as fh:
            fh.truncate(size)
    return make


FILES: dict[str, tuple[str | bytes | Callable[[Path], None] | None, str]] = {
    "dev-zero": (None, "not a regular file"),
    "fifo": (fifo, "not a regular file"),
    "directory": (directory, "is a directory"),
    "missing": ("", "no such file"),
    "over-the-limit": (_sparse(MAX_REPORT_BYTES + 1), "larger than 64 MiB"),
    "binary": (bytes(range(256)), "not UTF-8"),
    "empty": (b"", "not JSON"),
    "truncated": (json.dumps(_base())[:5000], "not JSON"),
    "json-null": ("null", "not a report's structure"),
    "json-list": ("[1, 2]", "not a report's structure"),
    "nested-deeply": ("[" * 200000, "nested too deeply"),
    "number-too-long": ('{"schema_version": 1' + "0" * 10000 + "}", "a number too long"),
    "empty-object": ("{}", "problems, first at target"),
    "nan-improvement": (json.dumps(_base()).replace('"improvement": ', '"improvement": NaN, "x": ', 1),
                        "not a tuner report"),
}
for _name, (_spec, _expect) in FILES.items():
    _files = {} if _spec is None or _spec == "" else {"r.json": _spec}
    _source = "/dev/zero" if _name == "dev-zero" else "r.json"
    for _fmt in ("conf", "udev", "json"):
        CASES.append((f"file-{_name}-{_fmt}", Case(_export(_fmt, _source), 2, _expect, files=_files, input=f"file-{_name}")))

HELPERS = ["{0}", "{}", "{path.__class__}", "{value.__init__.__globals__}", "{value[0]}", "{path!r}", "{device!s}",
           "{value:>99}", "{value:{path}}", "sudo {path", "sudo } {path}", "{PATH}", "{cmd} {path}"]


def _helper(command: str, code: int, expect: str) -> Case:
    return Case(["config", "validate", "--config", "t.toml"], code, expect,
                files={"t.toml": f"[readahead]\nhelper_command = {json.dumps(command)}\n"})


for _i, _cmd in enumerate(HELPERS):
    CASES.append((f"helper-command-{_i}", _helper(_cmd, 2, "[readahead] helper_command: ")))
for _i, _cmd in enumerate(["sudo -n /usr/local/sbin/tuner-sysfs {path} {value}", "awk '{{print}}' {path} {value}"]):
    CASES.append((f"helper-command-ok-{_i}", _helper(_cmd, 0, "configuration OK")))
# a few through a real `python -m tuner`, so the entry point's own stderr is covered
for _name in ("udev-program", "knob-archive-command", "schema-version-99", "genuine"):
    _change, _code, _expect = VARIANTS[_name]
    CASES.append((f"subprocess-{_name}", Case(_export("udev"), _code, _expect, files={"r.json": _report_file(_change)},
                                              subprocess=True, input=_name)))
CASES.append(("subprocess-fifo", Case(_export("conf"), 2, "not a regular file", files={"r.json": fifo},
                                      subprocess=True, input="file-fifo")))
INPUTS = case_inputs(CASES, "reports, stored reports and helper commands")


@pytest.mark.parametrize("name", [n for n, _ in CASES])
def test_hostile_report(name: str, tmp_path: Path) -> None:
    case = dict(CASES)[name]
    cwd, home, _, environ = prepare(case, tmp_path)
    before = _tree(cwd)

    code, stdout, stderr = _run(case, cwd, environ)  # type: ignore[arg-type]

    lines = stderr.strip().splitlines()
    assert code == case.code, stderr
    assert "Traceback" not in stderr and "unexpected error" not in stderr, stderr
    after = _tree(cwd)
    if code == 0:
        assert len(lines) <= 1 and all(line.startswith("tuner: ") and case.expect in line for line in lines), stderr
        written = {k: v for k, v in after.items() if k not in before}
        assert all(k == "out" or k.startswith("out/") for k in written), written
        assert {k: v for k, v in after.items() if k in before} == before, "an input changed"
        for p in [*(cwd / "out").rglob("*")] if (cwd / "out").exists() else []:
            if p.is_file():
                assert not _raw_unsafe(p.read_text(encoding="utf-8")), p
        assert not _raw_unsafe(stdout)
    else:
        assert 1 <= len(lines) <= 2, stderr
        assert lines[0].startswith("tuner: error: ") and case.expect in lines[0], stderr
        assert len(lines) == 1 or lines[1].startswith("hint: "), stderr
        assert stdout == "" and after == before, "something was written"
    assert not (cwd / "PWNED").exists() and not list(home.iterdir())


def test_the_report_corpus_is_large_enough() -> None:
    assert len(CASES) >= 250 and len({n for n, _ in CASES}) == len(CASES)
    assert {c.code for _, c in CASES} == {0, 2}
    assert sum(c.subprocess for _, c in CASES) >= 5
    assert {f for f in FORMATS} <= {n.rsplit("-", 1)[1] for n, _ in CASES if n.startswith("udev-program-")}
