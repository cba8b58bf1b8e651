"""Statistics for the confirmation step. Pure functions, no I/O.

The unit of evidence is a *pair*: one baseline probe and one candidate probe run next to each other in time.
Pairs come from ABBA blocks (A = baseline, B = candidate): ``A B | B A`` gives the pairs (A1, B1) and
(B2, A2), so a linear drift within a block cancels and the baseline is re-measured inside every comparison.

For each pair, d = log(baseline_ms / candidate_ms): d > 0 means the candidate is faster. The reported
improvement is exp(mean d), the geometric mean of the paired ratios.

Confirmation is sequential with two looks: after ``min_pairs`` (clear effects stop there) and at
``max_pairs``. More interim looks saved few probes but biased the interval where the test stopped
(benchmarks/confidence.py: 6 looks gave coverage 0.914–0.964, 2 looks 0.932–0.963 at equal power). To keep the error rate at ``alpha`` over all looks, each look decides with a t-interval at a Pocock
level: the per-look level whose intervals, over all K planned looks together, cover the truth with
probability 1 - alpha (computed once per design by a seeded simulation of the partial-sum random walk).

A design may plan interim looks between the two (``interim_looks``; ``tuner daemon``'s budget, which runs to
120 pairs, looks at 6, 20, 48 and 120). Those pay for power with early stops: at 120 pairs a small effect's
early stops are the extreme paths, whose reported intervals miss (at the minimum effect itself every early stop
misses, as its decision interval excluded the truth). So a design with interim looks reports, where it ran to
its last look, the decision interval: wider there, it pays the early misses back (docs/decisions.md, "The
daemon's confirmation budget": coverage 0.939–0.964; one calibrated level for every look cannot hold 93–97 %
there). Two-look designs keep the calibrated level below at every look: their figures are the recorded ones.

Two intervals come out:

* the **decision interval** — the Pocock-level interval the rule used (wider; valid over all looks);
* the reported **95 % interval** (``ci95``) — a t-interval at level ``REPORT_CONFIDENCE``. A plain 95 %
  interval taken where a sequential test stopped is biased (it stops when the mean looks extreme), and
  covers only ~92 % here; the reported level is calibrated by ``benchmarks/confidence.py`` so that coverage
  stays within 93–97 % for true effects 1.0–2.0× and noise CV 2–15 % (with interim looks: the decision
  interval at the last look, above).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import Literal

import numpy as np

# Level of the reported interval for alpha = 0.05, calibrated by benchmarks/confidence.py (see module doc).
REPORT_CONFIDENCE = 0.962

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


def _scipy_stats() -> ModuleType:
    """scipy.stats, imported on first use: it costs about 0.7 s, and rendering a stored report (``tuner show``,
    ``export --format html``) imports every family module, and so this one, without computing any interval."""
    from scipy import stats

    return stats


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
    half = float(_scipy_stats().t.ppf(0.5 + confidence / 2, n - 1)) * math.sqrt(var / n)
    return Interval(mean, mean - half, mean + half)


def p_value(d: Sequence[float]) -> float:
    """Two-sided one-sample t-test p-value for mean(d) = 0 (no difference)."""
    n = len(d)
    mean = math.fsum(d) / n
    var = math.fsum((x - mean) ** 2 for x in d) / (n - 1)
    if var == 0:
        return 0.0 if mean != 0 else 1.0
    t = mean / math.sqrt(var / n)
    return float(2 * _scipy_stats().t.sf(abs(t), n - 1))


@cache
def pocock_level(looks: tuple[int, ...], alpha: float, *, sims: int = 200_000, seed: int = 0) -> float:
    """Per-look two-sided confidence level c such that intervals at level c at every planned look cover the
    truth simultaneously with probability 1 - alpha (Pocock's constant boundary, for looks after n_k pairs).

    Simulated, not tabulated: Z_k = S(n_k) / sqrt(n_k) for a standard random walk S, and the boundary is the
    1 - alpha quantile of max_k |Z_k|. Deterministic for a given design.
    """
    if len(looks) == 1:
        return 1 - alpha
    rng = np.random.default_rng(seed)
    increments = np.diff(np.asarray((0, *looks), dtype=float))
    steps = rng.standard_normal((sims, len(looks))) * np.sqrt(increments)
    z = np.abs(np.cumsum(steps, axis=1) / np.sqrt(np.asarray(looks, dtype=float)))
    boundary = float(np.quantile(z.max(axis=1), 1 - alpha))
    return float(1 - 2 * _scipy_stats().norm.sf(boundary))


@dataclass(frozen=True)
class Effect:
    """The measured effect of a candidate against the baseline."""

    improvement: float  # geometric mean of baseline/candidate; > 1 is better
    ci_low: float  # the reported interval (level REPORT_CONFIDENCE, calibrated to cover ~95 %)
    ci_high: float
    decision_low: float  # the interval the sequential rule used (Pocock level, valid over all looks)
    decision_high: float
    confidence: float  # nominal level of the whole procedure (1 - alpha)
    n_pairs: int
    p_value: float
    looks: int  # how many times the sequential test looked before it stopped
    report_confidence: float  # the level of ci_low..ci_high (at the last look of a design with interim looks: the
    # decision interval's)


@dataclass(frozen=True)
class Look:
    verdict: Verdict
    effect: Effect
    reason: str


class SequentialTest:
    """Group-sequential paired comparison with Pocock boundaries.

    ``evaluate`` is called with all pairs so far; it only decides at the planned looks (``min_pairs``, any
    ``interim_looks`` and ``max_pairs``) and answers None in between.
    """

    def __init__(self, *, min_pairs: int, max_pairs: int, alpha: float, min_effect: float,
                 interim_looks: Sequence[int] = ()) -> None:
        if not 2 <= min_pairs <= max_pairs:
            raise ValueError("need 2 <= min_pairs <= max_pairs")
        if min_effect < 1:
            raise ValueError("min_effect is an improvement ratio >= 1")
        interim = tuple(interim_looks)
        if any(not min_pairs < n < max_pairs for n in interim) or list(interim) != sorted(set(interim)):
            raise ValueError("interim looks must rise strictly between min_pairs and max_pairs")
        self.min_pairs = min_pairs
        self.max_pairs = max_pairs
        self.alpha = alpha
        self.min_effect = min_effect
        self.looks = sorted({min_pairs, *interim, max_pairs})
        self.per_look_confidence = pocock_level(tuple(self.looks), alpha)
        # The reported level is calibrated for alpha = 0.05; for other alphas it scales alike.
        self.report_confidence = 1 - alpha * (1 - REPORT_CONFIDENCE) / 0.05
        # The level of the reported interval at each look (module doc: with interim looks the last one reports
        # the decision interval).
        last = self.per_look_confidence if interim else self.report_confidence
        self.report_levels = (*(self.report_confidence for _ in self.looks[:-1]), last)

    def effect(self, d: Sequence[float], looks_done: int) -> Effect:
        """The effect after ``len(d)`` pairs, reported as at the ``looks_done``-th planned look."""
        iv = t_interval(d, self.per_look_confidence)
        level = self.report_levels[looks_done - 1]
        shown = t_interval(d, level)
        return Effect(
            improvement=math.exp(iv.mean),
            ci_low=math.exp(shown.low),
            ci_high=math.exp(shown.high),
            decision_low=math.exp(iv.low),
            decision_high=math.exp(iv.high),
            confidence=1 - self.alpha,
            n_pairs=len(d),
            p_value=p_value(d),
            looks=looks_done,
            report_confidence=level,
        )

    def evaluate(self, d: Sequence[float]) -> Look | None:
        """The verdict at a planned look, or None when ``len(d)`` is not a look."""
        n = len(d)
        if n not in self.looks:
            return None
        looks_done = self.looks.index(n) + 1
        eff = self.effect(d, looks_done)
        threshold = self.min_effect
        if eff.decision_low > threshold:
            return Look("change", eff, f"the whole confidence interval lies above the minimum effect {threshold:g}x")
        if eff.decision_high < threshold:
            return Look("keep", eff, f"the whole confidence interval lies below the minimum effect {threshold:g}x")
        if n >= self.max_pairs:
            return Look(
                "keep", eff,
                f"after {n} pairs the interval adjusted for {len(self.looks)} looks "
                f"[{eff.decision_low:.3f}, {eff.decision_high:.3f}] still reaches below the minimum effect {threshold:g}x",
            )
        return Look("continue", eff, "the interval straddles the minimum effect; adding pairs")
