"""Issue 59, item 1: a re-validation runs only families its target allows. A `tuner daemon` of the test's own on a
writable PostgreSQL 15 server marked staging, its target limited to ``["replay"]``, and a store that already holds
an accepted WAL recommendation for that server: a requested re-validation finds nothing it may re-validate and
says so — no WAL probe, no ALTER SYSTEM, no scratch schema — and a drift of a WAL setting queues none. A request
whose target is 0, "" or null names no target: a 400, not the default target."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import tuner_env, wait_for
from tests.integration.test_daemon import TOKEN, Daemon, _free_port, _sql
from tests.integration.test_interlock_bypass import Bare, _bare
from tuner.settings.config_load import load_config
from tuner.emit.json import parse as parse_report
from tuner.report.validate import check
from tuner.store import open_store
from tuner.sandbox import Binaries

FIXTURE = Path(__file__).parent.parent / "fixtures" / "reports" / "sandbox-all-families.json"


@pytest.fixture(scope="module")
def marked(base_dir: Path, pg15: Binaries) -> Iterator[Bare]:
    yield from _bare(base_dir, pg15, name="replay-only", conf_line="tuner.role = 'staging'", argv_marker=None)


class ReplayOnly(Daemon):
    """:class:`Daemon` on a bare server instead of the staging clone, allowed only the replay family."""

    def __init__(self, server: Bare, tmp: Path) -> None:  # noqa: D107 — the parent's fields, another target
        self.tmp, self.port, self.state = tmp, _free_port(), tmp / "state"
        token = tmp / "token"
        token.write_text(TOKEN + "\n")
        token.chmod(0o600)
        self.config = tmp / "tuner.toml"
        self.text = (f'[tuner]\nfamilies = ["replay"]\n[daemon]\nlisten = "127.0.0.1:{self.port}"\n'
                     f'token_file = "{token}"\nschedule = ""\ndrift_check_every = "2s"\nrevalidate_every = "7d"\n')
        self.config.write_text(self.text)
        self.env = tuner_env(self.state, TUNER_TARGET__DSN=server.dsn())
        self.proc: subprocess.Popen[str] | None = None
        self.log = tmp / "daemon.log"


def _seed_wal_recommendation(server: Bare, daemon: ReplayOnly) -> None:
    """An earlier session's report on this server, its WAL recommendations accepted, in the daemon's own store."""
    sysid, data_directory = _sql(server.dsn(), "SELECT system_identifier::text FROM pg_control_system()",
                                 "SHOW data_directory")
    report = parse_report(FIXTURE.read_text())
    fingerprint = {"label": "replay-only", "system_identifier": sysid, "data_directory": data_directory}
    effect = next(r.effect for r in report.recommendations if r.decision == "change")
    recs = [r.model_copy(update={"decision": "change", "effect": effect}) if r.knob == "commit_delay" else r
            for r in report.recommendations]
    report = report.model_copy(update={"recommendations": recs, "target": report.target.model_copy(update={
        "system_identifier": sysid, "fingerprint": fingerprint, "dsn": server.dsn(), "sandbox": False,
        "in_recovery": False})})
    cfg = load_config(daemon.config, environ=daemon.env)

    async def save() -> None:
        async with open_store(cfg, check=check) as db:
            assert db is not None
            await db.sessions.save(report, fingerprint)

    asyncio.run(save())


def _untouched(server: Bare) -> None:
    assert (server.data / "postgresql.auto.conf").read_text().count("=") == 0  # no ALTER SYSTEM ever ran
    assert _sql(server.dsn(), "SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'tuner%'") == [0]


def test_a_revalidation_runs_no_family_its_target_excludes(marked: Bare, tmp_path: Path) -> None:
    d = ReplayOnly(marked, tmp_path)
    _seed_wal_recommendation(marked, d)
    d.start()
    try:
        # The daemon knows the server (its first drift check) and serves the WAL recommendations in force.
        assert wait_for(lambda: any(r["knob"] == "commit_delay" for t in d.get("/v1/recommendations")[1]["targets"]
                                    for r in t["recommendations"]), 60), d.stderr()
        # A target that names none (0, "", null) is a client's bug, not the default target: 400, nothing queued.
        for bad, says in ((0, "no target: target is a number, not a target's name"),
                          ("", "no target: target is empty"), (None, "no target: target is null, not a target's name")):
            status, doc = d.call("POST", "/v1/sessions", body={"target": bad, "kind": "revalidate"})
            assert (status, doc["error"]) == (400, says), doc
            assert "leave target out for default" in doc["hint"]
        assert d.get("/v1/sessions")[1]["runs"] == []
        status, queued = d.call("POST", "/v1/sessions", body={"kind": "revalidate"})
        assert status == 202, queued
        ended = d.wait_run(lambda r: r["id"] == queued["id"] and r["status"] not in ("queued", "running"), 120,
                           "re-validating that ended")
        assert ended["status"] == "failed", ended
        assert ended["detail"].startswith("nothing to re-validate on target default: no accepted recommendation"), \
            ended
        assert "(replay)" in ended["detail"] and "Traceback" not in d.stderr()
        _untouched(marked)

        # A WAL setting changed by hand: the drift is recorded, and no re-validation of it is queued.
        try:
            _sql(marked.dsn(), "ALTER SYSTEM SET commit_delay = 7", "SELECT pg_reload_conf()")
            assert wait_for(lambda: any("setting:commit_delay" in e["changes"]
                                        for e in d.get("/v1/drift")[1]["events"]), 60), d.stderr()
            event = next(e for e in d.get("/v1/drift")[1]["events"] if "setting:commit_delay" in e["changes"])
            assert "commit_delay is left alone: its family wal is not among this target's families" in \
                event["action"], event
            runs = d.get("/v1/sessions?limit=100")[1]["runs"]
            assert [r["id"] for r in runs if r["kind"] == "revalidate"] == [queued["id"]], json.dumps(runs)
        finally:
            _sql(marked.dsn(), "ALTER SYSTEM RESET commit_delay", "SELECT pg_reload_conf()")
    finally:
        d.stop()
