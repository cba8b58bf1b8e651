"""The replay family's pure logic: the stream's pages, the checks that reject a probe, the report's curve, when the
family does not apply, and the journal entries it writes on a hot standby. Real replay is in
tests/integration/test_replay.py."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import json

import pytest

from tuner.actuate import journal_check
from tuner.actuate.alter_system import settings
from tuner.families import REGISTRY
from tuner.families.base import Endpoint, FamilyContext
from tuner.knobs import catalog
from tuner.report.model import Trial
from tuner.settings.policy import load_policy
from tuner.probes.replayload import cold_problem, curve, stream_pages, wal_problem
from tuner.target.facts import Setting, TargetFacts

QUICK = Path(__file__).parent.parent / "fixtures" / "policies" / "good" / "replay_quick.toml"


def test_the_stream_is_the_same_for_a_seed_and_visits_distinct_pages_out_of_order() -> None:
    pages = stream_pages(20_000, 6000, seed=7)
    assert pages == stream_pages(20_000, 6000, seed=7)
    assert pages != stream_pages(20_000, 6000, seed=8)
    assert len(pages) == len(set(pages)) == 6000
    assert all(0 <= p < 19_999 for p in pages)  # never the last page, which may be partly filled
    assert pages != sorted(pages)  # in page order, kernel readahead would serve the stream without prefetching


def test_a_stream_asks_for_no_more_pages_than_the_table_has() -> None:
    assert sorted(stream_pages(101, 500, seed=1)) == list(range(100))
    assert stream_pages(1, 10, seed=1) == [] and stream_pages(0, 10, seed=1) == []


def test_a_stream_with_full_page_images_is_rejected() -> None:
    assert wal_problem(6000 * 140, 6000) is None  # one HOT update record per page
    problem = wal_problem(6000 * 8300, 6000)
    assert problem and "full-page images" in problem and "8300 bytes" in problem
    assert wal_problem(0, 6000) == "the stream wrote no WAL"


def test_a_catch_up_that_read_too_little_from_disk_is_rejected() -> None:
    block = 8192
    assert cold_problem(None, 6000, block, 0.9) is None  # no counter: nothing says otherwise
    assert cold_problem(6000 * block + 10**6, 6000, block, 0.9) is None  # the WAL is read too
    assert cold_problem(int(0.95 * 6000 * block), 6000, block, 0.9) is None
    assert cold_problem(int(0.07 * 6000 * block), 6000, block, 0.9) == (
        "only 7% of the stream's pages came from disk (cache not cold)")


def _trial(value: int, mb_per_s: float, status: str = "ok") -> Trial:
    return Trial(config={"maintenance_io_concurrency": value}, value=100.0 if status == "ok" else None,
                 status=status, phase="search", started_at=datetime.now(UTC), duration_s=1.0,  # type: ignore[arg-type]
                 metrics={"mb_per_s": mb_per_s, "pages_per_s": mb_per_s * 1000})


def test_the_curve_has_the_median_rate_of_the_ok_probes_at_each_value() -> None:
    points = curve([_trial(10, 1.0), _trial(10, 3.0), _trial(10, 2.0), _trial(256, 5.0), _trial(0, 9.0, "rejected")])
    assert [(p.maintenance_io_concurrency, p.mb_per_s, p.pages_per_s, p.n) for p in points] == [
        (10, 2.0, 2000.0, 3), (256, 5.0, 5000.0, 1)]


def test_the_replay_policy_table_has_documented_defaults() -> None:
    rp = load_policy("default").section("replay")
    assert (rp.pages, rp.table_shared_buffers, rp.filler_shared_buffers) == (8000, 2.0, 3.0)
    quick = load_policy(str(QUICK))
    assert quick.section("replay").pages == 6000 and "maintenance_io_concurrency" in quick.search


def test_maintenance_io_concurrency_belongs_to_the_replay_family_and_may_be_journaled() -> None:
    assert catalog.load().spec("maintenance_io_concurrency", 150018).family == "replay"  # type: ignore[union-attr]
    assert "maintenance_io_concurrency" in settings() and "wal_writer_delay" in settings()
    assert "replay" in REGISTRY.names()


def _entry(kind: str = "alter_system", **extra: Any) -> dict[str, Any]:
    return {"kind": kind, "name": "maintenance_io_concurrency", "original": None, "device": "PostgreSQL 1 port 2",
            "dsn": "host=/nonexistent port=2", "system_identifier": "1", "port": 2, "sandbox_dir": None, **extra}


@pytest.mark.parametrize(("change", "problem"), [
    (_entry(standby=True), None),
    (_entry(original="64"), None),
    (_entry("replay_pause", name="wal_replay", standby=True), None),
    (_entry(standby="yes"), "standby 'yes' is not true or false"),
    (_entry("replay_pause", name="wal_replay"), "not a hot standby's paused wal_replay"),
    (_entry("replay_pause", name="wal_replay", standby=True, original="paused"), "not a hot standby's paused"),
    (_entry("replay_pause", standby=True), "names 'maintenance_io_concurrency'"),
    (_entry(name="recovery_prefetch", standby=True), "setting 'recovery_prefetch' is not one tuner changes"),
], ids=["standby-line", "clone-line", "pause", "standby-type", "pause-not-on-standby", "pause-original",
        "pause-name", "not-a-replay-setting"])
def test_what_the_replay_family_journals_passes_the_journal_checks_and_nothing_else(
        change: dict[str, Any], problem: str | None) -> None:
    found = journal_check.entry_problem(change, Path("/sys"))
    assert (found is None) if problem is None else (found is not None and problem in found), found


def _facts(**kw: Any) -> TargetFacts:
    base: dict[str, Any] = {
        "server_version_num": 150018, "server_version": "15.18", "in_recovery": True, "database": "postgres",
        "user": "postgres", "is_superuser": True, "can_read_all_settings": True, "data_directory": "/nonexistent",
        "system_identifier": "42", "staging_marker": None, "marker_source": None, "server_addr": None,
        "tablespaces": (),
        "settings": {"maintenance_io_concurrency": Setting(
            name="maintenance_io_concurrency", setting="10", unit=None, context="user", vartype="integer",
            min_val="0", max_val="1000", boot_val="10", reset_val="10", source="default", pending_restart=False)}}
    return TargetFacts(**{**base, **kw})


def _ctx(target: TargetFacts, primary: TargetFacts | None, policy: str = str(QUICK)) -> FamilyContext:
    return FamilyContext(cfg=None, policy=load_policy(policy), target=Endpoint("standby", None, target),  # type: ignore[arg-type]
                         writable=None if primary is None else Endpoint("primary", None, primary),
                         journal=None, progress=None, budget=None)  # type: ignore[arg-type]


@pytest.mark.parametrize(("target", "primary", "policy", "reason"), [
    (_facts(in_recovery=False), _facts(in_recovery=False), str(QUICK), "the target is not a hot standby"),
    (_facts(server_version_num=140010, server_version="14.10"), _facts(in_recovery=False), str(QUICK),
     "PostgreSQL 14.10 has no recovery prefetch"),
    (_facts(), _facts(in_recovery=False), str(QUICK.parent / "minimal.toml"),
     "the policy does not search maintenance_io_concurrency"),
    (_facts(), _facts(in_recovery=False, system_identifier="7"), str(QUICK),
     "no writable primary of this standby is available"),
    (_facts(), None, str(QUICK), "no writable primary of this standby is available"),
    (_facts(is_superuser=False), _facts(in_recovery=False), str(QUICK), "it needs a superuser on the standby"),
    (_facts(), _facts(in_recovery=False), str(QUICK), "tuner is not running on the standby's host"),
], ids=["not-a-standby", "pg14", "not-searched", "another-primary", "no-primary", "not-superuser", "not-local"])
def test_the_family_says_in_one_sentence_why_it_does_not_apply(
        target: TargetFacts, primary: TargetFacts | None, policy: str, reason: str) -> None:
    why = REGISTRY.get("replay").applicable(_ctx(target, primary, policy))
    assert why is not None and why.startswith(reason) and "\n" not in why, why


def test_the_terminal_report_gives_the_replay_rate_today_and_recommended() -> None:
    from tuner.emit import json as json_emit
    from tuner.emit.table import to_table
    from tuner.families import replay_sections
    from tuner.families.replay_sections import ReplayOut
    from tuner.probes.replayload import ReplayPointOut

    fixture = Path(__file__).parent.parent / "fixtures" / "reports" / "sandbox-all-families.json"
    report = json_emit.parse(fixture.read_text())
    assert "replay:" not in to_table(report)
    section = ReplayOut(maintenance_io_concurrency_current=10, maintenance_io_concurrency_recommended=256,
                        mb_per_s_current=1.866, mb_per_s_recommended=4.41, wal_mb=0.818, pages=6000, table_mb=169.5,
                        recovery_prefetch="try", method="m",
                        curve=[ReplayPointOut(maintenance_io_concurrency=10, mb_per_s=1.866, pages_per_s=13680, n=5)])
    with_replay = report.model_copy(update={"sections": {**report.sections,
                                                         "replay": replay_sections.Report(replay=section)}})
    text = " ".join(to_table(with_replay).split())
    assert ("replay: 1.87 MB/s of WAL at maintenance_io_concurrency = 10 today, 4.41 MB/s at 256 (recommended); "
            "6000 random pages per 0.82 MB stream; recovery_prefetch = try") in text
    rendered = json_emit.JsonReport().render(with_replay)
    back = json_emit.parse(next(iter(rendered.values())))
    assert back.section("replay").replay == section  # type: ignore[union-attr]  # the JSON report carries it, and back
    assert json.loads(next(iter(rendered.values())))["replay"]["pages"] == 6000  # as a top-level key
