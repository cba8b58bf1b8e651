"""Does a warm start save probes without changing the answer? Two sessions per surface and seed, on the recorded
surfaces (pure logic: the simulator of benchmarks/optimiser.py, no PostgreSQL).

    python benchmarks/warmstart.py [--surface PATH …] [--seeds 10] [--noise-cv 0.10] [--drift 1.3 --drift 0.8]
                                   [--range grid|policy] [--jobs 2] [--json OUT]

Per surface and seed:

* session 1 runs cold: exactly what optimiser.py's ``tuner`` method runs (``run_tuner``: the default policy's
  optimiser from ``build_optimiser``, through ``tuner.core.loops.search``, with its noise draws);
* session 2, once per drift factor, gets session 1's trials as its prior, compressed as the store would (one
  observation per configuration: the geometric mean of its readings), today's value = the surface's default
  (optimiser.py's ``CURRENT``: effective_io_concurrency 1, read_ahead_kb 128), previous = session 1's answer,
  and reads the surface's times multiplied by the drift factor, with fresh noise (a noise stream of its own).

Reported per drift factor, per surface and over all: session 2's probes over session 1's (median), how often
session 2's answer lies inside session 1's near-optimal range (per knob, between its bounds), both sessions'
success rate (answer within 5 % of the true optimum) and median regret, what became of the prior
(``prior_status``), and how far the calibration (``prior_offset``) lands from the true drift. The issue's
target: at most half the probes, and the same recommendation (inside session 1's near-optimal range).

Default surfaces: the shipped ones optimiser.py runs (benchmarks/surfaces/*.csv) and the development draws
(benchmarks/surfaces/dev/); never benchmarks/surfaces/holdout/, which is sealed. The real-target version of this
benchmark (a PostgreSQL sandbox and the session store) lives with the store.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one BLAS thread per worker, as optimiser.py

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from optimiser import CURRENT, SUCCESS, NoiseStream, Surface, expand_surfaces, run_tuner, tuner_optimiser  # noqa: E402

from tuner.core.loops import build_optimiser, search  # noqa: E402
import tuner.families  # noqa: E402,F401  # the families' registry, which a policy needs to read their tables
from tuner.settings.policy import load_policy  # noqa: E402
from tests.support.synthetic import SyntheticProbe  # noqa: E402

HERE = Path(__file__).resolve().parent
DEFAULT_SURFACES = sorted((HERE / "surfaces").glob("*.csv")) + sorted((HERE / "surfaces" / "dev").glob("*.csv"))
# Session 2's noise: a stream of its own per seed (offset so that it never meets session 1's seeds).
SECOND_SESSION = 1_000_000


def compress(trials: list[tuple[dict[str, int], float]]) -> list[tuple[dict[str, int], float]]:
    """One observation per configuration, its readings' geometric mean (the store's compression), in the order
    the configurations were first measured."""
    logs: dict[tuple[tuple[str, int], ...], list[float]] = {}
    for cfg, ms in trials:
        logs.setdefault(tuple(cfg.items()), []).append(math.log(ms))
    return [(dict(k), math.exp(sum(v) / len(v))) for k, v in logs.items()]


def first_session(surface: Surface, seed: int, cv: float) -> tuple[dict[str, int], int, dict[str, tuple[int, int]],
                                                                   list[tuple[dict[str, int], float]]]:
    """Session 1, cold: what optimiser.py's run_tuner runs (``tuner_optimiser``, ``search`` with at most four
    failures in a row, the seed's noise stream), keeping the optimiser to read its trials and near-optimal range.
    On seed 0 run_tuner itself runs too, and must give the same answer and probe count."""
    opt = tuner_optimiser(surface, seed)
    factor = NoiseStream(cv, seed).measure()
    result = asyncio.run(search(opt, SyntheticProbe(lambda cfg: surface.as_time(surface.true(cfg)) * factor(cfg)),
                                max_consecutive_failures=4))
    assert result.recommendation is not None
    answer = result.recommendation.config
    if seed == 0:
        same = run_tuner(surface, NoiseStream(cv, seed), seed)
        assert (same[0], same[1]) == (answer, opt.probes), (surface.name, same[:2], answer, opt.probes)
    trials = [(t.config, t.value) for t in result.trials if t.value is not None]
    return answer, opt.probes, result.recommendation.near_optimal.pairs(), trials  # type: ignore[return-value]


def second_session(surface: Surface, seed: int, cv: float, drift: float, prior: list[tuple[dict[str, int], float]],
                   previous: dict[str, int]) -> dict[str, object]:
    dims = surface.dims()
    current = {d.name: CURRENT.get(d.name, d.low) for d in dims}
    opt = build_optimiser(load_policy(surface.policy), dims, current, seed=seed, prior=prior, previous=previous)
    factor = NoiseStream(cv, SECOND_SESSION + seed).measure()
    probe = SyntheticProbe(lambda cfg: surface.as_time(surface.true(cfg)) * drift * factor(cfg))
    result = asyncio.run(search(opt, probe, max_consecutive_failures=4))
    assert result.recommendation is not None
    offset = opt.prior_offset
    return {"answer": result.recommendation.config, "probes": opt.probes, "stop_reason": result.stop_reason,
            "prior_status": opt.prior_status, "prior_used": opt.prior_in_use,
            "calibration_error": None if offset is None else round(offset - math.log(drift), 4)}


def one_seed(args: tuple[str, int, float, tuple[float, ...], str]) -> dict[str, object]:
    path, seed, cv, drifts, search_range = args
    surface = Surface.load(Path(path))
    if search_range == "policy":
        surface.use_policy_range()
    answer, probes, near, trials = first_session(surface, seed, cv)
    out: dict[str, object] = {"seed": seed, "first": {"answer": answer, "probes": probes, "near_optimal": near,
                                                       "regret": surface.regret(answer)}, "second": {}}
    for drift in drifts:
        s2 = second_session(surface, seed, cv, drift, compress(trials), answer)
        s2["regret"] = surface.regret(s2["answer"])  # type: ignore[arg-type]
        s2["inside_first_range"] = all(near[k][0] <= v <= near[k][1] for k, v in s2["answer"].items())  # type: ignore[union-attr]
        s2["probe_ratio"] = round(int(s2["probes"]) / probes, 4)  # type: ignore[call-overload]
        out["second"][str(drift)] = s2  # type: ignore[index]
    return out


def _rate(xs: list[bool]) -> float:
    return round(sum(xs) / len(xs), 3)


def summarise(name: str, dims: int, runs: list[dict], drifts: tuple[float, ...]) -> dict[str, object]:  # type: ignore[type-arg]
    first = [r["first"] for r in runs]
    out: dict[str, object] = {
        "name": name, "dims": dims,
        "first": {"probes_median": statistics.median(f["probes"] for f in first),
                  "success_rate": _rate([f["regret"] <= SUCCESS for f in first]),
                  "regret_median": round(statistics.median(f["regret"] for f in first), 4)},
        "second": {},
    }
    for drift in drifts:
        second = [r["second"][str(drift)] for r in runs]
        out["second"][str(drift)] = {  # type: ignore[index]
            "probes_median": statistics.median(s["probes"] for s in second),
            "probe_ratio_median": statistics.median(s["probe_ratio"] for s in second),
            "inside_first_range": _rate([s["inside_first_range"] for s in second]),
            "success_rate": _rate([s["regret"] <= SUCCESS for s in second]),
            "regret_median": round(statistics.median(s["regret"] for s in second), 4),
            "prior_used": _rate([s["prior_used"] for s in second]),
        }
    out["runs"] = runs
    return out


def overall(surfaces: list[dict], drifts: tuple[float, ...]) -> dict[str, object]:  # type: ignore[type-arg]
    """Over every surface and seed, per drift factor and per dimensionality."""
    out: dict[str, object] = {}
    for dims in sorted({s["dims"] for s in surfaces}):
        runs = [r for s in surfaces if s["dims"] == dims for r in s["runs"]]
        first = [r["first"] for r in runs]
        block: dict[str, object] = {
            "surfaces": sum(s["dims"] == dims for s in surfaces), "searches": len(runs),
            "first": {"probes_mean": round(statistics.mean(f["probes"] for f in first), 2),
                      "success_rate": _rate([f["regret"] <= SUCCESS for f in first]),
                      "regret_median": round(statistics.median(f["regret"] for f in first), 4)},
        }
        for drift in drifts:
            second = [r["second"][str(drift)] for r in runs]
            errors = [abs(s["calibration_error"]) for s in second if s["calibration_error"] is not None]
            ratios = [s["probe_ratio"] for s in second]
            block[f"second_x{drift}"] = {
                "probes_mean": round(statistics.mean(s["probes"] for s in second), 2),
                "probe_ratio_median": statistics.median(ratios),
                "probe_ratio_of_means": round(statistics.mean(s["probes"] for s in second)
                                              / statistics.mean(f["probes"] for f in first), 3),
                "share_at_most_half_the_probes": _rate([x <= 0.5 for x in ratios]),
                "inside_first_range": _rate([s["inside_first_range"] for s in second]),
                "success_rate": _rate([s["regret"] <= SUCCESS for s in second]),
                "regret_median": round(statistics.median(s["regret"] for s in second), 4),
                "prior_used": _rate([s["prior_used"] for s in second]),
                "calibration_error_median": round(statistics.median(errors), 4) if errors else None,
                "surfaces_median_ratio_above_half": [s["name"] for s in surfaces if s["dims"] == dims
                                                     and s["second"][str(drift)]["probe_ratio_median"] > 0.5],
            }
        out[f"{dims}d"] = block
    return out


def markdown(result: dict) -> str:  # type: ignore[type-arg]
    drifts = result["drifts"]
    lines = [f"Noise CV {result['noise_cv']}, {result['seeds']} seeds, range {result['search_range']}, drift factors "
             f"{', '.join(f'×{d}' for d in drifts)}, {result['duration_s']} s.", "",
             "| dims | surfaces × seeds | drift | session 1 probes (mean) | session 2 probes (mean) | ratio (median) | "
             "ratio ≤ ½ | inside session 1's range | success 1 → 2 | median regret 1 → 2 | prior used | "
             "calibration error (median, log) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for dims, block in result["overall"].items():
        f = block["first"]
        for drift in drifts:
            s = block[f"second_x{drift}"]
            lines.append(f"| {dims} | {block['surfaces']} × {result['seeds']} | ×{drift} | {f['probes_mean']} | "
                         f"{s['probes_mean']} | {s['probe_ratio_median']:.3f} | {s['share_at_most_half_the_probes']:.2f} | "
                         f"{s['inside_first_range']:.3f} | {f['success_rate']:.3f} → {s['success_rate']:.3f} | "
                         f"{f['regret_median']:.4f} → {s['regret_median']:.4f} | {s['prior_used']:.2f} | "
                         f"{s['calibration_error_median']} |")
    lines += ["", "Per surface (session 2's median probe ratio / inside session 1's range / success 1 → 2, per drift):",
              "", "| surface | " + " | ".join(f"×{d}" for d in drifts) + " |", "|---|" + "---|" * len(drifts)]
    for s in result["surfaces"]:
        cells = [f"{s['second'][str(d)]['probe_ratio_median']:.2f} / {s['second'][str(d)]['inside_first_range']:.2f} / "
                 f"{s['first']['success_rate']:.2f} → {s['second'][str(d)]['success_rate']:.2f}" for d in drifts]
        lines.append(f"| {s['name']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--surface", action="append", metavar="PATH",
                    help="surface CSV or quoted glob (repeatable; default: the shipped surfaces and surfaces/dev/)")
    ap.add_argument("--seeds", type=int, default=10, metavar="N", help="seeds per surface (default 10)")
    ap.add_argument("--noise-cv", type=float, default=0.10, metavar="CV", help="noise of each probe (default 0.10)")
    ap.add_argument("--drift", type=float, action="append", metavar="F",
                    help="session 2's times are session 1's times this many times (repeatable; default 1.3 and 0.8)")
    ap.add_argument("--range", dest="search_range", choices=("grid", "policy"), default="grid",
                    help="search the surface's grid (default) or the default policy's range, as optimiser.py --range")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--json", type=Path, metavar="OUT", help="write the full result (JSON) here")
    args = ap.parse_args()
    if args.seeds < 1:
        ap.error(f"--seeds must be at least 1, not {args.seeds}")
    if not 0 <= args.noise_cv < 1:
        ap.error(f"--noise-cv is a coefficient of variation between 0 and 1, not {args.noise_cv}")
    drifts = tuple(args.drift or (1.3, 0.8))
    if any(not (math.isfinite(d) and d > 0) for d in drifts):
        ap.error("--drift must be a positive factor")
    paths = expand_surfaces(args.surface) if args.surface else DEFAULT_SURFACES
    if any("holdout" in p.parts for p in paths):
        ap.error("benchmarks/surfaces/holdout/ is sealed: run only to judge a change (its README), not here")
    t0 = time.monotonic()
    result: dict[str, object] = {"noise_cv": args.noise_cv, "seeds": args.seeds, "drifts": list(drifts),
                                 "search_range": args.search_range, "policy": "default", "surfaces": []}
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for path in paths:
            surface = Surface.load(path)
            runs = list(pool.map(one_seed, [(str(path), seed, args.noise_cv, drifts, args.search_range)
                                            for seed in range(args.seeds)]))
            summary = summarise(surface.name, len(surface.knobs), runs, drifts)
            result["surfaces"].append(summary)  # type: ignore[union-attr]
            s = summary["second"]
            print(f"  {surface.name}: session 1 {summary['first']['probes_median']} probes; session 2 "
                  + "; ".join(f"×{d}: ratio {s[str(d)]['probe_ratio_median']:.2f}, inside {s[str(d)]['inside_first_range']:.2f}"
                              for d in drifts), file=sys.stderr, flush=True)
    result["duration_s"] = round(time.monotonic() - t0, 1)
    result["overall"] = overall(result["surfaces"], drifts)  # type: ignore[arg-type]
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(markdown(result))


if __name__ == "__main__":
    main()
