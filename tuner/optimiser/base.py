"""The optimisers' shared bookkeeping (``BaseOptimiser``), prior observations from earlier sessions, and the
random-search baseline."""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Mapping, Sequence

from tuner.optimiser.prior import Prior
from tuner.report.near import NearOptimal, NearRange
from tuner.optimiser.space import Point, Dimension, History, Suggestion, key_of


class BaseOptimiser:
    """Shared bookkeeping: initial design, validation, history, stopping rule."""

    kind = "base"

    def __init__(
        self,
        *,
        dimensions: Sequence[Dimension],
        initial: Sequence[Mapping[str, int]] = (),
        seed: int = 0,
        budget: int = 14,
        min_probes: int = 7,
        patience: int = 3,
        tolerance: float = 0.05,
        prior: Sequence[tuple[Mapping[str, int], float]] = (),
        previous: Mapping[str, int] | None = None,
        fallback: Sequence[Mapping[str, int]] = (),
        min_effect: float = 1.05,
        alpha: float = 0.05,
    ) -> None:
        """``prior``: observations (configuration, time in ms) of earlier sessions on the same target, oldest
        first, as the caller chose them (``tuner.optimiser.prior``); ``previous``: the configuration the last
        of those sessions recommended (``rules.KeepPrevious``); ``initial`` is then the warm design (today's
        values and the previous answer), and ``fallback`` the design to run where the prior cannot be used
        (the policy's starts): from the outset where no prior observation fits these dimensions, else after
        the warm design where none of its configurations was measured in both (without a fallback the search
        goes on from the warm design alone).

        ``min_effect`` and ``alpha``: the policy's minimum effect and error rate, which bound the near-optimal
        range (``recommendation``); they do not change what the search probes."""
        if not dimensions:
            raise ValueError("at least one dimension")
        self.dimensions = tuple(dimensions)
        self.seed = seed
        self.budget = budget
        self.min_probes = min(min_probes, budget)
        self.patience = patience
        self.tolerance = tolerance
        if min_effect < 1 or not 0 < alpha < 1:
            raise ValueError(f"min_effect must be at least 1 and alpha in (0, 1), not {min_effect} and {alpha}")
        self.min_effect = min_effect
        self.alpha = alpha
        # Probes at the end of the budget spent re-measuring the leading candidates (joint searches): two,
        # on two configurations. Four left the model only six proposals after today's value and the 3 x 3
        # start, and where a narrow optimum lies between the starts it often never probed a good one.
        self.remeasure = 2 if len(dimensions) > 1 else 0
        self._remeasure_plan: list[Point] | None = None
        # Where the search ends: the budget, or — a warm joint search that converged early — the probe after its
        # re-measurements, with the reason it converged.
        self._end = budget
        self._end_reason: str | None = None
        # Stop when the best expected improvement (in log-time) is below a quarter of the tolerance.
        self.ei_stop = math.log1p(tolerance) / 4
        self._initial: list[Point] = []
        # The initial design, kept after it has been probed (joint re-measurements look back at it).
        self._start_keys: set[tuple[int, ...]] = set()
        self._prior = Prior.compress(self.dimensions, prior, self.prior_per_config)
        self._fallback = [self._validate(cfg) for cfg in fallback]
        self._previous: Point | None = None
        if previous is not None and self._prior.observations:
            try:
                self._previous = self._validate(previous)
            except (ValueError, TypeError):
                self._previous = None  # another knob set or range: no previous answer to keep
        # Where no prior observation fits, the search is the cold one from the start.
        for cfg in initial if self._prior.observations or not self._fallback else self._fallback:
            self._add_start(self._validate(cfg))
        if not self._prior.observations:
            self._fallback = []
        self.history = History()
        # After each successful probe: the search's answer, its predicted log(time), its near-optimal box.
        self._best_trace: list[tuple[tuple[int, ...], float, dict[str, tuple[int, int]]]] = []

    # How many of a configuration's latest prior readings its one compressed point averages. Not tuned: the
    # latest describe today's target best, and three readings already halve one reading's noise (in log-sd).
    prior_per_config = 3

    def _add_start(self, clean: Point) -> None:
        if key_of(clean, self.dimensions) not in self._start_keys:
            self._start_keys.add(key_of(clean, self.dimensions))
            self._initial.append(clean)

    # -- the prior ----------------------------------------------------------------------------------
    @property
    def prior_dropped(self) -> int:
        """Prior observations this search's dimensions cannot hold (another knob set, out of range, off the
        quantum, not a positive time): dropped silently, counted here."""
        return self._prior.dropped

    @property
    def prior_status(self) -> str:
        """What became of the prior, in one sentence (for the report and the log)."""
        return self._prior.status

    @property
    def prior_offset(self) -> float | None:
        """The calibration: log(this session's time / the prior's) at the configurations measured in both,
        averaged; None until the prior is in use."""
        return self._prior.offset

    @property
    def prior_in_use(self) -> bool:
        return self._prior.offset is not None

    @property
    def prior_configurations(self) -> int:
        """How many configurations the prior holds once compressed to one point per configuration — what a prior
        in use adds to the model's fitted set, however many stored observations it came from."""
        return len(self._prior.points)

    def _prior_keys(self) -> set[tuple[int, ...]]:
        """Configurations the prior has measured, once it is in use (else none): they count as seen — no
        proposal goes to them while unseen values remain — but never as probes of this session."""
        return set(self._prior.points) if self._prior.offset is not None else set()

    def _prior_configs(self) -> list[Point]:
        """The same, as configurations (in the prior's order)."""
        if self._prior.offset is None:
            return []
        return [{d.name: v for d, v in zip(self.dimensions, k, strict=True)} for k in self._prior.points]

    def _seen(self) -> set[tuple[int, ...]]:
        """Configurations probed in this session (failed ones included) or measured by the prior in use."""
        return {key_of(c, self.dimensions) for c in self.history.configs} | self._prior_keys()

    def _seen_values(self) -> set[int]:
        """1-D: the values probed in this session or measured by the prior in use."""
        return {k[0] for k in self._seen()}

    def _calibrate(self) -> None:
        """The initial design has been measured: rescale the prior onto this session's times, or give it up."""
        self._prior.calibrate(self._observed_means())
        if self._prior.offset is None and self._fallback:
            probed = {key_of(c, self.dimensions) for c in self.history.configs}
            for cfg in self._fallback:
                if key_of(cfg, self.dimensions) not in probed:
                    self._add_start(cfg)
        self._fallback = []

    # -- public, validating -------------------------------------------------------------------------
    def suggest(self) -> Point:
        """The next configuration to probe."""
        if self._initial:
            return dict(self._initial[0])
        remaining = self._end - self.probes
        if remaining <= self.remeasure:
            # The last probes re-measure the leading candidates: one noisy probe each cannot rank values
            # a few per cent apart, and the answer is chosen among them.
            # The list is fixed when the phase begins: ranks recomputed after each re-measurement could send
            # every remaining probe to the same configuration.
            if self._remeasure_plan is None:
                self._remeasure_plan = self._leaders(self.remeasure)
            if self._remeasure_plan:
                return dict(self._remeasure_plan[(self.remeasure - remaining) % len(self._remeasure_plan)])
        gap = self._unresolved_gap()
        if gap is not None:
            return self._validate(gap)
        return self._validate(self._suggest())

    def register(self, config: Mapping[str, int], value_ms: float | None) -> None:
        """Record one probe; ``value_ms=None`` marks it failed."""
        clean = self._validate(config)
        if value_ms is not None and not (math.isfinite(value_ms) and value_ms > 0):
            raise ValueError(f"a probe's value must be a positive number of ms, not {value_ms!r}")
        if self._initial and key_of(self._initial[0], self.dimensions) == key_of(clean, self.dimensions):
            self._initial.pop(0)
        self.history.configs.append(clean)
        self.history.values_ms.append(value_ms)
        if self._prior.pending and not self._initial:
            self._calibrate()  # the initial design has been measured (before the fit below, which uses it)
            if value_ms is None and self.prior_in_use:
                self._prior_calibrated()
        elif value_ms is not None and self.prior_in_use:
            self._prior.recalibrate(self._observed_means())  # one more configuration may be measured in both
        if value_ms is not None:
            self._register(clean, math.log(value_ms))
            rec = self._answer()
            score = math.log(rec.predicted_ms) if rec.predicted_ms else self._observed_mean(rec.config)
            self._best_trace.append((key_of(rec.config, self.dimensions), score, rec.near_optimal))

    @property
    def probes(self) -> int:
        return len(self.history.configs)

    def stop_reason(self) -> str | None:
        """Why the search should end now, or None to go on."""
        if self.probes >= self.budget:
            return f"probe budget of {self.budget} used"
        if self._end_reason is not None:
            return self._end_reason if self.probes >= self._end else None
        # A prior in use counts toward min_probes (one per configuration it measured): what lets a warm
        # search stop early. The budget and the patience trace count this session's probes only.
        if self._ok_count() < self.min_probes or self._initial:
            return None
        if self._unresolved_gap() is not None:
            return None
        reason = self._converged()
        if reason and self.remeasure and self.prior_in_use and self._end - self.probes > self.remeasure:
            # A warm joint search converged before its budget: it still ends on its re-measurements of the
            # leaders, which choose its answer (the GP smooths a narrow optimum into its neighbours; a prior
            # makes that no less true).
            self._end, self._end_reason = self.probes + self.remeasure, f"{reason}; the leaders were re-measured"
            return None
        return reason

    def _ok_count(self) -> int:
        """Successful probes, for ``min_probes``: this session's, plus one per configuration of a prior in use."""
        return len(self.history.ok) + (len(self._prior.points) if self.prior_in_use else 0)

    def _converged(self) -> str | None:
        ei = self._max_expected_improvement()
        if ei is not None and ei < self.ei_stop:
            return f"no value is expected to improve the optimum by more than {math.expm1(self.ei_stop):.1%}"
        trace = self._best_trace[-(self.patience + 1) :]
        if len(trace) <= self.patience:
            return None
        _, first_score, first_box = trace[0]
        # Stable: every later pick lies inside the near-optimal box of the pick `patience` probes ago
        # (in a flat basin the argmin wanders among equally good values; that is not progress).
        stable = all(
            first_box[d.name][0] <= k[i] <= first_box[d.name][1]
            for k, _, _ in trace[1:]
            for i, d in enumerate(self.dimensions)
        )
        no_gain = all(s >= first_score - math.log1p(self.tolerance) / 2 for _, s, _ in trace[1:])
        if stable and no_gain:
            return f"the predicted optimum did not move in the last {self.patience} probes"
        return None

    def recommendation(self) -> Suggestion:
        """The configuration to confirm and its near-optimal ranges (a ``NearOptimal``)."""
        return self._report(self._answer())

    def _answer(self) -> Suggestion:
        """The search's own answer: what its stopping rule follows (``_converged``), with the box of values
        predicted within the tolerance of the best. ``recommendation`` reports from it."""
        ok = self.history.ok
        if not ok:
            raise ValueError("no successful probe to recommend from")
        rec = self._model_recommendation()
        if rec is not None:
            return rec
        means = self._observed_means()
        best_key = min(means, key=lambda k: means[k])
        cfg = {d.name: v for d, v in zip(self.dimensions, best_key, strict=True)}
        tol = math.log1p(self.tolerance)
        near = [k for k, m in means.items() if m <= means[best_key] + tol]
        ranges = {
            d.name: (min(k[i] for k in near), max(k[i] for k in near)) for i, d in enumerate(self.dimensions)
        }
        return Suggestion(cfg, None, ranges, "observations")

    def _report(self, found: Suggestion) -> Suggestion:
        """What ``recommendation`` says about the search's answer (``near.RangeFinder`` where there is a model)."""
        return self._report_as_found(found)

    def _report_as_found(self, found: Suggestion) -> Suggestion:
        """Without a model: the answer and its box as they are (values observed within the tolerance of the
        best), with what a report says about each knob's range."""
        return Suggestion(found.config, found.predicted_ms, NearOptimal({
            d.name: self._knob_range(d, *found.near_optimal[d.name]) for d in self.dimensions}), found.source)

    def _knob_range(self, d: Dimension, low: int, high: int, plateau: bool = False) -> NearRange:
        # What was searched, in values the knob can hold (read_ahead_kb in whole pages: a policy's max 1022
        # searched up to 1020), so that an answer at the top of it is at the edge.
        return NearRange(low, high, searched=(d.snap(d.low), d.snap(d.high)), limits=d.limits, plateau=plateau,
                         step=d.quantum)

    # -- helpers ------------------------------------------------------------------------------------
    def _validate(self, config: Mapping[str, int]) -> Point:
        names = {d.name for d in self.dimensions}
        if set(config) != names:
            raise ValueError(f"a configuration needs exactly {sorted(names)}, got {sorted(config)}")
        out: Point = {}
        for d in self.dimensions:
            v = config[d.name]
            if isinstance(v, bool) or int(v) != v:
                raise ValueError(f"{d.name} must be an integer, got {v!r}")
            if not d.low <= int(v) <= d.high:
                raise ValueError(f"{d.name}={v} lies outside [{d.low}, {d.high}]")
            if int(v) % d.quantum:
                raise ValueError(f"{d.name}={v} is not a multiple of {d.quantum}")
            out[d.name] = int(v)
        return out

    def _observed_logs(self) -> dict[tuple[int, ...], list[float]]:
        """Every successful probe's log(time), per configuration."""
        acc: dict[tuple[int, ...], list[float]] = defaultdict(list)
        for cfg, v in self.history.ok:
            acc[key_of(cfg, self.dimensions)].append(math.log(v))
        return acc

    def _observed_means(self) -> dict[tuple[int, ...], float]:
        return {k: sum(v) / len(v) for k, v in self._observed_logs().items()}

    def _observed_mean(self, config: Point) -> float:
        return self._observed_means()[key_of(config, self.dimensions)]

    # -- private, overridden ------------------------------------------------------------------------
    def _suggest(self) -> Point:
        raise NotImplementedError  # abstract: both concrete optimisers override it

    def _register(self, config: Point, log_value: float) -> None:
        return None

    def _prior_calibrated(self) -> None:
        """The prior came into use on a failed probe (the design's last): refit where there is a model."""
        return None

    def _model_recommendation(self) -> Suggestion | None:
        return None

    def _max_expected_improvement(self) -> float | None:
        return None

    def _unresolved_gap(self) -> Point | None:
        return None

    def _leaders(self, n: int) -> list[Point]:
        """The ``n`` best probed configurations (by observed mean on the base class)."""
        means = self._observed_means()
        keys = sorted(means, key=lambda k: means[k])[:n]
        return [{d.name: v for d, v in zip(self.dimensions, k)} for k in keys]


class RandomOptimiser(BaseOptimiser):
    """Uniform random search on the transformed scale: the baseline and the fallback."""

    kind = "random"

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._rng = random.Random(self.seed)

    def _suggest(self) -> Point:
        return {d.name: d.from_z(self._rng.uniform(d.z_low, d.z_high)) for d in self.dimensions}
