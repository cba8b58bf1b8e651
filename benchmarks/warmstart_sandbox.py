"""Does a warm start halve the probes of a repeat session, and reach the same answer? Measured on real sandboxes.

    sudo python benchmarks/warmstart_sandbox.py [--repeats 5] [--scale 4] [--family concurrency]
                                                [--json benchmarks/measured/warmstart-sandbox.json]

Each repeat uses a store of its own (a fresh state directory) and runs `tuner recommend --sandbox` twice with the
same seed: the first session starts cold (nothing stored) and is stored; the second finds it — a new sandbox has
a new system identifier, so it matches on the same device model, file system and PostgreSQL major — and starts
warm: it re-measures today's value and the first session's winner, rescales the stored times, and searches on.
Repeats differ in their seed (--seed-base + i).

--control runs the second session cold too (``--cold``): the same comparison between two cold sessions, the
baseline for how often two sessions agree at all on this machine.

Reported per repeat and in total: the search probes and all probes (search + confirmation) of each session, the
warm/cold ratios, whether the warm session's recommended value lies inside the cold session's near-optimal range,
and whether the two decisions agree. Targets (issue #34): the warm session needs at most half the probes, and
answers inside the first session's near-optimal range.

Needs what `tuner recommend --sandbox` needs (PostgreSQL server binaries; root for cold caches and the loop disk).
A repeat takes about two sessions' time: a few minutes at --scale 4.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def session(state: Path, *, seed: int, scale: int, family: str, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "TUNER_"))}
    env["TUNER_TUNER__STATE_DIR"] = str(state)
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "tuner", "recommend", "--sandbox", "--scale", str(scale), "--family", family,
         "--seed", str(seed), "--format", "json", *extra],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"a session failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    doc = json.loads(proc.stdout)
    doc["_wall_s"] = round(time.monotonic() - t0, 1)
    return doc


def summary(doc: dict[str, Any], knob: str) -> dict[str, Any]:
    trials = doc["trials"]
    [rec] = [r for r in doc["recommendations"] if r["knob"] == knob] or [None]
    fam = doc["families"][0]
    return {
        "session": doc["session"]["id"],
        "search_probes": sum(1 for t in trials if t["phase"] == "search"),
        "probes": len(trials),
        "recommended": rec["recommended"] if rec else None,
        "decision": rec["decision"] if rec else None,
        "near_optimal": rec["near_optimal"] if rec else None,
        "improvement": rec["effect"]["improvement"] if rec and rec["effect"] else None,
        "ci95": rec["effect"]["ci95"] if rec and rec["effect"] else None,
        "warm_start": fam.get("warm_start"),
        "stop_reason": fam.get("stop_reason"),
        "wall_s": doc["_wall_s"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--scale", type=int, default=4)
    ap.add_argument("--family", default="concurrency")
    ap.add_argument("--knob", default="effective_io_concurrency")
    ap.add_argument("--seed-base", type=int, default=1000)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--control", action="store_true",
                    help="run the second session cold as well (--cold): how often two cold sessions agree")
    args = ap.parse_args()
    rows = []
    t0 = time.monotonic()
    for i in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix="tuner-warm-") as tmp:
            state = Path(tmp) / "state"
            seed = args.seed_base + i
            cold = summary(session(state, seed=seed, scale=args.scale, family=args.family), args.knob)
            warm = summary(session(state, seed=seed, scale=args.scale, family=args.family,
                                   extra=("--cold",) if args.control else ()), args.knob)
        near = cold["near_optimal"]
        inside = (near is not None and warm["recommended"] is not None and near[0] <= warm["recommended"] <= near[1])
        row = {"repeat": i + 1, "seed": seed, "cold": cold, "warm": warm,
               "search_ratio": round(warm["search_probes"] / cold["search_probes"], 3),
               "probe_ratio": round(warm["probes"] / cold["probes"], 3),
               "inside_cold_range": inside, "same_decision": cold["decision"] == warm["decision"]}
        rows.append(row)
        print(f"repeat {i + 1}: cold {cold['search_probes']}+{cold['probes'] - cold['search_probes']} probes -> "
              f"{cold['recommended']} ({cold['decision']}, near {near}); warm {warm['search_probes']}+"
              f"{warm['probes'] - warm['search_probes']} -> {warm['recommended']} ({warm['decision']}); inside: "
              f"{inside}; {warm['warm_start']}", flush=True)
    out = {
        "benchmark": "warmstart_sandbox", "second_session": "cold (--control)" if args.control else "warm",
        "repeats": args.repeats, "scale": args.scale, "family": args.family,
        "knob": args.knob, "duration_s": round(time.monotonic() - t0, 1),
        "median_search_ratio": statistics.median(r["search_ratio"] for r in rows),
        "median_probe_ratio": statistics.median(r["probe_ratio"] for r in rows),
        "search_probes_cold_total": sum(r["cold"]["search_probes"] for r in rows),
        "search_probes_warm_total": sum(r["warm"]["search_probes"] for r in rows),
        "probes_cold_total": sum(r["cold"]["probes"] for r in rows),
        "probes_warm_total": sum(r["warm"]["probes"] for r in rows),
        "inside_cold_range": sum(r["inside_cold_range"] for r in rows),
        "same_decision": sum(r["same_decision"] for r in rows),
        "rows": rows,
    }
    print(f"\nwarm/cold search probes: median {out['median_search_ratio']:.2f}, total "
          f"{out['search_probes_warm_total']}/{out['search_probes_cold_total']}; all probes: median "
          f"{out['median_probe_ratio']:.2f}; warm answer inside the cold near-optimal range "
          f"{out['inside_cold_range']}/{len(rows)}; same decision {out['same_decision']}/{len(rows)}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
