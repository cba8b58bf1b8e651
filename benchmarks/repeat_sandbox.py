"""Do repeat sessions on the same machine agree on where the optimum is? Measured on real sandboxes (issue #39).

    sudo python benchmarks/repeat_sandbox.py [--sessions 8] [--scale 4] [--family concurrency]
                                             [--seed-base 3900] [--json benchmarks/measured/repeat-sandbox.json]

Runs `tuner recommend --sandbox --family F --format json --no-store --seed S` ``--sessions`` times, each on a
fresh sandbox with its own seed (``--seed-base + i``), nothing stored, so every session starts cold. Per knob
(and object) that a session decided to change, it asks whether that session's recommended value lies inside the
*previous* session's near-optimal range — what an operator comparing two runs checks. Target: at least 90 %.

Reported: per session the recommended value, decision, near-optimal range, improvement and interval, whether it
sat on a plateau or at the edge of the searched range, every probe (phase, arm, configuration, ms), and the
machine's 1-minute load average before and after (other work on the machine makes probes noisier); in total, the consecutive pairs (n, inside), and for reference
every ordered pair of sessions (n, inside).

Needs what `tuner recommend --sandbox` needs (PostgreSQL server binaries; root for cold caches and the loop disk).
A session takes 15-30 s at --scale 4 on a 2-core machine.

    python benchmarks/repeat_sandbox.py --replay benchmarks/measured/repeat-sandbox.json [--replay ...]

replays recorded sessions (``--family concurrency``: effective_io_concurrency alone, the default policy) through
the optimiser of the tuner that ``PYTHONPATH`` names — the search must propose exactly the recorded probes —
and reports the same consistency from its answers and ranges (widened by each session's confirmation noise
where that tuner does so, and cut short of today's value after a "change"). The same sessions through two
versions of the code: a comparison that the machine's drift between runs cannot blur.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TARGET = 0.90


def session(*, seed: int, scale: int, family: str) -> dict[str, Any]:
    """One cold sandbox session's JSON report, with its wall time and the load around it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "TUNER_"))}
    load_before = os.getloadavg()[0]
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "tuner", "recommend", "--sandbox", "--scale", str(scale), "--family", family,
         "--seed", str(seed), "--format", "json", "--no-store"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"a session failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    doc = json.loads(proc.stdout)
    doc["_wall_s"] = round(time.monotonic() - t0, 1)
    doc["_load"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    return doc


def knobs_of(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each recommendation of a report, keyed by knob (and object), with what this benchmark compares."""
    out = {}
    for r in doc["recommendations"]:
        key = r["knob"] + (f" ({r['object']})" if r.get("object") else "")
        effect = r.get("effect") or {}
        out[key] = {
            "current": r["current"], "recommended": r["recommended"], "decision": r["decision"],
            "near_optimal": r.get("near_optimal"), "plateau": r.get("plateau"), "at_edge": r.get("at_edge"),
            "searched": r.get("searched"), "improvement": effect.get("improvement"), "ci95": effect.get("ci95"),
            "n_pairs": effect.get("n_pairs"),
        }
    return out


def inside(value: Any, near: list[int] | None) -> bool:
    return near is not None and isinstance(value, int) and near[0] <= value <= near[1]


def consistency(sessions: list[dict[str, Any]], *, consecutive: bool) -> dict[str, dict[str, int]]:
    """Per knob: of the sessions that decided "change", how many recommended a value inside the near-optimal
    range of the session before (``consecutive``) or of every other session (each ordered pair once)."""
    out: dict[str, dict[str, int]] = {}
    for j, later in enumerate(sessions):
        earlier = [sessions[j - 1]] if consecutive and j else ([] if consecutive else sessions[:j] + sessions[j + 1:])
        for key, rec in later["knobs"].items():
            if rec["decision"] != "change":
                continue
            for prev in earlier:
                p = prev["knobs"].get(key)
                if p is None:
                    continue
                row = out.setdefault(key, {"n": 0, "inside": 0})
                row["n"] += 1
                row["inside"] += inside(rec["recommended"], p["near_optimal"])
    return out


def replay(paths: list[Path]) -> list[dict[str, Any]]:
    """Recorded sessions' rows, each with ``knobs`` recomputed by the tuner on the import path from its search
    trials (and its confirmation's noise); every other field as recorded."""
    from datetime import UTC, datetime

    from tuner.core import decide as decide_mod
    from tuner.core.loops import build_optimiser
    from tuner.report.model import Trial
    from tuner.optimiser import Dimension
    import tuner.families  # noqa: F401  # the families' registry, which a policy needs to read their tables
    from tuner.settings.policy import load_policy

    knob = "effective_io_concurrency"
    rows = []
    for path in paths:
        doc = json.loads(path.read_text())
        if doc.get("family") != "concurrency":
            raise SystemExit(f"{path}: only --family concurrency sessions can be replayed")
        for row in doc["rows"]:
            fields = Dimension.__dataclass_fields__
            dim = Dimension(knob, 0, 1000, **({"limits": (True, True)} if "limits" in fields else {}))  # type: ignore[arg-type]
            opt = build_optimiser(load_policy("default"), [dim], {knob: 1}, seed=row["seed"])
            for phase, _, config, value in row["trials"]:
                if phase != "search":
                    continue
                if opt.suggest() != config:
                    raise SystemExit(f"{path}, seed {row['seed']}: this tuner's search would not probe {config} here")
                opt.register(config, value)
            rec = opt.recommendation()
            near = rec.near_optimal
            recorded = row["knobs"][knob]
            reading_noise = getattr(decide_mod, "reading_noise", None)
            if reading_noise is not None:
                now = datetime.now(UTC)
                confirm = [Trial(config=c, value=v, status="ok" if v else "failed", phase="confirm", arm=a,
                                 started_at=now, duration_s=0.0) for ph, a, c, v in row["trials"] if ph == "confirm"]
                noise = reading_noise(confirm)
                if noise is not None:
                    near = near.given_noise(noise)
            lo, hi = near[knob].as_pair()
            if recorded["decision"] == "change" and rec.config[knob] != recorded["current"]:
                kept = near[knob].without(recorded["current"], keep=rec.config[knob])  # decide(): the pairs told today's apart
                lo, hi = (lo, hi) if kept is None else kept.as_pair()
            rows.append({**row, "file": path.name, "knobs": {knob: {
                **recorded, "recommended": rec.config[knob], "near_optimal": [lo, hi],
                "plateau": near[knob].plateau, "recorded": recorded["recommended"]}}})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=8, help="sessions, each on a fresh sandbox (at least 5)")
    ap.add_argument("--scale", type=int, default=4)
    ap.add_argument("--family", default="concurrency")
    ap.add_argument("--seed-base", type=int, default=3900)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--replay", type=Path, action="append", metavar="JSON",
                    help="run nothing: replay recorded sessions through the tuner on the import path (repeatable)")
    args = ap.parse_args()
    if args.replay:
        for path in args.replay:
            rows = [r for r in replay([path])]
            for consecutive in (True, False):
                for k, v in consistency(rows, consecutive=consecutive).items():
                    print(f"{path.name}: {k}: inside the {'previous' if consecutive else 'other'} session's "
                          f"near-optimal range {v['inside']}/{v['n']} ({v['inside'] / v['n']:.0%})")
            widths = sorted(math.log2((1 + r["knobs"][k]["near_optimal"][1]) / (1 + r["knobs"][k]["near_optimal"][0]))
                            for r in rows for k in r["knobs"])
            moved = sum(r["knobs"][k]["recommended"] != r["knobs"][k]["recorded"] for r in rows for k in r["knobs"])
            print(f"{path.name}: range width median {statistics.median(widths):.1f} octaves "
                  f"(log2 of (1 + high) / (1 + low)); answers that differ from the recorded ones: {moved}")
        return
    if args.sessions < 2:
        ap.error("--sessions must be at least 2 (the issue asks for 5 or more)")
    rows: list[dict[str, Any]] = []
    t0 = time.monotonic()
    for i in range(args.sessions):
        seed = args.seed_base + i
        doc = session(seed=seed, scale=args.scale, family=args.family)
        row = {"session": i + 1, "seed": seed, "id": doc["session"]["id"], "probes": len(doc["trials"]),
               "search_probes": sum(1 for t in doc["trials"] if t["phase"] == "search"),
               "wall_s": doc["_wall_s"], "load_1min": doc["_load"], "knobs": knobs_of(doc),
               # Every probe, compactly: phase, arm, configuration, ms (None: failed or rejected).
               "trials": [[t["phase"], t.get("arm"), t["config"], None if t["value"] is None else round(t["value"], 2)]
                          for t in doc["trials"]]}
        rows.append(row)
        shown = "; ".join(f"{k} {r['current']} -> {r['recommended']} ({r['decision']}, near {r['near_optimal']}"
                          f"{', plateau' if r['plateau'] else ''}{', at ' + r['at_edge'] + ' edge' if r['at_edge'] else ''})"
                          for k, r in row["knobs"].items())
        print(f"session {i + 1} (seed {seed}, {row['probes']} probes, {row['wall_s']} s, load {row['load_1min']}): "
              f"{shown}", flush=True)
    pairs = consistency(rows, consecutive=True)
    every = consistency(rows, consecutive=False)
    out = {
        "benchmark": "repeat_sandbox", "sessions": args.sessions, "scale": args.scale, "family": args.family,
        "seed_base": args.seed_base, "duration_s": round(time.monotonic() - t0, 1), "target": TARGET,
        "consecutive": {k: {**v, "share": round(v["inside"] / v["n"], 3)} for k, v in pairs.items()},
        "every_ordered_pair": {k: {**v, "share": round(v["inside"] / v["n"], 3)} for k, v in every.items()},
        "rows": rows,
    }
    for k, v in pairs.items():
        e = every[k]
        print(f"\n{k}: inside the previous session's near-optimal range {v['inside']}/{v['n']} "
              f"({v['inside'] / v['n']:.0%}; target {TARGET:.0%}); every ordered pair {e['inside']}/{e['n']} "
              f"({e['inside'] / e['n']:.0%})")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
