"""Issue #56 item 4: what each query of a multi-query workload gains — its own times and paired interval from the
confirmation's pairs, by the same test as the workload's — and how every format shows it, with the statements
the workload left out."""

from __future__ import annotations

import asyncio
import io
import json
import math
import random
import re
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import pytest

from tuner.core import per_query
from tuner.core.decide import decide
from tuner.core.stats import SequentialTest, log_ratio
from tuner.daemon.service import Daemon
from tuner.families.readahead_sections import Combination, DeviceOut
from tuner.families.readahead_sections import Report as Devices
from tuner.emit import query_lines
from tuner.emit.html import to_html
from tuner.emit.json import parse, to_json
from tuner.emit.table import to_table
from tuner.emit.terminal import detect
from tuner.report import file as report_file
from tuner.report.model import LeftOutStatement, QueryEffect, Report, StatementOut, Trial
from tuner.report.validate import ReportError, check
from tuner.settings.config_load import load_config
from tuner.settings.policy import load_policy

from .test_store import make_report, save

EXAMPLE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "reports" / "example-report.json"
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _trial(arm: Literal["baseline", "candidate"], **query_ms: float) -> Trial:
    return Trial(config={}, value=sum(query_ms.values()), status="ok", phase="confirm", arm=arm, started_at=NOW,
                 duration_s=0.1, query_ms={k.replace("_", " "): v for k, v in query_ms.items()})


def test_each_query_gets_the_workloads_test_on_its_own_paired_ratios() -> None:
    rng = random.Random(7)
    pairs = []
    for _ in range(8):  # q1 twice as fast at the candidate, q2 unchanged; 3 % noise on each reading
        n = [math.exp(rng.gauss(0, 0.03)) for _ in range(4)]
        pairs.append((_trial("baseline", q1=200 * n[0], q2=50 * n[1]), _trial("candidate", q1=100 * n[2], q2=50 * n[3])))
    test = SequentialTest(min_pairs=4, max_pairs=8, alpha=0.05, min_effect=1.05)
    out = {q.name: q for q in per_query.effects(pairs, test, looks_done=2)}
    assert set(out) == {"q1", "q2"}
    q1, q2 = out["q1"], out["q2"]
    want = test.effect([log_ratio(b.query_ms["q1"], c.query_ms["q1"]) for b, c in pairs], 2)
    assert q1.improvement == round(want.improvement, 4) and q1.ci95 == (round(want.ci_low, 4), round(want.ci_high, 4))
    assert q1.decision_ci == (round(want.decision_low, 4), round(want.decision_high, 4)) and q1.n_pairs == 8
    assert q1.ci95[0] > 1.8 and q1.ci95[1] < 2.2  # the query that gained shows it
    assert q2.ci95[0] < 1.0 < q2.ci95[1]  # the one that did not, not
    assert 190 < q1.baseline_ms < 210 and 95 < q1.candidate_ms < 105
    assert abs(q1.time_share - 0.8) < 0.02 and abs(q1.time_share + q2.time_share - 1) < 1e-3


def test_one_query_or_a_query_with_a_zero_time_has_no_line_of_its_own() -> None:
    test = SequentialTest(min_pairs=2, max_pairs=4, alpha=0.05, min_effect=1.05)
    single = [(_trial("baseline", q1=10), _trial("candidate", q1=5))] * 2
    assert per_query.effects(single, test, looks_done=1) == []
    zero = [(_trial("baseline", q1=10, q2=0.0), _trial("candidate", q1=5, q2=1)),
            (_trial("baseline", q1=11, q2=1), _trial("candidate", q1=6, q2=1)),
            (_trial("baseline", q1=12, q2=1), _trial("candidate", q1=5, q2=1))]
    assert [q.name for q in per_query.effects(zero, test, looks_done=1)] == ["q1"]


def test_a_confirmation_pairs_each_querys_times_as_it_pairs_the_workloads() -> None:
    """Through decide(): the pairs the sequential test used (ABBA / BAAB, one failed probe retried) give the
    per-query lines, so a query's ratio is taken between the two probes the workload's was."""
    policy = load_policy("default")
    rng = random.Random(3)
    calls = {"n": 0}

    async def probe(config: dict[str, int], *, phase: str = "search", arm: str | None = None) -> Trial:
        calls["n"] += 1
        if calls["n"] == 3:  # one failure: retried, and not paired
            return Trial(config=config, value=None, status="failed", phase="confirm", arm=arm,  # type: ignore[arg-type]
                         started_at=NOW, duration_s=0.1, reason="boom")
        fast = config["k"] == 2
        q = {"scan a": (300 if not fast else 120) * math.exp(rng.gauss(0, 0.02)),
             "scan b": 100 * math.exp(rng.gauss(0, 0.02))}
        return Trial(config=config, value=sum(q.values()), status="ok", phase="confirm", arm=arm,  # type: ignore[arg-type]
                     started_at=NOW, duration_s=0.1, query_ms=q)

    decided = asyncio.run(decide({"k": 1}, {"k": 2}, probe, policy))  # type: ignore[arg-type]
    assert decided.effect is not None and decided.decision == "change"
    lines = {q.name: q for q in decided.effect.queries}
    assert lines["scan a"].n_pairs == decided.effect.n_pairs
    assert 2.3 < lines["scan a"].improvement < 2.7 and lines["scan a"].ci95[0] > 2.0
    assert lines["scan b"].ci95[0] < 1.0 < lines["scan b"].ci95[1]


def _with_queries() -> Report:
    """The example report with a confirmed effect that has per-query lines, the workload's identities (one from
    pg_stat_statements with its share of read I/O, one of the operator's own) and a statement left out."""
    report = report_file.read(EXAMPLE)
    rec = report.recommendations[0]
    assert rec.effect is not None
    effect = rec.effect.model_copy(update={"queries": [
        QueryEffect(name="statement 1", baseline_ms=812.4, candidate_ms=301.0, time_share=0.62, improvement=2.7,
                    ci95=(2.41, 3.02), decision_ci=(2.3, 3.1), n_pairs=16),
        QueryEffect(name="custom query 2", baseline_ms=498.0, candidate_ms=490.5, time_share=0.38, improvement=1.01,
                    ci95=(0.97, 1.05), decision_ci=(0.96, 1.06), n_pairs=16)]})
    families = [f.model_copy(update={"statements": [
        StatementOut(name="statement 1", queryid=-4242, text="SELECT count(*) FROM orders WHERE placed > $1",
                     share=0.55),
        StatementOut(name="custom query 2", text="SELECT sum(amount) FROM invoices WHERE due < now()")]})
        if f.family == "readahead" else f for f in report.families]
    return report.model_copy(update={
        "recommendations": [rec.model_copy(update={"effect": effect}), *report.recommendations[1:]],
        "families": families,
        "left_out": [LeftOutStatement(queryid=99, text="UPDATE orders SET state = $1", share=0.2, reason="it writes")]})


def test_the_table_has_a_line_per_query_with_its_interval_and_the_left_out_statements() -> None:
    text = re.sub(r"\n  (?=\S)", " ", to_table(_with_queries(), detect("never", io.StringIO(), {"COLUMNS": "200"})))
    assert "per query: read_ahead_kb" in text
    assert re.search(r"statement 1 \(queryid -4242\) SELECT count\(\*\) FROM orders WHERE placed > \$1 +│ 55% of "
                     r"read I/O +│ 812\.4 +│ 301\.0 +│ 2\.70x \[2\.41–3\.02\] +│ 16", text), text
    assert re.search(r"custom query 2 SELECT sum\(amount\).*│ 38% of time today +│ 498\.0 +│ 490\.5 +│ 1\.01x "
                     r"\[0\.97–1\.05\]", text)
    assert "left out: queryid 99 'UPDATE orders SET state = $1' (20% of read I/O): it writes" in text
    narrow = to_table(_with_queries(), detect("never", io.StringIO(), {"COLUMNS": "60"}))
    assert max(len(line) for line in narrow.splitlines()) <= 60
    assert "812.4 ms today, 301.0 ms at the recommendation, 2.70x" in re.sub(r"\n  (?=\S)", " ", narrow)


def test_the_json_report_carries_the_lines_and_reads_back() -> None:
    report = _with_queries()
    data = json.loads(to_json(report))
    [group] = data["per_query"]
    first = group["queries"][0]
    assert first["queryid"] == -4242 and first["share"] == 0.55 and first["share_of"] == "read I/O"
    assert first["ci95"] == [2.41, 3.02] and first["today_ms"] == 812.4 and first["recommended_ms"] == 301.0
    assert group["queries"][1]["share_of"] == "time today" and group["queries"][1]["share"] == 0.38
    assert data["left_out"][0]["reason"] == "it writes"
    assert data["left_out_lines"] == ["left out: queryid 99 'UPDATE orders SET state = $1' (20% of read I/O): "
                                      "it writes"]
    assert parse(to_json(report)) == report


def test_the_html_report_has_a_per_query_section_only_when_there_are_lines() -> None:
    page = to_html(_with_queries())
    assert '<section id="queries"><h2>Per query</h2>' in page
    assert "SELECT count(*) FROM orders WHERE placed &gt; $1" in page and "[2.41, 3.02]" in page
    assert "left out: queryid 99" in page
    assert 'id="queries"' not in to_html(report_file.read(EXAMPLE))


def test_the_daemons_recommendations_carry_the_per_query_lines_and_the_left_out(tmp_path: Path) -> None:
    """GET /v1/recommendations' backend over a real store (SQLite) holding a session whose effect has lines."""
    base = make_report("s1")
    rec = base.recommendations[0]
    assert rec.effect is not None
    effect = rec.effect.model_copy(update={"queries": [
        QueryEffect(name="q1", baseline_ms=80.0, candidate_ms=20.0, time_share=0.8, improvement=4.0, ci95=(3.5, 4.6),
                    decision_ci=(3.3, 4.8), n_pairs=6),
        QueryEffect(name="q2", baseline_ms=20.0, candidate_ms=19.0, time_share=0.2, improvement=1.05, ci95=(0.9, 1.2),
                    decision_ci=(0.85, 1.3), n_pairs=6)]})
    families = [base.families[0].model_copy(update={"statements": [
        StatementOut(name="q1", queryid=7, text="SELECT 1", share=0.7), StatementOut(name="q2", text="SELECT 2")]})]
    report = base.model_copy(update={
        "recommendations": [rec.model_copy(update={"effect": effect})], "families": families,
        "left_out": [LeftOutStatement(queryid=8, text="DELETE FROM t", share=0.1, reason="it writes")]})
    state = tmp_path / "state"
    state.mkdir()
    save(state / "tuner.db", report)
    cfg = tmp_path / "tuner.toml"
    cfg.write_text(f'[tuner]\nstate_dir = "{state}"\nfamilies = ["concurrency"]\n[target]\ndsn = "host=/nowhere"\n')
    d = Daemon(load_config(cfg, environ={}))
    with sqlite3.connect(state / "tuner.db") as con:
        [(sid,)] = con.execute("SELECT DISTINCT target_id FROM sessions").fetchall()
    con.close()
    for t in d.state.targets.values():
        t.store_id = sid
    served = asyncio.run(d.queries.recommendations(None))
    [target] = served["targets"]
    [group] = target["per_query"]
    assert [(q["name"], q["queryid"], q["share"], q["share_of"]) for q in group["queries"]] == [
        ("q1", 7, 0.7, "read I/O"), ("q2", None, 0.2, "time today")]
    assert group["queries"][0]["ci95"] == [3.5, 4.6] and group["title"].startswith("per query: effective_io_concurrency")
    assert target["left_out"] == [{"queryid": 8, "text": "DELETE FROM t", "share": 0.1, "reason": "it writes"}]
    assert target["recommendations"][0]["effect"]["queries"][0]["improvement"] == 4.0


def test_a_read_path_confirmed_as_one_has_its_own_group_before_the_knobs_shares() -> None:
    """The readahead family's combination (today's values against the pair it recommends) is what each query
    gains from the recommendation; a knob's share that carries the same effect is not repeated."""
    report = _with_queries()
    rec = report.recommendations[0]
    assert rec.effect is not None
    section = report.sections["readahead"]
    devices = [d.model_copy(update={"combination": Combination(
        today={"read_ahead_kb": 128, "effective_io_concurrency": 1},
        candidate={"read_ahead_kb": 512, "effective_io_concurrency": 64}, decision="change", reason="clear",
        effect=rec.effect)}) for d in section.devices]  # type: ignore[attr-defined]
    report = report.model_copy(update={"sections": {**report.sections,
                                                    "readahead": section.model_copy(update={"devices": devices})}})
    [group] = query_lines.groups(report)
    assert group.title == ("per query: read path on /dev/loop0: read_ahead_kb 128 -> 512, effective_io_concurrency "
                           "1 -> 64 (change)")
    assert [q.name for q in group.lines] == ["statement 1", "custom query 2"]
    assert parse(to_json(report)) == report  # the combination's lines travel in the devices' key


def test_a_report_whose_per_query_line_is_not_finite_is_refused() -> None:
    report = _with_queries()
    rec = report.recommendations[0]
    assert rec.effect is not None
    bad = rec.effect.queries[0].model_copy(update={"ci95": (1.0, math.inf)})
    effect = rec.effect.model_copy(update={"queries": [bad]})
    hostile = report.model_copy(update={"recommendations": [rec.model_copy(update={"effect": effect}),
                                                            *report.recommendations[1:]]})
    check(report)
    with pytest.raises(ReportError, match=r"recommendations\[0\]\.effect has a number that is not finite"):
        check(hostile)


def test_a_read_path_title_names_what_moved_and_at_what_the_rest_stayed() -> None:
    effect = _with_queries().recommendations[0].effect
    assert effect is not None
    section = Devices(devices=[DeviceOut(
        device="/dev/loop3", description="loop", roles=["data directory"], read_ahead_kb=128, status="probed",
        reason="", combination=Combination(today={"read_ahead_kb": 128, "effective_io_concurrency": 1},
                                           candidate={"read_ahead_kb": 128, "effective_io_concurrency": 32},
                                           decision="change", reason="clear", effect=effect))])
    [(title, _)] = section.confirmed()
    assert title == "per query: read path on /dev/loop3: effective_io_concurrency 1 -> 32 at read_ahead_kb 128 (change)"
