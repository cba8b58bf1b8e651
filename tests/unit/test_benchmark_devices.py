"""benchmarks/devices_score.py: the truth from a sweep and the scores against it."""

from __future__ import annotations

import math
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


# A 2-D surface: readahead 0 slow everywhere, eic helping at every readahead, the best at (512, 64).
GRID2D = {f"{r},{e}": [base * f, base * f * 1.01] for r, base in ((0, 1000.0), (128, 120.0), (512, 100.0))
          for e, f in ((1, 2.0), (64, 1.0))}


def test_the_2d_truth_and_an_answer_between_cells_interpolated_on_both_log_axes() -> None:
    t = sc.truth2d(GRID2D, 1.05)
    assert t["best"] == "512,64" and t["axes"] == {"read_ahead_kb": [0, 128, 512], "effective_io_concurrency": [1, 64]}
    assert t["truth_set"] == ["512,64"]
    assert sc.true_ms2d(t, 512, 64) == pytest.approx(100.5)
    # 256 KB lies half-way between 128 and 512 on log2(1 + x) within 0.01; eic 64 is a grid value.
    frac = (math.log2(257) - math.log2(129)) / (math.log2(513) - math.log2(129))
    assert sc.true_ms2d(t, 256, 64) == pytest.approx(120.6 + (100.5 - 120.6) * frac)
    s = sc.score2d(t, 0, 1)
    assert s["hit"] is False and s["regret"] == pytest.approx(2010.0 / 100.5 - 1, abs=1e-3)
    assert sc.score2d(t, 4096, 200)["true_ms"] == pytest.approx(100.5)  # beyond the grid: its edge


def test_a_sessions_advice_is_the_recommended_value_only_where_it_decided_change() -> None:
    assert sc.applied({"current": 1, "recommended": 128, "decision": "change"}, 16) == 128
    assert sc.applied({"current": 1, "recommended": 128, "decision": "keep"}, 16) == 1
    assert sc.applied(None, 16) == 16


def test_the_plateau_rule_answers_the_smallest_level_value_only_on_a_wide_plateau() -> None:
    import devices_plateau as pl

    # 16, 64 and 256 within 2.5 % of the best (64): four octaves wide, so the smallest, 16.
    assert pl.plateau_answer({0: 200.0, 16: 101.0, 64: 100.0, 256: 102.0, 1000: 110.0}) == 16
    # Level values only one octave apart (64 and 128): no plateau, the best reading's value.
    assert pl.plateau_answer({0: 200.0, 16: 150.0, 64: 100.0, 128: 101.0, 1000: 110.0}) == 64
    # A replay on readings whose truth has no plateau: the rule never moves the answer.
    r = pl.replay({0: [50.0, 51.0], 64: [100.0, 101.0], 1000: [200.0, 199.0]}, reads=2, draws=20)
    assert r["best"] == 0 and r["answers_differ"] == 0 and r["plateau_mean_regret"] == r["argmin_mean_regret"] == 0


def test_a_verdict_is_as_sure_as_the_sweep_s_own_noise_allows() -> None:
    # One value clearly ahead, repeats tight: every bootstrap truth agrees on the verdicts.
    clear = {0: [100.0, 101.0, 99.0, 100.5, 100.2], 64: [50.0, 50.5, 49.8, 50.2, 50.1], 1000: [80.0, 81.0, 79.0, 80.2, 80.4]}
    assert sc.hit_chances(clear, 1.05, [64, 1000, 0]) == [1.0, 0.0, 0.0]
    # Two values 10 % apart under 30 % noise: either may be the best in a bootstrap truth.
    noisy = {64: [50.0, 70.0, 35.0, 65.0, 40.0], 128: [55.0, 75.0, 40.0, 72.0, 44.0]}
    low, high = sc.hit_chances(noisy, 1.05, [64, 128])
    assert 0.5 < low < 1.0 and 0.1 < high < 0.9 and low > high
    assert sc.hit_chances(noisy, 1.05, [64, 128]) == [low, high]  # seeded
    # The 2-D truth: labels for cells, an answer off the grid scored by interpolation.
    [c] = sc.hit_chances(GRID2D, 1.05, [(512, 64)], make_truth=sc.truth2d, scorer=lambda t, a: sc.score2d(t, *a))
    assert c == 1.0
