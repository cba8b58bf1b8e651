"""The near-optimal range (issue #39): the values the measurements cannot tell apart from the best, the answer's
preference on a plateau, the edge of the searched range, and what decide() and the model make of them."""

from __future__ import annotations

import asyncio
import math
import random

import pytest

from tuner.core.decide import decide, recommendation
from tuner.core.loops import build_optimiser
from tuner.report.model import Recommendation
from tuner.optimiser import BayesianOptimiser, Dimension
from tuner.report.near import NearOptimal, NearRange
from tuner.settings.policy import load_policy
from tests.support.synthetic import SyntheticProbe

EIC = "effective_io_concurrency"
RA = "read_ahead_kb"
DIM = Dimension(EIC, 0, 1000, limits=(True, True))


def _searched(dim: Dimension, readings: list[tuple[int, float]], *, seed: int = 0) -> BayesianOptimiser:
    """An optimiser told ``readings`` (value, ms) in order, as a search would have: a fitted GP posterior."""
    opt = BayesianOptimiser(dimensions=[dim], initial=[{dim.name: v} for v, _ in readings], seed=seed,
                            budget=len(readings), min_probes=len(readings))
    for v, ms in readings:
        opt.register({dim.name: v}, ms)
    return opt


def _noisy(values: list[int], curve: dict[int, float], *, cv: float = 0.03, seed: int = 7) -> list[tuple[int, float]]:
    rng = random.Random(seed)
    return [(v, curve[v] * math.exp(rng.gauss(0, cv))) for v in values]


PLATEAU = {0: 800.0, 1: 1000.0, 4: 700.0, 16: 500.0, 64: 500.0, 256: 500.0, 1000: 500.0}
PEAK = {0: 900.0, 1: 1000.0, 4: 900.0, 16: 800.0, 64: 400.0, 256: 800.0, 1000: 950.0}


def test_a_flat_plateau_is_one_range_flagged_as_a_plateau_and_answered_by_its_smallest_measured_value() -> None:
    opt = _searched(DIM, _noisy([0, 1, 4, 16, 64, 256, 1000, 16, 64, 256], PLATEAU))
    rec = opt.recommendation()
    near = rec.near_optimal[EIC]
    assert isinstance(near, NearRange) and near.plateau
    assert 4 < near.low <= 16 and near.high == 1000  # 4 is 40 % slower: told apart; the plateau is not
    assert rec.config == {EIC: 16}  # the smallest value measured on it, not wherever the noise put the best
    assert opt._answer().config != rec.config  # (the search's own answer was elsewhere on the plateau)


def test_a_sharp_peak_gives_a_narrow_range_between_its_slower_neighbours_and_no_plateau() -> None:
    opt = _searched(DIM, _noisy([0, 1, 4, 16, 64, 256, 1000, 64, 16, 256], PEAK))
    rec = opt.recommendation()
    near = rec.near_optimal[EIC]
    assert rec.config == {EIC: 64} and not near.plateau
    assert 16 < near.low <= 64 <= near.high < 256  # 16 and 256 are twice as slow, measured twice each


def test_an_optimum_at_the_top_of_the_searched_range_is_reported_at_the_edge() -> None:
    curve = {v: 1000 / (1 + math.log2(1 + v)) for v in (0, 1, 4, 16, 64, 256, 512, 1000)}
    opt = _searched(DIM, _noisy([0, 1, 4, 16, 64, 256, 1000, 512, 1000], curve))
    rec = opt.recommendation()
    near = rec.near_optimal[EIC]
    assert rec.config == {EIC: 1000} and near.high == 1000 and near.searched == (0, 1000)
    out = Recommendation(knob=EIC, scope="system", object=None, current=1, recommended=rec.config[EIC],
                         near_optimal=near, decision="change", reason="r", effect=None, requires="reload")
    assert out.at_edge == "upper" and out.searched == (0, 1000) and out.edge_is_limit
    assert out.near_optimal == (near.low, 1000) and type(out.near_optimal) is tuple


def test_the_range_never_reaches_past_the_values_measured() -> None:
    opt = _searched(Dimension(RA, 0, 16384, quantum=4), [(v, 100.0) for v in (128, 512, 2048)])
    lo, hi = opt.recommendation().near_optimal[RA]
    assert 128 <= lo <= hi <= 2048


def test_readings_far_apart_stay_apart_when_the_fit_puts_every_difference_down_to_noise() -> None:
    """Seed 0 of the EBS gp2 surface at CV 10 %: skopt's GP explains the six readings as noise around a flat mean,
    and alone would call eic 1 (2.6x slower than 0) level with it. Its own readings tell it apart."""
    opt = build_optimiser(load_policy("default"), [Dimension(EIC, 0, 256)], {EIC: 1}, seed=0)
    for v, ms in [(0, 40569.0), (4, 64172.0), (16, 53607.0), (64, 57168.0), (256, 61928.0), (1, 104902.0)]:
        assert opt.suggest() == {EIC: v}
        opt.register({EIC: v}, ms)
    mean, sd = opt._differences([{EIC: 1}], {EIC: 0})
    assert abs(float(mean[0])) - 1.96 * float(sd[0]) < math.log(1.05)  # the model alone: indistinguishable
    rec = opt.recommendation()
    assert rec.config == {EIC: 0} and tuple(rec.near_optimal[EIC]) == (0, 0)


def test_a_joint_search_gives_each_knob_its_own_range_and_plateau() -> None:
    """Flat in effective_io_concurrency, a narrow optimum in read_ahead_kb: the two ranges say so separately."""
    eic, ra = Dimension(EIC, 0, 256), Dimension(RA, 0, 16384, quantum=4)

    def time_ms(c: dict[str, int]) -> float:
        return 100.0 * (1 + 0.6 * abs(math.log2((1 + c[RA]) / 513)) / 4)

    grid = [{EIC: e, RA: r} for e in (0, 32, 256) for r in (128, 512, 2048)]
    opt = BayesianOptimiser(dimensions=[eic, ra], initial=grid, seed=3, budget=16, min_probes=16)
    probe = SyntheticProbe(time_ms, noise_cv=0.02, seed=3)
    while opt.stop_reason() is None:
        cfg = opt.suggest()
        opt.register(cfg, asyncio.run(probe(cfg)).value)
    rec = opt.recommendation()
    e_range, r_range = rec.near_optimal[EIC], rec.near_optimal[RA]
    assert e_range.plateau and (e_range.low, e_range.high) == (0, 256)
    assert not r_range.plateau and 128 < r_range.low <= 512 <= r_range.high < 2048
    # The smallest value level with the best (32, 128 and 256 read within 2.5 %; 0 read 3 % slower), not 128.
    assert rec.config == {EIC: 32, RA: 512}


def test_a_range_cut_short_of_a_value_keeps_the_side_of_the_recommendation() -> None:
    near = NearRange(1, 1000, searched=(0, 1000), plateau=True)
    assert near.without(1, keep=64) == NearRange(2, 1000, searched=(0, 1000), plateau=True)
    assert near.without(1000, keep=64).as_pair() == (1, 999)  # type: ignore[union-attr]
    assert near.without(2000, keep=64) is near
    assert NearRange(512, 512).without(512, keep=1024) is None  # nothing is left
    assert NearRange(512, 516, step=4).without(512, keep=516) == NearRange(516, 516, step=4)
    cut = near.without(1, keep=64)
    assert cut is not None and cut.plateau and cut.searched == (0, 1000)
    with pytest.raises(ValueError):
        NearRange(5, 4)


def _policy():  # type: ignore[no-untyped-def]
    return load_policy("default")


def test_a_keep_with_todays_value_inside_the_range_says_so() -> None:
    probe = SyntheticProbe(lambda c: 100.0, noise_cv=0.05, seed=1)
    near = NearOptimal({EIC: NearRange(8, 1000, searched=(0, 1000), plateau=True)})
    d = asyncio.run(decide({EIC: 16}, {EIC: 256}, probe, _policy(), near_optimal=near))
    assert d.decision == "keep"
    assert d.reason.endswith("; today's value 16 lies inside the plateau from 8 to 1000")
    assert d.near_optimal[EIC].as_pair() == (8, 1000)


def test_a_change_tells_todays_value_apart_so_the_range_is_cut_short_of_it() -> None:
    probe = SyntheticProbe(lambda c: 100.0 if c[EIC] >= 16 else 300.0, noise_cv=0.05, seed=2)
    near = NearOptimal({EIC: NearRange(1, 1000, searched=(0, 1000), plateau=True)})
    d = asyncio.run(decide({EIC: 1}, {EIC: 16}, probe, _policy(), near_optimal=near))
    assert d.decision == "change"
    assert d.near_optimal[EIC].as_pair() == (2, 1000) and "lies inside" not in d.reason
    rec = recommendation(EIC, d, source="default", requires="reload")
    assert rec.near_optimal == (2, 1000) and rec.plateau and rec.searched == (0, 1000) and rec.at_edge is None


def test_todays_value_as_the_answer_is_kept_with_the_range_as_its_evidence() -> None:
    probe = SyntheticProbe(lambda c: 100.0)
    near = NearOptimal({EIC: NearRange(0, 4, searched=(0, 1000))})
    d = asyncio.run(decide({EIC: 1}, {EIC: 1}, probe, _policy(), near_optimal=near))
    assert d.decision == "keep" and not d.trials
    assert d.reason.endswith("(the search's measurements cannot tell it from the best: "
                             "effective_io_concurrency: the near-optimal range 0..4)")


def test_a_recommendation_at_an_edge_the_policy_set_can_be_widened() -> None:
    near = NearRange(4096, 16384, searched=(0, 16384), limits=(True, False))
    rec = Recommendation(knob=RA, scope="device", object="/dev/sdb", current=128, recommended=16384, near_optimal=near,
                         decision="change", reason="r", effect=None, requires="reopen", run_on="host")
    assert rec.at_edge == "upper" and not rec.edge_is_limit
    low = Recommendation(knob=RA, scope="device", object="/dev/sdb", current=128, recommended=0, near_optimal=near,
                         decision="change", reason="r", effect=None, requires="reopen", run_on="host")
    assert low.at_edge == "lower" and low.edge_is_limit
    inside = rec.model_copy(update={"recommended": 8192})
    assert Recommendation.model_validate(inside.model_dump() | {"at_edge": None}).at_edge is None
    again = Recommendation.model_validate_json(rec.model_dump_json())
    assert again == rec  # read back from JSON: the facts are fields, not the range's attributes


def test_a_plain_pair_carries_no_range_facts() -> None:
    rec = Recommendation(knob=EIC, scope="system", object=None, current=1, recommended=1000, near_optimal=(64, 1000),
                         decision="change", reason="r", effect=None, requires="reload")
    assert rec.searched is None and rec.at_edge is None and not rec.plateau


# A sandbox session (scale 4): single readings of 15-75 ms, which the fitted GP took for the truth (its noise
# 0.7 %); the confirmation's 12 readings varied by 14 % within each arm.
SANDBOX = [(0, 31.1), (4, 43.3), (16, 34.8), (64, 38.2), (256, 31.4), (1, 73.9), (128, 24.8), (1000, 15.7), (512, 23.5)]


def test_the_noise_a_confirmation_measured_widens_a_range_the_search_was_too_sure_of() -> None:
    opt = build_optimiser(load_policy("default"), [Dimension(EIC, 0, 1000)], {EIC: 1}, seed=3908)
    for v, ms in SANDBOX:
        assert opt.suggest() == {EIC: v}
        opt.register({EIC: v}, ms)
    assert opt._noise_sd() < 0.01
    near = opt.recommendation().near_optimal
    assert near[EIC].low > 512  # 512 read 1.5x slower than 1000: told apart at 0.7 % noise
    wider = near.given_noise(0.138)
    assert wider[EIC].low <= 512 < near[EIC].low and wider[EIC].high == 1000
    assert wider[EIC].low > 256  # 256 read 2x slower: told apart even at 14 %
    assert isinstance(wider[EIC], NearRange) and wider[EIC].searched == (0, 1000)
    assert near.given_noise(0.001) == near  # less than the model's own: no change


def test_decide_widens_the_range_by_the_noise_of_its_own_pairs() -> None:

    asked: list[float] = []

    def refine(noise_sd: float) -> dict[str, NearRange]:
        asked.append(noise_sd)
        return {EIC: NearRange(4, 1000, searched=(0, 1000))}

    near = NearOptimal({EIC: NearRange(200, 1000, searched=(0, 1000))}, refine)
    probe = SyntheticProbe(lambda c: 100.0 if c[EIC] >= 16 else 300.0, noise_cv=0.10, seed=4)
    d = asyncio.run(decide({EIC: 1}, {EIC: 1000}, probe, _policy(), near_optimal=near))
    assert d.decision == "change" and len(asked) == 1 and 0.05 < asked[0] < 0.2  # about the probe's CV
    assert d.near_optimal[EIC].as_pair() == (4, 1000)  # widened; today's 1 lies outside it, so nothing is cut


def test_reading_noise_pools_the_spread_within_each_arm() -> None:
    from datetime import UTC, datetime

    from tuner.core.decide import reading_noise
    from tuner.report.model import Trial

    def t(arm: str, v: float | None) -> Trial:
        return Trial(config={EIC: 1}, value=v, status="ok" if v else "failed", phase="confirm", arm=arm,  # type: ignore[arg-type]
                     started_at=datetime.now(UTC), duration_s=0.0)

    # Each arm: logs spread by ±0.1 around its own mean; the arms' 3x difference is no noise.
    trials = [t("baseline", 300 * math.exp(e)) for e in (-0.1, 0.1)] + [t("candidate", 100 * math.exp(e)) for e in (-0.1, 0.1, 0.0)]
    assert reading_noise(trials) == pytest.approx(math.sqrt((0.02 + 0.02) / 3))
    assert reading_noise(trials[:2] + [t("candidate", None)]) is None  # one degree of freedom is not enough


def test_ranges_survive_a_pickle_without_the_optimiser_behind_them() -> None:
    import pickle

    opt = _searched(DIM, _noisy([0, 1, 4, 16, 64, 256, 1000, 16, 64, 256], PLATEAU))
    near = opt.recommendation().near_optimal
    again = pickle.loads(pickle.dumps(near))
    assert again == near and again[EIC].plateau and again[EIC].searched == (0, 1000)
    assert again.given_noise(0.5) == near  # nothing to refit with, so nothing moves


def test_a_change_to_a_value_outside_the_searchs_range_reports_no_range_for_it() -> None:
    # A runner-up confirmed instead of the search's best (concurrency's _confirm_each): the range was built around
    # the best and says nothing about the candidate, so it is left out rather than shown beside a value it misses.
    probe = SyntheticProbe(lambda c: 100.0 if c[EIC] >= 128 else 300.0, noise_cv=0.05, seed=3)
    near = NearOptimal({EIC: NearRange(8, 64, searched=(0, 1000))})
    d = asyncio.run(decide({EIC: 16}, {EIC: 256}, probe, _policy(), near_optimal=near))
    assert d.decision == "change" and EIC not in d.near_optimal
    assert recommendation(EIC, d, source="default", requires="reload").near_optimal is None


def test_a_revalidation_against_the_replaced_value_does_not_call_it_todays() -> None:
    probe = SyntheticProbe(lambda c: 100.0, noise_cv=0.05, seed=1)
    near = NearOptimal.of_pairs({EIC: (8, 1000)})  # a pin's stored range: a plain pair, nothing to widen it
    d = asyncio.run(decide({EIC: 16}, {EIC: 256}, probe, _policy(), near_optimal=near, baseline_is_today=False))
    assert d.decision == "keep" and "today's value" not in d.reason
    assert d.reason.endswith("; the value it was compared with, 16 lies inside the near-optimal range 8..1000")


def test_a_plain_pair_is_cut_only_where_it_holds_todays_value() -> None:
    near = NearOptimal.of_pairs({EIC: (10, 20)})[EIC]  # a pin's: by steps of 1, no facts
    assert near.without(5, keep=15) == near
    assert near.without(12, keep=15) == NearRange(13, 20)
    assert near.without(20, keep=15) == NearRange(10, 19)


def test_an_answer_at_the_top_a_knob_can_hold_is_at_the_edge() -> None:
    # read_ahead_kb holds whole pages: a policy's max of 1022 is searched up to 1020, and 1020 is its edge.
    dim = Dimension(RA, 0, 1022, quantum=4)
    opt = _searched(dim, _noisy([0, 128, 256, 512, 1020, 1020], {0: 900.0, 128: 700.0, 256: 600.0, 512: 500.0,
                                                              1020: 300.0}))
    rec = opt.recommendation()
    assert rec.config[RA] == 1020 and rec.near_optimal[RA].searched == (0, 1020)
    out = Recommendation(knob=RA, object="/dev/loop0", scope="device", current=128, recommended=1020,
                         near_optimal=rec.near_optimal[RA], decision="keep", reason="-", effect=None, requires="reopen")
    assert out.at_edge == "upper" and out.searched == (0, 1020)


def test_repeated_readings_set_a_floor_under_the_noise_the_range_assumes() -> None:
    # Readings of 16 and 64 repeated, far apart each time: whatever the fit makes of single readings, the range
    # allows at least the noise the repeats show.
    readings = [(0, 900.0), (1, 1000.0), (4, 700.0), (16, 420.0), (64, 400.0), (256, 480.0), (1000, 520.0),
                (16, 560.0), (64, 300.0), (16, 430.0), (64, 390.0)]
    opt = _searched(DIM, readings)
    assert opt._repeat_noise() > 0.1
    wide = opt.recommendation().near_optimal[EIC]
    without = _searched(DIM, readings)
    without._repeat_noise = lambda: 0.0  # type: ignore[method-assign]
    narrow = without.recommendation().near_optimal[EIC]
    assert wide.low <= narrow.low and wide.high >= narrow.high and wide != narrow
    assert _searched(DIM, readings[:7])._repeat_noise() == 0.0  # no value read twice: no floor
