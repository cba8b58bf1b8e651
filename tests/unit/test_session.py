from __future__ import annotations

import asyncio

from tuner.core.loops import confirm
from tuner.core.stats import SequentialTest
from tests.support.synthetic import SyntheticProbe, seed_like_surface

EIC = "effective_io_concurrency"


def _test() -> SequentialTest:
    return SequentialTest(min_pairs=6, max_pairs=16, alpha=0.05, min_effect=1.05)


def test_confirmation_runs_abba_then_baab_blocks() -> None:
    probe = SyntheticProbe(seed_like_surface, noise_cv=0.05, seed=1)
    asyncio.run(confirm({EIC: 1}, {EIC: 256}, probe, _test()))
    arms = [arm for _, _, arm in probe.calls]
    assert arms[:8] == ["baseline", "candidate", "candidate", "baseline", "candidate", "baseline", "baseline", "candidate"]
    assert all(phase == "confirm" for _, phase, _ in probe.calls)


def test_confirmation_says_change_with_a_ci_for_a_large_effect() -> None:
    probe = SyntheticProbe(seed_like_surface, noise_cv=0.10, seed=2)
    out = asyncio.run(confirm({EIC: 1}, {EIC: 256}, probe, _test()))
    assert out.look is not None and out.look.verdict == "change"
    true_ratio = seed_like_surface({EIC: 1}) / seed_like_surface({EIC: 256})
    assert out.look.effect.ci_low < true_ratio < out.look.effect.ci_high
    assert out.look.effect.ci_low > 1.5


def test_confirmation_keeps_when_both_arms_are_the_same() -> None:
    probe = SyntheticProbe(lambda c: 100.0, noise_cv=0.10, seed=3)
    out = asyncio.run(confirm({EIC: 1}, {EIC: 256}, probe, _test()))
    assert out.look is not None and out.look.verdict == "keep"
    assert out.look.effect.n_pairs <= 16


def test_confirmation_gives_up_on_a_probe_that_keeps_failing() -> None:
    probe = SyntheticProbe(seed_like_surface, fail_when=lambda c: c[EIC] == 256)
    out = asyncio.run(confirm({EIC: 1}, {EIC: 256}, probe, _test(), retries=1))
    assert out.look is None
    assert out.failure is not None and "candidate probe failed 2 times" in out.failure
