"""Does the plateau rule cost anything on the device truths? (issue #46, end of part 3; commit 99d48c4)

The rule (tuner/optimiser/near.py, ``NearRange._report``): where measured values at least two octaves apart
(log2(1 + x)) are level with the best — the model and their own readings within half the search tolerance
(0.05 / 2) — the answer is the smallest of them, not the best reading's value.

On each measured truth (benchmarks/measured/devices/: every 1-D eic sweep on 15, each read_ahead_kb row and eic
column of the 2-D sweeps, each io_method row on 18) this compares two answers, scored by the truth's means:

* ``argmin``: the value with the lowest mean of its readings;
* ``plateau``: the same readings, the rule above (level: readings' mean within half the tolerance of the lowest;
  a plateau when the level values span two octaves; then the smallest level value read more than once — the
  rule's "trusted").

Each replay draws ``reads`` of the sweep's own repeats per value (a session reads most values once or twice; the
rule needs two to trust the lowest), ``draws`` times, seeded. The GP is left out on purpose: this isolates what the
rule does with the readings a session would have. In-sample (the draws come from the truth's own probes), so the
absolute regrets flatter both answers equally.

    python benchmarks/devices_plateau.py [--reads 2] [--draws 2000]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TOLERANCE = 0.05  # policies/default.toml [decision] near_optimal_tolerance
OCTAVES = 2.0  # NearRange.plateau_octaves
MEASURED = ROOT / "benchmarks" / "measured" / "devices"


def lines(out: Path = MEASURED) -> dict[str, dict[int, list[float]]]:
    """Every 1-D line of the measured truths: name → value → readings (ms)."""
    found: dict[str, dict[int, list[float]]] = {}
    for f in sorted(out.glob("*.json")):
        doc = json.loads(f.read_text())
        if "truth_sweep" not in doc:  # summaries, this script's own output
            continue
        samples = doc["truth_sweep"]["samples"]
        profile = doc["profile"]
        if f.name.endswith(".2d.json"):
            for axis, other, name in ((0, 1, "read_ahead_kb at eic"), (1, 0, "eic at read_ahead_kb")):
                for fixed in sorted({int(k.split(",")[other]) for k in samples}):
                    line = {int(k.split(",")[axis]): v for k, v in samples.items() if int(k.split(",")[other]) == fixed}
                    found[f"{profile} (15): {name} {fixed}"] = line
        elif f.name.endswith(".pg18.json"):
            for method in sorted({k.split(",")[0] for k in samples}):
                found[f"{profile} (18): eic under {method}"] = {int(k.split(",")[1]): v for k, v in samples.items()
                                                                if k.split(",")[0] == method}
        else:
            found[f"{profile} (15): eic"] = {int(k): v for k, v in samples.items()}
    return found


def z(v: float) -> float:
    return math.log2(1 + v)


def plateau_answer(means: dict[int, float]) -> int:
    best = min(means, key=lambda v: means[v])
    limit = means[best] * math.exp(math.log1p(TOLERANCE) / 2)
    level = [v for v, m in means.items() if m <= limit]
    if len(level) > 1 and z(max(level)) - z(min(level)) >= OCTAVES:
        return min(level)
    return best


def replay(line: dict[int, list[float]], reads: int, draws: int, seed: int = 46) -> dict[str, Any]:
    truth = {v: statistics.fmean(xs) for v, xs in line.items()}
    best = min(truth.values())
    out: dict[str, list[float]] = {"argmin": [], "plateau": []}
    differs = 0
    for i in range(draws):
        rng = random.Random(seed + i)
        means = {v: statistics.fmean(rng.choice(xs) for _ in range(reads)) for v, xs in line.items()}
        a, p = min(means, key=lambda v: means[v]), plateau_answer(means)
        differs += a != p
        out["argmin"].append(truth[a] / best - 1)
        out["plateau"].append(truth[p] / best - 1)
    # With perfect knowledge (the truth's means as the readings): what the rule itself gives up.
    ideal = plateau_answer(truth)
    return {"best": min(truth, key=lambda v: truth[v]), "ideal_plateau_answer": ideal,
            "ideal_plateau_regret": round(truth[ideal] / best - 1, 4), "answers_differ": round(differs / draws, 3),
            **{f"{k}_mean_regret": round(statistics.fmean(v), 4) for k, v in out.items()},
            **{f"{k}_hit": round(sum(r <= TOLERANCE for r in v) / draws, 3) for k, v in out.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reads", type=int, default=2)
    ap.add_argument("--draws", type=int, default=2000)
    args = ap.parse_args()
    rows = {name: replay(line, args.reads, args.draws) for name, line in lines().items() if len(line) > 2}
    print("| truth line | best | rule's answer on the means (regret) | answers differ | mean regret argmin → plateau "
          "| hits argmin → plateau |\n|---|---|---|---|---|---|")
    for name, r in rows.items():
        print(f"| {name} | {r['best']} | {r['ideal_plateau_answer']} ({r['ideal_plateau_regret']:.1%}) | "
              f"{r['answers_differ']:.0%} | {r['argmin_mean_regret']:.1%} → {r['plateau_mean_regret']:.1%} | "
              f"{r['argmin_hit']:.0%} → {r['plateau_hit']:.0%} |")
    tot = {k: sum(r[k] for r in rows.values()) for k in ("argmin_mean_regret", "plateau_mean_regret")}
    print(f"\nSummed mean regret over {len(rows)} lines: argmin {tot['argmin_mean_regret']:.3f}, "
          f"plateau {tot['plateau_mean_regret']:.3f}")
    (MEASURED / "plateau_rule.json").write_text(json.dumps({"reads": args.reads, "draws": args.draws,
                                                            "tolerance": TOLERANCE, "lines": rows, "summed": tot})
                                                + "\n")  # compact: benchmarks/ stays under 1 MB


if __name__ == "__main__":
    main()
