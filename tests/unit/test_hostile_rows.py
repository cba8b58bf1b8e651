"""Hostile inputs, issue #59 items 5 and 6 and the udev/tuned sentence.

- a stored row is input (item 6): a session row another writer changed — a date that is not one, a number out of
  range or not finite, a fingerprint that is not an object, a wrong type — is left out of every listing with one
  sentence (``tuner history`` shows it, the daemon logs it) and every other row is served: the history, the
  daemon's ``/``, ``/v1/sessions`` and ``?format=html``, and its drift check's refresh;
- a password holding Unicode whitespace is hidden to where libpq ends the value (item 5): libpq's conninfo parser
  splits on ASCII whitespace only, so U+00A0 or U+3000 is part of the password;
- a udev or tuned file whose every device change tuner refused to write says so, with the reason — not "nothing to
  change".

Rows are planted with SQL in a real SQLite store (the one a reader opens), read by the store's own code.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from tuner import redact
from tuner.actuate.alter_system import strip_password
from tuner.settings.config_load import load_config
from tuner.daemon.service import Daemon
from tuner.emit import tuned as tuned_emit
from tuner.emit import udev as udev_emit
from tuner.emit.json import parse
from tuner.store import Store

from .hostile import Input, case_inputs
from .test_hostile_inputs import Case, check_case
from .test_hostile_reports import _base
from .test_hostile_service import NOWHERE, TOKEN, Api, _answer, req
from .test_store import T0, _opened, make_report, save

BAD, GOOD = "a" * 12, "b" * 12  # the planted row is the older session; the newer one must still be served

# name: (SQL run on the older session's rows, a substring of the sentence that leaves it out)
ROWS: dict[str, tuple[str, str]] = {
    "started-at-words": ("UPDATE sessions SET started_at = 'not a date'", "started_at 'not a date' is not a date"),
    "started-at-empty": ("UPDATE sessions SET started_at = ''", "is not a date"),
    "started-at-month-13": ("UPDATE sessions SET started_at = '2026-13-45T00:00:00+00:00'", "is not a date"),
    "started-at-huge": ("UPDATE sessions SET started_at = printf('%.10000c', 'x')", "is not a date"),
    "started-at-integer": ("UPDATE sessions SET started_at = 1733140800", "is not a date"),
    "started-at-infinite": ("UPDATE sessions SET started_at = 1e999", "is not a date"),
    "started-at-blob": ("UPDATE sessions SET started_at = X'00ff'", "is not a date"),
    "started-at-sql-tail": ("UPDATE sessions SET started_at = '2026-12-02T12:00:00+00:00; DROP TABLE x'",
                            "is not a date"),
    "started-at-far-future": ("UPDATE sessions SET started_at = '9999-12-31T23:59:59+00:00Z'", "is not a date"),
    "duration-infinite": ("UPDATE sessions SET duration_s = 1e999", "duration_s inf"),
    "duration-minus-infinite": ("UPDATE sessions SET duration_s = -1e999", "duration_s -inf"),
    "duration-words": ("UPDATE sessions SET duration_s = 'slow'", "duration_s 'slow'"),
    "duration-1e300": ("UPDATE sessions SET duration_s = 1e300", "duration_s 1e+300"),
    "duration-blob": ("UPDATE sessions SET duration_s = X'ff'", "duration_s b'\\xff'"),
    "probes-infinite": ("UPDATE sessions SET probes = 1e999", "probes inf"),  # the finding: OverflowError
    "probes-int64-max": ("UPDATE sessions SET probes = 9223372036854775807", "probes 9223372036854775807"),
    "probes-int64-min": ("UPDATE sessions SET probes = -9223372036854775808", "probes -9223372036854775808"),
    "probes-negative": ("UPDATE sessions SET probes = -1", "probes -1 is not a count"),
    "probes-fraction": ("UPDATE sessions SET probes = 2.5", "probes 2.5 is not a count"),
    "probes-1e20": ("UPDATE sessions SET probes = 1e20", "probes 1e+20"),
    "probes-words": ("UPDATE sessions SET probes = 'many'", "probes 'many'"),
    "fingerprint-array": ("UPDATE sessions SET fingerprint = '[]'", "fingerprint '[]' is not a JSON object"),
    "fingerprint-null": ("UPDATE sessions SET fingerprint = 'null'", "is not a JSON object"),
    "fingerprint-string": ("UPDATE sessions SET fingerprint = '\"x\"'", "is not a JSON object"),
    "fingerprint-infinite": ("UPDATE sessions SET fingerprint = '1e999'", "is not a JSON object"),
    "fingerprint-cut": ("UPDATE sessions SET fingerprint = '{\"a\": '", "is not a JSON object"),
    "fingerprint-deep": ("UPDATE sessions SET fingerprint = printf('%.100000c', '[') || printf('%.100000c', ']')",
                         "is not a JSON object"),
    "fingerprint-blob": ("UPDATE sessions SET fingerprint = X'ff00'", "is not a JSON object"),
    "kind-blob": ("UPDATE sessions SET kind = X'00'", "kind b'\\x00' is not text"),
    "server-version-blob": ("UPDATE sessions SET server_version = X'00'", "server_version b'\\x00' is not text"),
    "policy-blob": ("UPDATE sessions SET policy = X'0102'", "policy b'\\x01\\x02' is not text"),
    "improvement-infinite": ("UPDATE recommendations SET improvement = 1e999", "improvement inf"),
    "improvement-words": ("UPDATE recommendations SET improvement = 'fast'", "improvement 'fast'"),
    "ci-low-minus-infinite": ("UPDATE recommendations SET ci_low = -1e999", "ci_low -inf"),
    "ci-high-blob": ("UPDATE recommendations SET ci_high = X'01'", "ci_high b'\\x01'"),
    "knob-blob": ("UPDATE recommendations SET knob = X'ff'", "knob b'\\xff' is not text"),
    "decision-blob": ("UPDATE recommendations SET decision = X'63'", "decision b'c' is not text"),
}


def _plant(sql: str) -> str:
    """``sql`` on the planted (older) session only."""
    column = "session_id" if sql.startswith("UPDATE recommendations") else "id"
    return f"{sql} WHERE {column} = '{BAD}'"


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("rows") / "tuner.db"
    save(db, make_report(BAD, at=T0), make_report(GOOD, at=T0 + timedelta(days=1)))
    return db


def _planted(template: Path, where: Path, name: str) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    db = where / "tuner.db"
    shutil.copy(template, db)
    with sqlite3.connect(db) as con:
        con.execute(_plant(ROWS[name][0]))
    con.close()
    return db


async def _sessions(db: Path) -> list[str]:
    store = await _opened(db)
    try:
        return [s.id for s in await store.sessions.newest()]
    finally:
        await store.backend.close()


@pytest.mark.parametrize("name", list(ROWS))
def test_a_hostile_row_is_left_out_with_one_sentence_and_the_rest_served(name: str, template: Path,
                                                                         tmp_path: Path) -> None:
    db = _planted(template, tmp_path, name)
    with capture_logs() as logs:
        served = asyncio.run(_sessions(db))
    assert served == [GOOD]
    [said] = [e for e in logs if e["event"] == "store.row_unreadable"]
    assert f"stored session {BAD} left out: its " in said["error"] and ROWS[name][1] in said["error"], said
    assert "\n" not in said["error"] and len(said["error"]) < 300


def _store(name: str) -> object:
    def make(path: Path) -> None:
        save(path, make_report(BAD, at=T0), make_report(GOOD, at=T0 + timedelta(days=1)))
        with sqlite3.connect(path) as con:
            con.execute(_plant(ROWS[name][0]))
        con.close()
    return make


# through the command line: the listing says what it left out, and lists the rest (exit 0)
HISTORY = {f"history-{n}": Case(["history", "--state-dir", "."], 0, "left out", said_on="stdout",
                                files={"tuner.db": _store(n)}, input=n)
           for n in ("probes-infinite", "started-at-words", "fingerprint-deep", "improvement-words")}
HISTORY["history-json-probes-infinite"] = Case(["history", "--format", "json", "--state-dir", "."], 0, GOOD,
                                               said_on="stdout", warns="left out",
                                               files={"tuner.db": _store("probes-infinite")}, input="probes-infinite")


@pytest.mark.parametrize("name", list(HISTORY))
def test_tuner_history_lists_the_rest_and_says_what_it_left_out(name: str, tmp_path: Path) -> None:
    check_case(HISTORY[name], tmp_path)


def _daemon(tmp_path: Path, db_from: Path) -> tuple[Daemon, int]:
    state = tmp_path / "state"
    state.mkdir()
    shutil.copy(db_from, state / "tuner.db")
    tok = tmp_path / "token"
    tok.write_text(TOKEN)
    tok.chmod(0o600)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = tmp_path / "tuner.toml"
    cfg.write_text(f'[tuner]\nstate_dir = "{state}"\nfamilies = ["concurrency"]\n[target]\ndsn = "{NOWHERE}"\n'
                   f'[daemon]\ntoken_file = "{tok}"\nlisten = "127.0.0.1:{port}"\n')
    d = Daemon(load_config(cfg, environ={}))
    with sqlite3.connect(db_from) as con:
        [(tid,)] = con.execute("SELECT DISTINCT target_id FROM sessions").fetchall()
    con.close()
    for t in d.state.targets.values():
        t.store_id = tid  # as the first drift check learns it
    return d, port


@pytest.mark.parametrize("path", ["/", "/v1/sessions", "/v1/recommendations/default?format=html"])
@pytest.mark.parametrize("name", ["probes-infinite", "started-at-words", "fingerprint-array"])
def test_the_daemon_serves_the_other_sessions_past_a_hostile_row(name: str, path: str, template: Path,
                                                                 tmp_path: Path) -> None:
    d, port = _daemon(tmp_path, _planted(template, tmp_path / "planted", name))
    status, body, _ = asyncio.run(_answer(d, Api(req("GET", path), 200), port))
    assert status == 200, body[:300]
    assert GOOD.encode() in body
    if path == "/v1/sessions":
        assert BAD.encode() not in json.dumps(json.loads(body)["sessions"]).encode()  # left out, not listed as fine


# the daemon's own rows: its queue (GET /v1/sessions lists its runs) and its drift events (GET /v1/drift)
RUN = "INSERT INTO daemon_runs VALUES ('{id}', '{owner}', 'default', NULL, 'session', '[\"concurrency\"]', '[]', " \
      "'asked', 0, 1, '2026-12-0{day}T00:00:00+00:00', NULL, NULL, 'done', NULL)"
EVENT = "INSERT INTO drift_events VALUES ('{id}', '{tid}', '2026-12-0{day}T00:00:00+00:00', '{{}}', 'nothing')"
OWN_ROWS: dict[str, tuple[str, str]] = {  # name: (SQL on the planted row, the endpoint that lists it)
    "run-families-words": ("UPDATE daemon_runs SET families = 'not json'", "/v1/sessions"),
    "run-families-object": ("UPDATE daemon_runs SET families = '{\"concurrency\": 1}'", "/v1/sessions"),
    "run-knobs-deep": ("UPDATE daemon_runs SET knobs = printf('%.50000c', '[')", "/v1/sessions"),
    "run-requested-at-words": ("UPDATE daemon_runs SET requested_at = 'soon'", "/v1/sessions"),
    "run-started-at-infinite": ("UPDATE daemon_runs SET started_at = 1e999", "/v1/sessions"),
    "run-ended-at-blob": ("UPDATE daemon_runs SET ended_at = X'00'", "/v1/sessions"),
    "drift-changes-words": ("UPDATE drift_events SET changes = 'not json'", "/v1/drift"),
    "drift-changes-array": ("UPDATE drift_events SET changes = '[]'", "/v1/drift"),
    "drift-detected-at-words": ("UPDATE drift_events SET detected_at = 'yesterday'", "/v1/drift"),
    "drift-action-blob": ("UPDATE drift_events SET action = X'00'", "/v1/drift"),
    "drift-changes-deep": ("UPDATE drift_events SET changes = printf('%.50000c', '{')", "/v1/drift"),
}


@pytest.mark.parametrize("name", list(OWN_ROWS))
def test_the_daemon_lists_its_other_runs_and_drift_events_past_a_hostile_row(name: str, template: Path,
                                                                               tmp_path: Path) -> None:
    sql, path = OWN_ROWS[name]
    d, port = _daemon(tmp_path, template)
    tid = next(iter(d.state.targets.values())).store_id
    with sqlite3.connect(tmp_path / "state" / "tuner.db") as con:
        for rid, day in ((BAD, 1), (GOOD, 2)):
            con.execute(RUN.format(id=rid, owner=d.owner, day=day))
            con.execute(EVENT.format(id=rid, tid=tid, day=day))
        con.execute(f"{sql} WHERE id = '{BAD}'")
    con.close()
    with capture_logs() as logs:
        status, body, _ = asyncio.run(_answer(d, Api(req("GET", path), 200), port))
    assert status == 200, body[:300]
    listed = json.loads(body)["runs" if path == "/v1/sessions" else "events"]
    assert [e["id"] for e in listed] == [GOOD]
    assert [e for e in logs if e["event"] == "store.row_unreadable" and f"'{BAD}' left out" in e["error"]]


def test_the_drift_checks_refresh_reads_past_a_date_that_is_not_one(template: Path, tmp_path: Path) -> None:
    d, _ = _daemon(tmp_path, _planted(template, tmp_path / "planted", "started-at-words"))
    target = next(iter(d.state.targets.values()))
    asyncio.run(d.worker.refresh(target))  # once per drift check that learns the target: it raised ValueError
    seen = d.state.metrics.last_session.labels(target.name)._value.get()
    assert seen == (T0 + timedelta(days=1)).timestamp()


def test_a_session_whose_date_is_not_one_decides_nothing_in_force(template: Path, tmp_path: Path) -> None:
    """'not a date' sorts after every ISO date: read as the newest session, it would decide what is in force."""
    db = _planted(template, tmp_path, "started-at-words")
    with sqlite3.connect(db) as con:
        con.execute(f"UPDATE recommendations SET current_value = '7', recommended = '7' WHERE session_id = '{BAD}'")
    con.close()

    async def accepted() -> list[str]:
        store = await _opened(db)
        try:
            return [sid for sid, _ in await store.accepted.find(json.loads(json.dumps(await _tid(store))))]
        finally:
            await store.backend.close()

    async def _tid(store: Store) -> str:
        return str((await store.backend.fetch("SELECT target_id FROM sessions LIMIT 1"))[0][0])

    assert set(asyncio.run(accepted())) == {GOOD}


def test_the_newest_session_is_never_one_whose_date_is_not_one(template: Path, tmp_path: Path) -> None:
    """What 'latest' shows and what a warm start learns from are the newest session by date."""
    db = _planted(template, tmp_path, "started-at-words")

    async def newest() -> tuple[str, str | None]:
        store = await _opened(db)
        try:
            prior = await store.priors.find({"system_identifier": "7001"}, "concurrency")
            return await store.sessions.resolve("latest"), prior.session_id if prior else None
        finally:
            await store.backend.close()

    assert asyncio.run(newest()) == (GOOD, GOOD)


# -- passwords holding Unicode whitespace (item 5) ---------------------------------------------------------------------
# What Python calls whitespace and C's isspace() does not: libpq keeps each inside a bare value.
UNICODE_SPACES = ["\x1c", "\x1d", "\x1e", "\x1f", "\x85", "\xa0", "\u1680", *map(chr, range(0x2000, 0x200B)),
                  "\u2028", "\u2029", "\u202f", "\u205f", "\u3000"]
FORMS = {
    "dsn": "host=db.example port=5432 password=Hunter2{c}s3cr3t-x9 dbname=prod",
    "shell": "PGPASSWORD=Hunter2{c}s3cr3t-x9 pg_ctl -D /srv/pg restart",
}
PASSWORDS = {f"password-{form}-U+{ord(c):04X}": text.format(c=c) for form, text in FORMS.items() for c in UNICODE_SPACES}


@pytest.mark.parametrize("name", list(PASSWORDS))
def test_a_password_is_hidden_to_where_libpq_ends_it(name: str) -> None:
    shown = redact.text(PASSWORDS[name])
    assert "s3cr3t" not in shown and "Hunter2" not in shown, repr(shown)
    assert redact.MASK in shown


@pytest.mark.parametrize("space", UNICODE_SPACES, ids=lambda c: f"U+{ord(c):04X}")
def test_a_journaled_dsn_keeps_no_part_of_a_password(space: str) -> None:
    """The journal records the DSN without its password (a file on disk must hold no secret)."""
    kept = strip_password(FORMS["dsn"].format(c=space))
    assert "s3cr3t" not in kept and "Hunter2" not in kept and kept.endswith("dbname=prod"), repr(kept)


PASSWORD_CLI = {
    f"password-config-print-U+{ord(c):04X}": Case(
        ["config", "validate", "--print"], 0, "configuration OK",
        env={"TUNER_TARGET__DSN": f"host=/nonexistent-h59 password=Hunter2{c}s3cr3t-x9"})
    for c in ("\xa0", "\u3000", "\u2007")
}


@pytest.mark.parametrize("name", list(PASSWORD_CLI))
def test_config_print_hides_the_whole_password(name: str, tmp_path: Path) -> None:
    check_case(PASSWORD_CLI[name], tmp_path)  # "s3cr3t" nowhere in stdout or stderr


# -- udev and tuned files whose every change was refused -------------------------------------------------------------
def _refused(match: dict[str, str], *, name: str = "sdb", recommended: int | None = None) -> object:
    data = _base()
    ra = data["recommendations"][0]
    ra["device"].update(match=match, name=name, node=f"/dev/{name}", sysfs_path=f"/sys/block/{name}/queue/read_ahead_kb")
    ra["object"] = f"/dev/{name}"
    report = parse(json.dumps(data))
    if recommended is not None:  # past the report check: what a renderer must still refuse on its own
        recs = [r.model_copy(update={"recommended": recommended}) if r.device else r for r in report.recommendations]
        report = report.model_copy(update={"recommendations": recs})
    return report


REFUSED = {  # name: (the report, the format)
    "tuned-scsi-wwid": (lambda: _refused({"ATTR{wwid}": "naa.5000c500a1b2c3d4"}), "tuned"),
    "tuned-serial-not-virtio": (lambda: _refused({"ATTR{serial}": "S3Z9NB0K"}, name="sdc"), "tuned"),
    "tuned-loop-backing-file": (lambda: parse(json.dumps(_base())), "tuned"),
    "udev-negative-readahead": (lambda: _refused({"ATTR{serial}": "S3Z9NB0K"}, recommended=-8), "udev"),
    "tuned-negative-readahead": (lambda: _refused({"KERNEL": "sdb"}, recommended=-8), "tuned"),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_a_device_file_whose_changes_were_refused_says_so(name: str) -> None:
    make, fmt = REFUSED[name]
    render = {"udev": udev_emit.render, "tuned": tuned_emit.render}[fmt]  # past the report check, as a renderer must
    for text in (render(make()), render(make(), rollback=True)):  # the file and its rollback twin
        assert "nothing to change" not in text and "nothing to roll back" not in text, text
        assert "this file sets nothing: tuner refused to write read_ahead_kb of /dev/" in text, text


INPUTS: list[Input] = [
    *[Input(n, "stored row", _plant(sql), frozenset({"59.6"})) for n, (sql, _) in ROWS.items()],
    *[Input(n, "stored row", f"{sql} WHERE id = '{BAD}'", frozenset({"59.6"})) for n, (sql, _) in OWN_ROWS.items()],
    *[Input(n, "secret in text", text, frozenset({"59.5"})) for n, text in PASSWORDS.items()],
    *case_inputs(PASSWORD_CLI.items(), "environment", findings={n: {"59.5"} for n in PASSWORD_CLI}),
    *[Input(n, "report rendered for the host", f"{n}", frozenset({"59.udev"})) for n in REFUSED],
]
