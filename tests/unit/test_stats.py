from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import norm

from tuner.core.stats import (
    SequentialTest,
    abba_blocks,
    log_ratio,
    p_value,
    pocock_level,
    t_interval,
)


def test_abba_blocks_alternate_so_each_arm_leads_half_the_time() -> None:
    gen = abba_blocks()
    assert [next(gen) for _ in range(3)] == [("A", "B", "B", "A"), ("B", "A", "A", "B"), ("A", "B", "B", "A")]


def test_log_ratio_is_positive_when_the_candidate_is_faster() -> None:
    assert log_ratio(200.0, 100.0) == pytest.approx(math.log(2))
    with pytest.raises(ValueError):
        log_ratio(0.0, 1.0)


@given(st.lists(st.floats(min_value=-3, max_value=3, allow_nan=False), min_size=2, max_size=40),
       st.floats(min_value=0.5, max_value=0.999))
def test_t_interval_contains_the_estimate(d: list[float], conf: float) -> None:
    iv = t_interval(d, conf)
    assert iv.low <= iv.mean + 1e-9 and iv.mean <= iv.high + 1e-9


def test_p_value_is_small_for_a_clear_effect_and_large_for_none() -> None:
    rng = random.Random(1)
    assert p_value([0.7 + rng.gauss(0, 0.1) for _ in range(10)]) < 1e-4
    assert p_value([rng.gauss(0, 0.1) for _ in range(10)]) > 0.01


def _pairs(effect: float, cv: float, n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    s = math.sqrt(2) * math.sqrt(math.log1p(cv**2))
    return [math.log(effect) + rng.gauss(0, s) for _ in range(n)]


def test_sequential_test_changes_early_on_a_large_effect() -> None:
    test = SequentialTest(min_pairs=6, max_pairs=16, alpha=0.05, min_effect=1.05)
    look = test.evaluate(_pairs(3.0, 0.1, 6, seed=2))
    assert look is not None and look.verdict == "change"
    assert look.effect.ci_low > 1.05
    assert look.effect.ci_low <= look.effect.improvement <= look.effect.ci_high


def test_sequential_test_keeps_when_there_is_no_effect() -> None:
    test = SequentialTest(min_pairs=6, max_pairs=16, alpha=0.05, min_effect=1.05)
    d = _pairs(1.0, 0.1, 16, seed=3)
    verdicts = [test.evaluate(d[:n]) for n in range(1, 17)]
    final = [v for v in verdicts if v is not None and v.verdict != "continue"][0]
    assert final.verdict == "keep"


def test_sequential_test_only_looks_at_planned_points() -> None:
    test = SequentialTest(min_pairs=6, max_pairs=16, alpha=0.05, min_effect=1.05)
    assert test.looks == [6, 16]
    assert test.evaluate([0.1] * 7) is None
    assert test.evaluate([0.1] * 8) is None


def test_sequential_test_ends_at_max_pairs_even_when_unclear() -> None:
    test = SequentialTest(min_pairs=2, max_pairs=4, alpha=0.05, min_effect=1.05)
    look = test.evaluate(_pairs(1.06, 0.2, 4, seed=5))
    assert look is not None and look.verdict in {"change", "keep"}


def test_false_change_rate_is_bounded_when_truth_equals_min_effect() -> None:
    test = SequentialTest(min_pairs=6, max_pairs=16, alpha=0.05, min_effect=1.05)
    changes = 0
    reps = 400
    for seed in range(reps):
        d = _pairs(1.05, 0.1, 16, seed=seed)
        for n in range(1, 17):
            look = test.evaluate(d[:n])
            if look is not None and look.verdict != "continue":
                changes += look.verdict == "change"
                break
    # One-sided error at the boundary is at most alpha/2 by construction; allow sampling slack.
    assert changes / reps <= 0.05


@pytest.mark.parametrize(("k", "boundary"), [(2, 2.178), (3, 2.289), (4, 2.361), (5, 2.413)])
def test_pocock_level_matches_the_published_constants_for_more_looks(k: int, boundary: float) -> None:
    # Pocock (1977), alpha 0.05 two-sided, K equally spaced looks: the simulated boundary agrees to 0.01.
    level = pocock_level(tuple(range(10, 10 * k + 1, 10)), 0.05)
    assert float(norm.isf((1 - level) / 2)) == pytest.approx(boundary, abs=0.01)


def test_the_two_look_design_keeps_its_calibrated_levels() -> None:
    # The recorded figures (benchmarks/results/confidence.json) were measured with exactly these.
    test = SequentialTest(min_pairs=6, max_pairs=16, alpha=0.05, min_effect=1.05)
    assert round(test.per_look_confidence, 4) == 0.9722
    assert test.report_levels == (0.962, 0.962)


def test_interim_looks_are_planned_looks_too() -> None:
    test = SequentialTest(min_pairs=6, max_pairs=120, alpha=0.05, min_effect=1.05, interim_looks=(20, 48))
    assert test.looks == [6, 20, 48, 120]
    assert test.evaluate([0.0, 0.01] * 10) is not None
    assert test.evaluate([0.0, 0.01] * 11) is None
    assert test.per_look_confidence > SequentialTest(min_pairs=6, max_pairs=120, alpha=0.05,
                                                     min_effect=1.05).per_look_confidence


@pytest.mark.parametrize("interim", [(6, 48), (20, 120), (48, 20), (20, 20), (130,)])
def test_interim_looks_must_rise_strictly_between_the_first_and_the_last(interim: tuple[int, ...]) -> None:
    with pytest.raises(ValueError):
        SequentialTest(min_pairs=6, max_pairs=120, alpha=0.05, min_effect=1.05, interim_looks=interim)


def test_with_interim_looks_the_last_look_reports_the_decision_interval() -> None:
    test = SequentialTest(min_pairs=2, max_pairs=8, alpha=0.05, min_effect=1.05, interim_looks=(4,))
    d = _pairs(1.05, 0.2, 8, seed=11)
    look = test.evaluate(d)
    assert look is not None and look.effect.report_confidence == test.per_look_confidence
    assert (look.effect.ci_low, look.effect.ci_high) == (look.effect.decision_low, look.effect.decision_high)
    early = test.evaluate(d[:4])
    assert early is not None and early.effect.report_confidence == test.report_confidence
