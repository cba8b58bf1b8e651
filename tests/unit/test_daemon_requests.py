"""Issue 44, item 4: ``POST /v1/sessions`` runs only families the target allows, and equal requests are one run.
Pure checks of the request, then the daemon's own queue on a real SQLite store."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.unit.hostile import Input

import pytest

from tuner.settings.config_load import load_config
from tuner.daemon.service import Daemon
from tuner.daemon.session_request import allowed, parse
from tuner.errors import DaemonError

TARGETS = {"db": ("concurrency",), "all": ("concurrency", "readahead", "wal")}


def test_a_family_the_target_excludes_is_a_400_with_one_sentence() -> None:
    with pytest.raises(DaemonError) as err:
        parse({"target": "db", "families": ["readahead"]}, TARGETS)
    assert err.value.http_status == 400
    assert str(err.value) == "target db does not allow the family readahead"
    assert "concurrency" in (err.value.hint or "")


@pytest.mark.parametrize("families", [["concurrency", "concurrency"], ["concurrency"], []])
def test_requests_for_the_same_work_are_the_same_request(families: list[str]) -> None:
    assert parse({"target": "db", "families": families}, TARGETS) == parse({"target": "db"}, TARGETS)


def test_families_come_in_the_targets_order_without_repeats() -> None:
    req = parse({"target": "all", "families": ["wal", "concurrency", "wal"]}, TARGETS)
    assert req.families == ("concurrency", "wal") and req.kind == "reprobe"


def test_a_revalidation_names_no_families() -> None:
    assert parse({"target": "all", "kind": "revalidate", "families": ["wal"]}, TARGETS).families == ()


def test_a_queued_run_probes_only_what_the_target_still_allows() -> None:
    assert allowed(["readahead", "concurrency"], ("concurrency",), "db") == ("concurrency",)
    assert allowed([], ("concurrency", "wal"), "db") == ("concurrency", "wal")
    with pytest.raises(DaemonError, match="no longer allows"):
        allowed(["readahead"], ("concurrency",), "db")


def _daemon(tmp_path: Path) -> Daemon:
    cfg_file = tmp_path / "tuner.toml"
    cfg_file.write_text(f'[tuner]\nstate_dir = "{tmp_path / "state"}"\nfamilies = ["concurrency"]\n'
                        '[target]\ndsn = "host=/nonexistent dbname=x"\n')
    return Daemon(load_config(cfg_file, environ={}))


def test_the_daemon_refuses_an_excluded_family_and_queues_nothing(tmp_path: Path) -> None:
    d = _daemon(tmp_path)

    async def go() -> list[dict]:
        from tuner.report.validate import check
        from tuner.store import open_store

        with pytest.raises(DaemonError, match="does not allow the family readahead"):
            await d.queries.request_session({"families": ["readahead"]})
        with pytest.raises(DaemonError, match="does not allow the family readahead"):
            await d.queries.request_session({"families": ["concurrency", "readahead"]})
        async with open_store(d.cfg, check=check) as db:
            return await db.runs.find(d.owner, status=("queued",))

    assert asyncio.run(go()) == []


def test_the_daemon_queues_equal_requests_once(tmp_path: Path) -> None:
    d = _daemon(tmp_path)

    async def go() -> list[dict]:
        a = await d.queries.request_session({})
        b = await d.queries.request_session({"families": ["concurrency", "concurrency"]})
        assert b["already_queued"] and a["id"] == b["id"]
        return [a, b]

    first, second = asyncio.run(go())
    assert first["kind"] == second["kind"] == "session"


def test_a_scheduled_revalidation_is_not_queued_for_a_family_the_target_excludes(tmp_path: Path) -> None:
    """Issue 59, item 1: the store holds an accepted WAL change on a target that allows only concurrency; the
    weekly re-validation finds nothing it may re-validate and queues nothing (a real SQLite store)."""
    from tuner.emit.json import parse as parse_report
    from tuner.report.validate import check
    from tuner.store import open_store, target_id

    d = _daemon(tmp_path)
    fixture = Path(__file__).parent.parent / "fixtures" / "reports" / "sandbox-all-families.json"
    report = parse_report(fixture.read_text())
    effect = next(r.effect for r in report.recommendations if r.decision == "change")
    recs = [r.model_copy(update={"decision": "change", "effect": effect}) for r in report.recommendations
            if r.knob == "commit_delay"]
    made = datetime.now(UTC) - timedelta(days=30)  # longer ago than revalidate_every: one is due
    report = report.model_copy(update={"recommendations": recs,
                                       "session": report.session.model_copy(update={"started_at": made})})
    fingerprint = {"label": "db", "data_directory": "/srv/db"}

    async def go() -> list[dict]:
        async with open_store(d.cfg, check=check) as db:
            await db.sessions.save(report, fingerprint)
        d.state.targets["default"].store_id = target_id(report.target.system_identifier, "/srv/db", "db")
        assert await d.worker.pins(d.state.targets["default"], [])  # the WAL pin is there to be found
        await d.worker.revalidate("default")
        async with open_store(d.cfg, check=check) as db:
            return await db.runs.find(d.owner, status=("queued",))

    assert asyncio.run(go()) == []


# The hostile-input suite's registry (tests/unit/hostile.py): issue 59 item 1's input, counted once (the API's
# form of it, a POST {"kind": "revalidate"}, is tests/integration/test_daemon_families.py's).
INPUTS = [Input("revalidate-excluded-family", "store",
                "an accepted WAL change on a target whose families are ['concurrency'], re-validated on schedule",
                frozenset({"59.1"}))]


def test_a_run_shows_the_families_it_probes_not_an_empty_list(tmp_path: Path) -> None:
    d = _daemon(tmp_path)

    async def go() -> tuple[dict, dict]:
        answer = await d.queries.request_session({"families": ["concurrency"]})
        return answer, (await d.queries.sessions(10))["runs"][0]

    answer, listed = asyncio.run(go())
    assert answer["families"] == listed["families"] == ["concurrency"]
