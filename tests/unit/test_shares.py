"""Each knob's own share of a confirmed combination (:func:`tuner.core.decide.shares`), with the package's synthetic
probe (pure logic): the combination is confirmed as the pair the operator will run, then each knob is put back to
today's value alone, in paired trials, so a knob that rode on the other's effect is kept."""

from __future__ import annotations

import asyncio

from tuner.core.decide import decide, shares
from tuner.families.readahead_sections import Combination
from tuner.settings.policy import load_policy
from tests.support.synthetic import SyntheticProbe

RA, EIC = "read_ahead_kb", "effective_io_concurrency"
POLICY = load_policy("default")
TODAY = {RA: 128, EIC: 1}
PAIR = {RA: 2048, EIC: 64}


def _eic_only(config: dict[str, int]) -> float:
    """Only effective_io_concurrency matters: readahead rides along."""
    return 300.0 if config[EIC] < 8 else 100.0


def _both(config: dict[str, int]) -> float:
    return (200.0 if config[RA] < 512 else 100.0) + (300.0 if config[EIC] < 8 else 100.0)


def _run(surface, seed: int):  # type: ignore[no-untyped-def]
    probe = SyntheticProbe(surface, noise_cv=0.04, seed=seed)

    async def go():  # type: ignore[no-untyped-def]
        combination = await decide(TODAY, PAIR, probe, POLICY)
        return combination, await shares(TODAY, combination, probe, POLICY)
    return asyncio.run(go())


def test_a_knob_that_rode_on_the_others_effect_is_kept_with_its_own_interval() -> None:
    combination, own = _run(_eic_only, seed=1)
    assert combination.decision == "change" and set(own) == {RA, EIC}
    assert own[EIC].decision == "change" and own[EIC].current == {RA: 2048, EIC: 1}
    assert own[RA].decision == "keep" and own[RA].current == {RA: 128, EIC: 64} and own[RA].effect is not None
    assert own[RA].reason.startswith("on its own (against today's 128, at effective_io_concurrency = 64): ")


def test_both_knobs_earn_their_share_where_both_matter() -> None:
    combination, own = _run(_both, seed=2)
    assert combination.decision == "change"
    assert own[RA].decision == own[EIC].decision == "change"
    assert own[RA].effect is not None and own[RA].effect.ci95[0] > 1.05


def test_a_kept_combination_has_no_shares_and_one_moved_knob_is_its_own_share() -> None:
    probe = SyntheticProbe(lambda c: 100.0, noise_cv=0.04, seed=3)

    async def go():  # type: ignore[no-untyped-def]
        flat = await decide(TODAY, PAIR, probe, POLICY)
        one = await decide(TODAY, {RA: 128, EIC: 64}, SyntheticProbe(_eic_only, noise_cv=0.04, seed=4), POLICY)
        return flat, await shares(TODAY, flat, probe, POLICY), one, await shares(TODAY, one, probe, POLICY)

    flat, none, one, mine = asyncio.run(go())
    assert flat.decision == "keep" and none == {}
    assert one.decision == "change" and mine == {EIC: one}


def test_the_combination_reads_as_one_sentence_with_its_interval() -> None:
    combination, _ = _run(_eic_only, seed=1)
    line = Combination(today=TODAY, candidate=PAIR, decision=combination.decision, reason=combination.reason,
                       effect=combination.effect).sentence()
    assert line.startswith("read path confirmed as one: read_ahead_kb 2048, effective_io_concurrency 64 against "
                           "today's read_ahead_kb 128, effective_io_concurrency 1: ")
    assert line.endswith("(change)") and "x [" in line
