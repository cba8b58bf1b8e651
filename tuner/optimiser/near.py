"""What the answer reports: per knob its near-optimal range — the values the measurements cannot tell
apart from the best — and, on a plateau, the answer an operator would expect. A mixin of ``BayesianOptimiser``,
after the search: nothing here changes what the search probes or when it stops (``BaseOptimiser._answer``)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from tuner.report.near import NearOptimal, NearRange
from tuner.optimiser.space import Point, Dimension, History, Suggestion, key_of, pooled_sd


class RangeFinder:
    """The reported answer and its ranges, from the search's answer (``recommendation`` → ``_report``)."""

    dimensions: tuple[Dimension, ...]
    tolerance: float
    min_effect: float
    alpha: float
    history: History
    _model: Any

    if TYPE_CHECKING:  # provided by BaseOptimiser, Posterior and BayesianOptimiser

        def predict(self, configs: Any) -> list[float] | None: ...
        def _incumbent(self) -> Point: ...
        def _observed_means(self) -> dict[tuple[int, ...], float]: ...
        def _observed_logs(self) -> dict[tuple[int, ...], list[float]]: ...
        def _prior_configs(self) -> list[Point]: ...
        def _z(self, config: Any) -> list[float]: ...
        def _knob_range(self, d: Dimension, low: int, high: int, plateau: bool = False) -> NearRange: ...
        def _with_noise(self, noise_sd: float) -> Any: ...
        def _noise_sd(self, model: Any = None) -> float: ...
        def _differences(self, configs: Any, ref: Any, model: Any = None) -> tuple[Any, Any]: ...
        def _report_as_found(self, found: Suggestion) -> Suggestion: ...

    # A plateau: the measured values level with the best (``_report``) lie at least this far apart on the knob's
    # log2(1 + value) scale — two octaves, a factor of about four (16 and 64, 256 and 1000).
    plateau_octaves = 2.0

    def _report(self, found: Suggestion) -> Suggestion:
        """The answer and its near-optimal ranges, as ``recommendation`` reports them.

        The range (per knob, the other knobs at the best): the values the measurements cannot tell apart from the
        best by more than ``min_effect`` at ``1 − alpha`` — the bar a confirmation must clear to call one value
        better than another (``_indistinguishable``). Never past the values measured: beyond them the model
        only extrapolates. ``NearOptimal.given_noise`` recomputes it for a reading noise measured since.

        Level with the best: the measured values inside the range that the model, and their own readings, put
        within half the tolerance of the best (the search's own bar for rounding, ``_model_recommendation``).
        Where they lie at least ``plateau_octaves`` apart the knob is on a plateau, and the answer is the
        smallest of them that an operator would write (a ladder value): on a plateau the least surprising
        value, and one that repeat sessions find again. Elsewhere the answer is the search's. (Today's value is
        not preferred here: the confirmation measures it against the answer, and ``core.decide`` keeps it, with
        that evidence, where it cannot be told apart.)"""
        if found.source != "model" or self._model is None:
            return self._report_as_found(found)
        best = self._incumbent()
        floor = self._repeat_noise()
        ranges = self._indistinguishable(best, noise_sd=floor)
        mu_best = (self.predict([best]) or [0.0])[0]
        limit = mu_best + math.log1p(self.tolerance) / 2
        probed = list({key_of(c, self.dimensions): c for c, _ in self.history.ok}.values())
        mu = self.predict(probed)
        assert mu is not None
        ladders = [set(d.ladder()) for d in self.dimensions]

        def inside(c: Point) -> bool:
            return all(ranges[d.name][0] <= c[d.name] <= ranges[d.name][1] for d in self.dimensions)

        # Level with the best by the model and by its own readings: a fit that puts every difference down to noise
        # (skopt's GP does, on some draws: a flat mean, the readings 2.4x apart) must not make a value level.
        means = self._observed_means()
        read_limit = means.get(key_of(best, self.dimensions), mu_best) + math.log1p(self.tolerance) / 2
        level = [c for c, m in zip(probed, mu, strict=True)
                 if m <= limit and means[key_of(c, self.dimensions)] <= read_limit and inside(c)]
        plateau = {d.name: len({c[d.name] for c in level}) > 1
                   and max(d.to_z(c[d.name]) for c in level) - min(d.to_z(c[d.name]) for c in level)
                   >= self.plateau_octaves for d in self.dimensions}
        chosen = found.config
        flat = [d for d in self.dimensions if plateau[d.name]]
        inside_probed = [c for c in probed if inside(c)]

        logs = self._observed_logs()

        def trusted(c: Point) -> bool:
            # Not the lowest value measured inside the range on a plateau knob, unless read more than once: at the
            # range's lower end one lucky reading of a shoulder is what makes a value level (a search answered eic
            # 32, 9 % slower than the best, on one such reading), and the next session's range may begin above it.
            return (c == best or len(logs[key_of(c, self.dimensions)]) > 1
                    or all(any(u[f.name] < c[f.name] for u in inside_probed) for f in flat))

        rounded = [c for c in level if all(c[d.name] in ls for d, ls in zip(self.dimensions, ladders, strict=True))
                   and trusted(c)]
        if flat and rounded:
            bz = self._z(best)

            def smallest_then_nearest(c: Point) -> tuple[float, float]:
                return (math.fsum(f.to_z(c[f.name]) for f in flat),
                        math.fsum((a - b) ** 2 for a, b in zip(self._z(c), bz, strict=True)))

            pick: Point = min(rounded, key=smallest_then_nearest)
            chosen = dict(pick)

        def knob_ranges(found_ranges: dict[str, tuple[int, int]]) -> dict[str, NearRange]:
            out: dict[str, NearRange] = {}
            for d in self.dimensions:
                lo, hi = found_ranges[d.name]
                out[d.name] = self._knob_range(d, min(lo, chosen[d.name]), max(hi, chosen[d.name]), plateau[d.name])
            return out

        def given_noise(noise_sd: float) -> dict[str, NearRange]:
            wider = self._indistinguishable(best, noise_sd=max(noise_sd, floor))
            return knob_ranges({k: (min(lo, ranges[k][0]), max(hi, ranges[k][1])) for k, (lo, hi) in wider.items()})

        predicted = found.predicted_ms if chosen == found.config else math.exp((self.predict([chosen]) or [0.0])[0])
        return Suggestion(chosen, predicted, NearOptimal(knob_ranges(ranges), given_noise), "model")

    def _repeat_noise(self) -> float:
        """The noise of one reading as this search's own repeated readings show it: the standard deviation of
        log(time) pooled within the configurations read more than once (0 with fewer than two degrees of
        freedom). A floor under the model's, which with single readings can take every reading for the truth —
        and where no confirmation follows (the answer is today's value), nothing else widens the ranges."""
        groups = [v for v in self._observed_logs().values() if len(v) > 1]
        return pooled_sd(groups) if sum(len(g) - 1 for g in groups) >= 2 else 0.0

    def _indistinguishable(self, best: Point, *, noise_sd: float = 0.0) -> dict[str, tuple[int, int]]:
        """Per knob (the other knobs at ``best``): the unbroken run of candidate values around ``best`` that the
        measurements cannot tell apart from it by more than the minimum effect (``_report``), between the
        smallest and largest values measured. A value measured in this session is judged by its own readings
        against the best's (their means, with the model's noise per reading); a value between them, by the model.

        Not the model at measured values: a smooth fit carries a trend across them with a confidence the
        readings do not have (on the sandbox one put eic 512, read 8 % *faster* than 1000, 10 % slower at
        ±3 %), and a fit that puts every difference down to noise (a flat mean, a small spread) would call
        readings 2.4x apart level. ``noise_sd``: a reading's noise measured since (``NearOptimal.given_noise``),
        the least both tests assume."""
        from statistics import NormalDist

        bar = math.log(self.min_effect)
        z = NormalDist().inv_cdf(1 - self.alpha / 2)
        logs = self._observed_logs()
        best_logs = logs.get(key_of(best, self.dimensions))
        model = self._with_noise(noise_sd)
        noise_sd = self._noise_sd(model)
        ranges: dict[str, tuple[int, int]] = {}
        for d in self.dimensions:
            probed = [c[d.name] for c, _ in self.history.ok] + [c[d.name] for c in self._prior_configs()]
            lo_p, hi_p = min(probed + [best[d.name]]), max(probed + [best[d.name]])
            values = [v for v in d.candidates(limit=2048 if len(self.dimensions) == 1 else 256) if lo_p <= v <= hi_p]
            values = sorted(set(values) | {best[d.name]})
            configs = [{**best, d.name: v} for v in values]
            mean, sd = self._differences(configs, best, model)
            ok = [bool(m - z * s <= bar) for m, s in zip(mean, sd, strict=True)]
            measured = [False] * len(values)
            if best_logs:
                for j, c in enumerate(configs):
                    mine = logs.get(key_of(c, self.dimensions))
                    if mine:  # measured: its own readings decide, whatever the fitted curve says about it
                        gap = sum(mine) / len(mine) - sum(best_logs) / len(best_logs)
                        ok[j] = gap - z * noise_sd * math.sqrt(1 / len(mine) + 1 / len(best_logs)) <= bar
                        measured[j] = True
            i = values.index(best[d.name])
            ok[i] = measured[i] = True
            # An unbroken run, not every value that passes: "anything from 16 to 1000". First the measured values
            # around the best that pass, and everything between them; then, into the gap toward the next measured
            # value, the unmeasured ones the model cannot tell apart. (The hull of every value that passes
            # covered the true optimum 0.964 / 0.988 of the time at CV 10 / 5 %, against 0.934 / 0.980, for
            # ranges 1.4 times as wide that spanned the valleys between two basins.)
            marks = [j for j in range(len(values)) if measured[j]]
            k = marks.index(i)
            lo_k = hi_k = k
            while lo_k > 0 and ok[marks[lo_k - 1]]:
                lo_k -= 1
            while hi_k < len(marks) - 1 and ok[marks[hi_k + 1]]:
                hi_k += 1
            lo, hi = marks[lo_k], marks[hi_k]
            # Toward a measured value told apart, at most half way (on the search's scale): the model alone would
            # carry the range to just short of it (eic 999 in, 1000 out), where the readings say the boundary lies
            # anywhere in between. (Coverage of the true optimum and width, as a share of the searched range, at
            # CV 10 / 5 % on the shipped, check and random surfaces: without the gaps 0.904 / 0.950, 0.259 / 0.229;
            # the whole gap by the model 0.935 / 0.980, 0.353 / 0.316; half way 0.934 / 0.979, 0.335 / 0.299.)
            lo_m, hi_m = lo, hi
            lo_stop = (d.to_z(values[lo_m]) + d.to_z(values[marks[lo_k - 1]])) / 2 if lo_k > 0 else -math.inf
            hi_stop = (d.to_z(values[hi_m]) + d.to_z(values[marks[hi_k + 1]])) / 2 if hi_k < len(marks) - 1 else math.inf
            while lo > 0 and not measured[lo - 1] and ok[lo - 1] and d.to_z(values[lo - 1]) >= lo_stop:
                lo -= 1
            while hi < len(values) - 1 and not measured[hi + 1] and ok[hi + 1] and d.to_z(values[hi + 1]) <= hi_stop:
                hi += 1
            ranges[d.name] = (values[lo], values[hi])
        return ranges
