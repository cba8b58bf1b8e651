"""Search over knob values: a Bayesian optimiser (scikit-optimize, ask/tell) and a random-search twin.

This is the only module that imports scikit-optimize. Both optimisers share one interface:

* ``suggest()`` returns the next configuration to probe (the initial design first);
* ``register(config, value_ms)`` records a probe — ``None`` for a failed probe, which is kept as failed and
  never told to the model as a number;
* ``recommendation()`` returns the configuration to confirm and its near-optimal range;
* ``stop_reason()`` says why the search should end now, or None.

The model works on log(time) (multiplicative noise becomes additive), over each knob's transformed scale
(``log2p1``: log2(1 + value), so 0 is reachable and 1, 3, 7, 15 … are evenly spaced). The recommendation
comes from the model's posterior mean, not from the luckiest observation (winner's curse).
"""

from __future__ import annotations

import itertools
import math
import random
import warnings
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

Config = dict[str, int]


@dataclass(frozen=True)
class Dimension:
    """One integer knob and the scale it is searched on."""

    name: str
    low: int
    high: int
    scale: Literal["log2p1", "linear"] = "log2p1"
    # Values the knob can hold are multiples of this (read_ahead_kb: the page size in KiB; the kernel keeps
    # whole pages, so 931 would read back as 928). 0 stays reachable.
    quantum: int = 1

    # On the log2p1 scale, 0 ("off": no prefetching, no readahead) is a different mechanism, not a small
    # value: it sits at z = -1, two units from 1, so the model has room for the cliff between them.
    ZERO_Z = -1.0

    @property
    def _zero_apart(self) -> bool:
        return self.scale == "log2p1" and self.low == 0

    def to_z(self, value: float) -> float:
        if self.scale != "log2p1":
            return float(value)
        if value == 0 and self._zero_apart:
            return self.ZERO_Z
        return math.log2(1 + value)

    def from_z(self, z: float) -> int:
        if self.scale != "log2p1":
            raw = z
        elif self._zero_apart:
            raw = 0 if z < 0 else max(1, 2**z - 1)
        else:
            raw = 2**z - 1
        return self.snap(raw)

    def snap(self, raw: float) -> int:
        """The nearest value the knob can hold, inside the bounds (a non-zero value never snaps to 0)."""
        q = self.quantum
        v = round(raw) if q == 1 else (0 if raw <= 0 else max(q, q * round(raw / q)))
        lo = self.low if q == 1 or self.low % q == 0 else q * -(-self.low // q)
        hi = self.high if q == 1 else q * (self.high // q)
        return int(min(hi, max(lo, v)))

    @property
    def z_low(self) -> float:
        return self.to_z(self.low)

    @property
    def z_high(self) -> float:
        return self.to_z(self.high)

    def candidates(self, limit: int = 2048) -> list[int]:
        """Values the recommendation may take: every holdable value, or a dense log grid for wide ranges."""
        if (self.high - self.low) // self.quantum + 1 <= limit:
            return sorted({self.snap(v) for v in range(self.low, self.high + 1, self.quantum)})
        zs = np.linspace(self.z_low, self.z_high, limit)
        return sorted({self.from_z(float(z)) for z in zs} | set(self.round_values()))

    def ladder(self) -> list[int]:
        """The values a 1-D search may probe: the round values (0, 1, powers of two, the bounds) and the half
        steps between them (3, 6, 12, 24, 48 … — 1.5 times a power of two), so that neighbours are at most a
        factor 1.5 apart; multiples of the quantum only. Half steps are probed only where a V through the best
        value and its round neighbours puts one below the best (see ``BayesianOptimiser._unresolved_gap``)."""
        if self.scale != "log2p1":
            span = self.high - self.low
            steps = {self.low + round(span * i / 16) for i in range(17)}
        else:
            steps = {self.low, self.high, 0, 1} | {m * 2**k for k in range(40) for m in (2, 3)}
        return sorted({self.snap(v) for v in steps if self.low <= v <= self.high and v % self.quantum == 0})

    def round_values(self) -> list[int]:
        """Values an operator would write in a config file: 0, 1 and powers of two, plus the bounds."""
        ladder = {self.low, self.high, 0, 1} | {2**k for k in range(0, 31)}
        return sorted(v for v in ladder if self.low <= v <= self.high and v % self.quantum == 0)


@dataclass(frozen=True)
class Recommendation:
    config: Config
    predicted_ms: float | None  # the model's prediction at config (None without a model)
    near_optimal: dict[str, tuple[int, int]]  # per knob: smallest and largest near-optimal value
    source: Literal["model", "observations"]


@dataclass
class _History:
    configs: list[Config] = field(default_factory=list)
    values_ms: list[float | None] = field(default_factory=list)

    @property
    def ok(self) -> list[tuple[Config, float]]:
        return [(c, v) for c, v in zip(self.configs, self.values_ms, strict=True) if v is not None]

    def consecutive_failures(self) -> int:
        n = 0
        for v in reversed(self.values_ms):
            if v is not None:
                break
            n += 1
        return n


def _pooled_sd(groups: Sequence[Sequence[float]]) -> float:
    """Pooled within-group standard deviation (the noise of one probe, from repeated probes)."""
    df = sum(len(g) - 1 for g in groups)
    if df <= 0:
        return 0.0
    ss = sum(sum((x - sum(g) / len(g)) ** 2 for x in g) for g in groups)
    return math.sqrt(ss / df)


def _key(config: Mapping[str, int], dims: Sequence[Dimension]) -> tuple[int, ...]:
    return tuple(int(config[d.name]) for d in dims)


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
    ) -> None:
        if not dimensions:
            raise ValueError("at least one dimension")
        self.dimensions = tuple(dimensions)
        self.seed = seed
        self.budget = budget
        self.min_probes = min(min_probes, budget)
        self.patience = patience
        self.tolerance = tolerance
        # Probes at the end of the budget spent re-measuring the leading candidates (joint searches): two,
        # on two configurations. Four left the model only six proposals after today's value and the 3 x 3
        # start, and on a narrow optimum between the starts (r2d02) it often never probed a good one.
        self.remeasure = 2 if len(dimensions) > 1 else 0
        self._remeasure_plan: list[Config] | None = None
        # Stop when the best expected improvement (in log-time) is below a quarter of the tolerance.
        self.ei_stop = math.log1p(tolerance) / 4
        self._initial: list[Config] = []
        # The initial design, kept after it has been probed (joint re-measurements look back at it).
        self._start_keys: set[tuple[int, ...]] = set()
        for cfg in initial:
            clean = self._validate(cfg)
            if _key(clean, self.dimensions) not in self._start_keys:
                self._start_keys.add(_key(clean, self.dimensions))
                self._initial.append(clean)
        self.history = _History()
        # After each successful probe: the recommended config, its predicted log(time), its near-optimal box.
        self._best_trace: list[tuple[tuple[int, ...], float, dict[str, tuple[int, int]]]] = []

    # -- public, validating -------------------------------------------------------------------------
    def suggest(self) -> Config:
        """The next configuration to probe."""
        if self._initial:
            return dict(self._initial[0])
        remaining = self.budget - self.probes
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
        if self._initial and _key(self._initial[0], self.dimensions) == _key(clean, self.dimensions):
            self._initial.pop(0)
        self.history.configs.append(clean)
        self.history.values_ms.append(value_ms)
        if value_ms is not None:
            self._register(clean, math.log(value_ms))
            rec = self.recommendation()
            score = math.log(rec.predicted_ms) if rec.predicted_ms else self._observed_mean(rec.config)
            self._best_trace.append((_key(rec.config, self.dimensions), score, rec.near_optimal))

    @property
    def probes(self) -> int:
        return len(self.history.configs)

    def stop_reason(self) -> str | None:
        """Why the search should end now, or None to go on."""
        if self.probes >= self.budget:
            return f"probe budget of {self.budget} used"
        n_ok = len(self.history.ok)
        if n_ok < self.min_probes or self._initial:
            return None
        if self._unresolved_gap() is not None:
            return None
        return self._converged()

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

    def recommendation(self) -> Recommendation:
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
        return Recommendation(cfg, None, ranges, "observations")

    # -- helpers ------------------------------------------------------------------------------------
    def _validate(self, config: Mapping[str, int]) -> Config:
        names = {d.name for d in self.dimensions}
        if set(config) != names:
            raise ValueError(f"a configuration needs exactly {sorted(names)}, got {sorted(config)}")
        out: Config = {}
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
            acc[_key(cfg, self.dimensions)].append(math.log(v))
        return acc

    def _observed_means(self) -> dict[tuple[int, ...], float]:
        return {k: sum(v) / len(v) for k, v in self._observed_logs().items()}

    def _observed_mean(self, config: Config) -> float:
        return self._observed_means()[_key(config, self.dimensions)]

    # -- private, overridden ------------------------------------------------------------------------
    def _suggest(self) -> Config:
        raise NotImplementedError  # abstract: both concrete optimisers override it

    def _register(self, config: Config, log_value: float) -> None:
        return None

    def _model_recommendation(self) -> Recommendation | None:
        return None

    def _max_expected_improvement(self) -> float | None:
        return None

    def _unresolved_gap(self) -> Config | None:
        return None

    def _leaders(self, n: int) -> list[Config]:
        """The ``n`` best probed configurations (by observed mean on the base class)."""
        means = self._observed_means()
        keys = sorted(means, key=lambda k: means[k])[:n]
        return [{d.name: v for d, v in zip(self.dimensions, k)} for k in keys]


def initial_design(
    dimensions: Sequence[Dimension],
    current: Mapping[str, int],
    starts: Mapping[str, Sequence[int]],
    *,
    today: bool = True,
) -> list[Config]:
    """Today's values first (they are the baseline anyway), then the policy's starting values: for one knob
    the values themselves; for several, every combination of them (3 × 3 = 9 points for two knobs), which
    puts the special values the seeds point at — concurrency 0, the kernel's readahead — on the grid.

    ``today=False`` leaves today's values out (a knob without starting values still starts at today's): the
    model then probes them only where it asks for them, like any other value. The confirmation measures them
    in any case."""
    def clamp(d: Dimension, v: int) -> int:
        return d.snap(v)

    design = [{d.name: clamp(d, current[d.name]) for d in dimensions}]
    per_dim = [[clamp(d, v) for v in starts.get(d.name, ())] or [clamp(d, current[d.name])] for d in dimensions]
    for combo in itertools.product(*per_dim):
        design.append({d.name: v for d, v in zip(dimensions, combo)})
    return design if today else design[1:]


def space_filling(dimensions: Sequence[Dimension], n: int) -> list[Config]:
    """``n`` deterministic, evenly spread points (a Fibonacci lattice in the transformed space), avoiding the
    edges where single bad values sit (readahead 0, concurrency 1)."""
    golden = (math.sqrt(5) - 1) / 2
    points: list[Config] = []
    for i in range(n):
        fracs = [(i + 0.5) / n] + [((i + 0.5) * golden * (k + 1)) % 1.0 for k in range(len(dimensions) - 1)]
        points.append({d.name: d.from_z(d.z_low + (0.1 + 0.8 * f) * (d.z_high - d.z_low)) for d, f in zip(dimensions, fracs)})
    return points


class RandomOptimiser(BaseOptimiser):
    """Uniform random search on the transformed scale: the baseline and the fallback."""

    kind = "random"

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._rng = random.Random(self.seed)

    def _suggest(self) -> Config:
        return {d.name: d.from_z(self._rng.uniform(d.z_low, d.z_high)) for d in self.dimensions}


class BayesianOptimiser(BaseOptimiser):
    """Gaussian-process Bayesian optimisation (scikit-optimize ``Optimizer``) on log(time).

    The GP has a learned white-noise term (skopt's default for ``"GP"``), so repeated probes of one value
    with different times are modelled as noise, not as structure.
    """

    kind = "bayesian"
    # A half step may answer only if its measured mean lies this many tolerances below the line through its
    # two round neighbours' means (see ``_half_step_above_chord``).
    half_step_margin = 1.0
    # A half step is probed only where a V through the incumbent and its round neighbours puts it no more than
    # this many tolerances above the incumbent (see ``_v_gain``): -1 lets one noisy reading move the V's tip a
    # tolerance's worth toward the incumbent and the half step still be measured.
    half_step_gain = -1.0
    # ... and only where the V's steep side rises at least this many tolerances: a flat stretch read at CV 5 %
    # looks like a shallow V too often.
    v_floor = 2.0
    # Before a 1-D search answers a half step, the half step and its better round neighbour are read once
    # more each, and the lower mean wins (see ``_duel_gap``); False turns the duel off.
    duel = True
    # ... unless the half step's reading lies more than this many tolerances below its rival's: a lucky reading
    # that far below is rare (r12's 48, 7.7 % worse than 32, would have to read 17 % below 32's reading),
    # and the duel's two probes are saved where the tip is plain. 0 always duels. On the check surfaces at CV
    # 10 % (30 seeds) 2 cut the probes from 0.806 to 0.784 of the sweep's, success unchanged; vee48 at 100
    # seeds 0.80 -> 0.81.
    duel_skip = 2.0
    # Before a 1-D search stops, the round neighbours of a second basin reading within this many tolerances
    # of the best reading are probed (see ``_coverage_gap``); 0 turns the rule off.
    coverage_window = 2.0
    # A joint search's second re-measurement goes back to the best start configuration when every leader
    # lies off the start and that start reads within this many tolerances of the best (see ``_leaders``).
    start_window = 2.0
    # A 1-D search stops on the expected improvement at unprobed values alone while the incumbent's observed
    # mean lies within this many tolerances of the best observed mean (see ``_max_expected_improvement``).
    agree_window = 1.0
    # Before a 1-D search stops, where the incumbent's better round neighbour reads within this many
    # tolerances of it, the next round value beyond that neighbour is probed (see ``_flank_gap``); 0 turns
    # the rule off.
    flank_window = 2.0

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        # The duel (1-D): the half step and its round rival once planned, and the reads still to be made.
        self._duel: tuple[int, int] | None = None
        self._duel_queue: list[int] = []
        from skopt import Optimizer
        from skopt.space import Real

        space = [Real(d.z_low, d.z_high, name=d.name) for d in self.dimensions]
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

    def _z(self, config: Mapping[str, int]) -> list[float]:
        return [d.to_z(config[d.name]) for d in self.dimensions]

    def register(self, config: Mapping[str, int], value_ms: float | None) -> None:
        if self._duel_queue and int(config[self.dimensions[0].name]) == self._duel_queue[0]:
            self._duel_queue.pop(0)  # a failed read counts as made: the duel does not retry it
        super().register(config, value_ms)

    def _suggest(self) -> Config:
        if len(self.dimensions) == 1 and self._opt.models:
            # 1-D: the acquisition is maximised over the round values (0, 1, powers of two) instead of the
            # continuum: probes land on values an operator would write, never on 45 next to 48. Half steps
            # come only from _unresolved_gap, where the measured curve bends between two round values.
            d = self.dimensions[0]
            coarse = d.round_values()
            ei = self._expected_improvement([{d.name: v} for v in coarse])
            seen = {c[d.name] for c in self.history.configs}
            fresh = [i for i, v in enumerate(coarse) if v not in seen]
            pick = max(fresh or range(len(coarse)), key=lambda i: ei[i])
            return {d.name: coarse[pick]}
        if self._opt.models:
            # Joint searches: the acquisition is maximised over the product of the knobs' round values
            # (0, 1, powers of two, the bounds) — configurations an operator would write — instead of skopt's
            # continuous proposals, which spent the model's probes at readahead 42-93 KiB between 16 and 128
            # and answered there, 5-9 % off an optimum at round values (random check r2d02: 0.47 success at
            # CV 5 %, 0.87 with round proposals). skopt's ask() remains for when every product is measured.
            products = list(itertools.product(*[d.round_values() for d in self.dimensions]))
            measured = {_key(c, self.dimensions) for c in self.history.configs}
            unmeasured = [k for k in products if k not in measured]
            if unmeasured:
                configs = [{d.name: v for d, v in zip(self.dimensions, k, strict=True)} for k in unmeasured]
                ei = self._expected_improvement(configs)
                return configs[int(np.argmax(ei))]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            z = self._opt.ask()
        return {d.name: d.from_z(float(zi)) for d, zi in zip(self.dimensions, z, strict=True)}

    def _register(self, config: Config, log_value: float) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._opt.tell(self._z(config), log_value)

    def _candidate_grid(self) -> list[tuple[int, ...]]:
        per_dim = [d.candidates(limit=2048 if len(self.dimensions) == 1 else 64) for d in self.dimensions]
        return list(itertools.product(*per_dim))

    def predict(self, configs: Sequence[Mapping[str, int]]) -> list[float] | None:
        """Posterior mean of log(time) at ``configs``, or None before the model has been fitted."""
        if not self._opt.models:
            return None
        model = self._opt.models[-1]
        xs = self._opt.space.transform([self._z(c) for c in configs])
        return [float(v) for v in model.predict(xs)]

    def _leaders(self, n: int) -> list[Config]:
        """The ``n`` best probed configurations by the model's prediction (denoised)."""
        probed = {_key(c, self.dimensions): c for c, _ in self.history.ok}
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
        if best_seen not in {_key(c, self.dimensions) for c in leaders}:
            leaders.append(probed[best_seen])
        # At least two different configurations: the answer is chosen among those measured more than once,
        # and one alone would win by default whatever its re-measurement read.
        for cfg in ranked:
            if len(leaders) >= min(2, n):
                break
            if cfg not in leaders:
                leaders.append(cfg)
        # A joint search whose leaders all lie off the initial design: the last one gives way to the start
        # configuration (today's included) with the best observed mean, if that reads within
        # ``start_window`` tolerances of the best reading. Each start was measured once, early; the model's
        # later proposals crowd around whatever has read low since, and a start value that read high once is
        # never measured again. On hold-out h2d04 the optimum is today's configuration (eic 1, 128 KiB), read
        # 4-8 % high at the start; both re-measurements went to 32-64 KiB, 6-7 % worse, where single readings
        # came out low, and one of them answered. Without the window the rule cost two-knob surfaces whose
        # optimum lies off the start (joint-interior-64x2048 0.80 -> 0.73, h2d02 0.80 -> 0.67 at CV 10 %),
        # where the best start reads far worse and the re-measurement belongs near the optimum.
        if len(self.dimensions) > 1 and len(leaders) >= 2 and self._start_keys:
            if not any(_key(c, self.dimensions) in self._start_keys for c in leaders):
                starts = [k for k in self._start_keys if k in means]
                if starts:
                    back = min(starts, key=means.__getitem__)
                    if means[back] <= min(means.values()) + self.start_window * math.log1p(self.tolerance):
                        leaders[-1] = probed[back]
        return leaders

    def _incumbent(self) -> Config:
        """The best probed configuration by the model's (denoised) prediction. Where the model cannot tell
        the leaders apart (within 1 % — it smooths a narrow dip toward its neighbours), their own measurements
        decide."""
        probed = list({_key(c, self.dimensions): c for c, _ in self.history.ok}.values())
        if self.remeasure and self.probes > self.budget - self.remeasure:
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
                sigma = _pooled_sd([logs[k] for k in repeated])
                within_noise = [
                    k for k in repeated
                    if means[k] - means[first] <= sigma * math.sqrt(1 / len(logs[k]) + 1 / len(logs[first]))
                ]
                configs = [{d.name: v for d, v in zip(self.dimensions, k, strict=True)} for k in within_noise]
                if len(configs) == 1:
                    return configs[0]
                mu_tied = self.predict(configs)
                assert mu_tied is not None
                return configs[int(np.argmin(mu_tied))]
        if len(self.dimensions) == 1:
            means = self._observed_means()
            lost = self._lost_duel()
            probed = [
                c for c in probed
                if not self._half_step_above_chord(c, means) and c[self.dimensions[0].name] != lost
            ] or probed
        mu = self.predict(probed)
        assert mu is not None
        tied = [c for c, m in zip(probed, mu, strict=True) if m <= min(mu) + 0.01]
        return min(tied, key=self._observed_mean)

    def _half_step_above_chord(self, config: Config, means: Mapping[tuple[int, ...], float]) -> bool:
        """True for a half step (6, 12, 24, 48 … in a 1-D search) whose measured mean does not lie at least
        ``half_step_margin`` tolerances below the straight line, in log(time) over the knob's scale, through
        its two round neighbours' means: such a value may not be the incumbent, so it never answers.

        A half step is probed where the curve bends, in case a narrow optimum lies between two round values
        (vee48: 48 is 16 % below that line). Where the tip is the round value itself (random surface r00: 4,
        with 6 on the line, 8 % worse), one noisy reading of 6 often came out level with 4, and the smooth
        GP — which turns the V into a U whose bottom lies between them — ranked 6 first even where 6 read
        worse than 4: 6 answered in 9 of 30 seeds at CV 5 % (success 0.70 against the sweep's 0.93, 0.90
        with this rule). A value operators would not write must earn its place by measurement; otherwise the
        model's choice among the other probed values answers. Cost, 30 seeds at CV 5 / 10 %: vee48 0.97 /
        0.90 -> 0.93 / 0.80 (sweep 0.97 / 0.83), where a correct 48 now and then reads too high."""
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

    def _unresolved_gap(self) -> Config | None:
        """A value that must be measured before the answer can be trusted, or None. Joint searches: see
        ``_edge_probe``. 1-D: a value next to the incumbent (the best probed value by the model).

        First the round values on either side of the incumbent: the answer is then a local optimum on the
        values operators write, not a guess between two far-apart probes (0 is not the neighbour of 1: it is
        another mechanism, probed up front). Then those of the best reading, where the model ranks another
        value first. Then the half step between the incumbent and its better
        neighbour (48 between 32 and 64), where a V through the three puts it at least ``half_step_gain``
        tolerances below the incumbent (``_v_gain``): a narrow optimum can lie there, and no round value is
        within the tolerance of it. On a flat stretch, at a bound, or where the V's tip is the incumbent
        itself no half step is probed: a half step measured once is one more chance for noise to crown a
        worse value, a chance the sweep never gives it. Last, when the search would stop, the round
        neighbours of a second basin that reads level with the best (``_coverage_gap``), then the round value
        beyond a neighbour that reads level with the incumbent (``_flank_gap``).
        """
        if self._initial or not self._opt.models:
            return None
        if len(self.dimensions) > 1:
            return self._edge_probe()
        if self._duel_queue:
            return {self.dimensions[0].name: self._duel_queue[0]}
        gap = self._neighbour_gap()
        if gap is not None or len(self.history.ok) < self.min_probes or self._converged() is None:
            return gap
        # The last three rules act only where the search would otherwise stop.
        return self._coverage_gap() or self._flank_gap() or self._duel_gap()

    def _duel_gap(self) -> Config | None:
        """A 1-D search about to answer a half step: plan a duel and return its first read, or None.

        The half step and its better round neighbour (by their readings) are read once more each, in that
        order, whatever the first read says; then the lower mean of the two wins (``_incumbent``). A half step
        is probed where the readings of its round neighbours leave room for a narrow optimum between them, and
        a half step read once is one more chance for noise to crown a worse value — a chance the sweep, which
        reads each value once and never a half step it does not hold, does not give it. The duel takes that
        chance back: on r12 (tip at 32, 48 7.7 % worse) a lucky first reading of 48 must be lucky twice, and on
        vee48 (tip at 48, 32 and 64 16-23 % worse) a correct 48 keeps its place. One duel per search, at most,
        only where two probes of the budget are left, and none where the half step read more than
        ``duel_skip`` tolerances below its rival."""
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
        self._duel_queue = [half, rival]
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

    def _round_neighbours(self, x: int) -> list[int]:
        """1-D: the round values on either side of ``x`` (0 is not the neighbour of 1 where it is kept apart)."""
        d = self.dimensions[0]
        coarse = d.round_values()
        below = [v for v in coarse if v < x and not (d._zero_apart and v == 0 and x > 0)]
        above = [v for v in coarse if v > x]
        return [v for v in (below[-1] if below else None, above[0] if above else None) if v is not None]

    def _neighbour_gap(self) -> Config | None:
        """1-D: the incumbent's unprobed round neighbour, else the best reading's (where that is another value),
        else the half step the V rule asks for, or None."""
        d = self.dimensions[0]
        probed = {c[d.name] for c in self.history.configs}
        inc = self._incumbent()[d.name]
        coarse = d.round_values()
        near = self._round_neighbours(inc)
        mu = dict(zip(near + [inc], self.predict([{d.name: v} for v in near + [inc]]) or [], strict=True))
        fresh = [v for v in near if v not in probed]
        if fresh:
            return {d.name: min(fresh, key=lambda v: mu[v])}
        # The same for the best reading, where the model's pick is another value: at CV 5 % the GP ranked 256
        # first on bimodal-2-128 while 128 read best, and 64 — 128's other neighbour — was never measured.
        means = self._observed_means()
        seen = min(means, key=means.__getitem__)[0]
        around = [v for v in self._round_neighbours(seen) if v not in probed] if seen != inc and seen in coarse else []
        if around:
            mu_around = self.predict([{d.name: v} for v in around])
            assert mu_around is not None
            return {d.name: around[int(np.argmin(mu_around))]}
        if len(near) < 2 or inc not in coarse:
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

    def _coverage_gap(self) -> Config | None:
        """A 1-D search about to stop: an unprobed round neighbour of a *second basin*, or None.

        A second basin is a probed round value whose reading lies within ``coverage_window`` tolerances of
        the best reading, cut off from the incumbent by a probed value that read at least a tolerance worse
        than both (a hump). At noise CV 10 % the GP often takes such a reading for noise and goes flat, the
        expected improvement everywhere falls below the stopping threshold, and the search ends without
        looking next to it. On bimodal-2-128 (basins at 2 and 128) a lucky reading in the left basin then
        answered while 32 read level with it and 64 and 128 were never probed — where the sweep, which
        measures every value once, found 64 or 128. The rule asks only for the neighbours the sweep would
        have measured, next to readings that say they may be worth it; in the incumbent's own basin (a
        saturating plateau) it is silent, as the model's neighbours rule already covers it.
        """
        if self.coverage_window <= 0:
            return None
        d = self.dimensions[0]
        means = self._observed_means()
        best = min(means.values())
        tol = math.log1p(self.tolerance)
        inc = self._incumbent()[d.name]
        probed = {c[d.name] for c in self.history.configs}
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
                mu = self.predict([{d.name: n} for n in nbrs])
                assert mu is not None
                return {d.name: nbrs[int(np.argmin(mu))]}
        return None

    def _flank_gap(self) -> Config | None:
        """A 1-D search about to stop: the round value one step beyond the incumbent's better round neighbour,
        where that neighbour reads within ``flank_window`` tolerances of the incumbent; else None.

        Two adjacent values reading level say the optimum may lie on either side of the pair, and only the
        incumbent's side has been bracketed. On tps-peak64 (best at 64, 256 10 % worse) one seed at CV 10 %
        read 32 at +19 %, 128 at +8 % and 256 best: the GP saw a falling trend, expected nothing of the
        unprobed 64 and stopped on 256, where the sweep, which measures 64 anyway, was right. Probing 64
        then costs one probe where the pair is level, none where the incumbent's neighbours both read clearly
        worse (a V, a narrow tip) — or where the value beyond is probed already.
        27 one-knob surfaces, 40 seeds, CV 10 %: summed success 22.35 -> 22.60 (the sweep's 21.45) for
        0.706 -> 0.726 of the sweep's probes; docs/optimiser-history.md, "What changed in the optimiser"."""
        if self.flank_window <= 0:
            return None
        d = self.dimensions[0]
        coarse = d.round_values()
        inc = self._incumbent()[d.name]
        if inc not in coarse:
            return None
        means = self._observed_means()
        probed = {c[d.name] for c in self.history.configs}
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

    def _readings_agree(self) -> bool:
        """True when the model's incumbent is, within ``agree_window`` tolerances, the best by its readings."""
        means = self._observed_means()
        incumbent = means[_key(self._incumbent(), self.dimensions)]
        return incumbent - min(means.values()) <= self.agree_window * math.log1p(self.tolerance)

    def _v_gain(self, inc: int, better: int, other: int, half: int, mu: Mapping[int, float]) -> float:
        """How much lower (in log(time)) than the incumbent a V through the incumbent and its two round
        neighbours puts the half step between the incumbent and its better neighbour — negative where the V
        puts it higher, as where the V's tip is the incumbent itself (a tip beyond the incumbent continues the
        same line: the further beyond, the lower); minus infinity where the steep side
        rises less than ``v_floor`` tolerances (a flat stretch, where a half step would only give noise
        another chance).

        The V is symmetric: its slope is the steeper (worse) side's, and the better side's rise then places
        the tip. Both neighbours far worse by about the same amount (random surface r07: 64, with 32 and 128
        each 38-40 % worse) put the tip at the incumbent and the half step 96 some four tolerances above it, and
        no half step is probed. A neighbour nearly level with the incumbent and a steep other side (vee48: 32
        and 64 level, 128 34 % up) put the tip between them, the half step 48 two tolerances below. One noisy
        reading moves that tip: where 64 reads 12 % low, the V through the three puts it at 64 and 48 about
        level with it. With ``half_step_gain`` 0.5 48 was then never probed — vee48 at CV 10 %, 100 seeds,
        0.65 against the sweep's 0.87; at -1 it is probed, and the duel (``_duel_gap``) keeps the half steps
        now probed on curves whose tip is a round value from answering on one lucky reading.
        """
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

    def _edge_probe(self) -> Config | None:
        """Joint searches: where the incumbent holds the largest (or smallest) value probed on some knob and
        the knob's range goes on, the value a start step further out (a factor of four, on round values, at
        most the bound), the other knobs as the incumbent's. An optimum past the starting values — readahead
        still helping at 8192 KiB when the start stopped at 2048 — is otherwise found only if the model dares
        to extrapolate, and it creeps (1888, 2891, 3998 on one measured trace). Once the bound is reached, or
        the probe further out is worse, the rule is silent."""
        if self.budget - self.probes <= self.remeasure:
            return None
        inc = self._incumbent()
        probed = {_key(c, self.dimensions) for c in self.history.configs}
        for d in self.dimensions:
            values = [c[d.name] for c in self.history.configs]
            z = d.to_z(inc[d.name])
            rounds = d.round_values()
            if inc[d.name] == max(values) and inc[d.name] < d.high:
                out = [v for v in rounds if d.to_z(v) >= z + 1.99] or [d.snap(d.high)]
                target = out[0]
            elif inc[d.name] == min(values) and inc[d.name] > d.low:
                out = [v for v in rounds if d.to_z(v) <= z - 1.99] or [d.snap(d.low)]
                target = out[-1]
            else:
                continue
            cand = {**inc, d.name: target}
            if _key(cand, self.dimensions) not in probed:
                return cand
        return None

    def _max_expected_improvement(self) -> float | None:
        """Largest expected improvement of log(time) over the candidate grid, against the best predicted
        value at a probed configuration (noise-aware, so a lucky probe does not set the bar).

        1-D: over the round values — but only the unprobed ones while the model's incumbent is also (within
        ``agree_window`` tolerances) the best by its readings. An unprobed value is all the search can probe
        next (``_suggest`` never proposes a probed one while another is left); the improvement the model
        still expects at a probed value is its doubt about that value's own reading. When model and readings
        agree on the answer, that doubt kept searches going on probes the model rated worthless: on random
        surface r13 (flat past 256) one seed read 1000 15 % low, and the model's doubt about it (2.4 %, twice
        the threshold) bought probes at 16 and 8 (0.0 % each) until the patience rule ended the search. When
        they disagree — the GP ranks 256 first on bimodal-2-128 while 128 read 9 % better, a smooth trend
        taken over a dip — those probes reshape the model, and the search goes on as before (without that
        condition bimodal fell from 0.80 to 0.62 at CV 5 %). docs/optimiser-history.md, "What changed in
        the optimiser"."""
        if not self._opt.models:
            return None
        if len(self.dimensions) == 1:
            d = self.dimensions[0]
            values = d.round_values()
            if self._readings_agree():
                probed = {c[d.name] for c in self.history.configs}
                values = [v for v in values if v not in probed]
                if not values:
                    return 0.0
            return float(np.max(self._expected_improvement([{d.name: v} for v in values])))
        grid = self._candidate_grid()
        configs = [{d.name: v for d, v in zip(self.dimensions, k, strict=True)} for k in grid]
        return float(np.max(self._expected_improvement(configs)))

    def _expected_improvement(self, configs: Sequence[Mapping[str, int]]) -> np.ndarray:
        model = self._opt.models[-1]
        xs = self._opt.space.transform([self._z(c) for c in configs])
        mu, sd = model.predict(xs, return_std=True)
        observed = self.predict([c for c, _ in self.history.ok])
        assert observed is not None
        best = min(observed)
        from scipy.stats import norm

        sd = np.maximum(sd, 1e-9)
        z = (best - mu) / sd
        return (best - mu) * norm.cdf(z) + sd * norm.pdf(z)

    def _model_recommendation(self) -> Recommendation | None:
        if not self._opt.models:
            return None
        grid = self._candidate_grid()
        configs = [{d.name: v for d, v in zip(self.dimensions, k, strict=True)} for k in grid]
        mu = self.predict(configs)
        assert mu is not None
        # The incumbent is the best *probed* configuration by the model's (denoised) prediction: the model
        # smooths noise away, but is not trusted to extrapolate to a value nobody measured.
        probed = {_key(c, self.dimensions): c for c, _ in self.history.ok}
        probed_mu = self.predict(list(probed.values()))
        assert probed_mu is not None
        incumbent = self._incumbent()
        best = grid.index(_key(incumbent, self.dimensions)) if _key(incumbent, self.dimensions) in grid else None
        if best is None:
            grid.append(_key(incumbent, self.dimensions))
            configs.append(incumbent)
            mu.append((self.predict([incumbent]) or [min(probed_mu)])[0])
            best = len(grid) - 1
        limit = mu[best] + math.log1p(self.tolerance)
        ranges = self._contiguous_ranges(configs[best], limit)
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
            bz = self._z(configs[best])
            chosen = min(round_near, key=lambda i: (sum((a - b) ** 2 for a, b in zip(self._z(configs[i]), bz)), mu[i]))
        return Recommendation(configs[chosen], math.exp(mu[chosen]), ranges, "model")


    def _contiguous_ranges(self, at: Config, limit: float) -> dict[str, tuple[int, int]]:
        """Per knob, the unbroken run of candidate values around ``at`` (other knobs held at ``at``) whose
        predicted log(time) stays within ``limit``. A range, not a set: "anything from 32 to 512". It never
        reaches past the smallest and largest values probed: beyond them the model only extrapolates."""
        ranges: dict[str, tuple[int, int]] = {}
        for d in self.dimensions:
            probed = [c[d.name] for c, _ in self.history.ok]
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


OPTIMISERS: dict[str, type[BaseOptimiser]] = {
    BayesianOptimiser.kind: BayesianOptimiser,
    RandomOptimiser.kind: RandomOptimiser,
}
