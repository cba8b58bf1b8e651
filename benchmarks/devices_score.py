"""Scoring for benchmarks/devices.py (pure: no PostgreSQL, no devices): the truth from a sweep, and every
method's answer scored against it — regret and hit.

* truth: per grid value the mean execution time (ms) of its cold probes and a 95 % t-interval; the best is the
  lowest mean; the truth set is every value whose mean is within the policy's ``min_effect`` (1.05) of the best.
* an answer off the grid (tuner may answer 37) gets a true time interpolated between its grid neighbours on
  log2(1 + eic) — the axis tuner searches on — and is a hit when that time is within min_effect of the best.
* regret = true time at the answer / best true time − 1.
* peers: fixed rules (PostgreSQL's default, PGTune, timescaledb-tune, folklore 256) scored directly; the seeds'
  method (each grid value once, the fastest) and Optuna TPE / random search with tuner's probe budget are run
  on the sweep's own measurements many times with seeded draws and scored by their mean regret and hit share:
  in sample (each probe draws one of the value's repeats, scored on the means of all of them — the probes the
  truth averages, an advantage tuner's sessions do not get) and out of sample (one repeat per value held for
  the probes, scored on the mean of the other four).
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

GRID = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000)
# t quantiles (two-sided 95 %) for small samples; beyond 30, 1.96.
_T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26, 10: 2.23, 15: 2.13, 20: 2.09, 30: 2.04}

# PGTune (le0pard/pgtune, src/features/configuration/configurationSlice.js, selectEffectiveIoConcurrency) asks
# for the storage type: hdd 2, ssd 200, san 300, nvme 1000. The storage type an operator would pick per profile:
PGTUNE_BY_STORAGE = {"hdd": 2, "ssd": 200, "san": 300, "nvme": 1000}
# timescaledb-tune (timescale/timescaledb-tune, pkg/pgtune/misc.go, getEffectiveIOConcurrency) sets 200 on Linux
# whatever the disk for PostgreSQL 9.6-12 only; from 13 it sets 256 (the folklore value). The 1-D, 2-D and 18 tables
# score this 200 as committed (their figures stand; on 15 and 18 it is the value of PostgreSQL 12 and older);
# devices.py --cloud scores each tool as it emits for the truth's version (benchmarks/peers.py).
TIMESCALEDB_TUNE = 200
FOLKLORE = 256


def storage_type(profile: str) -> str:
    """The PGTune storage type an operator would choose for a profile (a cloud shorthand by its parts: gp3 is
    network-attached, "san")."""
    from tuner.sandbox.device.cloud import expand

    short = expand(profile)
    parts = {p.split("=")[0] for p in (short[1] if short else profile).split(",")}
    if "hdd" in parts:
        return "hdd"
    if "ram" in parts:
        return "nvme"
    if parts & {"latency", "iops", "mbps"}:
        return "san"  # network-attached ("SAN" in PGTune's form)
    return "ssd"


def _t95(n: int) -> float:
    keys = [k for k in sorted(_T95) if k <= n - 1]
    return _T95[keys[-1]] if keys and n - 1 <= 30 else 1.96


def truth(samples: Mapping[int, Sequence[float]], min_effect: float) -> dict[str, Any]:
    """The truth from a sweep: ``samples`` maps each grid value to its probes' times (ms)."""
    cells = {}
    for v, xs in sorted(samples.items()):
        mean = statistics.fmean(xs)
        half = _t95(len(xs)) * statistics.stdev(xs) / math.sqrt(len(xs)) if len(xs) > 1 else float("nan")
        cells[v] = {"n": len(xs), "mean_ms": round(mean, 3), "median_ms": round(statistics.median(xs), 3),
                    "ci95_ms": [round(mean - half, 3), round(mean + half, 3)]}
    best_v = min(cells, key=lambda v: cells[v]["mean_ms"])
    best = cells[best_v]["mean_ms"]
    return {"cells": cells, "best": best_v, "best_ms": best, "min_effect": min_effect,
            "truth_set": [v for v, c in cells.items() if c["mean_ms"] <= best * min_effect],
            # The sweep cannot tell these from the best: their interval reaches within min_effect of the best mean.
            "plausible_set": [v for v, c in cells.items() if not c["ci95_ms"][0] > best * min_effect]}


def true_ms(t: Mapping[str, Any], value: float) -> float:
    """The true time at ``value``: the grid cell's mean, else interpolated on log2(1 + eic) between neighbours."""
    cells = {int(k): c["mean_ms"] for k, c in t["cells"].items()}
    grid = sorted(cells)
    value = min(max(value, grid[0]), grid[-1])
    if value in cells:
        return cells[int(value)]
    hi = next(g for g in grid if g > value)
    lo = max(g for g in grid if g < value)
    x, x0, x1 = math.log2(1 + value), math.log2(1 + lo), math.log2(1 + hi)
    return cells[lo] + (cells[hi] - cells[lo]) * (x - x0) / (x1 - x0)


def score(t: Mapping[str, Any], value: float) -> dict[str, Any]:
    """Regret and hit at ``value``; ``plausible``: inside the span of the plausible set (as wide as the sweep's
    own resolution)."""
    ms = true_ms(t, value)
    plausible = t.get("plausible_set") or [t["best"]]
    return {"answer": value, "regret": round(ms / t["best_ms"] - 1, 4), "hit": ms <= t["best_ms"] * t["min_effect"],
            "plausible": min(plausible) <= value <= max(plausible)}


def _draw(samples: Mapping[int, Sequence[float]], rng: random.Random) -> Callable[[int], float]:
    return lambda v: rng.choice(list(samples[v]))


def seeds_method(samples: Mapping[int, Sequence[float]], rng: random.Random) -> int:
    """Each grid value once, take the fastest (the hand-made sweeps of the seeds)."""
    probe = _draw(samples, rng)
    return min(samples, key=probe)


def random_search(samples: Mapping[int, Sequence[float]], budget: int, rng: random.Random) -> int:
    probe = _draw(samples, rng)
    tried = {v: probe(v) for v in (rng.choice(list(samples)) for _ in range(budget))}
    return min(tried, key=lambda v: tried[v])


def optuna_tpe(samples: Mapping[Any, Sequence[float]], budget: int, seed: int, cast: Callable[[Any], Any] = int) -> Any:
    """Optuna's TPE over the grid (categorical), ``budget`` probes, the best observed value."""
    import optuna  # benchmark-only dependency (the [bench] extra)

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rng = random.Random(seed)
    probe = _draw(samples, rng)
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed, n_startup_trials=min(5, budget)))
    study.optimize(lambda trial: probe(trial.suggest_categorical("eic", sorted(samples))), n_trials=budget)
    return cast(study.best_params["eic"])


def peers(t: Mapping[str, Any], samples: Mapping[int, Sequence[float]], *, profile: str, default: int,
          budget: int, draws: int = 50, seed: int = 46) -> dict[str, dict[str, Any]]:
    """Every peer's score on this truth: fixed rules once; the searching methods over ``draws`` seeded runs."""
    out = {
        "postgresql_default": score(t, default),
        "pgtune": score(t, PGTUNE_BY_STORAGE[storage_type(profile)]),
        "timescaledb_tune": score(t, TIMESCALEDB_TUNE),
        "folklore_256": score(t, FOLKLORE),
    }
    return {**out, **replayed(samples, t["min_effect"], budget=budget, draws=draws, seed=seed),
            **{f"{k} (out of sample)": v for k, v in replayed(samples, t["min_effect"], budget=budget, draws=draws,
                                                              seed=seed, out_of_sample=True).items()}}


def _split(samples: Mapping[Any, Sequence[float]], rng: random.Random,
           out_of_sample: bool) -> tuple[dict[Any, list[float]], dict[Any, float]]:
    """The probes a replayed method may draw from, per cell, and the means its answer is scored on: in sample,
    every repeat for both (as the issue's first table did: the method draws the very probes the truth averages);
    out of sample, one repeat drawn at random per cell, and the mean of the others."""
    if not out_of_sample:
        return {k: list(xs) for k, xs in samples.items()}, {k: statistics.fmean(xs) for k, xs in samples.items()}
    pool, rest = {}, {}
    for k, xs in samples.items():
        i = rng.randrange(len(xs))
        others = [x for j, x in enumerate(xs) if j != i] or list(xs)
        pool[k], rest[k] = [xs[i]], statistics.fmean(others)
    return pool, rest


def replayed(samples: Mapping[Any, Sequence[float]], min_effect: float, *, budget: int, draws: int = 50,
             seed: int = 46, out_of_sample: bool = False) -> dict[str, dict[str, Any]]:
    """The searching peers — the seeds' method (every cell once, the fastest), random search and Optuna TPE with
    ``budget`` probes — replayed ``draws`` times on the sweep's own probes, each answer scored by its cell's mean
    (see :func:`_split` for in and out of sample). Cells are grid values or labels ("512,64")."""
    runs: dict[str, list[dict[str, Any]]] = {"seeds_method": [], "random_search": [], "optuna_tpe": []}
    kind = type(next(iter(samples)))
    for i in range(draws):
        rng = random.Random(seed + i)
        pool, means = _split(samples, rng, out_of_sample)
        best = min(means.values())

        def at(cell: Any) -> dict[str, Any]:
            return {"regret": means[cell] / best - 1, "hit": means[cell] <= best * min_effect}

        runs["seeds_method"].append(at(seeds_method(pool, rng)))
        runs["random_search"].append(at(random_search(pool, budget, rng)))
        runs["optuna_tpe"].append(at(optuna_tpe(pool, budget, seed + i, cast=kind)))
    return {name: {"regret": round(statistics.fmean(r["regret"] for r in rs), 4),
                   "hit": round(sum(r["hit"] for r in rs) / len(rs), 3), "runs": len(rs),
                   "probes": len(samples) if name == "seeds_method" else budget} for name, rs in runs.items()}


def hit_chances(samples: Mapping[Any, Sequence[float]], min_effect: float, answers: Sequence[Any], *,
                scorer: Callable[[Mapping[str, Any], Any], dict[str, Any]] | None = None,
                make_truth: Callable[[Mapping[Any, Sequence[float]], float], dict[str, Any]] | None = None,
                draws: int = 400, seed: int = 46) -> list[float]:
    """How sure each hit/miss verdict is, given the sweep's own noise: the share of bootstrap truths (every value's
    repeats resampled with replacement, the best and the 5 % set found again) in which each answer is a hit. A
    miss at 0.4 is a coin toss the sweep cannot settle; at 0.0 it is a miss whatever the noise."""
    rng = random.Random(seed)
    scorer = scorer or score
    make_truth = make_truth or truth
    hits = [0] * len(answers)
    for _ in range(draws):
        boot = {k: [rng.choice(list(xs)) for _ in xs] for k, xs in samples.items()}
        t = make_truth(boot, min_effect)
        for i, a in enumerate(answers):
            hits[i] += bool(scorer(t, a)["hit"])
    return [round(h / draws, 3) for h in hits]


# --- the 2-D truth: cells keyed "read_ahead_kb,eic" ------------------------------------------------------------


def truth2d(samples: Mapping[str, Sequence[float]], min_effect: float) -> dict[str, Any]:
    """The 2-D truth: per cell the mean and interval (as :func:`truth`), the best cell, the truth set (within
    min_effect of the best) and the plausible set (interval reaching within min_effect of the best)."""
    t = truth(samples, min_effect)  # type: ignore[arg-type]  (keys are "ra,eic" strings; truth() only groups them)
    t["axes"] = {"read_ahead_kb": sorted({int(k.split(",")[0]) for k in samples}),
                 "effective_io_concurrency": sorted({int(k.split(",")[1]) for k in samples})}
    return t


def _bracket(grid: Sequence[int], v: float) -> tuple[int, int, float]:
    """The grid neighbours of ``v`` and its position between them on log2(1 + x)."""
    v = min(max(v, grid[0]), grid[-1])
    lo = max(g for g in grid if g <= v)
    hi = min(g for g in grid if g >= v)
    if lo == hi:
        return lo, hi, 0.0
    x, x0, x1 = math.log2(1 + v), math.log2(1 + lo), math.log2(1 + hi)
    return lo, hi, (x - x0) / (x1 - x0)


def true_ms2d(t: Mapping[str, Any], ra_kb: float, eic: float) -> float:
    """The true time at (read_ahead_kb, eic): the cell's mean, else bilinear between the four neighbours on the
    log2(1 + x) axes."""
    def m(r: int, e: int) -> float:
        return float(t["cells"][f"{r},{e}"]["mean_ms"])

    r0, r1, fr = _bracket(t["axes"]["read_ahead_kb"], ra_kb)
    e0, e1, fe = _bracket(t["axes"]["effective_io_concurrency"], eic)
    low = m(r0, e0) + (m(r0, e1) - m(r0, e0)) * fe
    high = m(r1, e0) + (m(r1, e1) - m(r1, e0)) * fe
    return low + (high - low) * fr


def score2d(t: Mapping[str, Any], ra_kb: float, eic: float) -> dict[str, Any]:
    ms = true_ms2d(t, ra_kb, eic)
    return {"answer": [ra_kb, eic], "true_ms": round(ms, 1), "regret": round(ms / t["best_ms"] - 1, 4),
            "hit": ms <= t["best_ms"] * t["min_effect"]}


def applied(rec: Mapping[str, Any] | None, default: Any) -> Any:
    """What a session tells the operator to run for a knob: the recommended value where it decided "change", else
    today's (a "keep" carries the search's best in ``recommended``, but the advice is to keep today's)."""
    if rec is None:
        return default
    return rec["recommended"] if rec.get("decision") == "change" else rec["current"]


# --- truths precise enough to decide (benchmarks/devices_cloud.py) ----------------------------------------------

# A cell is measured until its 95 % interval's half-width is at most this share of its mean: half the 5 % that
# defines a hit, so two cells 5 % apart have intervals that do not overlap.
PRECISION = 0.025
# ... or until it has this many probes (each >= 1 s, plus a restart and a cache drop: 20 repeats of 12 cells are
# 10-15 min a profile); a cell stopped by the cap is reported with the half-width it reached.
MAX_REPEATS = 20
# Every cell at least this often, in whole randomised blocks, before the rule may stop one: fewer gives the
# t-interval too few degrees of freedom to be believed (n = 5: t = 2.78).
MIN_REPEATS = 5
# A verdict is stated when this share of bootstrap truths agrees (hit) or disagrees (miss); between, the truth
# cannot resolve it.
SURE = 0.95


def half_width(xs: Sequence[float]) -> float:
    """The 95 % t-interval's half-width of the mean of ``xs`` as a share of that mean (inf below two probes)."""
    if len(xs) < 2:
        return float("inf")
    mean = statistics.fmean(xs)
    return _t95(len(xs)) * statistics.stdev(xs) / math.sqrt(len(xs)) / mean if mean > 0 else float("inf")


def needs_more(xs: Sequence[float], *, precision: float = PRECISION, min_n: int = MIN_REPEATS,
               max_n: int = MAX_REPEATS) -> bool:
    """The stopping rule, per cell: probe again while the cell has fewer than ``min_n`` probes, or its interval is
    wider than ``precision`` of its mean and it has fewer than ``max_n``."""
    return len(xs) < min_n or (len(xs) < max_n and half_width(xs) > precision)


def block_order(cells: Sequence[Any], profile: str, block: int) -> list[Any]:
    """The order one block visits ``cells`` in: a fresh random order per profile and per block (seeded by both,
    so a resumed run repeats it), not one shuffle for all — with one seed, eic 64 ran first on every profile, on
    a server just started (14-31 % slow on three profiles)."""
    order = list(cells)
    random.Random(f"{profile}/{block}").shuffle(order)
    return order


def verdict(chance: float, *, sure: float = SURE) -> str:
    """hit, miss or unresolved, from the share of bootstrap truths in which an answer is a hit."""
    return "hit" if chance >= sure else "miss" if chance <= 1 - sure else "unresolved"


# Reads a probe of the concurrency family's workload makes per unit of scale: iops=300 at scale 5 held every read
# at its cap, 3,220 ms x 300 IOPS = 966 reads (benchmarks/measured/devices/iops-300.json).
READS_PER_SCALE = 193
# The fastest a read is served where no cap binds (measured best cells): the executor's own work, 16 us (local and
# ram at scale 50: 153 and 160 ms for ~9,650 reads); through the FUSE read layer, 42 us (latency=1ms at eic 128:
# 162 ms for 3,860 reads); one spindle, 4.9 ms (hdd at scale 2: 1,905 ms for 386 reads).
FLOOR_S = {"plain": 16e-6, "layered": 42e-6, "hdd": 4.9e-3}


# The probe length aimed at: 1 s with a quarter to spare — gp3 at the scale aimed at exactly 1 s (16) ran its best
# cell in 823 ms, blk-throttle letting reads through above the cap at the start of its slices (3,392 IOPS median
# in tuner's deeper probes against a cap of 3,000; benchmarks/measured/devices/cloud/gp3.json).
PROBE_S = 1.25


def scale_for(parts: Mapping[str, Any], *, probe_s: float = PROBE_S, max_scale: int = 150) -> int:
    """The smallest scale at which the concurrency family's probe is expected to last ``probe_s`` even at its
    best eic: reads per probe (:data:`READS_PER_SCALE` per unit) times the fastest a read can be served — the
    slowest of the IOPS cap, the throughput cap for an 8 KiB read and the stack's floor (:data:`FLOOR_S`).
    ``parts``: ``hdd``, ``layered`` (bool), ``read_iops``, ``read_mbps`` (None when absent). At most ``max_scale``:
    ram would need ~320, and a primary and standby of that size hold ~8 GB in the tmpfs (a 24 GB machine shared
    with other work), so ram's probes stay shorter than a second (the run records how long they lasted)."""
    floor = FLOOR_S["hdd" if parts.get("hdd") else "layered" if parts.get("layered") else "plain"]
    per_read = max(floor, 1 / parts["read_iops"] if parts.get("read_iops") else 0.0,
                   8192 / (parts["read_mbps"] * 2**20) if parts.get("read_mbps") else 0.0)
    return min(max_scale, max(1, math.ceil(probe_s / (READS_PER_SCALE * per_read))))
