"""The plateau rule (:mod:`tuner.core.plateau`): on a plateau the answer is decided by a stated rule — today's value
inside the near-optimal range, else the accepted value inside it, else the search's answer — and the tuning step
confirms the value the rule chose, so the value recommended is the value measured."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from tuner.core.plateau import settle
from tuner.core.progress import NullProgress
from tuner.core.tune import tune
from tuner.report.near import NearRange
from tuner.optimiser import Dimension
from tuner.settings.policy import load_policy
from tests.support.synthetic import SyntheticProbe

EIC = "effective_io_concurrency"
RA = "read_ahead_kb"
POLICY = load_policy("default")


def test_todays_value_inside_the_range_is_kept_and_says_why() -> None:
    out = settle({EIC: 512}, {EIC: NearRange(8, 1000, plateau=True)}, {EIC: 64}, {EIC: 256})
    assert out.candidate == {EIC: 64}
    assert out.notes[EIC] == ("kept today's effective_io_concurrency = 64: inside the near-optimal 8..1000 "
                              "(a plateau) (the search's best was 512)")


def test_todays_value_inside_a_range_the_search_could_not_narrow_is_no_evidence() -> None:
    # A joint search's knob judged by the model alone: 1..1000 while eic 1 ran 1.8x slower (seen on a sandbox).
    out = settle({EIC: 512}, {EIC: NearRange(1, 1000)}, {EIC: 1}, {})
    assert out.candidate == {EIC: 512} and out.notes == {}


def test_the_accepted_value_inside_the_range_is_kept_when_todays_is_outside() -> None:
    out = settle({EIC: 1000}, {EIC: NearRange(8, 1000)}, {EIC: 1}, {EIC: 64})
    assert out.candidate == {EIC: 64}
    assert out.sentence() == ("kept the accepted effective_io_concurrency = 64: inside today's near-optimal 8..1000 "
                              "(the search's best was 1000)")


def test_an_accepted_value_outside_the_range_is_replaced_by_the_searchs_answer() -> None:
    out = settle({EIC: 256}, {EIC: NearRange(128, 1000)}, {EIC: 1}, {EIC: 16})
    assert out.candidate == {EIC: 256} and out.notes == {}


def test_each_knob_of_a_joint_answer_is_settled_on_its_own_range() -> None:
    out = settle({RA: 2048, EIC: 64}, {RA: NearRange(512, 4096), EIC: NearRange(32, 256)}, {RA: 128, EIC: 1},
                 {RA: 1024, EIC: 16})
    assert out.candidate == {RA: 1024, EIC: 64}  # readahead: the accepted 1024; eic: 16 lies outside, the answer
    assert set(out.notes) == {RA}


def test_a_knob_without_a_range_or_a_number_keeps_the_answer() -> None:
    out = settle({EIC: 64, "io_method": "worker"}, {}, {EIC: 64, "io_method": "sync"}, {"io_method": "sync"})
    assert out.candidate == {EIC: 64, "io_method": "worker"} and out.notes == {}
    # True is not the number 1: a bool never stands for a value inside a range.
    assert settle({EIC: 64}, {EIC: NearRange(0, 100)}, {EIC: True}, {}).candidate == {EIC: 64}


def _plateau(config: dict[str, int]) -> float:
    """Cold bitmap-scan time, flat from eic 8 up: where noise alone would pick the search's best."""
    return 300.0 if config[EIC] < 8 else 100.0


def _ctx(accepted: dict[str, int]) -> Any:
    return SimpleNamespace(cfg=SimpleNamespace(tuner=SimpleNamespace(seed=11)), policy=POLICY, budget=None,
                           progress=NullProgress(), history=None, pins={}, accepted=accepted)


def _tune(accepted: dict[str, int], seed: int) -> Any:
    probe = SyntheticProbe(_plateau, noise_cv=0.05, seed=seed)
    return asyncio.run(tune(_ctx(accepted), "concurrency", probe, [Dimension(EIC, 0, 1000)], {EIC: 1}))


def test_on_a_plateau_the_accepted_value_is_confirmed_and_recommended_again() -> None:
    tuned = _tune({EIC: 64}, seed=3)
    assert tuned.candidate == {EIC: 64}
    assert tuned.decided is not None and tuned.decided.candidate == {EIC: 64} and tuned.decided.decision == "change"
    assert "kept the accepted effective_io_concurrency = 64" in tuned.decided.reason
    assert {t.config[EIC] for t in tuned.trials if t.phase == "confirm"} == {1, 64}  # the value measured


def test_an_accepted_value_off_the_plateau_is_replaced() -> None:
    tuned = _tune({EIC: 2}, seed=3)  # 2 lies on the slow shoulder: outside any near-optimal range
    assert tuned.candidate is not None and tuned.candidate[EIC] >= 8
    assert tuned.decided is not None and "accepted" not in tuned.decided.reason


def test_repeat_sessions_on_a_plateau_keep_one_answer_once_it_is_accepted() -> None:
    accepted: dict[str, int] = {}
    answers = []
    for seed in range(5):
        tuned = _tune(accepted, seed=seed)
        assert tuned.decided is not None
        if tuned.decided.decision == "change":
            accepted = {EIC: tuned.decided.candidate[EIC]}
        answers.append(accepted.get(EIC))
    assert len({a for a in answers if a is not None}) == 1, answers
