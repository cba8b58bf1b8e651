"""``tuner diff`` across an 18 -> 19 upgrade: 19 has no io_workers, so the 18 session's value is read as 19's
self-sizing pool (io_min_workers, io_max_workers) and the diff says so."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tuner.knobs.successors import io_workers_pair, upgrade_note
from tuner.report.model import FamilyOutcome, Recommendation, Report, SessionOut, TargetOut
from tuner.emit.diff import diff, diff_text


def report(sid: str, version: int, *, workers: int | None = None, recommended: int | None = None) -> Report:
    recs = [] if recommended is None else [Recommendation(
        knob="io_workers", scope="system", object=None, current=workers, recommended=recommended,
        near_optimal=None, effect=None, decision="change", reason="measured", requires="reload")]
    settings = {} if workers is None else {"io_workers": [str(workers), "default"]}
    return Report(
        target=TargetOut(server_version_num=version, server_version=f"{version // 10000}", in_recovery=True,
                         system_identifier=sid, mode="hot_standby", dsn="host=staging", sandbox=False,
                         fingerprint={"system_identifier": sid, "server_version_num": version, "settings": settings}),
        session=SessionOut(id=sid, started_at=datetime(2026, 12, 6, tzinfo=UTC), duration_s=1.0, probes=0,
                           policy="default", seed=1, cache="cold", host="h", kernel="6.18"),
        families=[FamilyOutcome(family="concurrency", status="done", reason="ok")], recommendations=recs, trials=[])


@pytest.mark.parametrize(("workers", "pair"), [(1, (1, 8)), (3, (3, 8)), (16, (16, 16))])
def test_a_fixed_pool_reads_as_at_least_as_many_workers_never_capped_below_them(workers: int,
                                                                               pair: tuple[int, int]) -> None:
    assert io_workers_pair(workers) == {"io_min_workers": pair[0], "io_max_workers": pair[1]}


def test_diff_from_18_to_19_maps_the_recommended_io_workers_to_the_pool() -> None:
    d = diff(report("s18", 180006, workers=3, recommended=12), report("s19", 190000))
    assert "io_workers = 12 reads as io_min_workers = 12, io_max_workers = 12" in d["converted"]
    assert "note: io_workers of session s18 (PostgreSQL 18)" in diff_text(d)


def test_either_order_and_the_value_in_force_when_nothing_was_recommended() -> None:
    note = upgrade_note(report("s19", 190000), report("s18", 180006, workers=3))
    assert note is not None and "io_workers = 3 reads as io_min_workers = 3, io_max_workers = 8" in note


def test_no_note_between_sessions_on_the_same_side_of_19() -> None:
    assert upgrade_note(report("a", 180006, workers=3), report("b", 180007, workers=4)) is None
    assert diff(report("a", 190000), report("b", 190001))["converted"] is None
