"""Hostile inputs, the service half (issue 44): the daemon's configuration (`daemon --check-config`), the store and
the journal read back by the command line, and the daemon's HTTP API on a real socket with its real backend (the
daemon's own queue in a real SQLite store). Whatever the input: exit 0/2/3 or an HTTP 4xx, one sentence, no
traceback, and nothing changed — the files in the working directory (:func:`check_case`), or the daemon's queue.

``CASES`` lists every input (an aggregate test sums it with the other half's); each is one parametrized test.
The command-line cases reuse the runner and checks of :mod:`test_hostile_inputs`.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tuner.settings.config_load import load_config
from tuner.daemon.api import make_runner
from tuner.daemon.service import Daemon

from .hostile import case_inputs, describe
from .test_hostile_inputs import PASSWORD, Case, check_case, directory, fifo, with_mode
from .test_store import make_report, save

P = PASSWORD
NOWHERE = "host=/nonexistent-tuner-h44 dbname=x"
TOKEN = "0123456789abcdef0123456789abcdef"


def private(content: str | bytes) -> Callable[[Path], None]:
    """A file only its owner may read (the token file's required mode), with ``content``."""
    def make(path: Path) -> None:
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        os.chmod(path, 0o600)

    return make


def symlink_to(target: str) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        path.symlink_to(target)

    return make


# -- the daemon's configuration ------------------------------------------------------------------------------------
def daemon_cfg(toml: str, expect: str, code: int = 2, *, files: dict[str, Any] | None = None) -> Case:
    """``daemon --check-config`` with tuner-in.toml = a target that is never reached plus ``toml``."""
    text = f'[target]\ndsn = "{NOWHERE} password={P}"\n{toml}'
    return Case(["daemon", "--check-config", "--config", "tuner-in.toml"], code, expect,
                files={"tuner-in.toml": text, **(files or {})})


def token(spec: Any, expect: str, path: str = "tok") -> Case:
    return daemon_cfg(f'[daemon]\ntoken_file = "{path}"\n', expect, files={"tok": spec} if spec is not None else {})


def daemon_key(key: str, value: str, expect: str) -> Case:
    return daemon_cfg(f"[daemon]\n{key} = {value}\n", expect)


def targets(body: str, expect: str) -> Case:
    return daemon_cfg(body, expect)


CONFIG: dict[str, Case] = {
    "token-fifo": token(fifo, "not a regular file"),
    "token-directory": token(directory, "it is a directory"),
    "token-not-utf8": token(private(b"\xff\xfe" * 20), "not ASCII"),
    "token-latin1": token(private("é" * 20), "not ASCII"),
    "token-binary": token(private(b"\x7fELF\x02\x01" + bytes(range(256))), "not ASCII"),
    "token-empty": token(private(""), "16 to 4096"),
    "token-short": token(private("abc"), "16 to 4096"),
    "token-space-inside": token(private("a" * 10 + " " + "b" * 10), "16 to 4096"),
    "token-two-lines": token(private("a" * 20 + "\n" + "b" * 20), "16 to 4096"),
    "token-nul-inside": token(private(b"a" * 20 + b"\x00" + b"b" * 20), "16 to 4096"),
    "token-escape-sequence": token(private("\x1b[31m" + "a" * 20), "16 to 4096"),
    "token-huge": token(private("a" * 5000), "16 to 4096"),
    "token-world-readable": token(with_mode(TOKEN, 0o644), "can be read by others"),
    "token-group-readable": token(with_mode(TOKEN, 0o640), "can be read by others"),
    "token-missing": token(None, "cannot be read"),
    "token-symlink": token(symlink_to("/etc/hostname"), "symbolic link"),
    "token-dev-zero": token(None, "not a regular file", path="/dev/zero"),
    "token-dev-null": token(None, "not a regular file", path="/dev/null"),
    "token-under-a-file": token(None, "cannot be read", path="/etc/passwd/x"),
    "listen-public-without-token": daemon_key("listen", '"0.0.0.0:8187"', "not a loopback address"),
    "listen-port-huge": daemon_key("listen", '"127.0.0.1:99999"', "[daemon] listen"),
    "listen-garbage": daemon_key("listen", '"::::"', "[daemon] listen"),
    "listen-empty": daemon_key("listen", '""', "[daemon] listen"),
    "listen-nul": daemon_key("listen", '"127.0.0.1\\u0000:1"', "[daemon] listen"),
    "listen-number": daemon_key("listen", "8187", "[daemon] listen"),
    "schedule-three-fields": daemon_key("schedule", '"* * *"', "schedule"),
    "schedule-minute-61": daemon_key("schedule", '"61 * * * *"', "schedule"),
    "schedule-words": daemon_key("schedule", '"a b c d e"', "schedule"),
    "schedule-step-zero": daemon_key("schedule", '"*/0 * * * *"', "schedule"),
    "schedule-long": daemon_key("schedule", '"' + "1," * 3000 + '99 * * * *"', "schedule"),
    "schedule-number": daemon_key("schedule", "5", "schedule"),
    "windows-hour-25": daemon_key("windows", '["Mon 25:00-26:00"]', "window"),
    "windows-funday": daemon_key("windows", '["Funday 01:00-02:00"]', "window"),
    "windows-string": daemon_key("windows", '"Sat 01:00-05:00"', "windows"),
    "windows-numbers": daemon_key("windows", "[1, 2]", "windows"),
    "windows-garbage": daemon_key("windows", '["\\u0000"]', "window"),
    "drift-zero": daemon_key("drift_check_every", '"0s"', "drift_check_every"),
    "drift-negative": daemon_key("drift_check_every", '"-5m"', "drift_check_every"),
    "drift-huge": daemon_key("drift_check_every", '"1000000000d"', "drift_check_every"),
    "drift-words": daemon_key("drift_check_every", '"soon"', "drift_check_every"),
    "drift-number": daemon_key("drift_check_every", "10", "drift_check_every"),
    "revalidate-huge": daemon_key("revalidate_every", '"99999999999d"', "revalidate_every"),
    "daemon-unknown-key": daemon_key("tokn_file", '"x"', "unknown key"),
    "targets-bad-name": targets('[[daemon.targets]]\nname = "Bad Name"\n', "name"),
    "targets-empty-name": targets('[[daemon.targets]]\nname = ""\n', "name"),
    "targets-path-name": targets('[[daemon.targets]]\nname = "../../etc"\n', "name"),
    "targets-duplicate": targets('[[daemon.targets]]\nname = "a"\n[[daemon.targets]]\nname = "a"\n', "a"),
    "targets-bad-dsn": targets(f'[[daemon.targets]]\nname = "a"\ndsn = "host=x keepalives=1 password={P}"\n',
                               "keepalives"),
    "targets-dsn-nul": targets('[[daemon.targets]]\nname = "a"\ndsn = "host=x\\u0000"\n', "NUL"),
    "targets-unknown-family": targets('[[daemon.targets]]\nname = "a"\nfamilies = ["bogus"]\n', "unknown family"),
    "targets-family-string": targets('[[daemon.targets]]\nname = "a"\nfamilies = "wal"\n', "families"),
    "targets-missing-policy": targets('[[daemon.targets]]\nname = "a"\npolicy = "nope"\n', "no policy named"),
    "targets-unknown-key": targets('[[daemon.targets]]\nname = "a"\ndns = "x"\n', "unknown key"),
    "targets-scalar": targets("[daemon]\ntargets = 5\n", "targets"),
    "store-url-scheme": daemon_cfg(f'[store]\nurl = "mysql://u:{P}@h/db"\n', "[store] url"),
    "store-url-keyword": daemon_cfg(f'[store]\nurl = "postgresql://u:{P}@h/db?keepalives=1"\n', "keepalives"),
    "store-path-under-a-file": daemon_cfg('[store]\npath = "/etc/passwd/x"\n', "[store] path"),
    "store-path-directory": daemon_cfg('[store]\npath = "/tmp"\n', "directory"),
}


# -- the store, read back by the command line ----------------------------------------------------------------------
def _store(*sql: str, reports: int = 2) -> Callable[[Path], None]:
    """A real tuner.db with ``reports`` sessions, then ``sql`` run on it (what another program might do)."""
    def make(path: Path) -> None:
        from datetime import timedelta

        from .test_store import T0

        save(path, *(make_report(f"{i:x}" * 12, at=T0 + timedelta(days=i)) for i in range(1, reports + 1)))
        con = sqlite3.connect(path)
        with con:
            for s in sql:
                con.execute(s)
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.close()
        for extra in (path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            if extra.exists() and extra.stat().st_size == 0:
                extra.unlink()

    return make


def _truncated(path: Path) -> None:
    _store()(path)
    path.write_bytes(path.read_bytes()[:1500])


def _other_app(path: Path) -> None:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE customers (id INTEGER, name TEXT)")
    con.commit()
    con.close()


STORES: dict[str, tuple[Any, int, str]] = {  # name: (tuner.db, exit code of a reader, sentence)
    "garbage": (b"\x00garbage" * 200, 2, "damaged or not a tuner store"),
    "text": ("SQLite format 3 is not this\n" * 10, 2, "damaged or not a tuner store"),
    "truncated": (_truncated, 2, "store"),
    "another-apps-database": (_other_app, 2, "not a tuner store"),
    "newer-schema": (_store("UPDATE tuner_meta SET value = '999' WHERE key = 'schema_version'"), 2, "newer"),
    "schema-version-words": (_store("UPDATE tuner_meta SET value = 'x' WHERE key = 'schema_version'"), 2,
                             "no readable schema version"),
    "fingerprint-not-json": (_store("UPDATE sessions SET fingerprint = '{oops'"), 2, "cannot read"),
    "duration-not-a-number": (_store("UPDATE sessions SET duration_s = 'long'"), 2, "cannot read"),
    "probes-not-a-number": (_store("UPDATE sessions SET probes = 'many'"), 2, "cannot read"),
    "report-garbage": (_store("UPDATE sessions SET report = 'garbage'"), 2, "cannot be read"),
}
STORE_COMMANDS = {
    "history": (["history"], None),
    "history-json": (["history", "--format", "json"], None),
    "show": (["show", "--format", "json"], None),
    "diff": (["diff", "1111", "2222"], None),
    "prune-dry-run": (["prune", "--older-than", "30d", "--dry-run"], None),
    "prune": (["prune", "--older-than", "30d"], None),
}


ROW_DAMAGE = ("fingerprint-not-json", "duration-not-a-number", "probes-not-a-number")
# What a reader does with a store whose one row is damaged: a command that reads that row refuses in one sentence;
# one that does not (prune reads no fingerprint, diff reads the reports, history no report) answers; a listing
# (history, show's history) leaves the row out, says so in one sentence — on stdout, or beside JSON on stderr —
# and serves the rest.
ANSWERS = {**{(s, c): 0 for s in ROW_DAMAGE
              for c in ("prune-dry-run", "prune", "diff", "history", "history-json", "show")},
           ("report-garbage", "history"): 0}


def _store_case(store: str, command: str) -> Case:
    spec, code, said = STORES[store]
    args, _ = STORE_COMMANDS[command]
    if (store, command) in ANSWERS:
        listed = store in ROW_DAMAGE and command == "history"
        warns = store in ROW_DAMAGE and command in ("history-json", "show")
        return Case([*args, "--state-dir", "."], 0, "left out" if listed else "", files={"tuner.db": spec},
                    said_on="stdout", warns="left out" if warns else "", input=f"store-{store}")
    return Case([*args, "--state-dir", "."], code, said, files={"tuner.db": spec}, input=f"store-{store}")


STORE_CASES = {f"store-{s}-{c}": _store_case(s, c) for s in STORES for c in ("history", "show", "prune-dry-run")}
STORE_CASES.update({f"store-{s}-{c}": _store_case(s, c) for s in ("garbage", "fingerprint-not-json", "newer-schema")
                    for c in ("history-json", "diff", "prune")})
STORE_CASES["store-zero-bytes-history"] = Case(["history", "--state-dir", "."], 0, "no sessions stored",
                                              files={"tuner.db": b""}, said_on="stdout", input="store-zero-bytes")
STORE_CASES["store-zero-bytes-prune"] = Case(["prune", "--older-than", "1d", "--state-dir", "."], 0, "removed 0",
                                             files={"tuner.db": b""}, said_on="stdout", input="store-zero-bytes")
STORE_CASES["store-is-a-directory"] = Case(["history", "--state-dir", "."], 2, "is a directory",
                                           files={"tuner.db": directory})
STORE_CASES["store-is-a-fifo"] = Case(["history", "--state-dir", "."], 2, "not a regular file", files={"tuner.db": fifo})


# -- the journal, read back by `tuner restore` ---------------------------------------------------------------------
OWNER = {"pid": 1, "start": "1", "host": "elsewhere", "boot_id": "another-boot", "session": "s",
         "opened_at": "2026-01-01T00:00:00+00:00"}
SYSFS = {"kind": "sysfs", "path": "/sys/block/h44x/queue/read_ahead_kb", "device": "/dev/h44x",
         "name": "read_ahead_kb", "original": "128"}  # no such device: even a valid entry could write nothing
ALTER = {"kind": "alter_system", "name": "wal_writer_delay", "original": "200ms", "dsn": NOWHERE,
         "system_identifier": "1", "port": 5432}


def doc(*changes: Any, **over: Any) -> bytes:
    d: dict[str, Any] = {"version": 1, "owner": OWNER, "changes": list(changes)}
    d.update(over)
    return json.dumps(d).encode()


def journal(raw: bytes | str, expect: str = "damaged", code: int = 2, args: tuple[str, ...] = ()) -> Case:
    return Case(["restore", *args, "--state-dir", "."], code, expect, files={"journal.json": raw})


def entry(**over: Any) -> bytes:
    return doc({**SYSFS, **over})


def alter(**over: Any) -> bytes:
    return doc({**ALTER, **over})


JOURNALS: dict[str, Case] = {
    "journal-binary": journal(b"\x00\xff" * 100),
    "journal-empty": journal(b""),
    "journal-whitespace": journal(b"  \n\t\n"),
    "journal-half-written": journal(doc(SYSFS)[:40]),
    "journal-not-an-object": journal(b"[1, 2, 3]"),
    "journal-null": journal(b"null"),
    "journal-deep-array": journal(b"[" * 100_000 + b"]" * 100_000),
    "journal-deep-object": journal(b'{"a":' * 50_000 + b"1" + b"}" * 50_000),
    "journal-deep-changes": journal(doc() .replace(b'"changes": []', b'"changes": ' + b"[" * 60_000 + b"]" * 60_000)),
    "journal-huge-number": journal(b'{"version": ' + b"9" * 20_000 + b"}"),
    "journal-version-2": journal(doc(version=2)),
    "journal-version-text": journal(doc(version="1")),
    "journal-version-missing": journal(json.dumps({"owner": OWNER, "changes": []}).encode()),
    "journal-version-float": journal(doc(version=1.0000001)),
    "journal-owner-missing": journal(json.dumps({"version": 1, "changes": []}).encode()),
    "journal-owner-list": journal(doc(owner=[1, 2])),
    "journal-owner-pid-text": journal(doc(owner={**OWNER, "pid": "1"})),
    "journal-owner-unknown-key": journal(doc(owner={**OWNER, "uid": 0})),
    "journal-owner-huge-value": journal(doc(owner={**OWNER, "host": ["x"] * 100_000})),
    "journal-changes-missing": journal(json.dumps({"version": 1, "owner": OWNER}).encode()),
    "journal-changes-object": journal(doc(changes={"a": 1})),
    "journal-changes-string": journal(doc(changes="rm -rf /")),
    "journal-unknown-field": journal(doc(run="touch PWNED")),
    "journal-entry-not-object": journal(doc("rm -rf /")),
    "journal-entry-unknown-kind": journal(doc({"kind": "shell", "command": "touch PWNED"})),
    "journal-entry-huge-kind": journal(doc({"kind": "k" * 1_000_000})),
    "journal-entry-unknown-field": journal(entry(command="touch PWNED")),
    "journal-sysfs-traversal": journal(entry(path="/sys/block/../../etc/shadow/queue/read_ahead_kb")),
    "journal-sysfs-outside-sys": journal(entry(path="/etc/passwd")),
    "journal-sysfs-relative": journal(entry(path="sys/block/h44x/queue/read_ahead_kb")),
    "journal-sysfs-other-attribute": journal(entry(path="/sys/block/h44x/queue/scheduler", name="scheduler")),
    "journal-sysfs-name-mismatch": journal(entry(name="nr_requests")),
    "journal-sysfs-device-mismatch": journal(entry(device="/dev/sda")),
    "journal-sysfs-device-injection": journal(entry(device="/dev/h44x; touch PWNED")),
    "journal-sysfs-value-huge": journal(entry(original="99999999999999")),
    "journal-sysfs-value-negative": journal(entry(original="-1")),
    "journal-sysfs-value-shell": journal(entry(original="1; touch PWNED")),
    "journal-sysfs-value-bool": journal(entry(original=True)),
    "journal-sysfs-value-newline": journal(entry(original="128\n256")),
    "journal-sysfs-nul-in-path": journal(entry(path="/sys/block/h44x\u0000/queue/read_ahead_kb")),
    "journal-sysfs-path-not-text": journal(entry(path=["/sys"])),
    "journal-sysfs-recorded-at-number": journal(entry(recorded_at=5)),
    "journal-alter-durability": journal(alter(name="fsync", original="off")),
    "journal-alter-archive-command": journal(alter(name="archive_command", original="touch PWNED")),
    "journal-alter-value-injection": journal(alter(original="200ms'; DROP TABLE x; --")),
    "journal-alter-value-newline": journal(alter(original="200ms\narchive_command = 'x'")),
    "journal-alter-standby-text": journal(alter(standby="yes")),
    "journal-alter-dsn-number": journal(alter(dsn=5)),
    "journal-scratch-other-schema": journal(doc({**ALTER, "kind": "scratch_schema", "name": "public",
                                                 "original": None})),
    "journal-replay-not-standby": journal(doc({**ALTER, "kind": "replay_pause", "name": "replay",
                                               "original": None, "standby": False})),
    "journal-many-bad-entries": journal(doc(*([{"kind": "bogus"}] * 10_000))),
    "journal-bom": journal(b"\xef\xbb\xbf" + doc(SYSFS).replace(b'"128"', b'"x"')),
    "journal-is-a-directory": journal(directory, "not a regular file"),  # type: ignore[arg-type]
    "journal-is-a-fifo": journal(fifo, "not a regular file"),  # type: ignore[arg-type]
    # --forget with values that name nothing, on a journal whose format is fine but whose entry is not
    "forget-zero": journal(entry(original="-1"), "names no entries", args=("--forget", "0")),
    "forget-negative": journal(entry(original="-1"), "names no entries", args=("--forget", "-1")),
    "forget-too-big": journal(entry(original="-1"), "names no entries", args=("--forget", "99")),
    "forget-path-traversal": journal(entry(original="-1"), "names no entries", args=("--forget", "../../x")),
    "forget-empty": journal(entry(original="-1"), "names no entries", args=("--forget", "")),
    "forget-shell": journal(entry(original="-1"), "names no entries", args=("--forget", "all; rm -rf /")),
    "forget-on-a-damaged-file": journal(b"\x00garbage", "damaged", args=("--forget", "1")),
}


# -- the HTTP API, on a real socket, with the daemon's own backend ---------------------------------------------------
@dataclass
class Api:
    """One raw HTTP request to the daemon's API; the answer must be ``status`` (a 4xx) with one sentence."""

    request: bytes
    status: int = 400
    expect: str = ""
    families: list[str] = field(default_factory=lambda: ["concurrency"])


def req(method: str, path: str, body: bytes | None = None, *, headers: dict[str, str] | None = None,
        host: str | None = "127.0.0.1:PORT", token: str | None = TOKEN, line: str | None = None) -> bytes:
    h = {"Host": host} if host is not None else {}
    if token is not None:
        h["Authorization"] = f"Bearer {token}"
    if body is not None:
        h["Content-Type"] = "application/json"
        h["Content-Length"] = str(len(body))
    h.update(headers or {})
    h["Connection"] = "close"
    head = (line or f"{method} {path} HTTP/1.1") + "\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items())
    return head.encode("latin-1") + b"\r\n" + (body or b"")


def post(body: bytes | str, status: int = 400, expect: str = "") -> Api:
    return Api(req("POST", "/v1/sessions", body if isinstance(body, bytes) else body.encode()), status, expect)


APIS: dict[str, Api] = {
    "api-body-not-json": post("{oops", expect="not JSON"),
    "api-body-not-utf8": post(b"\xff\xfe{}", expect="not UTF-8"),
    "api-body-array": post("[]", expect="JSON object"),
    "api-body-null": post("null", expect="JSON object"),
    "api-body-string": post('"session"', expect="JSON object"),
    "api-body-number": post("1", expect="JSON object"),
    "api-body-deep-array": post(b"[" * 10_000 + b"]" * 10_000, expect="nests deeper"),
    "api-body-deep-object": post(b'{"a":' * 5_000 + b"1" + b"}" * 5_000, expect="nests deeper"),
    "api-body-deep-in-field": post(b'{"target": ' + b"[" * 100 + b"]" * 100 + b"}", expect="nests deeper"),
    "api-body-huge-number": post(b"9" * 20_000, expect="number longer"),
    "api-body-huge-number-field": post(b'{"in_window": ' + b"1" * 20_000 + b"}", expect="number longer"),
    "api-body-huge-negative": post(b'{"families": [-' + b"1" * 5_000 + b"]}", expect="number longer"),
    "api-body-too-large": post(b'{"target": "' + b"a" * 70_000 + b'"}', 413, "larger than"),
    "api-body-nan": post('{"target": NaN}', expect="no target"),
    "api-body-infinity": post('{"in_window": Infinity}', expect="in_window"),
    "api-unknown-field": post('{"command": "touch PWNED"}', expect="unknown field"),
    "api-unknown-field-long": post('{"' + "x" * 10_000 + '": 1}', expect="unknown field"),
    "api-target-unknown": post('{"target": "elsewhere"}', expect="no target"),
    "api-target-number": post('{"target": 5}', expect="no target"),
    "api-target-object": post('{"target": {"a": 1}}', expect="no target"),
    "api-target-long": post('{"target": "' + "t" * 10_000 + '"}', expect="no target"),
    "api-target-control-chars": post('{"target": "\\u001b[31mred"}', expect="no target"),
    "api-target-path": post('{"target": "../../etc/passwd"}', expect="no target"),
    "api-kind-unknown": post('{"kind": "shell"}', expect="kind must be"),
    "api-kind-number": post('{"kind": 1}', expect="kind must be"),
    "api-kind-huge": post('{"kind": "' + "k" * 10_000 + '"}', expect="kind must be"),
    "api-in-window-text": post('{"in_window": "yes"}', expect="in_window"),
    "api-in-window-number": post('{"in_window": 1}', expect="in_window"),
    "api-families-string": post('{"families": "concurrency"}', expect="list of family names"),
    "api-families-object": post('{"families": {"concurrency": 1}}', expect="list of family names"),
    "api-families-unknown": post('{"families": ["bogus"]}', expect="list of family names"),
    "api-families-number": post('{"families": [1]}', expect="list of family names"),
    "api-families-nested": post('{"families": [["concurrency"]]}', expect="list of family names"),
    "api-families-many": post(json.dumps({"families": ["concurrency"] * 1000}), expect="list of family names"),
    "api-families-excluded-readahead": post('{"families": ["readahead"]}', expect="does not allow the family"),
    "api-families-excluded-wal": post('{"families": ["wal"]}', expect="does not allow the family"),
    "api-families-excluded-among-allowed": post('{"families": ["concurrency", "readahead"]}',
                                                expect="does not allow the family"),
    "api-families-excluded-revalidate": post('{"kind": "revalidate", "families": ["readahead"]}',
                                             expect="does not allow the family"),
    "api-families-case": post('{"families": ["Concurrency"]}', expect="list of family names"),
    "api-no-host": Api(req("GET", "/v1/recommendations", host=None, line="GET /v1/recommendations HTTP/1.0"),
                       400, "Host header"),
    # HTTP/1.1 without Host: aiohttp's own parser answers 400 (RFC 9112, section 3.2) before the API sees it
    "api-no-host-post": Api(req("POST", "/v1/sessions", b"{}", host=None), 400, ""),
    "api-empty-host": Api(req("GET", "/v1/recommendations", host=""), 400, "Host header"),
    # two Host headers: aiohttp's parser answers 400 itself (RFC 9112, section 3.2)
    "api-two-hosts": Api(req("GET", "/v1/recommendations").replace(b"\r\n\r\n", b"\r\nHost: evil.example\r\n\r\n"),
                         400, ""),
    "api-foreign-host": Api(req("GET", "/v1/recommendations", host="evil.example"), 403, "loopback Host"),
    "api-foreign-host-post": Api(req("POST", "/v1/sessions", b"{}", host="evil.example"), 403, "loopback Host"),
    "api-absolute-form": Api(req("GET", "", line="GET http://127.0.0.1:PORT/v1/recommendations HTTP/1.1"), 400,
                             "origin-form"),
    "api-absolute-form-foreign": Api(req("GET", "", line="GET http://evil.example/v1/recommendations HTTP/1.1"), 400,
                                     "origin-form"),
    "api-absolute-form-post": Api(req("POST", "", b"{}", line="POST http://127.0.0.1:PORT/v1/sessions HTTP/1.1"),
                                  400, "origin-form"),
    "api-no-token-post": Api(req("POST", "/v1/sessions", b"{}", token=None), 401, "bearer token"),
    "api-wrong-token": Api(req("POST", "/v1/sessions", b"{}", token="x" * 32), 401, "bearer token"),
    "api-basic-auth": Api(req("POST", "/v1/sessions", b"{}", token=None,
                              headers={"Authorization": "Basic dXNlcjpwYXNz"}), 401, "bearer token"),
    "api-token-prefix": Api(req("POST", "/v1/sessions", b"{}", token=TOKEN[:-1]), 401, "bearer token"),
    "api-token-longer": Api(req("POST", "/v1/sessions", b"{}", token=TOKEN + "0"), 401, "bearer token"),
    "api-token-huge": Api(req("POST", "/v1/sessions", b"{}", token="t" * 7000), 401, "bearer token"),
    "api-token-latin1": Api(req("POST", "/v1/sessions", b"{}", token="é" * 32), 401, "bearer token"),
    "api-limit-text": Api(req("GET", "/v1/sessions?limit=abc"), 400, "limit"),
    "api-limit-zero": Api(req("GET", "/v1/sessions?limit=0"), 400, "limit"),
    "api-limit-huge": Api(req("GET", "/v1/drift?limit=" + "9" * 5000), 400, "limit"),
    "api-limit-negative": Api(req("GET", "/v1/sessions?limit=-1"), 400, "limit"),
    "api-format-unknown": Api(req("GET", "/v1/recommendations/default?format=../../etc"), 400, "unknown format"),
    "api-rendered-unknown-target": Api(req("GET", "/v1/recommendations/elsewhere?format=conf"), 404, "no target"),
    "api-rendered-traversal": Api(req("GET", "/v1/recommendations/..%2F..%2Fetc?format=conf"), 404, "no target"),
    "api-session-unknown": Api(req("GET", "/v1/sessions/ffffffffffff"), 404, "no session"),
    "api-session-garbage-id": Api(req("GET", "/v1/sessions/%00%ff"), 404, "no session"),
    "api-method-not-allowed": Api(req("DELETE", "/v1/sessions"), 405, ""),
    "api-unknown-path": Api(req("GET", "/v1/../../etc/passwd"), 404, ""),
}

# Every hostile input of this half, named; an aggregate test sums it with the other half's.
CASES: list[tuple[str, Case | Api]] = [*CONFIG.items(), *STORE_CASES.items(), *JOURNALS.items(), *APIS.items()]
INPUTS = [*case_inputs(CONFIG.items(), "daemon configuration"), *case_inputs(STORE_CASES.items(), "store"),
          *case_inputs(JOURNALS.items(), "journal"),
          *case_inputs(APIS.items(), "API request", material=lambda a: describe([a.request, a.families]))]


@pytest.mark.parametrize("name", [n for n, c in CASES if isinstance(c, Case)])
def test_hostile_command_line_input(name: str, tmp_path: Path) -> None:
    check_case(dict(CASES)[name], tmp_path)  # type: ignore[arg-type]


async def _answer(d: Daemon, case: Api, port: int) -> tuple[int, bytes, int]:
    runner = make_runner(d.queries, idle_timeout_s=30)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    try:
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(case.request.replace(b"PORT", str(port).encode()))
        await w.drain()
        data = await asyncio.wait_for(r.read(), 60)
        w.close()
        from tuner.report.validate import check
        from tuner.store import open_store

        async with open_store(d.cfg, check=check) as db:
            queued = len(await db.runs.find(d.owner, status=("queued",))) if db is not None else 0
    finally:
        await runner.cleanup()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body, queued


@pytest.mark.parametrize("name", [n for n, c in CASES if isinstance(c, Api)])
def test_hostile_api_input(name: str, tmp_path: Path) -> None:
    case = dict(CASES)[name]
    assert isinstance(case, Api)
    tok = tmp_path / "token"
    tok.write_text(TOKEN)
    tok.chmod(0o600)
    cfg_file = tmp_path / "tuner.toml"
    with socket.socket() as s:  # the daemon answers to the Host of the address it is configured to listen on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg_file.write_text(f'[tuner]\nstate_dir = "{tmp_path / "state"}"\nfamilies = {json.dumps(case.families)}\n'
                        f'[target]\ndsn = "{NOWHERE}"\n[daemon]\ntoken_file = "{tok}"\nlisten = "127.0.0.1:{port}"\n')
    d = Daemon(load_config(cfg_file, environ={}))
    status, body, queued = asyncio.run(_answer(d, case, port))
    assert status == case.status, (status, body[:500])
    text = body.decode("utf-8", "replace")
    assert "Traceback" not in text and "unexpected error" not in text and PASSWORD not in text
    if case.expect:
        answer = json.loads(body)
        assert case.expect in answer["error"] and "\n" not in answer["error"], answer
        assert len(answer["error"]) <= 300, answer  # one sentence, not the request echoed back
    assert queued == 0  # nothing was queued


def test_the_service_half_counts_its_inputs() -> None:
    names = [n for n, _ in CASES]
    assert len(names) == len(set(names)) and len(CASES) >= 170
    print(f"hostile inputs (service half): {len(CASES)} — config {len(CONFIG)}, store {len(STORE_CASES)}, "
          f"journal {len(JOURNALS)}, API {len(APIS)}")
