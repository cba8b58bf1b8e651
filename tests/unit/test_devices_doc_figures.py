"""Figures docs/devices.md and docs/results.md quote about the device truths, recomputed from the committed
measurements (benchmarks/measured/devices/) with the benchmark's own scoring — pure, no Optuna: a re-scored or
re-measured file that changes one of them fails here until the pages are corrected."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
MEASURED = ROOT / "benchmarks" / "measured" / "devices"
sys.path.insert(0, str(ROOT / "benchmarks"))

import devices_score as sc  # noqa: E402

FLAT = ("iops-3000", "iops-300", "hdd")


def _cold(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A 1-D file's truth and its cold sessions scored as devices.py scores them (a keep is today's value)."""
    m = json.loads(path.read_text())
    samples = {int(k): v for k, v in m["truth_sweep"]["samples"].items()}
    t = sc.truth(samples, m["truth_sweep"]["min_effect"])
    sessions = [s for s in m["sessions"] if "error" not in s and not s.get("warm")]
    return t, [sc.score(t, sc.applied(s, s["current"])) for s in sessions]


def _one_d(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.json") if p.name.count(".") == 1 and not p.name.startswith(("summary", "plateau")))


def test_the_first_measurement_scores_11_of_21_as_today_s_code_scores_it() -> None:
    scored = [s for p in _one_d(MEASURED / "loaded-ra2560") for s in _cold(p)[1]]
    assert len(scored) == 21 and sum(s["hit"] for s in scored) == 11
    assert "11/21" in (ROOT / "docs" / "devices.md").read_text() and "11/21" in (ROOT / "docs" / "results.md").read_text()


def test_256_leads_tuner_on_ram_and_local_not_on_the_flat_profiles() -> None:
    tuner, fixed = {}, {}
    for p in _one_d(MEASURED):
        t, scored = _cold(p)
        tuner[p.stem] = statistics.fmean(s["regret"] for s in scored)
        fixed[p.stem] = sc.score(t, sc.FOLKLORE)["regret"]
    assert len(tuner) == 7
    assert sum(tuner[k] for k in FLAT) == pytest.approx(0.073, abs=0.001)
    assert sum(fixed[k] for k in FLAT) == pytest.approx(0.073, abs=0.001)
    assert tuner["ram"] + tuner["local"] == pytest.approx(0.148, abs=0.001)
    assert fixed["ram"] + fixed["local"] == pytest.approx(0.021, abs=0.001)
    assert "0.073" in (ROOT / "docs" / "devices.md").read_text()


def test_an_answer_beyond_2048_kib_is_scored_with_the_2048_cell_not_measured() -> None:
    m = json.loads((MEASURED / "latency-1ms.2d.json").read_text())
    t = sc.truth2d(m["truth_sweep"]["samples"], m["truth_sweep"]["min_effect"])
    assert max(t["axes"]["read_ahead_kb"]) == 2048 and t["best"] == "2048,64"
    assert sc.score2d(t, 8192, 64) == {**sc.score2d(t, 2048, 64), "answer": [8192, 64]}


def test_the_second_measurement_s_load_reached_9_5_around_latency_1ms() -> None:
    loads = {p.stem: [x for s in [json.loads(p.read_text())["truth_sweep"], *json.loads(p.read_text())["sessions"]]
                      for x in s["load"]] for p in _one_d(MEASURED)}
    assert max(loads["latency-1ms"]) == pytest.approx(9.48) and max(loads["mbps-125"]) == pytest.approx(9.48)
    assert max(x for k, v in loads.items() if k not in ("latency-1ms", "mbps-125") for x in v) < 3.7
