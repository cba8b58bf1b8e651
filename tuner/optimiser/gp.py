"""The Bayesian optimiser: a Gaussian process (scikit-optimize, ask/tell) on log(time), with the gap rules.

This is the only module that imports scikit-optimize.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Mapping
from typing import TypeVar

import numpy as np

from tuner.optimiser.base import BaseOptimiser
from tuner.optimiser.near import RangeFinder
from tuner.optimiser.posterior import Posterior
from tuner.optimiser.rule_api import GapRule, Rule
from tuner.optimiser.rules import GAP_RULES, RULES, AgreeWindow, Duel, HalfStepBelowChord, KeepPrevious, StartWindow
from tuner.optimiser.space import Point, Suggestion, key_of, pooled_sd

R = TypeVar("R", bound=Rule)


class BayesianOptimiser(RangeFinder, Posterior, BaseOptimiser):
    """Gaussian-process Bayesian optimisation (scikit-optimize ``Optimizer``) on log(time).

    The GP has a learned white-noise term (skopt's default for ``"GP"``), so repeated probes of one value
    with different times are modelled as noise, not as structure. The rules (``tuner.optimiser.rules``) are
    objects it holds, one of each (``rules``; ``rule(Kind)`` finds one, to read or set its constants); the
    fit and the predictions are ``Posterior``'s (``tuner.optimiser.posterior``), what the answer reports
    ``RangeFinder``'s (``tuner.optimiser.near``).
    """

    kind = "bayesian"

    def __init__(self, **kwargs: object) -> None:
        self.rules: tuple[Rule, ...] = tuple(kind() for kind in RULES)
        super().__init__(**kwargs)  # type: ignore[arg-type]
        from skopt import Optimizer
        from skopt.space import Real

        space = [Real(d.z_low, d.z_high, name=d.name) for d in self.dimensions]
        # skopt keeps the session's observations (Xi, yi), the space's transform, and proposes where the search
        # has nothing of its own to say (ask()); the GP is fitted here (``fit``), on the prior and the probes.
        self._opt = Optimizer(
            space,
            # skopt's default GP (Matern 5/2, learned noise). A length-scale floor of 0.1 was tried to stop
            # point-sized near-optimal ranges; it cut joint-search success at CV 10 % from 14/16 to 8/16,
            # because the optimum measured here (eic 0 at 512 KB readahead) is a narrow dip.
            base_estimator="GP",
            acq_func="EI",
            acq_optimizer="sampling",
            n_initial_points=max(1, len(self._initial)),
            initial_point_generator="lhs",
            random_state=self.seed,
            acq_optimizer_kwargs={"n_points": 2000},
        )
        self._init_posterior()
        # skopt drew 2000 random points and evaluated the acquisition on them after every tell, for an ask()
        # that 1-D searches never make and joint ones only once every round-value product is measured. The
        # draws are owed instead and made, in the same order from the same generator, when ask() is needed,
        # so its proposals are the ones skopt would have made.
        self._draws_owed = 0
        self._next_z: list[float] | None = None
        self._grid: tuple[tuple[int, ...], ...] | None = None

    def _suggest(self) -> Point:
        if len(self.dimensions) == 1 and self._model is not None:
            # 1-D: the acquisition is maximised over the round values (0, 1, powers of two) instead of the
            # continuum: probes land on values an operator would write, never on 45 next to 48. Half steps
            # come only from _unresolved_gap, where the measured curve bends between two round values.
            # A value the prior measured counts as seen.
            d = self.dimensions[0]
            coarse = d.round_values()
            ei = self._expected_improvement([{d.name: v} for v in coarse])
            seen = self._seen_values()
            fresh = [i for i, v in enumerate(coarse) if v not in seen]
            pick = max(fresh or range(len(coarse)), key=lambda i: ei[i])
            return {d.name: coarse[pick]}
        if self._model is not None:
            # Joint searches: the acquisition is maximised over the product of the knobs' round values
            # (0, 1, powers of two, the bounds) — configurations an operator would write — instead of skopt's
            # continuous proposals, which spent the model's probes at readahead 42-93 KiB between 16 and 128
            # and answered there, 5-9 % off an optimum at round values. skopt's ask() remains for when every
            # product is measured (by this session or the prior).
            products = list(itertools.product(*[d.round_values() for d in self.dimensions]))
            measured = self._seen()
            unmeasured = [k for k in products if k not in measured]
            if unmeasured:
                configs = [{d.name: v for d, v in zip(self.dimensions, k, strict=True)} for k in unmeasured]
                ei = self._expected_improvement(configs)
                return configs[int(np.argmax(ei))]
        z = self._ask()
        return {d.name: d.from_z(float(zi)) for d, zi in zip(self.dimensions, z, strict=True)}

    def rule(self, kind: type[R]) -> R:
        """This optimiser's rule of type ``kind``."""
        return next(r for r in self.rules if isinstance(r, kind))

    def register(self, config: Mapping[str, int], value_ms: float | None) -> None:
        for rule in self.rules:
            if isinstance(rule, GapRule):
                rule.registered(self, config)
        super().register(config, value_ms)

    def _register(self, config: Point, log_value: float) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # Bookkeeping only (Xi, yi, the count of initial points): the fit is ours, below.
            self._opt.tell(self._z(config), log_value, fit=False)
        if self._opt._n_initial_points <= 0:
            self._draws_owed += 1  # skopt would have drawn its acquisition sample now
        if self._opt._n_initial_points <= 0 or self.prior_in_use:
            self.fit()

    def _prior_calibrated(self) -> None:
        if self._opt.yi:
            self.fit()

    def _ask(self) -> list[float]:
        """skopt's proposal: before a model its initial points; after, the best of 2000 random points by
        expected improvement, drawn now from skopt's generator after the draws owed — as skopt's tell() made
        them after each fit, so the proposal is the one skopt's ask() returned."""
        opt = self._opt
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if self._model is None or (opt._n_initial_points > 0 and not self.prior_in_use):
                return list(opt.ask())
            from skopt.acquisition import _gaussian_acquisition

            if self._draws_owed or self._next_z is None:
                for _ in range(self._draws_owed - 1):
                    opt.space.rvs(n_samples=opt.n_points, random_state=opt.rng)
                xs = opt.space.transform(opt.space.rvs(n_samples=opt.n_points, random_state=opt.rng))
                values = _gaussian_acquisition(X=xs, model=self._acquisition_model(), y_opt=np.min(self._fitted_y),
                                               acq_func="EI", acq_func_kwargs=opt.acq_func_kwargs)
                bounds = np.array(opt.space.transformed_bounds)
                best = np.clip(xs[np.argmin(values)], bounds[:, 0], bounds[:, 1])
                self._next_z = opt.space.inverse_transform(best.reshape((1, -1)))[0]
                self._draws_owed = 0
            z = self._next_z
            # skopt's avoid_duplicates: a proposal already measured is replaced by a random point.
            if opt.Xi and abs(min(opt.space.distance(z, x) for x in opt.Xi)) <= 1e-8:
                z = opt.space.rvs(random_state=opt.rng)[0]
            return list(z)

    def _config(self, key: tuple[int, ...]) -> Point:
        return {d.name: v for d, v in zip(self.dimensions, key, strict=True)}

    def _candidate_grid(self) -> list[tuple[int, ...]]:
        """The configurations the answer is chosen among (fixed for a search: computed once; a copy)."""
        if self._grid is None:
            per_dim = [d.candidates(limit=2048 if len(self.dimensions) == 1 else 64) for d in self.dimensions]
            self._grid = tuple(itertools.product(*per_dim))
        return list(self._grid)

    def _leaders(self, n: int) -> list[Point]:
        """The ``n`` best probed configurations by the model's prediction (denoised)."""
        probed = {key_of(c, self.dimensions): c for c, _ in self.history.ok}
        mu = self.predict(list(probed.values()))
        if mu is None:
            return super()._leaders(n)
        configs = list(probed.values())
        ranked = [configs[int(i)] for i in np.argsort(mu)]
        leaders = ranked[: max(1, n // 2)]
        # Also the best by its own observations: the model smooths a narrow dip upward toward its neighbours,
        # so a truly better value can sit outside the posterior's top ranks until it is measured again.
        means = self._observed_means()
        best_seen = min(means, key=lambda k: means[k])
        if best_seen not in {key_of(c, self.dimensions) for c in leaders}:
            leaders.append(probed[best_seen])
        # At least two different configurations: the answer is chosen among those measured more than once,
        # and one alone would win by default whatever its re-measurement read.
        for cfg in ranked:
            if len(leaders) >= min(2, n):
                break
            if cfg not in leaders:
                leaders.append(cfg)
        self.rule(StartWindow).back_to_start(self, leaders, probed, means)
        return leaders

    def _incumbent(self) -> Point:
        """The best probed configuration by the model's (denoised) prediction. Where the model cannot tell
        the leaders apart (within 1 % — it smooths a narrow dip toward its neighbours), their own measurements
        decide."""
        probed = list({key_of(c, self.dimensions): c for c, _ in self.history.ok}.values())
        if self.remeasure and self.probes > self._end - self.remeasure:
            # A joint search's last probes re-measured the leaders: among the configurations measured more
            # than once, their own means decide. The stationary GP smooths a narrow dip (eic 0 at 512 KiB,
            # 1.2x better than every neighbour) into its surroundings: on one measured trace it predicted
            # 909 ms where two probes read 505 and 513, and ranked the dip behind a corner measured at 663.
            # Where two leaders' means are closer than their noise can separate (one standard error of the
            # difference), the model decides between them: it pools every probe, so it sees a trend that two or
            # three probes of one value cannot (on a curve still falling at the readahead bound, two lucky probes
            # at 2048 would otherwise beat three honest ones at 5000).
            logs = self._observed_logs()
            repeated = [k for k, v in logs.items() if len(v) > 1]
            if repeated:
                means = {k: sum(logs[k]) / len(logs[k]) for k in repeated}
                first = min(repeated, key=means.__getitem__)
                sigma = pooled_sd([logs[k] for k in repeated])
                within_noise = [
                    k for k in repeated
                    if means[k] - means[first] <= sigma * math.sqrt(1 / len(logs[k]) + 1 / len(logs[first]))
                ]
                configs = [{d.name: v for d, v in zip(self.dimensions, k, strict=True)} for k in within_noise]
                if len(configs) == 1:
                    return configs[0]
                if self.rule(KeepPrevious).stands(self, within_noise):
                    return dict(self._previous or {})
                mu_tied = self.predict(configs)
                assert mu_tied is not None
                return configs[int(np.argmin(mu_tied))]
        if len(self.dimensions) == 1:
            means = self._observed_means()
            lost = self.rule(Duel).lost(self)
            chord = self.rule(HalfStepBelowChord)
            probed = [
                c for c in probed if not chord.above_chord(self, c, means) and c[self.dimensions[0].name] != lost
            ] or probed
        mu = self.predict(probed)
        assert mu is not None
        tied = [c for c, m in zip(probed, mu, strict=True) if m <= min(mu) + 0.01]
        return self.rule(KeepPrevious).kept(self, min(tied, key=self._observed_mean), probed)

    def _unresolved_gap(self) -> Point | None:
        """A value that must be measured before the answer can be trusted, or None: the gap rules
        (``tuner.optimiser.rules.GAP_RULES``), asked in order, each where it applies. Joint searches:
        ``PriorLeader``, ``Edge``. 1-D: the duel's reads while one is under way; then ``PriorLeader``,
        ``RoundNeighbours``, ``HalfStep``; last, and only where the search would otherwise stop (``at_stop``),
        ``Coverage``, ``Flank`` and ``Duel``."""
        if self._initial or self._model is None:
            return None
        joint = len(self.dimensions) > 1
        if not joint and (read := self.rule(Duel).next_read(self)) is not None:
            return read
        stopping = False
        for kind in GAP_RULES:
            rule = self.rule(kind)
            if not (rule.joint if joint else rule.one_knob):
                continue
            if rule.at_stop and not stopping:
                if self._ok_count() < self.min_probes or self._converged() is None:
                    return None
                stopping = True
            if (gap := rule.gap(self)) is not None:
                return gap
        return None

    def _max_expected_improvement(self) -> float | None:
        """Largest expected improvement of log(time) over the candidate grid, against the best predicted
        value at a probed configuration (noise-aware, so a lucky probe does not set the bar).

        1-D: over the round values — but only the unprobed ones while the model's incumbent is also (within
        ``agree_window`` tolerances) the best by its readings (``AgreeWindow``). An unprobed value is all the
        search can probe next (``_suggest`` never proposes a probed one while another is left); the
        improvement the model still expects at a probed value is its doubt about that value's own reading.
        When model and readings disagree — a smooth trend taken over a dip — those probes reshape the model,
        and the search goes on."""
        if self._model is None:
            return None
        if len(self.dimensions) == 1:
            d = self.dimensions[0]
            values = d.round_values()
            if self.rule(AgreeWindow).readings_agree(self):
                probed = self._seen_values()
                values = [v for v in values if v not in probed]
                if not values:
                    return 0.0
            return float(np.max(self._expected_improvement([{d.name: v} for v in values])))
        if self.prior_in_use:
            # A warm joint search (a cold one spends its budget before this rule may stop it): over the round-value
            # products it has not seen — all it can probe next (``_suggest``), as in 1-D.
            seen = self._seen()
            configs = [{d.name: v for d, v in zip(self.dimensions, k, strict=True)}
                       for k in itertools.product(*[d.round_values() for d in self.dimensions]) if k not in seen]
            return float(np.max(self._expected_improvement(configs))) if configs else 0.0
        grid = self._candidate_grid()
        configs = [{d.name: v for d, v in zip(self.dimensions, k, strict=True)} for k in grid]
        return float(np.max(self._expected_improvement(configs)))

    def _model_recommendation(self) -> Suggestion | None:
        if self._model is None:
            return None
        grid = self._candidate_grid()
        assert self._grid is not None  # _candidate_grid() keeps it
        mu = [float(v) for v in self._posterior_at(self._grid, std=False)]  # self.predict(grid's configurations)
        config = self._config  # a grid point as a configuration, only where one is needed (4096 in 2-D)
        # The incumbent is the best *probed* configuration by the model's (denoised) prediction: the model
        # smooths noise away, but is not trusted to extrapolate to a value nobody measured.
        probed = {key_of(c, self.dimensions): c for c, _ in self.history.ok}
        probed_mu = self.predict(list(probed.values()))
        assert probed_mu is not None
        incumbent = self._incumbent()
        best = grid.index(key_of(incumbent, self.dimensions)) if key_of(incumbent, self.dimensions) in grid else None
        if best is None:
            grid.append(key_of(incumbent, self.dimensions))
            mu.append((self.predict([incumbent]) or [min(probed_mu)])[0])
            best = len(grid) - 1
        limit = mu[best] + math.log1p(self.tolerance)
        ranges = self._contiguous_ranges(config(grid[best]), limit)
        # Operators write round values: prefer a measured round value inside the near-optimal range, closest
        # to the best — but only where the model predicts it within half the tolerance: a smooth model
        # understates how steep a narrow optimum is, and rounding must not spend the whole tolerance on its
        # own. Never an unmeasured one: snapping a joint answer at readahead 7932 to an unprobed 4096 cost 7 %.
        snap_limit = mu[best] + math.log1p(self.tolerance) / 2
        # (Searches probe the ladder, whose half steps — 3, 6, 12, 24, 48 … — are round values too.)
        round_sets = [set(d.ladder()) for d in self.dimensions]
        round_near = [
            i
            for i, m in enumerate(mu)
            if m <= snap_limit
            and grid[i] in probed
            and all(
                g in rs and ranges[d.name][0] <= g <= ranges[d.name][1]
                for g, rs, d in zip(grid[i], round_sets, self.dimensions, strict=True)
            )
        ]
        chosen = best
        if round_near:
            bz = self._z(config(grid[best]))
            chosen = min(round_near, key=lambda i: (sum((a - b) ** 2 for a, b in zip(self._z(config(grid[i])), bz)), mu[i]))
        return Suggestion(config(grid[chosen]), math.exp(mu[chosen]), ranges, "model")

    def _contiguous_ranges(self, at: Point, limit: float) -> dict[str, tuple[int, int]]:
        """Per knob, the unbroken run of candidate values around ``at`` (other knobs held at ``at``) whose
        predicted log(time) stays within ``limit``. A range, not a set: "anything from 32 to 512". It never
        reaches past the smallest and largest values probed: beyond them the model only extrapolates."""
        ranges: dict[str, tuple[int, int]] = {}
        for d in self.dimensions:
            # (A prior in use has data too: its configurations count as probed here.)
            probed = [c[d.name] for c, _ in self.history.ok] + [c[d.name] for c in self._prior_configs()]
            lo_p, hi_p = min(probed + [at[d.name]]), max(probed + [at[d.name]])
            values = [v for v in d.candidates(limit=2048 if len(self.dimensions) == 1 else 256) if lo_p <= v <= hi_p]
            values = sorted(set(values) | {at[d.name]})
            mu = self.predict([{**at, d.name: v} for v in values])
            assert mu is not None
            i = min(range(len(values)), key=lambda k: abs(values[k] - at[d.name]))
            lo = hi = i
            while lo > 0 and mu[lo - 1] <= limit:
                lo -= 1
            while hi < len(values) - 1 and mu[hi + 1] <= limit:
                hi += 1
            ranges[d.name] = (values[lo], values[hi])
        return ranges
