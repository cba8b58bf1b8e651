"""Where a pre-13 effective_io_concurrency meets a 13+ one, it is converted as PostgreSQL 13 did (a number of
spindles becomes a prefetch distance: round(Σ old/n), at most 1000).

The one place tuner compares sessions of different servers is ``tuner diff``. Warm starts never meet a pre-13
value on a 13+ server: they match the same system identifier (pg_upgrade gives the new cluster a new one, checked
with 15 → 18 on this machine) or the same PostgreSQL major.
"""

from __future__ import annotations

from datetime import UTC, datetime

from tuner.report.model import EffectOut, FamilyOutcome, Recommendation, Report, SessionOut, TargetOut
from tuner.emit.diff import diff, diff_text

EIC = "effective_io_concurrency"


def report(sid: str, version: int, *, current: int, recommended: int, near: tuple[int, int], setting: str) -> Report:
    rec = Recommendation(
        knob=EIC, scope="system", object=None, current=current, recommended=recommended, near_optimal=near,
        decision="change", reason="measured", requires="reload",
        effect=EffectOut(metric="execution_time_ms", improvement=2.0, ci95=(1.8, 2.2), decision_ci=(1.7, 2.3),
                         n_pairs=6, p_value=0.001, looks=1, method="t"))
    return Report(
        target=TargetOut(server_version_num=version, server_version=f"{version // 10000}.4", in_recovery=True,
                         system_identifier=sid, mode="hot_standby", dsn="host=staging", sandbox=False,
                         fingerprint={"system_identifier": sid, "server_version_num": version,
                                      "settings": {EIC: [setting, "configuration file"]}}),
        session=SessionOut(id=sid, started_at=datetime(2026, 1, 1, tzinfo=UTC), duration_s=1.0, probes=0,
                           policy="default", seed=1, cache="cold", host="h", kernel="6.18"),
        families=[FamilyOutcome(family="concurrency", status="done", reason="ok")],
        recommendations=[rec], trials=[])


def test_diff_reads_a_pre13_session_in_13_terms() -> None:
    # PostgreSQL 12 recommended 4 spindles (near-optimal 3..8) with 2 in force; 15 recommends 8, has 3 in force.
    old = report("aaaa00000012", 120010, current=2, recommended=4, near=(3, 8), setting="2")
    new = report("bbbb00000015", 150018, current=3, recommended=8, near=(6, 22), setting="3")
    d = diff(old, new)
    [e] = d["decisions"]
    assert e["before"]["current"] == 3 and e["before"]["recommended"] == 8  # 2 -> 3, 4 -> 8: the same settings
    assert e["before"]["near_optimal"] == [6, 22]
    assert e["change"] is None  # the same decision, once both speak of the same thing
    assert d["settings"] == []  # 2 spindles on 12 is what 3 is on 15
    assert "aaaa00000012" in d["converted"] and "spindles" in d["converted"]
    assert "note: effective_io_concurrency of session aaaa00000012" in diff_text(d)
    # The other way round converts the same side, and a big spindle count is clamped as 13 clamps it.
    back = diff(new, report("aaaa00000012", 120010, current=2, recommended=200, near=(175, 256), setting="2"))
    assert back["decisions"][0]["after"]["recommended"] == 1000 and back["decisions"][0]["after"]["near_optimal"] == [
        1000, 1000]


def test_sessions_on_the_same_side_of_13_are_not_converted() -> None:
    a = report("aaaa00000015", 150018, current=1, recommended=16, near=(8, 64), setting="1")
    b = report("bbbb00000018", 180006, current=16, recommended=16, near=(8, 64), setting="16")
    d = diff(a, b)
    assert d["converted"] is None and d["decisions"][0]["before"]["current"] == 1
    assert d["settings"] == [{"setting": EIC, "before": ["1", "configuration file"],
                              "after": ["16", "configuration file"]}]
