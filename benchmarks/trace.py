"""Show what tuner's optimiser probed, seed by seed, on one surface: the probes in order with their noisy
values, the answer, its regret and why the search stopped — the per-seed view behind optimiser.py's summary.

    python benchmarks/trace.py SURFACE.csv [--noise-cv 0.05] [--seeds 30] [--failures-only]
                               [--policy NAME] [--range grid|policy]

Same simulator, noise draws and optimiser construction as ``benchmarks/optimiser.py`` (with the same
``--policy`` and ``--range``), so seed N here is seed N there.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from optimiser import SUCCESS, NoiseStream, Surface, check_run_arguments, tuner_optimiser  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("surface", type=Path)
    ap.add_argument("--noise-cv", type=float, default=0.05)
    ap.add_argument("--seeds", type=int, default=30)
    ap.add_argument("--failures-only", action="store_true", help="only the seeds whose answer misses by > 5 %%")
    ap.add_argument("--policy", default="default", metavar="NAME",
                    help="the policy the optimiser runs with (default: default; shipped: ssd, hdd, network; or a path)")
    ap.add_argument("--range", dest="search_range", choices=("grid", "policy"), default="grid",
                    help="search the surface's grid (default) or the policy's range, as optimiser.py --range")
    args = ap.parse_args()
    if not args.surface.is_file():
        ap.error(f"no surface file at {str(args.surface)!r} (the shipped ones are under benchmarks/surfaces/)")
    check_run_arguments(ap, args)
    surface = Surface.load(args.surface)
    surface.policy = args.policy
    if args.search_range == "policy":
        surface.use_policy_range()
    failures, probes = 0, 0
    for seed in range(args.seeds):
        factor = NoiseStream(args.noise_cv, seed).measure()
        opt = tuner_optimiser(surface, seed)
        steps = []
        while not (reason := opt.stop_reason()):
            cfg = opt.suggest()
            value = surface.as_time(surface.true(cfg)) * factor(cfg)
            opt.register(cfg, value)
            steps.append(f"{','.join(str(v) for v in cfg.values())}:{value:.0f}")
        answer = opt.recommendation().config
        regret = surface.regret(answer)
        failures += regret > SUCCESS
        probes += opt.probes
        if regret > SUCCESS or not args.failures_only:
            mark = "miss" if regret > SUCCESS else "ok  "
            print(f"seed {seed:3d} {mark} answer {answer} regret {regret:.3f} after {opt.probes} probes ({reason})")
            print("         " + " ".join(steps))
    print(f"{args.seeds - failures}/{args.seeds} within {SUCCESS:.0%}; mean probes {probes / args.seeds:.2f}")


if __name__ == "__main__":
    main()
