"""Statistics for the confirmation step. Pure functions, no I/O.

The unit of evidence is a *pair*: one baseline probe and one candidate probe run next to each other in time.
Pairs come from ABBA blocks (A = baseline, B = candidate): ``A B | B A`` gives the pairs (A1, B1) and
(B2, A2), so a linear drift within a block cancels and the baseline is re-measured inside every comparison.

For each pair, d = log(baseline_ms / candidate_ms): d > 0 means the candidate is faster. The reported
improvement is exp(mean d), the geometric mean of the paired ratios.

Confirmation is sequential: after ``min_pairs`` and then after every block, it looks at the data and may
stop. To keep the error rate at ``alpha`` over all looks, each look uses a Bonferroni-adjusted t-interval
at level 1 - alpha/K (K = number of planned looks). The interval reported is that adjusted interval at
the look where the test stopped, so it is a valid (conservative) 1 - alpha interval.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from scipy import stats as _st

Arm = Literal["A", "B"]
Verdict = Literal["change", "keep", "continue"]


def abba_blocks() -> Iterator[tuple[Arm, Arm, Arm, Arm]]:
    """Endless ABBA, BAAB, ABBA, … blocks (alternating keeps each arm first in half of the blocks)."""
    k = 0
    while True:
        yield ("A", "B", "B", "A") if k % 2 == 0 else ("B", "A", "A", "B")
        k += 1


def log_ratio(baseline_ms: float, candidate_ms: float) -> float:
    """log(baseline / candidate); positive when the candidate is faster."""
    if baseline_ms <= 0 or candidate_ms <= 0:
        raise ValueError("times must be positive")
    return math.log(baseline_ms / candidate_ms)


@dataclass(frozen=True)
class Interval:
    mean: float
    low: float
    high: float


def t_interval(d: Sequence[float], confidence: float) -> Interval:
    """Two-sided Student-t interval for the mean of ``d`` (needs at least 2 values)."""
    n = len(d)
    if n < 2:
        raise ValueError("a t-interval needs at least two values")
    mean = math.fsum(d) / n
    var = math.fsum((x - mean) ** 2 for x in d) / (n - 1)
    half = float(_st.t.ppf(0.5 + confidence / 2, n - 1)) * math.sqrt(var / n)
    return Interval(mean, mean - half, mean + half)


def p_value(d: Sequence[float]) -> float:
    """Two-sided one-sample t-test p-value for mean(d) = 0 (no difference)."""
    n = len(d)
    mean = math.fsum(d) / n
    var = math.fsum((x - mean) ** 2 for x in d) / (n - 1)
    if var == 0:
        return 0.0 if mean != 0 else 1.0
    t = mean / math.sqrt(var / n)
    return float(2 * _st.t.sf(abs(t), n - 1))


@dataclass(frozen=True)
class Effect:
    """The measured effect of a candidate against the baseline."""

    improvement: float  # geometric mean of baseline/candidate; > 1 is better
    ci_low: float
    ci_high: float
    confidence: float  # nominal level of the whole procedure (1 - alpha)
    n_pairs: int
    p_value: float
    looks: int  # how many times the sequential test looked before it stopped


@dataclass(frozen=True)
class Look:
    verdict: Verdict
    effect: Effect
    reason: str


class SequentialTest:
    """Group-sequential paired comparison with Bonferroni-spent alpha.

    ``evaluate`` is called with all pairs so far; it only decides at planned looks (``min_pairs``,
    ``min_pairs + 2``, … ``max_pairs``) and answers ``continue`` in between.
    """

    def __init__(self, *, min_pairs: int, max_pairs: int, alpha: float, min_effect: float, step: int = 2) -> None:
        if not 2 <= min_pairs <= max_pairs:
            raise ValueError("need 2 <= min_pairs <= max_pairs")
        if min_effect < 1:
            raise ValueError("min_effect is an improvement ratio >= 1")
        self.min_pairs = min_pairs
        self.max_pairs = max_pairs
        self.alpha = alpha
        self.min_effect = min_effect
        self.looks = list(range(min_pairs, max_pairs + 1, step))
        if self.looks[-1] != max_pairs:
            self.looks.append(max_pairs)
        self.per_look_confidence = 1 - alpha / len(self.looks)

    def effect(self, d: Sequence[float], looks_done: int) -> Effect:
        iv = t_interval(d, self.per_look_confidence)
        return Effect(
            improvement=math.exp(iv.mean),
            ci_low=math.exp(iv.low),
            ci_high=math.exp(iv.high),
            confidence=1 - self.alpha,
            n_pairs=len(d),
            p_value=p_value(d),
            looks=looks_done,
        )

    def evaluate(self, d: Sequence[float]) -> Look | None:
        """The verdict at a planned look, or None when ``len(d)`` is not a look."""
        n = len(d)
        if n not in self.looks:
            return None
        looks_done = self.looks.index(n) + 1
        eff = self.effect(d, looks_done)
        threshold = self.min_effect
        if eff.ci_low > threshold:
            return Look("change", eff, f"the whole CI lies above the minimum effect {threshold:g}x")
        if eff.ci_high < threshold:
            return Look("keep", eff, f"the whole CI lies below the minimum effect {threshold:g}x")
        if n >= self.max_pairs:
            return Look("keep", eff, f"after {n} pairs the CI still reaches below the minimum effect {threshold:g}x")
        return Look("continue", eff, "the CI straddles the minimum effect; adding pairs")
