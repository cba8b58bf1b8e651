"""How many probes does tuner's optimiser need, against what users would do instead?

    python benchmarks/optimiser.py [--surface PATH …] [--seeds 30] [--noise-cv 0.05] [--json OUT]
                                   [--markdown OUT] [--plot OUT.png] [--jobs 2] [--range grid|policy]
                                   [--policy NAME]

A *surface* is a CSV grid: one column per knob (named as the setting), then ``value`` and ``direction``
(``minimize``/``maximize``). The simulator interpolates linearly in log2(1 + setting) between grid points,
clamps outside the grid, and multiplies by lognormal noise with the given coefficient of variation.

Per surface and seed, every method sees the same noise draws — common random numbers: the k-th measurement
of a configuration reads the same draw in every method, so where tuner and the sweep probe the same value once
they read the same number, and a difference between methods is their doing, not luck (``--draws probe``
gives the i-th probe of every method the i-th draw instead, whatever it measures). Each method runs until
it gives its answer:

* ``sweep`` — what the seed threads did: one probe per grid level, ascending; the best observation wins;
* ``tuner`` — exactly what ``tuner recommend`` runs: ``BayesianOptimiser`` with the policy's budget, initial
  design (the policy's starting points, with today's value — the PostgreSQL default — first where the policy
  says so, or a space-filling design for joint searches) and stopping rule, through ``tuner.core.loops.search``.
  The policy is the default one unless ``--policy NAME`` names another (ssd, hdd, network or one in the
  configuration directory); the result file then records its name;
* ``random`` and ``optuna_tpe`` — given the same number of probes tuner used on that seed.

Reported per method (over seeds): median probes, success rate (the answer's true value within 5 % of the
true optimum) and median regret (relative distance of the answer's true value from the optimum), plus an
anytime curve (median regret of the current answer after k probes). Per surface also tuner's success rate
minus the sweep's, in points, with a 95 % interval paired by seed (``success_vs_sweep``); the verdict sorts
the target "tuner >= sweep - 5 points" per surface into met, missed and not decided by that interval — at
30 seeds it is +-11 points even where both methods agree on every seed.

Search range (``--range``): by default (``grid``) tuner, random search and TPE search each knob between the
surface's first and last grid level — effective_io_concurrency 0..256 on the seeds' grids — the range the
sweep covers. ``--range policy`` gives them the default policy's range instead (effective_io_concurrency
0..1000, read_ahead_kb 0..16384 in whole pages of the machine's page size), as ``tuner recommend`` searches
it; the surface is flat beyond its last level (clamped), and the sweep still measures the grid. For
reference such a run adds ``sweep_range``: the same sweep over the range tuner searches (the grid's levels and
the round values past them: effective_io_concurrency 512 and 1000 beyond 256, read_ahead_kb 16384 beyond
8192), with tuner's success minus its own per surface. The targets are judged against ``sweep``; the
reference says how much of a gap comes from the wider range — more values that a lucky reading can crown —
rather than from the method.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import glob
import itertools
import json
import math
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

# One BLAS thread per process, set before numpy loads: the benchmark already runs one worker per core (--jobs),
# and OpenBLAS's own threads in each GP fit then fight over the same two cores. Measured on this machine, two
# workers with their default threads took 2.7 times as long as with one thread each, on the same seeds.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tuner.hostfacts.blockdev import readahead_quantum_kb  # noqa: E402
from tuner.optimiser import BayesianOptimiser, Dimension, RandomOptimiser  # noqa: E402
from tuner.errors import TunerError  # noqa: E402
import tuner.families  # noqa: E402,F401  # the families' registry, which a policy needs to read their tables
from tuner.settings.policy import load_policy  # noqa: E402
from tuner.core.loops import build_optimiser, search  # noqa: E402
from tests.support.synthetic import SyntheticProbe  # noqa: E402

HERE = Path(__file__).resolve().parent
DEFAULT_SURFACES = sorted((HERE / "surfaces").glob("*.csv"))
SUCCESS = 0.05
# Today's values when nobody tuned: PostgreSQL 15's default and the kernel's usual readahead.
CURRENT = {"effective_io_concurrency": 1, "read_ahead_kb": 128}


def _z(v: float) -> float:
    return math.log2(1 + v)


@dataclass
class Surface:
    name: str
    knobs: list[str]
    levels: list[list[int]]
    values: dict[tuple[int, ...], float]
    direction: str
    # Per knob, the range the search methods are given (``--range policy``); by default the grid's own.
    search_range: dict[str, tuple[int, int]] = field(default_factory=dict)
    # The policy whose design, budget and stopping rule tuner's optimiser runs with (``--policy``).
    policy: str = "default"

    @classmethod
    def load(cls, path: Path) -> Surface:
        with path.open() as fh:
            rows = list(csv.DictReader(fh))
        if not rows:
            raise SystemExit(f"{path}: empty surface")
        knobs = [k for k in rows[0] if k not in ("value", "direction")]
        directions = {r["direction"] for r in rows}
        if len(directions) != 1 or not directions <= {"minimize", "maximize"}:
            raise SystemExit(f"{path}: direction must be one of minimize/maximize, the same on every row")
        levels = [sorted({int(float(r[k])) for r in rows}) for k in knobs]
        values = {tuple(int(float(r[k])) for k in knobs): float(r["value"]) for r in rows}
        if len(values) != math.prod(len(lv) for lv in levels):
            raise SystemExit(f"{path}: the rows do not form a full grid")
        return cls(path.stem, knobs, levels, values, directions.pop())

    def true(self, config: dict[str, int]) -> float:
        """Multilinear interpolation in log2(1 + setting), clamped to the grid."""
        return sum(w * self.values[key] for key, w in self.weights(config).items())

    def weights(self, config: dict[str, int]) -> dict[tuple[int, ...], float]:
        """The grid points ``config``'s true value is interpolated from, with their (nonzero) weights."""
        corners: list[list[tuple[int, float]]] = []
        for k, lv in zip(self.knobs, self.levels):
            x = min(max(config[k], lv[0]), lv[-1])
            i = max(0, min(len(lv) - 2, next((j for j in range(len(lv) - 1) if lv[j + 1] >= x), len(lv) - 2))) if len(lv) > 1 else 0
            if len(lv) == 1:
                corners.append([(lv[0], 1.0)])
                continue
            a, b = lv[i], lv[i + 1]
            t = (_z(x) - _z(a)) / (_z(b) - _z(a))
            corners.append([(a, 1 - t), (b, t)])
        out: dict[tuple[int, ...], float] = {}
        for combo in itertools.product(*corners):
            w = math.prod(c[1] for c in combo)
            if w:
                out[tuple(c[0] for c in combo)] = w
        return out

    @property
    def optimum(self) -> tuple[dict[str, int], float]:
        pick = min if self.direction == "minimize" else max
        key = pick(self.values, key=lambda k: self.values[k])
        return dict(zip(self.knobs, key)), self.values[key]

    def regret(self, config: dict[str, int]) -> float:
        _, best = self.optimum
        v = self.true(config)
        return (v - best) / best if self.direction == "minimize" else (best - v) / best

    def dims(self) -> list[Dimension]:
        dims = []
        for k, lv in zip(self.knobs, self.levels):
            if k in self.search_range:
                low, high = self.search_range[k]
                # read_ahead_kb in whole pages, as the readahead family searches it.
                dims.append(Dimension(k, low, high, quantum=readahead_quantum_kb() if k == "read_ahead_kb" else 1))
            else:
                dims.append(Dimension(k, lv[0], lv[-1]))
        return dims

    def use_policy_range(self) -> None:
        """Search each knob over the policy's range, as ``tuner recommend`` does."""
        search = load_policy(self.policy).search
        self.search_range = {k: (search[k].min, search[k].max) for k in self.knobs if k in search}

    def range_levels(self) -> list[list[int]]:
        """Per knob, the levels a sweep of the search range measures: the grid's levels, plus the round values
        (0, 1, powers of two, the bound) the search range adds beyond them — effective_io_concurrency 512 and
        1000 past a grid ending at 256 (``--range policy``). With the grid's own range, the grid's levels."""
        out = []
        for lv, d in zip(self.levels, self.dims()):
            out.append(sorted(set(lv) | {v for v in d.round_values() if v < lv[0] or v > lv[-1]}))
        return out

    def as_time(self, value: float) -> float:
        """tuner minimises a time; a throughput becomes its reciprocal (scaled to stay readable)."""
        return value if self.direction == "minimize" else 1e6 / value


class NoiseStream:
    """Multiplicative lognormal noise (mean 1, the given CV) for one seed.

    ``measure()`` starts one method's run: it returns a function from a configuration to its noise factor.
    With ``per="config"`` (the default) the k-th measurement of a configuration gets a draw seeded by
    (seed, configuration, k) — the same in every method; with ``per="probe"`` the i-th probe gets the i-th
    draw of one stream.
    """

    def __init__(self, cv: float, seed: int, n: int = 4096, per: str = "config") -> None:
        self.cv, self.seed, self.per = cv, seed, per
        self.sigma = math.sqrt(math.log1p(cv**2))
        self.draws = np.exp(np.random.default_rng(seed).normal(-(self.sigma**2) / 2, self.sigma, n)) if cv else np.ones(n)

    def __getitem__(self, i: int) -> float:
        return float(self.draws[i])

    def measure(self) -> Callable[[dict[str, int]], float]:
        seen: dict[tuple[tuple[str, int], ...], int] = {}
        count = [0]

        def factor(config: dict[str, int]) -> float:
            i = count[0]
            count[0] += 1
            if self.per == "probe" or not self.cv:
                return float(self.draws[i])
            key = tuple(sorted(config.items()))
            k = seen.get(key, 0)
            seen[key] = k + 1
            rng = np.random.default_rng([self.seed, k, *(int(v) for _, v in key)])
            return float(math.exp(rng.normal(-(self.sigma**2) / 2, self.sigma)))

        return factor


def _best_observed(history: list[tuple[dict[str, int], float]], surface: Surface) -> dict[str, int]:
    means: dict[tuple[int, ...], list[float]] = {}
    for cfg, v in history:
        means.setdefault(tuple(cfg[k] for k in surface.knobs), []).append(math.log(v))
    key = min(means, key=lambda k: sum(means[k]) / len(means[k]))
    return dict(zip(surface.knobs, key))


def run_sweep(surface: Surface, noise: NoiseStream, *, search_range: bool = False) -> tuple[dict[str, int], int, list[float]]:
    """One probe per grid level, ascending; the best observation wins. ``search_range``: per level of the
    search range instead (``Surface.range_levels``) — the sweep an operator would run over the range tuner
    searches, a reference for ``--range policy``."""
    history = []
    anytime = []
    factor = noise.measure()
    for combo in itertools.product(*(surface.range_levels() if search_range else surface.levels)):
        cfg = dict(zip(surface.knobs, combo))
        history.append((cfg, surface.as_time(surface.true(cfg)) * factor(cfg)))
        anytime.append(surface.regret(_best_observed(history, surface)))
    return _best_observed(history, surface), len(history), anytime


def tuner_optimiser(surface: Surface, seed: int) -> BayesianOptimiser:
    dims = surface.dims()
    current = {d.name: CURRENT.get(d.name, d.low) for d in dims}
    return build_optimiser(load_policy(surface.policy), dims, current, seed=seed)


def run_tuner(surface: Surface, noise: NoiseStream, seed: int,
              probed: list[dict[str, int]] | None = None,
              near: dict[str, tuple[int, int]] | None = None) -> tuple[dict[str, int], int, list[float]]:
    """Tuner's answer, probe count and anytime regret on one seed; ``probed`` (if given) gets the
    configurations it probed, in order, and ``near`` (if given) the answer's near-optimal range per knob."""
    opt = tuner_optimiser(surface, seed)
    factor = noise.measure()
    anytime: list[float] = []

    def value(cfg: dict[str, int]) -> float:
        return surface.as_time(surface.true(cfg)) * factor(cfg)

    probe = SyntheticProbe(value)  # noise comes from the shared stream, not from the probe
    original_register = opt.register

    def register(config, value_ms):  # type: ignore[no-untyped-def]
        original_register(config, value_ms)
        anytime.append(surface.regret(opt.recommendation().config))

    opt.register = register  # type: ignore[method-assign]
    result = asyncio.run(search(opt, probe, max_consecutive_failures=4))
    assert result.recommendation is not None
    if probed is not None:
        probed.extend(dict(c) for c in opt.history.configs)
    if near is not None:
        found = result.recommendation.near_optimal
        near.update(found.pairs())
        # What the range becomes once a confirmation has measured the reading noise (``NearOptimal.given_noise``):
        # here the noise's own standard deviation of log(time), what a long confirmation would measure.
        if noise.cv:
            near.update({f"{k} confirmed": v for k, v in found.given_noise(noise.sigma).pairs().items()})
    return result.recommendation.config, opt.probes, anytime


def run_random(surface: Surface, noise: NoiseStream, seed: int, probes: int) -> tuple[dict[str, int], list[float]]:
    opt = RandomOptimiser(dimensions=surface.dims(), seed=seed, budget=probes, min_probes=probes)
    history, anytime = [], []
    factor = noise.measure()
    for _ in range(probes):
        cfg = opt.suggest()
        v = surface.as_time(surface.true(cfg)) * factor(cfg)
        opt.register(cfg, v)
        history.append((cfg, v))
        anytime.append(surface.regret(_best_observed(history, surface)))
    return _best_observed(history, surface), anytime


def run_tpe(surface: Surface, noise: NoiseStream, seed: int, probes: int) -> tuple[dict[str, int], list[float]]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dims = surface.dims()
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed), direction="minimize")
    history, anytime = [], []
    factor = noise.measure()
    for _ in range(probes):
        trial = study.ask()
        cfg = {d.name: d.from_z(trial.suggest_float(d.name, d.z_low, d.z_high)) for d in dims}
        v = surface.as_time(surface.true(cfg)) * factor(cfg)
        study.tell(trial, math.log(v))
        history.append((cfg, v))
        anytime.append(surface.regret(_best_observed(history, surface)))
    return _best_observed(history, surface), anytime


def one_seed(args: tuple[str, int, float, str, str, str]) -> dict[str, dict[str, object]]:
    path, seed, cv, per, search_range, policy = args
    surface = Surface.load(Path(path))
    surface.policy = policy
    if search_range == "policy":
        surface.use_policy_range()
    noise = NoiseStream(cv, seed, per=per)
    out: dict[str, dict[str, object]] = {}
    near: dict[str, tuple[int, int]] = {}
    cfg, n, any_t = run_tuner(surface, noise, seed, near=near)
    searched = {k: v for k, v in near.items() if not k.endswith(" confirmed")}
    confirmed = {k.removesuffix(" confirmed"): v for k, v in near.items() if k.endswith(" confirmed")}
    out["tuner"] = {"answer": cfg, "probes": n, "anytime": any_t, "near_optimal": searched,
                    **range_figures(surface, cfg, searched)}
    if confirmed:
        out["tuner"]["near_optimal_confirmed"] = confirmed
        out["tuner"].update({f"confirmed_{k}": v for k, v in range_figures(surface, cfg, confirmed).items()})
    cfg, n_s, any_s = run_sweep(surface, noise)
    out["sweep"] = {"answer": cfg, "probes": n_s, "anytime": any_s}
    cfg, any_r = run_random(surface, noise, seed, n)
    out["random"] = {"answer": cfg, "probes": n, "anytime": any_r}
    cfg, any_o = run_tpe(surface, noise, seed, n)
    out["optuna_tpe"] = {"answer": cfg, "probes": n, "anytime": any_o}
    if search_range == "policy":
        cfg, n_w, any_w = run_sweep(surface, noise, search_range=True)
        out["sweep_range"] = {"answer": cfg, "probes": n_w, "anytime": any_w}
    for m in out.values():
        m["regret"] = surface.regret(m["answer"])  # type: ignore[arg-type]
    return out


def range_figures(surface: Surface, answer: dict[str, int], near: dict[str, tuple[int, int]]) -> dict[str, object]:
    """What one near-optimal range says about the truth (issue #39): whether it holds a true optimum (a grid point
    with the surface's best value, every knob inside its knob's range), its width per knob as a share of the
    searched range on the search's scale (log2(1 + value)), and the worst true regret of a grid level inside it
    (per knob, the other knobs at the answer — the cross the per-knob ranges describe)."""
    _, best = surface.optimum
    optima = [k for k, v in surface.values.items() if v == best]
    covered = any(all(near[kn][0] <= o[i] <= near[kn][1] for i, kn in enumerate(surface.knobs)) for o in optima)
    widths, worst = [], 0.0
    for d, lv in zip(surface.dims(), surface.levels):
        lo, hi = near[d.name]
        widths.append((d.to_z(hi) - d.to_z(lo)) / (d.z_high - d.z_low))
        for v in lv:
            if lo <= v <= hi:
                worst = max(worst, surface.regret({**answer, d.name: v}))
    return {"range_covers_optimum": covered, "range_width": round(sum(widths) / len(widths), 4),
            "range_worst_regret": round(worst, 4)}


def _wilson(successes: int, n: int, z: float) -> tuple[float, float]:
    """Wilson score interval for one binomial proportion."""
    p = successes / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return centre - half, centre + half


def paired_success_difference(both: int, first_only: int, second_only: int, neither: int,
                              z: float = 1.959964) -> tuple[float, float, float]:
    """Difference of two success rates measured on the same seeds, with Newcombe's (1998, method 10)
    square-and-add interval for paired proportions: Wilson intervals for each rate, combined with the
    correlation of the pairs (continuity-corrected phi). Returns (difference, lower, upper), as fractions.

    The seeds pair the methods (common random numbers), so the pairs are correlated and an interval for two
    independent rates would be too wide; the plain Wald interval on the per-seed differences misbehaves when
    few seeds disagree. Checked against Fagerland, Lydersen & Laake's contingencytables (chapter 8 test):
    59/6/16/80 gives -0.0621 (-0.1186 to -0.0046)."""
    n = both + first_only + second_only + neither
    if n == 0:
        raise ValueError("no pairs")
    p1, p2 = (both + first_only) / n, (both + second_only) / n
    l1, u1 = _wilson(both + first_only, n, z)
    l2, u2 = _wilson(both + second_only, n, z)
    margins = (both + first_only) * (second_only + neither) * (both + second_only) * (first_only + neither)
    cross = both * neither - first_only * second_only
    corrected = cross - n / 2 if cross > n / 2 else (cross if cross < 0 else 0.0)
    phi = corrected / math.sqrt(margins) if margins > 0 else 0.0
    diff = p1 - p2
    lower = diff - math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    upper = diff + math.sqrt(max(0.0, (p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2))
    return diff, max(-1.0, lower), min(1.0, upper)


def success_vs_sweep(runs: list[dict[str, dict[str, object]]], sweep: str = "sweep") -> dict[str, object]:
    """Tuner's success rate minus the sweep's (or ``sweep``'s) on one surface, in points, with a 95 % interval
    over seeds."""
    pairs = [(float(r["tuner"]["regret"]) <= SUCCESS, float(r[sweep]["regret"]) <= SUCCESS)  # type: ignore[arg-type]
             for r in runs]
    both = sum(t and s for t, s in pairs)
    tuner_only = sum(t and not s for t, s in pairs)
    sweep_only = sum(s and not t for t, s in pairs)
    diff, lo, hi = paired_success_difference(both, tuner_only, sweep_only, len(pairs) - both - tuner_only - sweep_only)
    return {"points": round(100 * diff, 1), "ci95_points": [round(100 * lo, 1), round(100 * hi, 1)],
            "tuner_only": tuner_only, "sweep_only": sweep_only}


def summarise(surface: Surface, runs: list[dict[str, dict[str, object]]]) -> dict[str, object]:
    opt_cfg, opt_val = surface.optimum
    methods: dict[str, object] = {}
    for m in [m for m in ("tuner", "sweep", "random", "optuna_tpe", "sweep_range") if m in runs[0]]:
        regrets = [float(r[m]["regret"]) for r in runs]  # type: ignore[arg-type]
        probes = [int(r[m]["probes"]) for r in runs]  # type: ignore[arg-type]
        longest = max(len(r[m]["anytime"]) for r in runs)  # type: ignore[arg-type]
        curve = []
        for k in range(longest):
            vals = [r[m]["anytime"][min(k, len(r[m]["anytime"]) - 1)] for r in runs]  # type: ignore[index]
            curve.append(round(statistics.median(vals), 4))
        methods[m] = {
            "probes_median": statistics.median(probes),
            "probes_mean": round(statistics.mean(probes), 2),
            "success_rate": round(sum(r <= SUCCESS for r in regrets) / len(regrets), 3),
            "regret_median": round(statistics.median(regrets), 4),
            "regret_mean": round(statistics.mean(regrets), 4),
            "anytime_regret_median": curve,
        }
    for key, prefix in (("near_optimal", ""), ("near_optimal_confirmed", "confirmed_")):
        if f"{prefix}range_covers_optimum" not in runs[0]["tuner"]:
            continue
        covered = sum(bool(r["tuner"][f"{prefix}range_covers_optimum"]) for r in runs)
        widths = [float(r["tuner"][f"{prefix}range_width"]) for r in runs]  # type: ignore[arg-type]
        methods["tuner"][key] = {  # type: ignore[index]
            "covers_optimum": covered, "seeds": len(runs), "coverage": round(covered / len(runs), 3),
            "width_mean": round(statistics.mean(widths), 4), "width_median": round(statistics.median(widths), 4),
            "worst_regret_median": round(statistics.median(
                float(r["tuner"][f"{prefix}range_worst_regret"]) for r in runs), 4),  # type: ignore[arg-type]
        }
    out = {"name": surface.name, "dims": len(surface.knobs), "optimum": {**opt_cfg, "value": opt_val},
           "direction": surface.direction, "methods": methods, "success_vs_sweep": success_vs_sweep(runs)}
    if "sweep_range" in runs[0]:
        out["success_vs_sweep_range"] = success_vs_sweep(runs, "sweep_range")
    return out


def _by_interval(surfaces: list[dict], key: str) -> dict[str, object]:  # type: ignore[type-arg]
    """Surfaces sorted by the 95 % interval of one success gap against -5 points: met (lower bound >= -5),
    missed (upper bound < -5), or not decided by this many seeds."""
    bounds = [(s["name"], *s[key]["ci95_points"]) for s in surfaces]
    return {"met": sum(lo >= -5 for _, lo, _ in bounds),
            "undecided": sum(lo < -5 <= hi for _, lo, hi in bounds),
            "missed": [name for name, _, hi in bounds if hi < -5]}


def verdict(result: dict[str, object]) -> dict[str, object]:
    surfaces = result["surfaces"]  # type: ignore[assignment]
    out: dict[str, object] = {}
    for dims in (1, 2):
        group = [s for s in surfaces if s["dims"] == dims]  # type: ignore[index]
        if not group:
            continue
        t = sum(s["methods"]["tuner"]["probes_mean"] for s in group)  # type: ignore[index]
        w = sum(s["methods"]["sweep"]["probes_mean"] for s in group)  # type: ignore[index]
        out[f"probes_ratio_{dims}d"] = round(t / w, 3)
    out["success_vs_sweep_min_points"] = round(min(
        100 * (s["methods"]["tuner"]["success_rate"] - s["methods"]["sweep"]["success_rate"]) for s in surfaces  # type: ignore[index]
    ), 1)
    # Surfaces more than 5 points below the sweep, with the 95 % interval of the paired difference: an upper
    # bound below -5 says the gap is real at this many seeds; one above it says these seeds cannot tell.
    out["success_below_sweep_minus5"] = [
        {"name": s["name"], **s["success_vs_sweep"]}  # type: ignore[index, dict-item]
        for s in surfaces  # type: ignore[union-attr]
        if s["success_vs_sweep"]["points"] < -5  # type: ignore[index]
    ]
    # The target (tuner >= sweep - 5 points) per surface, by that interval: met (lower bound >= -5), missed
    # (upper bound < -5), or not decided by this many seeds.
    out["success_target_by_interval"] = _by_interval(surfaces, "success_vs_sweep")  # type: ignore[arg-type]
    # For reference (``--range policy``): the same per-surface count against a sweep of the range tuner searches.
    if all("success_vs_sweep_range" in s for s in surfaces):  # type: ignore[operator, union-attr]
        out["success_vs_sweep_range_by_interval"] = _by_interval(surfaces, "success_vs_sweep_range")  # type: ignore[arg-type]
    # The near-optimal range (issue #39): how often it holds the true optimum, over every seed of every surface
    # (target >= 0.90), next to its mean width (share of the searched range, log2(1 + value) scale).
    # "confirmed": the same once the reading noise is known, as after a confirmation (``NearOptimal.given_noise``).
    for key in ("near_optimal", "near_optimal_confirmed"):
        ranges = [s["methods"]["tuner"].get(key) for s in surfaces]  # type: ignore[index]
        if all(ranges):
            seeds = sum(r["seeds"] for r in ranges)  # type: ignore[index]
            out[f"{key}_coverage"] = round(sum(r["covers_optimum"] for r in ranges) / seeds, 3)  # type: ignore[index]
            out[f"{key}_width_mean"] = round(sum(r["width_mean"] * r["seeds"] for r in ranges) / seeds, 4)  # type: ignore[index]
    for m in ("random", "optuna_tpe", "sweep"):
        out[f"regret_sum_tuner_vs_{m}"] = [
            round(sum(s["methods"]["tuner"]["regret_median"] for s in surfaces), 4),  # type: ignore[index]
            round(sum(s["methods"][m]["regret_median"] for s in surfaces), 4),  # type: ignore[index]
        ]
    return out


def _gap_table(surfaces: list[dict], key: str, title: str, name: str, only: str) -> list[str]:  # type: ignore[type-arg]
    """The Markdown table of one per-surface success gap (``key``: success_vs_sweep or success_vs_sweep_range)."""
    lines = ["", title, "",
             f"| surface | tuner − {name} (points) | 95 % interval | seeds only tuner got right | only {only} |",
             "|---|---|---|---|---|"]
    for s in surfaces:
        v = s[key]
        lines.append(f"| {s['name']} | {v['points']:+.1f} | {v['ci95_points'][0]:+.1f} to {v['ci95_points'][1]:+.1f} | "
                     f"{v['tuner_only']} | {v['sweep_only']} |")
    return lines


def markdown(result: dict[str, object]) -> str:
    lines = [f"Noise CV {result['noise_cv']}, {result['seeds']} seeds, noise draws per {result.get('draws', 'probe')}, "
             f"search range: {result.get('search_range', 'grid')}, "
             + (f"policy: {result['policy']}, " if "policy" in result else "") + f"{result['duration_s']} s.", "",
             "| surface | dims | method | probes (median) | probes (mean) | success | regret (median) |",
             "|---|---|---|---|---|---|---|"]
    for s in result["surfaces"]:  # type: ignore[union-attr]
        for m, v in s["methods"].items():
            lines.append(f"| {s['name']} | {s['dims']} | {m} | {v['probes_median']} | {v['probes_mean']} | "
                         f"{v['success_rate']:.2f} | {v['regret_median']:.3f} |")
    surfaces = result["surfaces"]  # type: ignore[assignment]
    if all("near_optimal" in s["methods"]["tuner"] for s in surfaces):  # type: ignore[index]
        lines += ["", "Tuner's near-optimal range: how often it holds the true optimum (target 0.90), its width "
                  "(share of the searched range on the log2(1 + value) scale) and the worst true regret of a grid "
                  "level inside it; as the search reports it, and once the reading noise is known (as after a "
                  "confirmation):", "",
                  "| surface | coverage | width (mean) | width (median) | worst regret inside (median) | "
                  "confirmed: coverage | width (mean) |", "|---|---|---|---|---|---|---|"]
        for s in surfaces:  # type: ignore[union-attr]
            r = s["methods"]["tuner"]["near_optimal"]
            c = s["methods"]["tuner"].get("near_optimal_confirmed")
            tail = f"{c['covers_optimum']}/{c['seeds']} ({c['coverage']:.2f}) | {c['width_mean']:.2f}" if c else "– | –"
            lines.append(f"| {s['name']} | {r['covers_optimum']}/{r['seeds']} ({r['coverage']:.2f}) | "
                         f"{r['width_mean']:.2f} | {r['width_median']:.2f} | {r['worst_regret_median']:.3f} | {tail} |")
    lines += _gap_table(surfaces, "success_vs_sweep", "Tuner's success rate minus the sweep's, paired by seed "
                        "(Newcombe's interval for paired rates):", "sweep", "the sweep")
    if all("success_vs_sweep_range" in s for s in surfaces):  # type: ignore[union-attr]
        lines += _gap_table(surfaces, "success_vs_sweep_range", "For reference, against `sweep_range`, a sweep of "
                            "the range tuner searches (the grid's levels and the round values past them); the target "
                            "is judged against `sweep`, above:", "sweep_range", "sweep_range")
    lines.append("")
    lines.append("Verdict: " + json.dumps(result["verdict"]))
    return "\n".join(lines) + "\n"


def plot(result: dict[str, object], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    surfaces = result["surfaces"]  # type: ignore[assignment]
    fig, axes = plt.subplots(1, len(surfaces), figsize=(4.2 * len(surfaces), 3.4), squeeze=False)
    for ax, s in zip(axes[0], surfaces):
        for m, v in s["methods"].items():
            ax.plot(range(1, len(v["anytime_regret_median"]) + 1), v["anytime_regret_median"], label=m)
        ax.set_title(f"{s['name']} ({s['dims']}-D)", fontsize=9)
        ax.set_xlabel("probes")
        ax.set_ylabel("median regret")
        ax.set_yscale("symlog", linthresh=0.01)
        ax.axhline(SUCCESS, color="grey", lw=0.5, ls=":")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def expand_surfaces(patterns: list[str]) -> list[Path]:
    """Paths and quoted globs, in order, each file once; a pattern that names no file is an error."""
    out: list[Path] = []
    for pattern in patterns:
        found = sorted(Path(p) for p in glob.glob(pattern)) if glob.has_magic(pattern) else [Path(pattern)]
        if not found or not all(p.is_file() for p in found):
            raise SystemExit(f"optimiser.py: no surface file at {pattern!r} (give a CSV path or a quoted glob)")
        out += [p for p in found if p not in out]
    return out


def check_run_arguments(ap: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """--seeds, --noise-cv and --policy, shared with trace.py: a bad value is one argparse sentence (exit 2)."""
    if args.seeds < 1:
        ap.error(f"--seeds must be at least 1, not {args.seeds} (30 is the issue's benchmark)")
    if not 0 <= args.noise_cv < 1:
        ap.error(f"--noise-cv is a coefficient of variation between 0 and 1, not {args.noise_cv} (try 0.05 or 0.10)")
    try:
        load_policy(args.policy)
    except TunerError as exc:
        ap.error(f"--policy: {exc}" + (f" ({exc.hint})" if exc.hint else ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--surface", action="append", metavar="PATH",
                    help="surface CSV, or a quoted glob such as 'benchmarks/surfaces/checks/*.csv' "
                         "(repeatable; default: benchmarks/surfaces/*.csv)")
    ap.add_argument("--seeds", type=int, default=30, metavar="N",
                    help="seeds per surface, each with its own noise draws (default 30: a paired interval of about +-11 points per surface; 100 seeds: +-4 to +-10)")
    ap.add_argument("--noise-cv", type=float, default=0.05, metavar="CV",
                    help="coefficient of variation of the lognormal noise on each probe (default 0.05)")
    ap.add_argument("--json", type=Path, metavar="OUT", help="write the full result (JSON) here")
    ap.add_argument("--markdown", type=Path, metavar="OUT", help="write the tables (Markdown) here")
    ap.add_argument("--plot", type=Path, help="anytime-regret plot (PNG; needs matplotlib)")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--draws", choices=("config", "probe"), default="config",
                    help="common random numbers per configuration and repeat (default), or per probe index")
    ap.add_argument("--range", dest="search_range", choices=("grid", "policy"), default="grid",
                    help="the range tuner, random search and TPE search: the surface's grid (default) or the "
                         "policy's (the default policy's effective_io_concurrency 0..1000), as tuner recommend "
                         "searches; policy also reports sweep_range, a sweep of that whole range, for reference")
    ap.add_argument("--policy", default="default", metavar="NAME",
                    help="the policy tuner's optimiser runs with: its starts, budget and stopping rule, and with "
                         "--range policy its range (default: default; shipped: ssd, hdd, network; or a path)")
    args = ap.parse_args()
    check_run_arguments(ap, args)
    if args.jobs < 1:
        ap.error(f"--jobs must be at least 1, not {args.jobs}")
    paths = expand_surfaces(args.surface) if args.surface else DEFAULT_SURFACES
    t0 = time.monotonic()
    result: dict[str, object] = {"noise_cv": args.noise_cv, "seeds": args.seeds, "draws": args.draws,
                                 "search_range": args.search_range, "surfaces": []}
    if args.policy != "default":
        result["policy"] = args.policy  # absent: the default policy (as in every file written before --policy)
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for path in paths:
            surface = Surface.load(path)
            runs = list(pool.map(one_seed, [(str(path), seed, args.noise_cv, args.draws, args.search_range,
                                             args.policy) for seed in range(args.seeds)]))
            summary = summarise(surface, runs)
            result["surfaces"].append(summary)  # type: ignore[union-attr]
            t = summary["methods"]
            print(f"  {surface.name}: tuner {t['tuner']['probes_median']} probes, success {t['tuner']['success_rate']:.2f}; "
                  f"sweep {t['sweep']['probes_median']}, success {t['sweep']['success_rate']:.2f}", file=sys.stderr, flush=True)
    result["duration_s"] = round(time.monotonic() - t0, 1)
    result["verdict"] = verdict(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    if args.markdown:
        args.markdown.write_text(markdown(result))
    if args.plot:
        plot(result, args.plot)
    print(markdown(result))


if __name__ == "__main__":
    main()
