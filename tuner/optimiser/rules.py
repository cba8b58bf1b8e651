"""The optimiser's rules: values the GP would not ask for that must be measured (or may not answer) before the
answer can be trusted. Each rule is an object of its own (``BayesianOptimiser.rules``), handed the optimiser it
reads: its constant(s), in tolerances (log(1 + tolerance) in log(time)) unless said otherwise and settable per
optimiser (``opt.rule(Coverage).coverage_window = 0``), and its reason in one line as its docstring.

Gap rules (``GapRule``) name a configuration to measure; ``BayesianOptimiser._unresolved_gap`` asks them in one
loop, in the order of ``GAP_RULES``, each where it applies (joint or one-knob searches; ``at_stop``: only where a
one-knob search would otherwise stop). The others judge the answer: which probed value may answer
(``HalfStepBelowChord``, ``KeepPrevious``), what the re-measurements go to (``StartWindow``), and when the model's
doubt buys no probe (``AgreeWindow``). The measurements behind each rule and constant: docs/decisions.md (one
entry per adopted rule, with its figure).

A warm search (a calibrated ``prior``): a value the prior measured counts as *seen* wherever a rule asks whether
it is unprobed; readings (observed means) and the answer stay this session's (docs/decisions.md, rule by rule).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from tuner.optimiser.rule_api import GapRule, Rule, Searcher, around_incumbent, lowest_predicted, round_neighbours
from tuner.optimiser.space import Point, key_of


class RoundNeighbours(GapRule):
    """The answer must be a local optimum on the values operators write, by the model and by the readings."""

    def gap(self, opt: Searcher) -> Point | None:
        """1-D: the incumbent's unprobed round neighbour (the lower predicted first), else, where the best reading
        is another round value, its unprobed round neighbour (a smooth model may rank a falling trend over a dip
        that read better), or None. 0 is not the neighbour of 1: it is another mechanism, probed up front."""
        d = opt.dimensions[0]
        probed = opt._seen_values()
        inc, near, mu = around_incumbent(opt)
        fresh = [v for v in near if v not in probed]
        if fresh:
            return {d.name: min(fresh, key=lambda v: mu[v])}
        means = opt._observed_means()
        seen = min(means, key=means.__getitem__)[0]
        coarse = d.round_values()
        around = [v for v in round_neighbours(opt, seen) if v not in probed] if seen != inc and seen in coarse else []
        return lowest_predicted(opt, around) if around else None


class HalfStep(GapRule):
    """A narrow optimum can lie between two round values, where no round value comes within the tolerance."""

    # A half step is probed where the V (``v_gain``) puts it at most this many tolerances above the incumbent:
    # -1 lets one noisy reading move the V's tip a tolerance toward the incumbent and the half step still be read.
    half_step_gain = -1.0
    v_floor = 2.0  # ... and the V's steep side rises this many: a flat stretch at CV 5 % looks like a shallow V

    def gap(self, opt: Searcher) -> Point | None:
        """1-D: the unprobed half step between the incumbent and its better round neighbour (48 between 32 and
        64) where the V puts it at least ``half_step_gain`` tolerances below the incumbent, or None; none on a
        flat stretch, at a bound, or at a tip on the incumbent, where it would only give noise one more chance."""
        d = opt.dimensions[0]
        probed = opt._seen_values()
        inc, near, mu = around_incumbent(opt)
        if len(near) < 2 or inc not in d.round_values():
            return None
        better, other = sorted(near, key=lambda v: mu[v])
        tol = math.log1p(opt.tolerance)
        lo, hi = sorted((inc, better))
        halves = [v for v in d.ladder() if lo < v < hi and v not in probed]
        if not halves:
            return None
        half = halves[len(halves) // 2]
        if self.v_gain(opt, inc, better, other, half, mu) <= self.half_step_gain * tol:
            return None
        return {d.name: half}

    def v_gain(self, opt: Searcher, inc: int, better: int, other: int, half: int, mu: Mapping[int, float]) -> float:
        """How much lower (in log(time)) than the incumbent a V through the incumbent and its two round
        neighbours puts ``half`` — negative where higher, as where the tip is the incumbent (a tip beyond it
        continues the line: the further beyond, the lower); minus infinity where the steep side rises less than
        ``v_floor`` tolerances. The V is symmetric: its slope is the steeper side's, the better side's rise
        places the tip (both sides rising alike: at the incumbent; one level with it: between the two)."""
        d = opt.dimensions[0]
        zi, zb, zo, zh = (d.to_z(v) for v in (inc, better, other, half))
        rise_other, rise_better = mu[other] - mu[inc], mu[better] - mu[inc]
        if rise_other <= self.v_floor * math.log1p(opt.tolerance):
            return -math.inf
        slope = rise_other / abs(zo - zi)
        offset = (abs(zb - zi) - rise_better / slope) / 2  # the tip's distance from the incumbent
        to_half = abs(zh - zi)
        if offset <= 0:
            # The tip at or beyond the incumbent: the same line continued, lower the further beyond it lies.
            return slope * (2 * offset - to_half)
        return slope * offset - slope * abs(to_half - offset)


class HalfStepBelowChord(Rule):
    """A value operators would not write answers only where its readings put it clearly below its neighbours'."""

    # How far (in tolerances) below the line through its round neighbours' means a half step's mean must lie.
    half_step_margin = 1.0

    def above_chord(self, opt: Searcher, config: Point, means: Mapping[tuple[int, ...], float]) -> bool:
        """True for a half step (6, 12, 24, 48 … in a 1-D search) whose measured mean does not lie at least
        ``half_step_margin`` tolerances below the straight line, in log(time) over the knob's scale, through
        its two round neighbours' means: such a value may not be the incumbent, so it never answers. Where the
        tip is a round value, the smooth GP turns the V into a U whose bottom lies next to it, and a half step
        on the line ranks first on one level reading; the cost: a correct half step now and then reads high."""
        d = opt.dimensions[0]
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
        return means[(v,)] > chord - self.half_step_margin * math.log1p(opt.tolerance)


class Duel(GapRule):
    """A half step read once is one more chance for noise: it answers only if a second reading still wins."""

    at_stop = True
    duel = True  # False turns the duel off
    # No duel where the half step read more than this many tolerances below its rival: a lucky reading that
    # far below is rare, and the two probes are saved where the tip is plain. 0 always duels.
    duel_skip = 2.0

    def __init__(self) -> None:
        self.planned: tuple[int, int] | None = None  # the duel once planned: the half step and its round rival
        self.queue: tuple[int, ...] = ()  # the reads still to be made

    def registered(self, opt: Searcher, config: Mapping[str, int]) -> None:
        if self.queue and int(config[opt.dimensions[0].name]) == self.queue[0]:
            self.queue = self.queue[1:]  # a failed read counts as made: the duel does not retry it

    def next_read(self, opt: Searcher) -> Point | None:
        """1-D: the duel's next read while one is under way (it comes before every other rule), else None."""
        return {opt.dimensions[0].name: self.queue[0]} if self.queue else None

    def gap(self, opt: Searcher) -> Point | None:
        """A 1-D search about to answer a half step: plan a duel and return its first read, or None. The half
        step and its better round neighbour (by their readings) are read once more each, in that order; then the
        lower mean wins (``_incumbent``). One duel per search, at most, and only with two probes left."""
        if not self.duel or self.planned is not None or opt.budget - opt.probes < 2:
            return None
        d = opt.dimensions[0]
        half = opt._incumbent()[d.name]
        if half in d.round_values():
            return None
        means = opt._observed_means()
        rivals = [v for v in round_neighbours(opt, half) if (v,) in means]
        if not rivals:
            return None
        rival = min(rivals, key=lambda v: means[(v,)])
        if self.duel_skip > 0 and means[(rival,)] - means[(half,)] > self.duel_skip * math.log1p(opt.tolerance):
            return None
        self.planned = (half, rival)
        self.queue = (half, rival)
        return {d.name: half}

    def lost(self, opt: Searcher) -> int | None:
        """The half step that lost its duel (its mean above its rival's after both were read again), or None."""
        if self.planned is None or self.queue:
            return None
        half, rival = self.planned
        means = opt._observed_means()
        if (half,) in means and (rival,) in means and means[(rival,)] < means[(half,)]:
            return half
        return None


class Coverage(GapRule):
    """A second basin reading level with the best may hold the optimum, which the sweep would find next to it."""

    at_stop = True
    coverage_window = 2.0  # a second basin reading within this many tolerances of the best; 0: off

    def gap(self, opt: Searcher) -> Point | None:
        """A 1-D search about to stop: an unprobed round neighbour of a *second basin*, or None: a probed round
        value reading within ``coverage_window`` tolerances of the best, cut off from the incumbent by a hump
        (a value read a tolerance worse than both). At CV 10 % the GP takes it for noise and goes flat. In the
        incumbent's own basin (a saturating plateau) the rule is silent."""
        if self.coverage_window <= 0:
            return None
        d = opt.dimensions[0]
        means = opt._observed_means()
        best = min(means.values())
        tol = math.log1p(opt.tolerance)
        inc = opt._incumbent()[d.name]
        probed = opt._seen_values()
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
            nbrs = [n for n in round_neighbours(opt, v) if n not in probed]
            if nbrs:
                return lowest_predicted(opt, nbrs)
        return None


class Flank(GapRule):
    """Two adjacent values reading level say the optimum may lie beyond the pair, not only on the incumbent's side."""

    at_stop = True
    flank_window = 2.0  # the better neighbour reads within this many tolerances of the incumbent; 0: off

    def gap(self, opt: Searcher) -> Point | None:
        """A 1-D search about to stop: the round value one step beyond the incumbent's better round neighbour,
        where that neighbour reads within ``flank_window`` tolerances of the incumbent; else None. A GP that
        reads a falling trend toward the bound expects nothing past the pair, where the peak may be; nothing is
        probed where both neighbours read clearly worse (a V), or where that value is probed."""
        if self.flank_window <= 0:
            return None
        d = opt.dimensions[0]
        coarse = d.round_values()
        inc = opt._incumbent()[d.name]
        if inc not in coarse:
            return None
        means = opt._observed_means()
        probed = opt._seen_values()
        i = coarse.index(inc)
        sides = [j for j in (i - 1, i + 1) if 0 <= j < len(coarse) and (coarse[j],) in means]
        if not sides:
            return None
        j = min(sides, key=lambda j: means[(coarse[j],)])
        if means[(coarse[j],)] - means[(inc,)] > self.flank_window * math.log1p(opt.tolerance):
            return None
        k = 2 * j - i
        if not 0 <= k < len(coarse) or coarse[k] in probed or (d._zero_apart and coarse[k] == 0):
            return None
        return {d.name: coarse[k]}


class Edge(GapRule):
    """An optimum past the starting values is otherwise found only where the model dares to extrapolate."""

    joint, one_knob = True, False
    # How far out (on the knob's log2(1 + value) scale) the probe goes: about a factor of four, a start step.
    edge_step = 1.99

    def gap(self, opt: Searcher) -> Point | None:
        """Joint searches: where the incumbent holds the largest (or smallest) value probed on some knob and
        the knob's range goes on, the round value ``edge_step`` further out (at most the bound), the other
        knobs as the incumbent's; silent once the bound is reached or the probe further out is worse. Without
        it, model proposals creep toward such an optimum (1888, 2891, 3998 KiB on one measured trace)."""
        if opt._end - opt.probes <= opt.remeasure:
            return None
        inc = opt._incumbent()
        probed = opt._seen()
        for d in opt.dimensions:
            values = [c[d.name] for c in opt.history.configs] + [c[d.name] for c in opt._prior_configs()]
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
            if key_of(cand, opt.dimensions) not in probed:
                return cand
        return None


class PriorLeader(GapRule):
    """A configuration only the prior measured may be today's best, but it answers only once measured today."""

    joint = True
    # Measured where the model puts it this many tolerances below every configuration this session measured:
    # where it is level with them, the answer is as good, and a flat basin would otherwise send the search
    # through every configuration the prior read in it.
    prior_leader_margin = 0.5

    def gap(self, opt: Searcher) -> Point | None:
        """A warm search: of the configurations only the prior measured, the one the model ranks best, where it
        ranks it ``prior_leader_margin`` tolerances below every configuration measured in this session; else
        None. The incumbent is always a configuration measured today — without this rule, one the prior read
        best (and counts as seen) would never be measured, and never answer."""
        probed = {key_of(c, opt.dimensions) for c in opt.history.configs}
        only_prior = [c for c in opt._prior_configs() if key_of(c, opt.dimensions) not in probed]
        today = list({key_of(c, opt.dimensions): c for c, _ in opt.history.ok}.values())
        if not only_prior or not today:
            return None
        mu_prior, mu_today = opt.predict(only_prior), opt.predict(today)
        assert mu_prior is not None and mu_today is not None
        i = int(np.argmin(mu_prior))
        if mu_prior[i] < min(mu_today) - self.prior_leader_margin * math.log1p(opt.tolerance):
            return only_prior[i]
        return None


class KeepPrevious(Rule):
    """A warm search keeps the previous answer unless today's evidence puts another configuration clearly below it."""

    # Another configuration measured today answers only where the model puts it this many tolerances, and this many
    # standard deviations of the posterior difference (one-sided 5 %), below the previous answer: one noisy reading
    # would move it as often to a worse value as to a better one (the reasons and figures: docs/decisions.md).
    previous_margin = 1.0
    previous_z = 1.645

    def kept(self, opt: Searcher, incumbent: Point, candidates: Sequence[Point]) -> Point:
        """The previous answer instead of ``incumbent`` where it is among ``candidates`` (measured today) and the
        model does not put ``incumbent`` clearly below it (the margin and the z above); else ``incumbent``."""
        prev = opt._previous
        if prev is None or not opt._prior_configs() or prev == incumbent or prev not in candidates:
            return incumbent
        mu, sd = opt.predict([prev, incumbent]), opt._difference_sd(prev, incumbent)
        assert mu is not None
        bar = max(self.previous_margin * math.log1p(opt.tolerance), self.previous_z * sd)
        return incumbent if mu[0] - mu[1] > bar else dict(prev)  # mu[0] - mu[1] > 0: the incumbent is faster

    def stands(self, opt: Searcher, within_noise: Sequence[tuple[int, ...]]) -> bool:
        """After a joint search's re-measurements: the previous answer is among the leaders whose means its
        noise cannot separate from the best (where the model would otherwise decide)."""
        prev = opt._previous
        return prev is not None and bool(opt._prior_configs()) and key_of(prev, opt.dimensions) in within_noise


class StartWindow(Rule):
    """A start configuration read high once is never measured again, unless a re-measurement goes back to it."""

    start_window = 2.0  # the best start reads within this many tolerances of the best reading

    def back_to_start(
        self, opt: Searcher, leaders: list[Point], probed: Mapping[tuple[int, ...], Point],
        means: Mapping[tuple[int, ...], float],
    ) -> None:
        """Joint searches whose ``leaders`` all lie off the initial design: the last one gives way to the start
        configuration (today's included) with the best observed mean, if that reads within ``start_window``
        tolerances of the best reading (where the starts all read far worse, the re-measurements belong near
        the optimum)."""
        if len(opt.dimensions) > 1 and len(leaders) >= 2 and opt._start_keys:
            if not any(key_of(c, opt.dimensions) in opt._start_keys for c in leaders):
                starts = [k for k in opt._start_keys if k in means]
                if starts:
                    back = min(starts, key=means.__getitem__)
                    if means[back] <= min(means.values()) + self.start_window * math.log1p(opt.tolerance):
                        leaders[-1] = probed[back]


class AgreeWindow(Rule):
    """While the model's answer is also the best reading, its doubt about a probed reading buys no probe."""

    # A 1-D search stops on the expected improvement at unprobed values alone while the incumbent's observed
    # mean lies within this many tolerances of the best observed mean (``_max_expected_improvement``).
    agree_window = 1.0

    def readings_agree(self, opt: Searcher) -> bool:
        """True when the model's incumbent is, within ``agree_window`` tolerances, the best by its readings."""
        means = opt._observed_means()
        incumbent = means[key_of(opt._incumbent(), opt.dimensions)]
        return incumbent - min(means.values()) <= self.agree_window * math.log1p(opt.tolerance)


# The gap rules in the order ``BayesianOptimiser._unresolved_gap`` asks them (after a duel's pending reads).
GAP_RULES: tuple[type[GapRule], ...] = (PriorLeader, Edge, RoundNeighbours, HalfStep, Coverage, Flank, Duel)
# Every rule an optimiser holds one of.
RULES: tuple[type[Rule], ...] = (*GAP_RULES, HalfStepBelowChord, KeepPrevious, StartWindow, AgreeWindow)
