"""benchmarks/devices_score.py: the truth from a sweep and the scores against it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import devices_score as sc  # noqa: E402

# A latency-bound shape: slow at 0-2, fast and flat from 64 on, 256 a hair behind.
SAMPLES = {0: [300.0, 310.0], 1: [350.0, 340.0], 2: [200.0, 210.0], 4: [90.0, 80.0], 8: [50.0, 55.0],
           16: [30.0, 31.0], 32: [20.0, 21.0], 64: [17.0, 17.4], 128: [16.0, 16.2], 256: [16.5, 16.9],
           512: [18.0, 18.0], 1000: [19.0, 19.4]}


def test_the_truth_set_is_every_value_within_min_effect_of_the_best() -> None:
    t = sc.truth(SAMPLES, 1.05)
    assert t["best"] == 128 and t["best_ms"] == pytest.approx(16.1)
    assert t["truth_set"] == [128, 256]  # 16.7 is within 5 % of 16.1 (16.905); 64's 17.2 is not
    lo, hi = t["cells"][128]["ci95_ms"]
    assert lo < 16.1 < hi
    # Two repeats make wide intervals: every value whose interval reaches 16.905 is one the sweep cannot rule out.
    assert t["plausible_set"] == [v for v, c in t["cells"].items() if c["ci95_ms"][0] <= 16.905]
    assert {64, 128, 256} <= set(t["plausible_set"]) and 1 not in t["plausible_set"]


def test_an_answer_off_the_grid_is_interpolated_on_log2_1_plus_eic() -> None:
    t = sc.truth(SAMPLES, 1.05)
    # 90 lies between 64 and 128: log2(91) is 0.5 of the way from log2(65) to log2(129), within rounding.
    assert sc.true_ms(t, 90) == pytest.approx(17.2 + (16.1 - 17.2) * 0.49, abs=0.02)
    assert sc.score(t, 1)["regret"] == pytest.approx(345.0 / 16.1 - 1, abs=1e-3)
    assert sc.score(t, 1)["hit"] is False and sc.score(t, 200)["hit"] is True


def test_the_rules_follow_their_sources() -> None:
    assert sc.storage_type("hdd") == "hdd" and sc.PGTUNE_BY_STORAGE["hdd"] == 2
    assert sc.storage_type("latency=1ms,iops=3000") == "san" and sc.PGTUNE_BY_STORAGE["san"] == 300
    assert sc.storage_type("ram") == "nvme" and sc.storage_type("local") == "ssd"


def test_peers_are_scored_reproducibly_and_searching_ones_over_many_draws() -> None:
    t = sc.truth(SAMPLES, 1.05)
    a = sc.peers(t, SAMPLES, profile="latency=1ms", default=1, budget=6, draws=5)
    b = sc.peers(t, SAMPLES, profile="latency=1ms", default=1, budget=6, draws=5)
    assert a == b
    assert a["postgresql_default"]["hit"] is False and a["folklore_256"]["hit"] is True
    assert a["optuna_tpe"]["runs"] == 5 and 0 <= a["optuna_tpe"]["hit"] <= 1
    assert a["seeds_method"]["probes"] == len(SAMPLES) and a["random_search"]["probes"] == 6
