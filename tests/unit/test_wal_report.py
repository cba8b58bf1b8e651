"""Issue #47 item 7: the WAL family's scaling runs in the report — a phase of their own, never a search point or
evidence, drawn in their own figure as the single readings they are; older reports read the same way."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tuner.emit import evidence
from tuner.emit import html as h
from tuner.emit.json import parse
from tuner.families import wal_figures, wal_legacy
from tuner.families.wal_sections import Report as WalSection
from tuner.families.wal_sections import WalScalingOut
from tuner.report.model import EffectOut, FamilyOutcome, Recommendation, Report, SessionOut, TargetOut, Trial

FIXTURE = Path(__file__).parent.parent / "fixtures" / "reports" / "sandbox-all-families.json"
T0 = datetime(2026, 12, 2, 12, 0, 0, tzinfo=UTC)
TODAY = {"commit_delay": 0, "wal_writer_delay": 200}
POINTS = [(1, 10), (8, 10), (1, 1000), (8, 1000)]


def _t(cfg: dict[str, int | str], ms: float, *, phase: str = "search", arm: str | None = None, clients: int = 8,
       rows: int = 10, i: int = 0) -> Trial:
    return Trial(config=cfg, value=ms, status="ok", phase=phase, arm=arm, family="wal",  # type: ignore[arg-type]
                 started_at=T0 + timedelta(seconds=i), duration_s=2.6,
                 metrics={"tps": 1000.0 / ms, "clients": float(clients), "rows_per_tx": float(rows)})


def _report(*, scaling_phase: str = "scaling", per_point: int = 1, decision: str = "keep",
            confirm_tps: tuple[float, ...] = (7000.0, 8000.0, 9000.0, 8000.0)) -> Report:
    """A WAL session: a search at 8 clients x 10 rows, a confirmation, then the scaling curve (stored under
    ``scaling_phase``: "search" is how reports before issue #47 stored it)."""
    search = [_t({"commit_delay": cd, "wal_writer_delay": wd}, ms, i=i) for i, (cd, wd, ms) in enumerate(
        [(0, 200, 0.13), (100, 200, 0.14), (1000, 200, 0.23), (0, 4096, 0.12), (0, 10, 0.13)])]
    cand = {"commit_delay": 0, "wal_writer_delay": 4096}
    confirm = [_t(TODAY if n % 2 == 0 else cand, 1000.0 / tps, phase="confirm",
                  arm="baseline" if n % 2 == 0 else "candidate", i=20 + n)
               for n, tps in enumerate(x for v in confirm_tps for x in (v, v))]
    ms = {(1, 10): 0.37, (8, 10): 0.11, (1, 1000): 1.24, (8, 1000): 0.6}
    scaling = [_t(TODAY, ms[p], phase=scaling_phase, clients=p[0], rows=p[1], i=40 + k)
               for k, p in enumerate(p for p in POINTS for _ in range(per_point))]
    effect = EffectOut(metric="ms_per_transaction", improvement=1.03, ci95=(0.98, 1.07), decision_ci=(0.97, 1.08),
                       n_pairs=len(confirm_tps), p_value=0.3, looks=1, method="t")
    rec = Recommendation(knob="wal_writer_delay", scope="system", object=None, current=200, recommended=4096,
                         near_optimal=None, decision=decision, reason="measured", effect=effect,  # type: ignore[arg-type]
                         requires="reload")
    return Report(
        target=TargetOut(server_version_num=150018, server_version="15.18", in_recovery=False, system_identifier="7",
                         mode="writable_clone", dsn="sandbox (removed)", sandbox=True),
        session=SessionOut(id="abc123def456", started_at=T0, duration_s=60.0, probes=0, policy="default", seed=1,
                           cache="cold", host="h", kernel="6.18"),
        families=[FamilyOutcome(family="wal", status="done", reason="ok")], recommendations=[rec],
        trials=[*search, *confirm, *scaling],
        wal_scaling=[WalScalingOut(clients=c, rows_per_tx=r, tps_current=1000.0 / ms[(c, r)],
                                   tps_recommended=(1000.0 / ms[(c, r)] if per_point == 2 else None),
                                   reading_s=2.0) for c, r in POINTS])


def _search_section(page: str) -> str:
    m = re.search(r'<section id="search">(.*?)</section>', page, flags=re.S)
    assert m
    return m.group(1)


def test_scaling_runs_are_neither_search_points_nor_evidence() -> None:
    rep = _report()
    confs = evidence.confirmations(rep.trials)
    groups = evidence.searches(rep, confs)
    assert [len(g.trials) for g in groups] == [5]
    assert sum(len(c.trials) for c in confs) == 8
    search = _search_section(h.to_html(rep))
    assert search.count('class="pt search"') == 5 and "· 5 probes" in search
    assert "median of" not in search  # today's setting is its one search probe, not a median over other loads


def test_an_older_report_s_scaling_runs_are_read_as_scaling_runs() -> None:
    for per_point in (1, 2):
        old, new = _report(scaling_phase="search", per_point=per_point), _report(per_point=per_point)
        assert [t.phase for t in wal_legacy.upgrade_report(old).trials] == [t.phase for t in new.trials]
        assert h.to_html(old) == h.to_html(new)


def test_a_tail_that_is_not_the_curve_is_left_as_it_was_stored() -> None:
    old = _report(scaling_phase="search")
    last = old.trials[-1]
    moved = last.model_copy(update={"metrics": {**last.metrics, "clients": 4.0}})  # not the curve's last point
    odd = old.model_copy(update={"trials": [*old.trials[:-1], moved]})
    assert wal_legacy.scaling_tail(odd) == [] and wal_legacy.upgrade_report(odd) is odd
    assert wal_legacy.scaling_tail(_report()) == []  # already in their own phase
    assert wal_legacy.scaling_tail(Report.model_validate({**old.model_dump(mode="json"), "wal_scaling": []})) == []


def test_the_stored_fixture_s_ten_scaling_runs_are_found() -> None:
    rep = parse(FIXTURE.read_text())
    wal = [i for i, t in enumerate(rep.trials) if t.family == "wal"]
    assert wal_legacy.scaling_tail(rep) == wal[-10:]
    assert [rep.trials[i].metrics["clients"] for i in wal[-10:]] == [1, 2, 4, 8, 16] * 2
    # the report as stored is untouched: JSON out is what came in
    assert {t.phase for t in rep.trials} == {"search", "confirm"}


def test_an_old_scaling_point_parses_as_one_reading_of_unknown_length() -> None:
    rep = parse(FIXTURE.read_text())
    assert {(s.readings, s.reading_s) for s in WalSection.of(rep, "wal").wal_scaling} == {(1, None)}


def test_single_readings_are_drawn_hollow_and_said_so() -> None:
    page = h.to_html(_report())
    (fig,) = re.findall(r'<svg[^>]*data-figure="wal-scaling".*?</svg>', page, flags=re.S)
    points = re.findall(r'<circle[^>]*class="pt wal"[^>]*>', fig)
    assert len(points) == len(POINTS)
    assert all('fill="#ffffff"' in p and 'data-readings="1"' in p for p in points)
    assert "one 2-second reading per point" in fig and "(one reading each)" in fig
    assert "Each point is one 2-second reading, not repeated" in page


def test_the_caption_gives_the_spread_the_confirmation_measured() -> None:
    # today's setting read 4 times in the confirmation: 7000, 8000, 9000, 8000 TPS -> sd 816.5, mean 8000
    n, cv, lo, hi, load = wal_figures.repeat_spread(_report())  # type: ignore[misc]
    assert (n, round(cv, 4), lo, hi, load) == (4, 0.1021, 7000.0, 9000.0, "8 clients x 10 rows")
    page = h.to_html(_report())
    assert "4 repeated readings of one setting in the confirmation (8 clients x 10 rows per transaction) " \
           "varied by 10% (coefficient of variation; 7000–9000 TPS)" in page
    assert wal_figures.repeat_spread(_report(confirm_tps=(8000.0, 8100.0))) is None


def test_the_wal_figures_are_folded_unless_a_wal_setting_changes() -> None:
    for decision, opened in (("keep", False), ("change", True)):
        page = h.to_html(_report(decision=decision))
        m = re.search(r'<section id="wal">.*?<details( open)?><summary>throughput and waits', page, flags=re.S)
        assert m and bool(m.group(1)) == opened
