"""The gap rules: values the GP would not ask for that must be measured (or may not answer) before the answer
can be trusted. Each rule is a mixin of ``BayesianOptimiser``: its constant(s), in tolerances (log(1 +
tolerance) in log(time)) unless said otherwise and settable per instance, and its reason in one line as its
docstring. ``BayesianOptimiser._unresolved_gap`` asks them in order. The measurements behind each rule and
constant: docs/decisions.md (one entry per adopted rule, with its figure).

A warm search (a calibrated ``prior``): a value the prior measured counts as *seen* wherever a rule asks whether
it is unprobed; readings (observed means) and the answer stay this session's (docs/decisions.md, rule by rule).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from tuner.optimiser.space import Config, Dimension, History, key_of


class _Rule:
    """What the rules read of the optimiser they are mixed into (``BayesianOptimiser``), and shared helpers."""

    dimensions: tuple[Dimension, ...]
    tolerance: float
    budget: int
    remeasure: int
    _end: int
    _previous: Config | None
    history: History
    _start_keys: set[tuple[int, ...]]

    if TYPE_CHECKING:  # provided by BaseOptimiser and BayesianOptimiser; declared here for the type checker

        @property
        def probes(self) -> int: ...
        def register(self, config: Mapping[str, int], value_ms: float | None) -> None: ...
        def predict(self, configs: Sequence[Mapping[str, int]]) -> list[float] | None: ...
        def _incumbent(self) -> Config: ...
        def _observed_means(self) -> dict[tuple[int, ...], float]: ...
        def _prior_configs(self) -> list[Config]: ...
        def _seen(self) -> set[tuple[int, ...]]: ...
        def _seen_values(self) -> set[int]: ...

    def _round_neighbours(self, x: int) -> list[int]:
        """1-D: the round values on either side of ``x`` (0 is not the neighbour of 1 where it is kept apart)."""
        d = self.dimensions[0]
        coarse = d.round_values()
        below = [v for v in coarse if v < x and not (d._zero_apart and v == 0 and x > 0)]
        above = [v for v in coarse if v > x]
        return [v for v in (below[-1] if below else None, above[0] if above else None) if v is not None]

    def _around_incumbent(self) -> tuple[int, list[int], dict[int, float]]:
        """1-D: the incumbent, its round neighbours, and the model's prediction at each of them."""
        d = self.dimensions[0]
        inc = self._incumbent()[d.name]
        near = self._round_neighbours(inc)
        mu = dict(zip(near + [inc], self.predict([{d.name: v} for v in near + [inc]]) or [], strict=True))
        return inc, near, mu

    def _lowest_predicted(self, values: list[int]) -> Config:
        """1-D: the one of ``values`` the model predicts lowest (the first of equals)."""
        d = self.dimensions[0]
        mu = self.predict([{d.name: v} for v in values])
        assert mu is not None
        return {d.name: values[int(np.argmin(mu))]}


class RoundNeighbours(_Rule):
    """The answer must be a local optimum on the values operators write, by the model and by the readings."""

    def _neighbour_gap(self) -> Config | None:
        """1-D: the incumbent's unprobed round neighbour (the lower predicted first), else, where the best reading
        is another round value, its unprobed round neighbour (a smooth model may rank a falling trend over a dip
        that read better), or None. 0 is not the neighbour of 1: it is another mechanism, probed up front."""
        d = self.dimensions[0]
        probed = self._seen_values()
        inc, near, mu = self._around_incumbent()
        fresh = [v for v in near if v not in probed]
        if fresh:
            return {d.name: min(fresh, key=lambda v: mu[v])}
        means = self._observed_means()
        seen = min(means, key=means.__getitem__)[0]
        coarse = d.round_values()
        around = [v for v in self._round_neighbours(seen) if v not in probed] if seen != inc and seen in coarse else []
        return self._lowest_predicted(around) if around else None


class HalfStep(_Rule):
    """A narrow optimum can lie between two round values, where no round value comes within the tolerance."""

    # A half step is probed where the V (``_v_gain``) puts it at most this many tolerances above the incumbent:
    # -1 lets one noisy reading move the V's tip a tolerance toward the incumbent and the half step still be read.
    half_step_gain = -1.0
    v_floor = 2.0  # ... and the V's steep side rises this many: a flat stretch at CV 5 % looks like a shallow V

    def _half_step_gap(self) -> Config | None:
        """1-D: the unprobed half step between the incumbent and its better round neighbour (48 between 32 and
        64) where the V puts it at least ``half_step_gain`` tolerances below the incumbent, or None; none on a
        flat stretch, at a bound, or at a tip on the incumbent, where it would only give noise one more chance."""
        d = self.dimensions[0]
        probed = self._seen_values()
        inc, near, mu = self._around_incumbent()
        if len(near) < 2 or inc not in d.round_values():
            return None
        better, other = sorted(near, key=lambda v: mu[v])
        tol = math.log1p(self.tolerance)
        lo, hi = sorted((inc, better))
        halves = [v for v in d.ladder() if lo < v < hi and v not in probed]
        if not halves:
            return None
        half = halves[len(halves) // 2]
        if self._v_gain(inc, better, other, half, mu) <= self.half_step_gain * tol:
            return None
        return {d.name: half}

    def _v_gain(self, inc: int, better: int, other: int, half: int, mu: Mapping[int, float]) -> float:
        """How much lower (in log(time)) than the incumbent a V through the incumbent and its two round
        neighbours puts ``half`` — negative where higher, as where the tip is the incumbent (a tip beyond it
        continues the line: the further beyond, the lower); minus infinity where the steep side rises less than
        ``v_floor`` tolerances. The V is symmetric: its slope is the steeper side's, the better side's rise
        places the tip (both sides rising alike: at the incumbent; one level with it: between the two)."""
        d = self.dimensions[0]
        zi, zb, zo, zh = (d.to_z(v) for v in (inc, better, other, half))
        rise_other, rise_better = mu[other] - mu[inc], mu[better] - mu[inc]
        if rise_other <= self.v_floor * math.log1p(self.tolerance):
            return -math.inf
        slope = rise_other / abs(zo - zi)
        offset = (abs(zb - zi) - rise_better / slope) / 2  # the tip's distance from the incumbent
        to_half = abs(zh - zi)
        if offset <= 0:
            # The tip at or beyond the incumbent: the same line continued, lower the further beyond it lies.
            return slope * (2 * offset - to_half)
        return slope * offset - slope * abs(to_half - offset)


class HalfStepBelowChord(_Rule):
    """A value operators would not write answers only where its readings put it clearly below its neighbours'."""

    # How far (in tolerances) below the line through its round neighbours' means a half step's mean must lie.
    half_step_margin = 1.0

    def _half_step_above_chord(self, config: Config, means: Mapping[tuple[int, ...], float]) -> bool:
        """True for a half step (6, 12, 24, 48 … in a 1-D search) whose measured mean does not lie at least
        ``half_step_margin`` tolerances below the straight line, in log(time) over the knob's scale, through
        its two round neighbours' means: such a value may not be the incumbent, so it never answers. Where the
        tip is a round value, the smooth GP turns the V into a U whose bottom lies next to it, and a half step
        on the line ranks first on one level reading; the cost: a correct half step now and then reads high."""
        d = self.dimensions[0]
        v = config[d.name]
        rounds = d.round_values()
        if v in rounds:
            return False
        below = [r for r in rounds if r < v]
        above = [r for r in rounds if r > v]
        if not below or not above:
            return False
        lo, hi = below[-1], above[0]
        if (lo,) not in means or (hi,) not in means:
            return False
        zl, zh, zv = d.to_z(lo), d.to_z(hi), d.to_z(v)
        chord = means[(lo,)] + (means[(hi,)] - means[(lo,)]) * (zv - zl) / (zh - zl)
        return means[(v,)] > chord - self.half_step_margin * math.log1p(self.tolerance)


class Duel(_Rule):
    """A half step read once is one more chance for noise: it answers only if a second reading still wins."""

    duel = True  # False turns the duel off
    # No duel where the half step read more than this many tolerances below its rival: a lucky reading that
    # far below is rare, and the two probes are saved where the tip is plain. 0 always duels.
    duel_skip = 2.0
    # The duel once planned (the half step and its round rival), and the reads still to be made.
    _duel: tuple[int, int] | None = None
    _duel_queue: tuple[int, ...] = ()

    def register(self, config: Mapping[str, int], value_ms: float | None) -> None:
        if self._duel_queue and int(config[self.dimensions[0].name]) == self._duel_queue[0]:
            self._duel_queue = self._duel_queue[1:]  # a failed read counts as made: the duel does not retry it
        super().register(config, value_ms)

    def _duel_gap(self) -> Config | None:
        """A 1-D search about to answer a half step: plan a duel and return its first read, or None. The half
        step and its better round neighbour (by their readings) are read once more each, in that order; then the
        lower mean wins (``_incumbent``). One duel per search, at most, and only with two probes left."""
        if not self.duel or self._duel is not None or self.budget - self.probes < 2:
            return None
        d = self.dimensions[0]
        half = self._incumbent()[d.name]
        if half in d.round_values():
            return None
        means = self._observed_means()
        rivals = [v for v in self._round_neighbours(half) if (v,) in means]
        if not rivals:
            return None
        rival = min(rivals, key=lambda v: means[(v,)])
        if self.duel_skip > 0 and means[(rival,)] - means[(half,)] > self.duel_skip * math.log1p(self.tolerance):
            return None
        self._duel = (half, rival)
        self._duel_queue = (half, rival)
        return {d.name: half}

    def _lost_duel(self) -> int | None:
        """The half step that lost its duel (its mean above its rival's after both were read again), or None."""
        if self._duel is None or self._duel_queue:
            return None
        half, rival = self._duel
        means = self._observed_means()
        if (half,) in means and (rival,) in means and means[(rival,)] < means[(half,)]:
            return half
        return None


class Coverage(_Rule):
    """A second basin reading level with the best may hold the optimum, which the sweep would find next to it."""

    coverage_window = 2.0  # a second basin reading within this many tolerances of the best; 0: off

    def _coverage_gap(self) -> Config | None:
        """A 1-D search about to stop: an unprobed round neighbour of a *second basin*, or None: a probed round
        value reading within ``coverage_window`` tolerances of the best, cut off from the incumbent by a hump
        (a value read a tolerance worse than both). At CV 10 % the GP takes it for noise and goes flat. In the
        incumbent's own basin (a saturating plateau) the rule is silent."""
        if self.coverage_window <= 0:
            return None
        d = self.dimensions[0]
        means = self._observed_means()
        best = min(means.values())
        tol = math.log1p(self.tolerance)
        inc = self._incumbent()[d.name]
        probed = self._seen_values()
        coarse = d.round_values()
        for key in sorted(means, key=means.__getitem__):
            if means[key] > best + self.coverage_window * tol:
                break
            v = key[0]
            if v not in coarse or v == inc:
                continue
            lo, hi = sorted((v, inc))
            hump = max((m for k, m in means.items() if lo < k[0] < hi), default=-math.inf)
            if hump <= max(means[key], means[(inc,)]) + tol:
                continue  # the incumbent's own basin
            nbrs = [n for n in self._round_neighbours(v) if n not in probed]
            if nbrs:
                return self._lowest_predicted(nbrs)
        return None


class Flank(_Rule):
    """Two adjacent values reading level say the optimum may lie beyond the pair, not only on the incumbent's side."""

    flank_window = 2.0  # the better neighbour reads within this many tolerances of the incumbent; 0: off

    def _flank_gap(self) -> Config | None:
        """A 1-D search about to stop: the round value one step beyond the incumbent's better round neighbour,
        where that neighbour reads within ``flank_window`` tolerances of the incumbent; else None. A GP that
        reads a falling trend toward the bound expects nothing past the pair, where the peak may be; nothing is
        probed where both neighbours read clearly worse (a V), or where that value is probed."""
        if self.flank_window <= 0:
            return None
        d = self.dimensions[0]
        coarse = d.round_values()
        inc = self._incumbent()[d.name]
        if inc not in coarse:
            return None
        means = self._observed_means()
        probed = self._seen_values()
        i = coarse.index(inc)
        sides = [j for j in (i - 1, i + 1) if 0 <= j < len(coarse) and (coarse[j],) in means]
        if not sides:
            return None
        j = min(sides, key=lambda j: means[(coarse[j],)])
        if means[(coarse[j],)] - means[(inc,)] > self.flank_window * math.log1p(self.tolerance):
            return None
        k = 2 * j - i
        if not 0 <= k < len(coarse) or coarse[k] in probed or (d._zero_apart and coarse[k] == 0):
            return None
        return {d.name: coarse[k]}


class Edge(_Rule):
    """An optimum past the starting values is otherwise found only where the model dares to extrapolate."""

    # How far out (on the knob's log2(1 + value) scale) the probe goes: about a factor of four, a start step.
    edge_step = 1.99

    def _edge_probe(self) -> Config | None:
        """Joint searches: where the incumbent holds the largest (or smallest) value probed on some knob and
        the knob's range goes on, the round value ``edge_step`` further out (at most the bound), the other
        knobs as the incumbent's; silent once the bound is reached or the probe further out is worse. Without
        it, model proposals creep toward such an optimum (1888, 2891, 3998 KiB on one measured trace)."""
        if self._end - self.probes <= self.remeasure:
            return None
        inc = self._incumbent()
        probed = self._seen()
        for d in self.dimensions:
            values = [c[d.name] for c in self.history.configs] + [c[d.name] for c in self._prior_configs()]
            z = d.to_z(inc[d.name])
            rounds = d.round_values()
            if inc[d.name] == max(values) and inc[d.name] < d.high:
                out = [v for v in rounds if d.to_z(v) >= z + self.edge_step] or [d.snap(d.high)]
                target = out[0]
            elif inc[d.name] == min(values) and inc[d.name] > d.low:
                out = [v for v in rounds if d.to_z(v) <= z - self.edge_step] or [d.snap(d.low)]
                target = out[-1]
            else:
                continue
            cand = {**inc, d.name: target}
            if key_of(cand, self.dimensions) not in probed:
                return cand
        return None


class PriorLeader(_Rule):
    """A configuration only the prior measured may be today's best, but it answers only once measured today."""

    # Measured where the model puts it this many tolerances below every configuration this session measured:
    # where it is level with them, the answer is as good, and a flat basin would otherwise send the search
    # through every configuration the prior read in it.
    prior_leader_margin = 0.5

    def _prior_leader_gap(self) -> Config | None:
        """A warm search: of the configurations only the prior measured, the one the model ranks best, where it
        ranks it ``prior_leader_margin`` tolerances below every configuration measured in this session; else
        None. The incumbent is always a configuration measured today — without this rule, one the prior read
        best (and counts as seen) would never be measured, and never answer."""
        probed = {key_of(c, self.dimensions) for c in self.history.configs}
        only_prior = [c for c in self._prior_configs() if key_of(c, self.dimensions) not in probed]
        today = list({key_of(c, self.dimensions): c for c, _ in self.history.ok}.values())
        if not only_prior or not today:
            return None
        mu_prior, mu_today = self.predict(only_prior), self.predict(today)
        assert mu_prior is not None and mu_today is not None
        i = int(np.argmin(mu_prior))
        if mu_prior[i] < min(mu_today) - self.prior_leader_margin * math.log1p(self.tolerance):
            return only_prior[i]
        return None


class KeepPrevious(_Rule):
    """A warm search keeps the previous answer unless today's evidence puts another configuration clearly below it."""

    # Another configuration measured today answers only where the model puts it this many tolerances, and this many
    # standard deviations of the posterior difference (one-sided 5 %), below the previous answer: one noisy reading
    # would move it as often to a worse value as to a better one (the reasons and figures: docs/decisions.md).
    previous_margin = 1.0
    previous_z = 1.645

    def _kept_previous(self, incumbent: Config, candidates: Sequence[Config]) -> Config:
        """The previous answer instead of ``incumbent`` where it is among ``candidates`` (measured today) and the
        model does not put ``incumbent`` clearly below it (the margin and the z above); else ``incumbent``."""
        prev = self._previous
        if prev is None or not self._prior_configs() or prev == incumbent or prev not in candidates:
            return incumbent
        mu, sd = self.predict([prev, incumbent]), self._difference_sd(prev, incumbent)  # type: ignore[attr-defined]
        assert mu is not None
        bar = max(self.previous_margin * math.log1p(self.tolerance), self.previous_z * sd)
        return incumbent if mu[0] - mu[1] > bar else dict(prev)  # mu[0] - mu[1] > 0: the incumbent is faster

    def _previous_stands(self, within_noise: Sequence[tuple[int, ...]]) -> bool:
        """After a joint search's re-measurements: the previous answer is among the leaders whose means its
        noise cannot separate from the best (where the model would otherwise decide)."""
        prev = self._previous
        return prev is not None and bool(self._prior_configs()) and key_of(prev, self.dimensions) in within_noise


class StartWindow(_Rule):
    """A start configuration read high once is never measured again, unless a re-measurement goes back to it."""

    start_window = 2.0  # the best start reads within this many tolerances of the best reading

    def _back_to_start(
        self, leaders: list[Config], probed: Mapping[tuple[int, ...], Config], means: Mapping[tuple[int, ...], float]
    ) -> None:
        """Joint searches whose ``leaders`` all lie off the initial design: the last one gives way to the start
        configuration (today's included) with the best observed mean, if that reads within ``start_window``
        tolerances of the best reading (where the starts all read far worse, the re-measurements belong near
        the optimum)."""
        if len(self.dimensions) > 1 and len(leaders) >= 2 and self._start_keys:
            if not any(key_of(c, self.dimensions) in self._start_keys for c in leaders):
                starts = [k for k in self._start_keys if k in means]
                if starts:
                    back = min(starts, key=means.__getitem__)
                    if means[back] <= min(means.values()) + self.start_window * math.log1p(self.tolerance):
                        leaders[-1] = probed[back]


class AgreeWindow(_Rule):
    """While the model's answer is also the best reading, its doubt about a probed reading buys no probe."""

    # A 1-D search stops on the expected improvement at unprobed values alone while the incumbent's observed
    # mean lies within this many tolerances of the best observed mean (``_max_expected_improvement``).
    agree_window = 1.0

    def _readings_agree(self) -> bool:
        """True when the model's incumbent is, within ``agree_window`` tolerances, the best by its readings."""
        means = self._observed_means()
        incumbent = means[key_of(self._incumbent(), self.dimensions)]
        return incumbent - min(means.values()) <= self.agree_window * math.log1p(self.tolerance)
