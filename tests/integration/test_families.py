"""The family seam with real probes: a fourth family registered from its own module runs through the same
orchestrator as the shipped ones, on a real hot standby."""

from __future__ import annotations

import json
from pathlib import Path

from tuner.settings.config import Config
from tuner.emit import sql
from tuner.families import REGISTRY
from tuner.emit.json import parse, to_json
from tuner.emit.table import to_table
from tuner.settings.policy import SHIPPED_POLICY_DIR, load_policy
from tuner.session.runner import recommend

from .conftest import Running
from .toy_family import Toy


def test_a_registered_fourth_family_runs_through_the_orchestrator(sandbox15: Running, tmp_path: Path) -> None:
    cfg = Config.model_validate({"target": {"dsn": sandbox15.sandbox.dsn("standby")},
                                 "tuner": {"state_dir": str(tmp_path / "state")}})
    policy_file = tmp_path / "toy.toml"  # the shipped default with the toy's own table
    policy_file.write_text((SHIPPED_POLICY_DIR / "default.toml").read_text() + "\n[toy]\nrows = 200000\n")
    REGISTRY.register(Toy)  # the one registry line a new family needs
    try:
        report = sandbox15.run(recommend(cfg, load_policy(str(policy_file)), use_sandbox=False, families=("toy",),
                                         budget=5))
        # Its report section: a top-level key of the JSON report, read back, and a line of the terminal table.
        text = to_json(report)
        assert json.loads(text)["toy_rows_sorted"] == 200000
        assert parse(text).section("toy") == report.section("toy") is not None
        assert "toy: sorted 200000 rows per probe" in to_table(report)
    finally:
        REGISTRY.unregister("toy")
    assert [(f.family, f.status) for f in report.families] == [("toy", "done")]
    assert report.target.mode == "hot_standby"
    [rec] = report.recommendations
    assert rec.knob == "work_mem" and rec.scope == "system" and rec.source == "default"
    assert rec.decision in ("change", "keep")
    # Real probes: every value measured, the search's own plus the paired confirmation (when it ran).
    assert len(report.trials) >= 5 and all(t.status == "ok" and t.value and t.value > 0 for t in report.trials)
    assert report.session.probes == len(report.trials)
    if rec.recommended != rec.current:
        assert rec.effect is not None or rec.reason.startswith("confirmation could not finish")
        assert {t.arm for t in report.trials if t.phase == "confirm"} == {"baseline", "candidate"}
    rendered = sql.render(report)
    if rec.decision == "change":
        assert f"ALTER SYSTEM SET work_mem = {rec.recommended};" in rendered
    else:
        assert "keep what you have" in rendered


def test_a_family_whose_needs_are_not_met_is_skipped_with_the_reason(sandbox15: Running, tmp_path: Path) -> None:
    cfg = Config.model_validate({"target": {"dsn": sandbox15.sandbox.dsn("standby")},
                                 "tuner": {"state_dir": str(tmp_path / "state")}})
    report = sandbox15.run(recommend(cfg, load_policy("default"), use_sandbox=False, families=("wal",)))
    [fam] = report.families
    assert fam.family == "wal" and fam.status == "skipped" and "hot standby" in fam.reason, fam
    assert report.trials == [] and report.recommendations == []
