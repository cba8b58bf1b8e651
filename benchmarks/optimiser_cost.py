"""What one probe costs the optimiser: ``stop_reason`` + ``suggest`` + ``register``, as
``tuner.core.loops.search`` calls them, against the unmodified path measured in the same run.

    python benchmarks/optimiser_cost.py [--repeats 12] [--baseline-repeats 5] [--json OUT] [--quick]

Two searches: 1-D (effective_io_concurrency 0..1000) and 2-D (× read_ahead_kb 0..16384 in 4 KiB pages), on a
synthetic curve (prefetching helps, with a readahead bowl at 512 KiB) with lognormal noise (CV 10 %). Two
scenarios:

* ``session``: 10, 25, 50, 100 and 200 observations of one session (ladder values, and round-value products
  in 2-D), then the cost of each of the next probes;
* ``prior``: a warm search over a prior of 100, 1,000 and 10,000 stored observations — whole sessions of 12
  (1-D) or 20 (2-D) probes: today's values, the previous answer, ladder values or round-value products, each
  session with its own drift (lognormal, 10 %) — timed from its first probe: the initial design (today's values
  and the previous answer), whose last probe calibrates the prior and makes the first fit on it, then the next
  probes.

``new`` is the optimiser as it is: the prior compressed to one point per configuration, the GP fitted by
``BayesianOptimiser.fit`` (skopt's restarts up to 24 points, warm-started above), no acquisition sampling
after a fit, and predictions remembered within a fit. ``baseline`` is the unmodified path: a plain skopt
``Optimizer`` told every observation — the prior's too, uncompressed, on the same calibration — fitting and
sampling after every tell, and every prediction computed afresh (the rules and the search are the same code).
A baseline fit on 10,000 points is not run: its kernel matrix alone is 0.8 GB and every likelihood evaluation
a 10,000-point Cholesky factorisation; on 1,000 it runs the design and one probe more (each fit takes seconds).

Each figure is the median and the 95th percentile over repeated probes (``--repeats``; the baseline fewer), in
ms, and the new path's median over the baseline's, measured in the same run. The stopping rule is evaluated in
full on every probe (``min_probes`` reached, joint re-measurements off, the search never stopped): the costly
path, not the one that ends early. One BLAS thread (as optimiser.py's workers). Writes a JSON result (default
benchmarks/results/optimiser-cost.json) and prints a Markdown summary.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import time
import warnings
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tuner.optimiser import BayesianOptimiser, Dimension  # noqa: E402

HERE = Path(__file__).resolve().parent
EIC, RA = "effective_io_concurrency", "read_ahead_kb"
DIMS = {1: [Dimension(EIC, 0, 1000)], 2: [Dimension(EIC, 0, 1000), Dimension(RA, 0, 16384, quantum=4)]}
TODAY = {EIC: 1, RA: 128}
SESSION_SIZES = (10, 25, 50, 100, 200)
PRIOR_SIZES = (100, 1_000, 10_000)
BASELINE_PRIOR_LIMIT = 1_000  # above, the baseline is not run (see the module's docstring)
CV = 0.10


def truth(config: dict[str, int]) -> float:
    e = config[EIC]
    ms = 500.0 if e == 0 else 250.0 + 350.0 / (1 + math.log2(1 + e))
    if RA in config:
        ms *= 1 + abs(math.log2(1 + config[RA]) - 9) / 3
    return ms


class Baseline(BayesianOptimiser):
    """The unmodified path: skopt told every observation, fitting and sampling after each tell, as the optimiser
    did before; predictions computed afresh each time, with skopt's own arithmetic at every fitted size. Built on
    the optimiser's public hooks (``fit``, ``use_fit``, ``remember_predictions``, ``full_fit_points``)."""

    kind = "baseline"  # not registered: a benchmark's instrument
    remember_predictions = False
    full_fit_points = math.inf

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.raw_prior: list[tuple[dict[str, int], float]] = []  # the prior uncompressed (set by build())

    def z(self, config: dict[str, int]) -> list[float]:
        return [d.to_z(config[d.name]) for d in self.dimensions]

    def fit(self) -> None:
        from skopt import Optimizer
        from skopt.space import Real

        # What skopt was told: this session's successful probes, in order (log time).
        xs = [self.z(c) for c, _ in self.history.ok]
        ys = [math.log(ms) for _, ms in self.history.ok]
        if self.prior_in_use:
            # Every prior observation, uncompressed, on the same calibration, then the session's probes.
            assert self.prior_offset is not None
            xs = [self.z(c) for c, _ in self.raw_prior] + xs
            ys = [math.log(ms) + self.prior_offset for _, ms in self.raw_prior] + ys
        space = [Real(d.z_low, d.z_high, name=d.name) for d in self.dimensions]  # the optimiser's own space
        plain = Optimizer(space, base_estimator="GP", acq_func="EI", acq_optimizer="sampling",
                          n_initial_points=1, random_state=self.seed, acq_optimizer_kwargs={"n_points": 2000})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            plain.tell([list(x) for x in xs], list(ys))  # one fit on everything, and skopt's sampling after it
        self.use_fit(plain.models[-1], ys)


def ladder_configs(dims: list[Dimension]) -> list[dict[str, int]]:
    """What searches probe: the ladder (1-D), the products of round values (2-D)."""
    if len(dims) == 1:
        return [{dims[0].name: v} for v in dims[0].ladder()]
    return [{EIC: e, RA: r} for e in dims[0].round_values() for r in dims[1].round_values()]


def warm_design(dims: list[Dimension]) -> list[dict[str, int]]:
    """Today's values and the previous answer: what a warm search probes first, and every stored session read."""
    return [{d.name: TODAY[d.name] for d in dims}, {EIC: 256, RA: 512} if len(dims) == 2 else {EIC: 256}]


def make_prior(dims: list[Dimension], n: int, rng: random.Random) -> list[tuple[dict[str, int], float]]:
    """``n`` stored observations: whole sessions of 12 (1-D) or 20 (2-D) probes — today's values, the previous
    answer, then ladder values or round-value products — each session with a drift of its own."""
    pool = ladder_configs(dims)
    per = 12 if len(dims) == 1 else 20
    out: list[tuple[dict[str, int], float]] = []
    while len(out) < n:
        drift = math.exp(rng.gauss(0, 0.1))
        configs = warm_design(dims) + rng.sample(pool, per - 2)
        for cfg in configs[: n - len(out)]:
            out.append((cfg, truth(cfg) * drift * math.exp(rng.gauss(0, CV))))
    return out


def build(cls: type[BayesianOptimiser], dims: list[Dimension], *, session: int, prior: list, seed: int,
          rng: random.Random) -> BayesianOptimiser:
    """An optimiser with ``session`` observations of its own (and ``prior``), fitted once, ready for timing."""
    initial = warm_design(dims) if prior else warm_design(dims)[:1]
    opt = cls(dimensions=dims, initial=initial, seed=seed, budget=100_000, min_probes=5, prior=prior)
    opt.remeasure = 0  # joint searches: the stopping rule in full on every probe, no early end
    if isinstance(opt, Baseline):
        opt.raw_prior = [(c, ms) for c, ms in prior if all(c[d.name] % d.quantum == 0 for d in dims)]
    if not session:
        return opt  # a warm search, timed from its first probe
    fit = opt.fit
    opt.fit = lambda: None  # type: ignore[method-assign]  # building: one fit at the end, not one per observation
    pool = ladder_configs(dims)
    for i in range(max(session, len(initial))):
        cfg = initial[i] if i < len(initial) else rng.choice(pool)
        opt.register(cfg, truth(cfg) * math.exp(rng.gauss(0, CV)))
    del opt.fit
    fit()
    return opt


def time_probes(opt: BayesianOptimiser, repeats: int, rng: random.Random) -> list[float]:
    """ms per probe: stop_reason, suggest, register (the value from the curve), as search() calls them."""
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        opt.stop_reason()
        cfg = opt.suggest()
        opt.register(cfg, truth(cfg) * math.exp(rng.gauss(0, CV)))
        out.append(1000 * (time.perf_counter() - t0))
    return out


def stats(ms: list[float]) -> dict[str, float]:
    ordered = sorted(ms)
    p95 = ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]
    return {"median_ms": round(statistics.median(ms), 1), "p95_ms": round(p95, 1), "n": len(ms)}


def measure(dims: list[Dimension], *, session: int, prior_n: int, repeats: int, baseline_repeats: int,
            seed: int) -> dict[str, object]:
    prior = make_prior(dims, prior_n, random.Random(seed)) if prior_n else []
    row: dict[str, object] = {"dims": len(dims), "session_observations": session, "prior_observations": prior_n}
    new = build(BayesianOptimiser, dims, session=session, prior=prior, seed=seed, rng=random.Random(seed + 1))
    design = 2 if prior else 0  # a warm search's design probes are timed too
    new_ms = time_probes(new, design + repeats, random.Random(seed + 2))
    row["fitted_points"] = new.fitted_points
    row["prior_configurations"] = new.prior_configurations
    row["prior_status"] = new.prior_status
    row["new"] = stats(new_ms)
    if design:
        row["new_calibration_probe_ms"] = round(new_ms[design - 1], 1)  # the first fit on the prior
    if prior_n <= BASELINE_PRIOR_LIMIT and baseline_repeats:
        old = build(Baseline, dims, session=session, prior=prior, seed=seed, rng=random.Random(seed + 1))
        more = 1 if prior_n >= BASELINE_PRIOR_LIMIT else baseline_repeats
        old_ms = time_probes(old, design + more, random.Random(seed + 2))
        row["baseline"] = stats(old_ms)
        if design:
            row["baseline_calibration_probe_ms"] = round(old_ms[design - 1], 1)
        row["baseline_fitted_points"] = old.fitted_points
        row["ratio_median"] = round(row["new"]["median_ms"] / row["baseline"]["median_ms"], 3)  # type: ignore[index]
    else:
        row["baseline"] = None
        row["baseline_not_run"] = f"a fit on {prior_n + session} points (see the module's docstring)"
    return row


def markdown(result: dict) -> str:  # type: ignore[type-arg]
    lines = [f"Cost per probe (stop_reason + suggest + register), ms; {result['duration_s']} s. Session rows: "
             f"{result['repeats']} probes timed after that many observations ({result['baseline_repeats']} for the "
             "baseline); prior rows: a warm search timed from its first probe (its two design probes, the second "
             f"of which calibrates and fits the prior, then {result['repeats']} more; the baseline on 1,000 one more).",
             "", "| dims | session obs. | prior obs. | prior configs | fitted points | new median | new p95 | "
             "baseline median | baseline p95 | new / baseline (medians) | calibration probe: new / baseline |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        b = r["baseline"]
        cal = (f"{r['new_calibration_probe_ms']} / {r.get('baseline_calibration_probe_ms', 'not run')}"
               if "new_calibration_probe_ms" in r else "–")
        lines.append(f"| {r['dims']} | {r['session_observations']} | {r['prior_observations']} | "
                     f"{r['prior_configurations']} | {r['fitted_points']} | {r['new']['median_ms']} | {r['new']['p95_ms']} | "
                     + (f"{b['median_ms']} | {b['p95_ms']} | {r['ratio_median']:.3f} |" if b else "not run | – | – |")
                     + f" {cal} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=12, help="probes timed per row, new path (default 12)")
    ap.add_argument("--baseline-repeats", type=int, default=5, help="probes timed per row, baseline (default 5)")
    ap.add_argument("--json", type=Path, default=HERE / "results" / "optimiser-cost.json", metavar="OUT",
                    help="where the JSON result goes (default benchmarks/results/optimiser-cost.json)")
    ap.add_argument("--quick", action="store_true", help="session sizes 10 and 100, prior 100 and 1,000 only")
    args = ap.parse_args()
    if args.repeats < 1 or args.baseline_repeats < 0:
        ap.error("--repeats must be at least 1 and --baseline-repeats at least 0")
    t0 = time.monotonic()
    rows = []
    sessions = (10, 100) if args.quick else SESSION_SIZES
    priors = (100, 1_000) if args.quick else PRIOR_SIZES
    for d in (1, 2):
        for n in sessions:
            rows.append(measure(DIMS[d], session=n, prior_n=0, repeats=args.repeats,
                                baseline_repeats=args.baseline_repeats, seed=10 * n + d))
            print(f"  {d}-D, session {n}: {rows[-1]['new']} / {rows[-1]['baseline']}", file=sys.stderr, flush=True)
        for p in priors:
            rows.append(measure(DIMS[d], session=0, prior_n=p, repeats=args.repeats,
                                baseline_repeats=args.baseline_repeats, seed=p + d))
            print(f"  {d}-D, prior {p}: {rows[-1]['new']} / {rows[-1]['baseline']}", file=sys.stderr, flush=True)
    result = {"repeats": args.repeats, "baseline_repeats": args.baseline_repeats, "noise_cv": CV, "rows": rows,
              "duration_s": round(time.monotonic() - t0, 1)}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(markdown(result))


if __name__ == "__main__":
    main()
