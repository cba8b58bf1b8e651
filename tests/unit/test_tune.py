"""The one tuning step every family runs (:func:`tuner.core.tune.tune`), with a synthetic probe (pure logic): a pin
is re-validated without a search, a search is confirmed against today's values unless the family confirms its
own way, and a warm start comes from the latest stored session's trials of exactly these knobs."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from tuner.core.progress import NullProgress
from tuner.core.loops import build_optimiser, search
from tuner.core.tune import tune
from tuner.families.base import Pin
from tuner.optimiser import Dimension
from tuner.settings.policy import load_policy
from tuner.store.priors import StoredPrior
from tests.support.synthetic import SyntheticProbe, seed_like_surface

EIC = "effective_io_concurrency"
DIM = Dimension(EIC, 0, 1000)
POLICY = load_policy("default")


@dataclass
class _History:
    found: StoredPrior | None
    asked: list[str] = field(default_factory=list)

    async def prior(self, family: str) -> StoredPrior | None:
        self.asked.append(family)
        return self.found


def _ctx(*, pins: dict[str, Pin] | None = None, history: _History | None = None, budget: int | None = None,
         accepted: dict[str, int] | None = None) -> Any:
    return SimpleNamespace(cfg=SimpleNamespace(tuner=SimpleNamespace(seed=7)), policy=POLICY, budget=budget,
                           progress=NullProgress(), history=history, pins=pins or {}, accepted=accepted or {})


def test_a_search_is_confirmed_against_todays_value_as_the_families_did_by_hand() -> None:
    probe = SyntheticProbe(seed_like_surface, noise_cv=0.05, seed=1)
    tuned = asyncio.run(tune(_ctx(), "concurrency", probe, [DIM], {EIC: 1}))
    assert not tuned.pinned and tuned.found is not None and tuned.decided is not None
    assert tuned.decided.current == {EIC: 1} and tuned.decided.candidate == tuned.candidate
    phases = [t.phase for t in tuned.trials]
    assert phases == sorted(phases, key=lambda p: p != "search") and "confirm" in phases  # search, then confirm
    assert tuned.optimiser == "bayesian" and tuned.stop_reason and tuned.warm_start is None
    # The same search the chain it replaces ran: build_optimiser with the policy's budget, and search.
    again = SyntheticProbe(seed_like_surface, noise_cv=0.05, seed=1)
    by_hand = asyncio.run(search(build_optimiser(POLICY, [DIM], {EIC: 1}, seed=7), again,
                                 max_consecutive_failures=POLICY.guardrails.max_failed_probes))
    assert [t.config for t in by_hand.trials] == [t.config for t in tuned.trials if t.phase == "search"]
    assert by_hand.recommendation is not None and by_hand.recommendation.config == tuned.found.config


def test_a_family_that_confirms_its_own_way_gets_the_search_only() -> None:
    probe = SyntheticProbe(seed_like_surface, noise_cv=0.05, seed=2)
    tuned = asyncio.run(tune(_ctx(budget=8), "readahead", probe, [DIM], {EIC: 1}, confirm=False))
    assert tuned.decided is None and tuned.found is not None
    assert {t.phase for t in tuned.trials} == {"search"} and len(tuned.trials) <= 8


def test_a_search_that_finds_nothing_is_failed_with_its_stop_reason() -> None:
    probe = SyntheticProbe(seed_like_surface, fail_when=lambda c: True)
    tuned = asyncio.run(tune(_ctx(), "wal", probe, [DIM], {EIC: 1}))
    assert tuned.failed and tuned.decided is None and "in a row failed" in (tuned.stop_reason or "")


def test_a_pin_is_re_validated_in_paired_trials_without_a_search() -> None:
    pin = Pin(session_id="abc123", candidate={EIC: 256}, baseline={EIC: 1}, near_optimal={EIC: (128, 512)})
    history = _History(None)
    probe = SyntheticProbe(seed_like_surface, noise_cv=0.05, seed=3)
    tuned = asyncio.run(tune(_ctx(pins={"concurrency": pin}, history=history), "concurrency", probe, [DIM],
                             {EIC: 1}))
    assert tuned.pinned and tuned.found is None and tuned.optimiser is None and history.asked == []
    assert {phase for _, phase, _ in probe.calls} == {"confirm"}
    assert tuned.decided is not None and tuned.decided.candidate == {EIC: 256}
    assert tuned.warm_start == pin.note()


def test_an_applied_pin_is_compared_with_the_values_it_replaced_and_says_so() -> None:
    pin = Pin(session_id="abc123", candidate={EIC: 256}, baseline={EIC: 1}, near_optimal={EIC: (1, 512)})
    probe = SyntheticProbe(lambda c: 100.0, noise_cv=0.05, seed=4)  # no difference: a keep
    tuned = asyncio.run(tune(_ctx(pins={"replay": pin}), "replay", probe, [DIM], {EIC: 256}))
    assert tuned.decided is not None and tuned.decided.current == {EIC: 1} and tuned.decided.decision == "keep"
    assert "the value it was compared with, 1 lies inside" in tuned.decided.reason
    assert "today's value" not in tuned.decided.reason  # 1 is not what the server runs: 256 is


def test_a_warm_start_uses_the_stored_trials_of_these_knobs_and_names_the_session() -> None:
    stored = [({EIC: v}, seed_like_surface({EIC: v}), None) for v in (0, 1, 16, 64, 256, 1000)]
    prior = StoredPrior("s1", "2026-12-01", "system identifier", stored, [({EIC: 256}, None)])
    history = _History(prior)
    probe = SyntheticProbe(seed_like_surface, noise_cv=0.05, seed=5)
    tuned = asyncio.run(tune(_ctx(history=history), "concurrency", probe, [DIM], {EIC: 1}, confirm=False))
    assert history.asked == ["concurrency"]
    assert tuned.warm_start is not None and tuned.warm_start.startswith("session s1 of 2026-12-01")
    assert [c for c, _, _ in probe.calls[:2]] == [{EIC: 1}, {EIC: 256}]  # today's value and the last winner first


def test_a_stored_session_without_trials_of_these_knobs_or_this_object_is_a_cold_start() -> None:
    joint = StoredPrior("s1", "2026-12-01", "system identifier", [({EIC: 4, "io_combine_limit": 16}, 9.0, None)], [])
    elsewhere = StoredPrior("s1", "2026-12-01", "system identifier", [({EIC: 8}, 9.0, "sdb")], [({EIC: 8}, "sdb")])
    for other, kw in ((joint, {}), (elsewhere, {"object": "sda"})):
        history = _History(other)
        probe = SyntheticProbe(seed_like_surface, noise_cv=0.05, seed=6)
        tuned = asyncio.run(tune(_ctx(history=history), "readahead", probe, [DIM], {EIC: 1}, confirm=False, **kw))
        assert history.asked == ["readahead"] and tuned.warm_start is None


def test_without_a_warm_start_the_history_is_not_asked() -> None:
    history = _History(None)
    probe = SyntheticProbe(seed_like_surface, noise_cv=0.05, seed=7)
    asyncio.run(tune(_ctx(history=history), "concurrency", probe, [DIM], {EIC: 1}, confirm=False, warm_start=False))
    assert history.asked == []
