"""examples/prometheus-rules.yml and examples/grafana-dashboard.json: the rules pass ``promtool check rules`` and
their own ``promtool test rules`` (each alert fires on the series that should fire it, and only then), and every
metric either file queries is one the daemon's registry exports. (tests/integration/test_daemon_page.py holds them
to a real daemon's /metrics as well.)"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.prometheus import DASHBOARD, RULES, dashboard_exprs, metric_names, rule_exprs, unknown
from tuner.daemon.metrics import Metrics

RULES_TEST = Path(__file__).resolve().parents[1] / "fixtures" / "prometheus" / "tuner-rules.test.yml"
needs_promtool = pytest.mark.skipif(shutil.which("promtool") is None,
                                    reason="promtool is not installed (Debian: apt-get install prometheus; "
                                           "scripts/setup installs it as root)")


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=120)


@needs_promtool
def test_promtool_check_rules_passes_on_the_shipped_rules() -> None:
    proc = _promtool("check", "rules", str(RULES))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(rule_exprs())} rules found" in proc.stdout


@needs_promtool
def test_promtool_check_rules_would_catch_a_broken_rule(tmp_path: Path) -> None:
    broken = tmp_path / "rules.yml"
    broken.write_text(RULES.read_text().replace("expr: tuner_last_restore_successful == 0",
                                                "expr: tuner_last_restore_successful ==== 0"))
    assert _promtool("check", "rules", str(broken)).returncode != 0


@needs_promtool
def test_each_alert_fires_on_its_series_and_not_on_healthy_ones() -> None:
    proc = _promtool("test", "rules", str(RULES_TEST))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_metric_the_rules_and_the_dashboard_query_is_one_the_daemon_exports() -> None:
    m = Metrics()
    m.target("default")
    exprs = rule_exprs() + dashboard_exprs()
    assert len(exprs) >= 20
    assert unknown(m.render().decode(), exprs) == set()


def test_the_metric_check_catches_a_name_the_daemon_does_not_export() -> None:
    text = Metrics().render().decode()
    assert unknown(text, ["increase(tuner_sessions_failed_total[1h]) > 0"]) == {"tuner_sessions_failed_total"}
    assert unknown(text, ['sum by (target) (rate(tuner_probes_total{target=~"$target"}[5m])) > bool 1e3']) == set()
    assert metric_names('label_values(tuner_session_running{instance=~"$instance"}, target)') == \
        {"tuner_session_running"}


def test_the_dashboard_is_importable_grafana_json() -> None:
    doc = json.loads(DASHBOARD.read_text())
    assert doc["uid"] and doc["title"] and isinstance(doc["schemaVersion"], int)
    panels = doc["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    variables = {v["name"] for v in doc["templating"]["list"]}
    assert {"datasource", "instance", "target"} <= variables
    for p in panels:
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        assert {"x", "y", "w", "h"} <= set(p["gridPos"]) and p["gridPos"]["x"] + p["gridPos"]["w"] <= 24
        assert p["targets"] and all(t["expr"] for t in p["targets"]), p["title"]
    # Panels do not overlap on Grafana's 24-column grid.
    cells = [(p["title"], x, y) for p in panels for x in range(p["gridPos"]["x"], p["gridPos"]["x"] + p["gridPos"]["w"])
             for y in range(p["gridPos"]["y"], p["gridPos"]["y"] + p["gridPos"]["h"])]
    assert len({(x, y) for _, x, y in cells}) == len(cells)
