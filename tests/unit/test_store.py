"""The SQLite store: sessions in and out, history, warm-start priors, diff, and refusals that change nothing.

(The PostgreSQL store runs the same code against a real server: tests/integration/test_store_pg.py.)"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tuner import emit
from tuner.cli import main
from tuner.settings.config_load import load_config
from tuner.report.model import EffectOut, FamilyOutcome, Recommendation, Report, SessionOut, TargetOut, Trial
from tuner.emit.diff import diff, diff_text
from tuner.emit.history import history_text
from tuner.report.validate import check
from tuner.store import Store, StoreError, migrations, open_store
from tuner.store.sqlite import SqliteBackend

T0 = datetime(2026, 12, 2, 12, 0, 0, tzinfo=UTC)
EIC = "effective_io_concurrency"


def fp(sysid: str = "7001", device_key: str | None = "loop|rotational=0|ext4", **settings: Any) -> dict[str, Any]:
    return {"label": f"staging {sysid}", "system_identifier": sysid, "data_directory": "/srv/pg", "major": 15,
            "server_version_num": 150018, "device_key": device_key, "kernel": "6.18", "host": "h1",
            "settings": {EIC: [str(settings.get("eic", 1)), settings.get("source", "default")]}}


def make_report(sid: str, *, at: datetime = T0, sysid: str = "7001", recommended: int = 256, decision: str = "change",
                values: dict[int, float] | None = None, device_key: str | None = "loop|rotational=0|ext4",
                current: int = 1, **settings: Any) -> Report:
    values = values or {1: 2800.0, 16: 1200.0, 256: 900.0}
    trials = [Trial(config={EIC: k}, value=v, status="ok", phase="search", started_at=at, duration_s=1.0,
                    family="concurrency") for k, v in values.items()]
    trials.append(Trial(config={EIC: 64}, value=None, status="failed", phase="search", started_at=at, duration_s=1.0,
                        reason="timeout", family="concurrency"))
    trials += [Trial(config={EIC: c}, value=values.get(c, 1000.0), status="ok", phase="confirm", arm=arm,
                     started_at=at, duration_s=1.0, family="concurrency")
               for c, arm in ((1, "baseline"), (recommended, "candidate"))]
    rec = Recommendation(
        knob=EIC, scope="system", object=None, current=current, recommended=recommended, near_optimal=(64, 1000),
        decision=decision, reason="measured",  # type: ignore[arg-type]
        effect=EffectOut(metric="execution_time_ms", improvement=3.1, ci95=(2.8, 3.4), decision_ci=(2.6, 3.6),
                         n_pairs=6, p_value=0.001, looks=1, method="t"),
        requires="reload")
    return Report(
        target=TargetOut(server_version_num=150018, server_version="15.18", in_recovery=True, system_identifier=sysid,
                         mode="hot_standby", dsn="host=staging", sandbox=False,
                         fingerprint=fp(sysid, device_key, **settings)),
        session=SessionOut(id=sid, started_at=at, duration_s=42.0, probes=len(trials), policy="default", seed=1,
                           cache="cold", host="h1", kernel="6.18"),
        families=[FamilyOutcome(family="concurrency", status="done", reason="ok")],
        recommendations=[rec], trials=trials)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def _opened(path: Path) -> Store:
    backend = SqliteBackend(path).open()
    await backend.prepare()
    return Store(backend, check=check)


def save(path: Path, *reports: Report) -> None:
    async def go() -> None:
        store = await _opened(path)
        try:
            for r in reports:
                await store.sessions.save(r, r.target.fingerprint or {})
        finally:
            await store.backend.close()

    run(go())


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- round trip, listing, resolving -----------------------------------------------------------------------------
def test_a_stored_report_comes_back_equal_and_renders_identically(tmp_path: Path) -> None:
    db = tmp_path / "tuner.db"
    r = make_report("a1b2c3d4e5f6")
    save(db, r)

    async def go() -> Report:
        store = await _opened(db)
        try:
            return await store.sessions.report(await store.sessions.resolve("a1b2"))
        finally:
            await store.backend.close()

    back = run(go())
    assert back == r
    assert emit.text(back, "json") == emit.text(r, "json")
    assert oct(db.stat().st_mode & 0o777) == "0o600"
    assert sqlite3.connect(db).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_history_lists_sessions_newest_first_with_decisions_and_intervals(tmp_path: Path) -> None:
    db = tmp_path / "tuner.db"
    save(db, make_report("aaaaaaaaaaaa"), make_report("bbbbbbbbbbbb", at=T0 + timedelta(days=1), recommended=128),
         make_report("cccccccccccc", sysid="9009", at=T0 + timedelta(hours=1)))

    async def go() -> Any:
        store = await _opened(db)
        try:
            every = await store.sessions.newest()
            return every, await store.sessions.newest(target=every[0].target_id[:6])
        finally:
            await store.backend.close()

    every, one = run(go())
    assert [s.id for s in every] == ["bbbbbbbbbbbb", "cccccccccccc", "aaaaaaaaaaaa"]
    assert {s.id for s in one} == {"aaaaaaaaaaaa", "bbbbbbbbbbbb"}
    d = every[0].decisions[0]
    assert (d["knob"], d["current"], d["recommended"], d["decision"]) == (EIC, "1", "128", "change")
    assert d["ci95"] == [2.8, 3.4] and d["near_optimal"] == [64, 1000]
    text = history_text(every, "x")
    assert "changed since" not in text  # the same settings in both sessions of 7001
    moved = make_report("dddddddddddd", at=T0 + timedelta(days=2), eic=256, source="configuration file")
    save(db, moved)

    async def again() -> Any:
        store = await _opened(db)
        try:
            return await store.sessions.newest()
        finally:
            await store.backend.close()

    assert ("changed since bbbbbbbbbbbb: effective_io_concurrency 1 (default) -> 256 (configuration file)"
            in history_text(run(again()), "x"))
    assert "effective_io_concurrency 1 -> 128 (3.10x, 95% CI [2.80, 3.40]), near-optimal 64..1000" in text
    assert text.count("target ") == 2


@pytest.mark.parametrize(("ref", "expect"), [
    ("zz", "is not a session id"), ("ffff", "no stored session starts with"), ("a", "names more than one session"),
])
def test_a_bad_session_reference_is_one_sentence(tmp_path: Path, ref: str, expect: str) -> None:
    db = tmp_path / "tuner.db"
    save(db, make_report("a1aaaaaaaaaa"), make_report("a2aaaaaaaaaa"))

    async def go() -> None:
        store = await _opened(db)
        try:
            await store.sessions.resolve(ref)
        finally:
            await store.backend.close()

    with pytest.raises(Exception, match=expect) as err:
        run(go())
    assert getattr(err.value, "exit_code", None) == 2


def test_saving_one_session_twice_fails_whole_and_keeps_the_first(tmp_path: Path) -> None:
    db = tmp_path / "tuner.db"
    save(db, make_report("a1aaaaaaaaaa"))
    with pytest.raises(StoreError):
        save(db, make_report("a1aaaaaaaaaa", recommended=16))
    con = sqlite3.connect(db)
    assert con.execute("SELECT count(*) FROM trials").fetchone()[0] == 6
    assert con.execute("SELECT recommended FROM recommendations").fetchall() == [("256",)]


# -- refusals that change nothing -------------------------------------------------------------------------------
def _open_error(path: Path) -> StoreError:
    async def go() -> None:
        backend = SqliteBackend(path).open()
        try:
            await backend.prepare()
        finally:
            await backend.close()

    with pytest.raises(StoreError) as err:
        run(go())
    assert err.value.exit_code == 2 and "\n" not in str(err.value)
    return err.value


def test_a_newer_schema_is_refused_and_left_alone(tmp_path: Path) -> None:
    db = tmp_path / "tuner.db"
    save(db, make_report("a1aaaaaaaaaa"))
    con = sqlite3.connect(db)
    con.execute(f"UPDATE {migrations.META} SET value = ? WHERE key = 'schema_version'", (str(migrations.VERSION + 1),))
    con.commit()
    con.close()
    before = digest(db)
    err = _open_error(db)
    assert f"schema version {migrations.VERSION + 1}, newer than this tuner knows" in str(err)
    assert digest(db) == before


def test_a_damaged_file_is_refused_and_left_alone(tmp_path: Path) -> None:
    db = tmp_path / "tuner.db"
    db.write_bytes(b"not a database at all " * 200)
    before = digest(db)
    assert "is damaged or not a tuner store" in str(_open_error(db))
    assert digest(db) == before


def test_a_truncated_store_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "tuner.db"
    save(db, *(make_report(f"{i:012x}") for i in range(30)))
    raw = db.read_bytes()
    # The sessions table's root page: damage where reading the history must pass (a page nobody reads, such as an
    # empty table's index, goes unnoticed by reads — SQLite checks pages as it reads them).
    con = sqlite3.connect(db)
    root, size = con.execute("SELECT rootpage FROM sqlite_master WHERE name = 'sessions'").fetchone()[0], \
        con.execute("PRAGMA page_size").fetchone()[0]
    con.close()
    at = (root - 1) * size
    db.write_bytes(raw[:at] + b"\xff" * size + raw[at + size:])

    async def go() -> None:
        store = await _opened(db)
        try:
            # Everything the store holds is read: wherever the damage falls, something reads it.
            await store.runs.find("owner")
            await store.drift_events.recent()
            for s in await store.sessions.newest(limit=1000):
                await store.sessions.report(s.id)
        finally:
            await store.backend.close()

    with pytest.raises(StoreError, match="damaged|cannot be read"):
        run(go())


def test_someone_elses_sqlite_database_is_refused_and_left_alone(tmp_path: Path) -> None:
    db = tmp_path / "tuner.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE invoices (id int)")
    con.commit()
    con.close()
    before = digest(db)
    assert "not a tuner store" in str(_open_error(db))
    assert digest(db) == before


def test_reopening_migrates_nothing_and_keeps_everything(tmp_path: Path) -> None:
    db = tmp_path / "tuner.db"
    save(db, make_report("a1aaaaaaaaaa"))
    save(db, make_report("a2aaaaaaaaaa"))
    con = sqlite3.connect(db)
    assert con.execute("SELECT count(*) FROM sessions").fetchone()[0] == 2
    assert con.execute(f"SELECT value FROM {migrations.META}").fetchall() == [(str(migrations.VERSION),)]


# -- warm-start priors -------------------------------------------------------------------------------------------
def _prior(db: Path, fingerprint: dict[str, Any], exclude: str | None = None) -> Any:
    async def go() -> Any:
        store = await _opened(db)
        try:
            return await store.priors.find(fingerprint, "concurrency", exclude=exclude)
        finally:
            await store.backend.close()

    return run(go())


def test_the_prior_is_the_latest_session_on_the_same_server(tmp_path: Path) -> None:
    db = tmp_path / "tuner.db"
    save(db, make_report("a1aaaaaaaaaa", values={1: 3000.0, 8: 1500.0}),
         make_report("a2aaaaaaaaaa", at=T0 + timedelta(days=1), recommended=16, values={1: 2000.0, 16: 700.0}),
         make_report("a3aaaaaaaaaa", at=T0 + timedelta(days=2), sysid="other", device_key="nvme|rotational=0|xfs"))
    p = _prior(db, fp("7001"))
    assert p.session_id == "a2aaaaaaaaaa" and p.matched_by == "system identifier"
    # Every successful trial of the family (search and confirmation), none of the failed ones.
    assert p.observations == [({EIC: 1}, 2000.0), ({EIC: 16}, 700.0), ({EIC: 1}, 2000.0), ({EIC: 16}, 700.0)]
    assert p.previous == {EIC: 16}
    assert _prior(db, fp("7001"), exclude="a2aaaaaaaaaa").session_id == "a1aaaaaaaaaa"
    # The same server moved to another disk: its old curve is not this one's (and no other session matches).
    assert _prior(db, fp("7001", device_key="nvme9|rotational=0|xfs")) is None
    assert _prior(db, fp("7001", device_key=None)).session_id == "a2aaaaaaaaaa"  # a remote target: sysid alone


def test_a_scaling_run_is_never_a_warm_start_observation(tmp_path: Path) -> None:
    """Issue #47: a scaling run measured another load (another client count) at today's setting; registered as an
    observation it would tell the optimiser that setting costs what 1 or 16 clients cost."""
    db = tmp_path / "tuner.db"
    rep = make_report("a1aaaaaaaaaa", values={1: 3000.0, 8: 1500.0})
    scaling = Trial(config={EIC: 1}, value=9.0, status="ok", phase="scaling", started_at=T0, duration_s=1.0,
                    family="concurrency", metrics={"clients": 16.0})
    save(db, rep.model_copy(update={"trials": [*rep.trials, scaling]}))
    p = _prior(db, fp("7001"))
    assert p.session_id == "a1aaaaaaaaaa" and ({EIC: 1}, 9.0) not in p.observations
    assert p.observations == [({EIC: 1}, 3000.0), ({EIC: 8}, 1500.0), ({EIC: 1}, 3000.0), ({EIC: 256}, 1000.0)]


def test_the_prior_falls_back_to_the_same_device_and_major(tmp_path: Path) -> None:
    db = tmp_path / "tuner.db"
    save(db, make_report("a1aaaaaaaaaa", sysid="1"),
         make_report("a2aaaaaaaaaa", sysid="2", device_key="nvme|rotational=0|xfs", at=T0 + timedelta(days=1)))
    p = _prior(db, fp("3", device_key="loop|rotational=0|ext4"))
    assert p.session_id == "a1aaaaaaaaaa" and p.matched_by.startswith("device model")
    assert _prior(db, fp("3", device_key="sata|rotational=1|ext4")) is None
    assert _prior(db, fp("3", device_key=None)) is None
    assert _prior(db, {**fp("3"), "major": 18}) is None


# -- diff ------------------------------------------------------------------------------------------------------
def test_diff_names_what_changed() -> None:
    a = make_report("a1aaaaaaaaaa")
    b = make_report("a2aaaaaaaaaa", recommended=16, eic=256, source="configuration file")
    d = diff(a, b)
    assert d["same_target"] and d["settings"] == [
        {"setting": EIC, "before": ["1", "default"], "after": ["256", "configuration file"]}]
    assert d["decisions"][0]["change"] == "recommended value moved outside the first session's near-optimal range"
    text = diff_text(d)
    assert "setting effective_io_concurrency: 1 (default) -> 256 (configuration file)" in text
    within = diff(a, make_report("a2aaaaaaaaaa", recommended=512))
    assert within["decisions"][0]["change"] == "recommended value moved within the first session's near-optimal range"
    kept = diff(a, make_report("a2aaaaaaaaaa", decision="keep"))
    assert kept["decisions"][0]["change"] == "decision changed (change -> keep)"
    assert "nothing changed" in diff_text(diff(a, make_report("a3aaaaaaaaaa")))


# -- drift events ----------------------------------------------------------------------------------------------
def test_drift_events_are_stored_per_target(tmp_path: Path) -> None:
    db = tmp_path / "tuner.db"
    save(db, make_report("a1aaaaaaaaaa"))

    async def go() -> Any:
        store = await _opened(db)
        try:
            tid = (await store.sessions.newest())[0].target_id
            await store.drift_events.record(tid, {"server_version_num": [150018, 180001]}, "full session")
            return await store.drift_events.find(tid)
        finally:
            await store.backend.close()

    (event,) = run(go())
    assert event["changes"] == {"server_version_num": [150018, 180001]} and event["action"] == "full session"


# -- the commands ----------------------------------------------------------------------------------------------
def _cli(*args: str, state: Path) -> Any:
    return CliRunner().invoke(main, [*args, "--state-dir", str(state)], catch_exceptions=False)


def test_history_show_and_diff_commands(tmp_path: Path) -> None:
    a, b = make_report("a1aaaaaaaaaa"), make_report("b2bbbbbbbbbb", at=T0 + timedelta(days=1), recommended=16)
    save(tmp_path / "tuner.db", a, b)
    h = _cli("history", state=tmp_path)
    assert h.exit_code == 0 and h.output.index("b2bbbbbbbbbb") < h.output.index("a1aaaaaaaaaa")
    hj = json.loads(_cli("history", "--format", "json", state=tmp_path).output)
    assert hj[0]["decisions"][0]["recommended"] == "16"
    s = _cli("show", "a1aa", "--format", "json", state=tmp_path)
    assert s.exit_code == 0 and s.output == emit.text(a, "json")
    assert _cli("show", state=tmp_path).output == emit.text(b, "table")
    d = _cli("diff", "a1", "b2", state=tmp_path)
    assert d.exit_code == 0 and "256" in d.output and "16" in d.output
    assert json.loads(_cli("diff", "a1", "--format", "json", state=tmp_path).output)["sessions"] == [
        "a1aaaaaaaaaa", "b2bbbbbbbbbb"]


@pytest.mark.parametrize("args", [("show", "nothex"), ("show", "ffff"), ("diff", "a1", "zz"), ("history", "--target", "x;")])
def test_bad_references_on_the_command_line_are_one_sentence(tmp_path: Path, args: tuple[str, ...]) -> None:
    save(tmp_path / "tuner.db", make_report("a1aaaaaaaaaa"))
    r = _cli(*args, state=tmp_path)
    assert r.exit_code == 2 and r.output.startswith("tuner: error: ") and "Traceback" not in r.output
    assert r.output.count("\n") == 2  # the sentence and its hint


def test_reading_commands_without_a_store_say_so_and_create_nothing(tmp_path: Path) -> None:
    r = _cli("history", state=tmp_path)
    assert r.exit_code == 2 and "no store at" in r.output
    assert not (tmp_path / "tuner.db").exists()


def test_a_damaged_store_is_one_sentence_on_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "tuner.db").write_bytes(b"\x00garbage" * 100)
    r = _cli("history", state=tmp_path)
    assert r.exit_code == 2 and "damaged or not a tuner store" in r.output and "Traceback" not in r.output


def test_open_store_honours_no_store_and_the_config_path_and_creates_the_file_on_first_write(tmp_path: Path) -> None:
    cfg = load_config(overrides={"store": {"path": str(tmp_path / "mine.db")}})
    r = make_report("a1aaaaaaaaaa")

    async def go() -> Any:
        async with open_store(cfg, check=check, enabled=False) as off:
            assert off is None
        async with open_store(cfg, check=check) as on:
            assert on is not None
            # A run that fails before it stores anything leaves nothing behind; reading an absent store is empty.
            assert not (tmp_path / "mine.db").exists() and await on.sessions.newest() == []
            assert await on.priors.find(fp(), "concurrency") is None
            await on.sessions.save(r, r.target.fingerprint or {})
            return on.backend.where

    assert str(tmp_path / "mine.db") in run(go())
    assert oct((tmp_path / "mine.db").stat().st_mode & 0o777) == "0o600"


def test_a_prior_gives_a_search_only_its_own_knobs_and_objects() -> None:
    from tuner.store import StoredPrior

    ra, cd, wd, comp = "read_ahead_kb", "commit_delay", "wal_writer_delay", "wal_compression"
    p = StoredPrior("s", "t", "system identifier", trials=[
        ({ra: 128, EIC: 1}, 10.0, "data directory, pg_wal"),
        ({ra: 512, EIC: 1}, 8.0, "tablespace fast"),
        ({cd: 0, wd: 200}, 2.0, None),
        ({cd: 0, wd: 200, comp: 1}, 1.9, None),  # a screen's trial: one more knob
    ], candidates=[({ra: 256, EIC: 1}, "data directory, pg_wal"), ({ra: 512, EIC: 1}, "tablespace fast"),
                   ({cd: 10, wd: 400}, None), ({cd: 10, wd: 400, comp: 1}, None)])
    assert p.for_knobs([ra, EIC], object="data directory, pg_wal") == {
        "prior": [({ra: 128, EIC: 1}, 10.0)], "previous": {ra: 256, EIC: 1}}
    assert p.for_knobs([ra, EIC], object="tablespace other") == {"prior": [], "previous": None}
    assert p.for_knobs([cd, wd]) == {"prior": [({cd: 0, wd: 200}, 2.0)], "previous": {cd: 10, wd: 400}}
    assert p.previous == {cd: 10, wd: 400, comp: 1}


@pytest.mark.parametrize(("dsn", "env", "address"), [
    ("host=/tmp/x port=5 dbname=a", {}, "/tmp/x:5"),
    ("postgresql://u:secret@H1:6,h2/db", {}, "h1:6,h2:5432"),
    ("postgresql://postgres@/postgres?host=/var/tmp/s&port=4815", {}, "/var/tmp/s:4815"),
    (None, {}, "/var/run/postgresql:5432"),
    ("host=db1 dbname=x", {"PGPORT": "6543"}, "db1:6543"),
    ("host=db2,db1 port=1,2 dbname=y user=z", {}, "db1:2,db2:1"),
])
def test_the_address_lock_names_the_server_not_the_database_or_the_password(
    dsn: str | None, env: dict[str, str], address: str
) -> None:
    from tuner.target.connection import server_address

    assert server_address(dsn, env) == address


# -- retention -------------------------------------------------------------------------------------------------
def _counts(path: Path) -> dict[str, int]:
    con = sqlite3.connect(path)
    try:
        return {t: con.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                for t in ("sessions", "trials", "recommendations", "drift_events", "daemon_runs")}
    finally:
        con.close()


def _aged(db: Path) -> None:
    """Target 7001: an old session whose 'change' is in force, an older one it superseded, a newer 'keep' of
    what is in force; target 7002: one old session (its newest). Old drift events and daemon runs of each kind."""
    old = T0 - timedelta(days=400)
    save(db,
         make_report("a0aaaaaaaaaa", at=old - timedelta(days=1), recommended=64),           # superseded: removed
         make_report("a1aaaaaaaaaa", at=old, recommended=256),                              # in force: kept
         make_report("a2aaaaaaaaaa", at=T0, decision="keep", current=256, recommended=512),  # newest: kept
         make_report("b1bbbbbbbbbb", at=old, sysid="7002", decision="keep"))                # its target's newest

    con = sqlite3.connect(db)
    with con:
        tid = con.execute("SELECT target_id FROM sessions WHERE id = 'a1aaaaaaaaaa'").fetchone()[0]
        con.execute("INSERT INTO drift_events VALUES ('d0', ?, ?, '{}', 'record')", (tid, (old).isoformat()))
        con.execute("INSERT INTO drift_events VALUES ('d1', ?, ?, '{}', 'record')", (tid, T0.isoformat()))
        for rid, status, at in (("r0", "done", old), ("r1", "failed", old), ("r2", "queued", old),
                                ("r3", "deferred", old), ("r4", "done", T0)):
            con.execute("INSERT INTO daemon_runs (id, owner, target, kind, families, knobs, reason, forced, attempt, "
                        "requested_at, status) VALUES (?, 'h:/s', 'default', 'session', '[]', '[]', 'test', 0, 1, ?, ?)",
                        (rid, at.isoformat(), status))
    con.close()


def test_prune_removes_what_is_old_and_keeps_what_is_in_force_or_newest(tmp_path: Path) -> None:
    db = tmp_path / "tuner.db"
    _aged(db)
    before = _counts(db)
    dry = _cli("prune", "--older-than", "365d", "--dry-run", state=tmp_path)
    assert dry.exit_code == 0, dry.output
    assert dry.output.startswith("tuner: would remove 1 session(s), 1 drift event(s) and 2 finished daemon run(s)")
    assert "kept 2 older session(s)" in dry.output
    assert _counts(db) == before  # a dry run changes nothing

    done = _cli("prune", "--older-than", "365d", state=tmp_path)
    assert done.exit_code == 0 and done.output.startswith("tuner: removed 1 session(s)")
    after = _counts(db)
    assert after["sessions"] == 3 and after["drift_events"] == 1 and after["daemon_runs"] == 3
    con = sqlite3.connect(db)
    try:
        assert not con.execute("SELECT COUNT(*) FROM trials WHERE session_id = 'a0aaaaaaaaaa'").fetchone()[0]
        assert not con.execute("SELECT COUNT(*) FROM recommendations WHERE session_id = 'a0aaaaaaaaaa'").fetchone()[0]
        assert {r[0] for r in con.execute("SELECT id FROM daemon_runs")} == {"r2", "r3", "r4"}
    finally:
        con.close()
    # What is in force is what it was, and history still reads.
    h = _cli("history", state=tmp_path)
    assert h.exit_code == 0 and "a1aaaaaaaaaa" in h.output and "a0aaaaaaaaaa" not in h.output
    assert _cli("prune", "--older-than", "365d", state=tmp_path).output.startswith("tuner: removed 0 session(s)")


@pytest.mark.parametrize("value", ["soon", "0d", "400d"])
def test_a_bad_prune_age_is_one_sentence_and_changes_nothing(tmp_path: Path, value: str) -> None:
    db = tmp_path / "tuner.db"
    _aged(db)
    digest_before = digest(db)
    r = _cli("prune", "--older-than", value, state=tmp_path)
    assert r.exit_code == 2 and r.output.startswith("tuner: error: --older-than") and "Traceback" not in r.output
    assert digest(db) == digest_before


# -- issue 44, item 5: what is in force comes from the whole history, and prune keeps it -------------------------
def _long_history(db: Path, later: int = 205) -> None:
    """One session that recommended 256, then ``later`` sessions that each kept it (the setting was applied)."""
    save(db, make_report("f0ffffffffff", at=T0 - timedelta(days=400), recommended=256),
         *(make_report(f"{i:012x}", at=T0 + timedelta(minutes=i), decision="keep", current=256, recommended=512)
           for i in range(1, later + 1)))


def test_what_is_in_force_survives_any_number_of_later_sessions(tmp_path: Path) -> None:
    db = tmp_path / "tuner.db"
    _long_history(db)

    async def go() -> list[tuple[str, Any]]:
        store = await _opened(db)
        try:
            tid = (await store.sessions.newest(limit=1))[0].target_id
            return await store.accepted.find(tid)
        finally:
            await store.backend.close()

    accepted = run(go())
    assert [(sid, r.recommended) for sid, r in accepted] == [("f0ffffffffff", 256)]


def test_prune_never_removes_the_session_whose_recommendation_is_in_force(tmp_path: Path) -> None:
    db = tmp_path / "tuner.db"
    _long_history(db)
    done = _cli("prune", "--older-than", "365d", state=tmp_path)
    assert done.exit_code == 0 and done.output.startswith("tuner: removed 0 session(s)"), done.output
    con = sqlite3.connect(db)
    try:
        assert con.execute("SELECT COUNT(*) FROM sessions WHERE id = 'f0ffffffffff'").fetchone()[0] == 1
    finally:
        con.close()
