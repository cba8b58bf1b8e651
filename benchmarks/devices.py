"""Ground truth per emulated device, and tuner and its peers scored against it (issue #46, parts 2 and 3).

    sudo python benchmarks/devices.py [--profiles local,latency=1ms,...] [--scale N] [--repeats 5] [--sessions 3]
                                      [--out benchmarks/measured/devices] [--force]
    sudo python benchmarks/devices.py --quick       # smoke run: scale 1, 2 repeats, 1 session, 2 profiles,
                                                    # into benchmarks/measured/devices/smoke-scale1/

Per profile (each on its own sandbox, ``--device PROFILE``, PostgreSQL 15):

1. the truth: an exhaustive cold sweep of effective_io_concurrency over the grid tuner searches (0, 1, 2, 4, …,
   512, 1000), ``--repeats`` randomised blocks (every block visits every value once, in a fresh random order, so
   drift between blocks cancels), each probe exactly the concurrency family's probe (its workload, its cache
   emptying, its EXPLAIN measurement) — the sweep runs as a family of its own inside a tuner session;
2. ``--sessions`` cold ``tuner recommend --sandbox --device P --family concurrency --format json`` sessions, each
   with its own seed and sandbox (the first kept in a store of the profile's own), then one warm session that
   starts from that store — each scored against the truth: hit, regret, probes, wall time, and whether the
   keep/change decision agrees with the truth at today's value (change ⇔ today's value is outside the truth set);
3. the peers scored on the same truth (benchmarks/devices_score.py), and how sure each session's hit/miss verdict
   is: the share of bootstrap truths (the sweep's repeats resampled) in which its answer is a hit.

Results: one JSON per profile in ``--out`` (resumable: a profile whose file exists with the same parameters is
not measured again; ``--force`` re-measures), and ``summary.json`` with the table (rows = methods, columns =
profiles, cells = regret (hit)), printed as Markdown. The machine's load average is recorded around each step.

``--cloud`` measures the cloud-shaped shorthands instead (gp3, gp2-100g, io2, pd-balanced, hdd, ram), each cell
until its 95 % interval is within ±2.5 % of its mean, with per-block random orders, an unscored warm-up and
verdicts that may be "unresolved" (benchmarks/devices_cloud.py), and the peers scored out of sample
(benchmarks/peers.py); ``--cloud --quick`` is its smoke run.

Before the 1-D part, the same run measures the 2-D truth (read_ahead_kb × eic on PostgreSQL 15, sessions of the
readahead and concurrency families together: devices_2d.py) and io_method × eic on PostgreSQL 18 (devices_pg18.py);
``--only 1d|2d|pg18`` measures one part.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any, ClassVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import devices_2d as d2  # noqa: E402
from benchmarks import devices_pg18 as d18  # noqa: E402
from benchmarks import devices_score as sc  # noqa: E402
from benchmarks.devices_run import eic_sweep_probe, recommend_json, run_session, state_dir  # noqa: E402
from tuner.settings.config_load import load_config  # noqa: E402
from tuner.families import REGISTRY  # noqa: E402
from tuner.families.base import Family, FamilyContext, FamilyResult, Needs  # noqa: E402
from tuner.families.concurrency import KNOB  # noqa: E402
from tuner.report.model import FamilyOutcome, Trial  # noqa: E402
from tuner.settings.policy import load_policy  # noqa: E402

# Each profile at the scale where its probes last long enough to be told apart (a few hundred ms at the best eic,
# seconds at the worst): at scale 10 local and ram probes took 30-60 ms and varied 20-33 % (CV) under load.
DEFAULT_PROFILES = ("local@50", "ram@50", "latency=1ms@20", "iops=3000@10", "iops=300@5", "mbps=125@50", "hdd@2")
QUICK_PROFILES = ("local", "latency=1ms")
# The 2-D truth (read_ahead_kb × eic on the readahead family's workload) with each profile's scale: a cold
# sequential scan at readahead 128 KiB takes about a second on each (latency=1ms reads ~180 MB/s at 128 KiB a
# request, iops=3000 ~370 MB/s, local ~2 GB/s), plus the bitmap scan.
TWO_D_PROFILES = ("latency=1ms@6", "iops=3000@16", "local@40")
# PostgreSQL 18: io_method (worker, sync, io_uring where it runs) × eic on the concurrency family's 17+ workload (a sequential scan and
# the bitmap scans). Smaller scales than 15's: a session on 18 runs ~150 probes (eic × io_combine_limit, then
# io_workers, then io_method screened in ABBA pairs).
PG18_PROFILES = ("latency=1ms@3", "iops=3000@20", "mbps=125@4")
PG15_DEFAULT_EIC = 1


class Sweep(Family):
    """The truth sweep as a family: the concurrency family's cold probe at every grid value, in randomised
    blocks. Registered only inside this benchmark."""

    name: ClassVar[str] = "devsweep"
    needs: ClassVar[Needs] = Needs(local_host=True)
    after: ClassVar[tuple[str, ...]] = ()
    summary: ClassVar[str] = "effective_io_concurrency at every grid value, cold, repeated (benchmarks/devices.py)"
    repeats: ClassVar[int] = 5
    seed: ClassVar[int] = 46

    def applicable(self, ctx: FamilyContext) -> str | None:
        return None

    async def run(self, ctx: FamilyContext) -> FamilyResult:
        planned = await eic_sweep_probe(ctx, self.name)
        if isinstance(planned, FamilyResult):
            return planned
        probe, queries, cache = planned
        rng = random.Random(self.seed)
        trials: list[Trial] = []
        for block in range(self.repeats):
            order = list(sc.GRID)
            rng.shuffle(order)
            for v in order:
                trials.append(await probe({KNOB: v}))
            print(f"  block {block + 1}/{self.repeats} done ({len(trials)} probes)", file=sys.stderr, flush=True)
        return FamilyResult(FamilyOutcome(family=self.name, status="done", reason="sweep finished",
                                          workload=[q.sql for q in queries], cache=cache.describe()), trials=trials)


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def sweep(profile: str, scale: int, repeats: int) -> dict[str, Any]:
    """The truth for one profile: the sweep's probes, grouped by value."""
    from tuner.session.runner import recommend  # heavy: the whole session machinery

    Sweep.repeats = repeats
    REGISTRY.register(Sweep)
    env = {"TUNER_SANDBOX__DEVICE": profile, "TUNER_SANDBOX__SCALE": str(scale)}
    cfg = load_config(None, environ=env)
    policy = load_policy("default")
    t0, load0 = time.monotonic(), _load()
    try:
        report = run_session(recommend(cfg, policy, use_sandbox=True, families=(Sweep.name,), store=None,
                                       warm_start=False))
    finally:
        REGISTRY.unregister(Sweep.name)
    samples: dict[int, list[float]] = {}
    failed = 0
    for t in report.trials:
        if t.status == "ok" and t.value is not None:
            samples.setdefault(int(t.config[KNOB]), []).append(t.value)
        else:
            failed += 1
    section = next((f for f in report.families if f.family == Sweep.name), None)
    if not samples:
        raise SystemExit(f"{profile}: the sweep measured nothing ({section.reason if section else 'no section'})")
    return {"samples": samples, "failed": failed, "wall_s": round(time.monotonic() - t0, 1), "load": [load0, _load()],
            "server_version_num": report.target.server_version_num,
            "workload": section.workload if section else None, "cache": section.cache if section else None,
            "min_effect": policy.decision.min_effect}


def session(profile: str, scale: int, seed: int, store: str | None = None) -> dict[str, Any]:
    """One tuner session on a fresh sandbox with the profile: its answer, decision, probes and wall time. Cold
    and unstored, or (``store``) kept in that state directory's store and warm-started from what it holds."""
    doc, run = recommend_json(["--device", profile, "--scale", str(scale), "--family", "concurrency"], seed,
                              store, store=store is not None)
    if doc is None:
        return run
    rec = next(r for r in doc["recommendations"] if r["knob"] == KNOB)
    fam = next((f for f in doc["families"] if f["family"] == "concurrency"), {})
    return {"seed": seed, "current": rec["current"], "recommended": rec["recommended"], "decision": rec["decision"],
            "near_optimal": rec.get("near_optimal"), "probes": len(doc["trials"]),
            "search_probes": sum(1 for t in doc["trials"] if t["phase"] == "search"),
            "warm_start": fam.get("warm_start"),
            "io_regime": [{k: r.get(k) for k in ("regime", "cap_source", "cap_iops", "cap_mib_s", "read_iops",
                                                 "read_mib_s", "reads_in_flight", "read_latency_ms", "sentence")}
                          for r in doc.get("io_regime") or []], **run}


def sessions_of(profile: str, scale: int, n: int) -> list[dict[str, Any]]:
    """``n`` cold sessions (seeds 4600, 4601, …), the first one stored in a store of this profile's own (emptied
    first), then a warm one (seed 4600 + n) that starts from that store — what a second run on the same kind of
    disk does."""
    store = Path(state_dir(profile, "1d-store"))
    shutil.rmtree(store, ignore_errors=True)
    store.mkdir(parents=True, mode=0o700)
    out = []
    for i in range(n):
        print(f"{profile}: session {i + 1}/{n}", file=sys.stderr, flush=True)
        out.append({**session(profile, scale, 4600 + i, str(store) if i == 0 else None), "warm": False})
    print(f"{profile}: warm session", file=sys.stderr, flush=True)
    out.append({**session(profile, scale, 4600 + n, str(store)), "warm": True})
    return out


def score_profile(profile: str, measured: dict[str, Any]) -> dict[str, Any]:
    samples = {int(k): v for k, v in measured["truth_sweep"]["samples"].items()}
    t = sc.truth(samples, measured["truth_sweep"]["min_effect"])
    sessions = [s for s in measured["sessions"] if "error" not in s and not s.get("warm")]
    warm = [s for s in measured["sessions"] if "error" not in s and s.get("warm")]
    scored = []
    for s in sessions:
        r = sc.score(t, sc.applied(s, s["current"]))  # a keep's advice is today's value, not the search's best
        today_in_truth = sc.score(t, s["current"])["hit"]
        scored.append({**s, **r, "decision_agrees": (s["decision"] == "change") == (not today_in_truth)})
    warm_scored = [{**s, **sc.score(t, sc.applied(s, s["current"])),
                    "decision_agrees": (s["decision"] == "change") == (not sc.score(t, s["current"])["hit"])}
                   for s in warm]
    budget = round(statistics.median(s["search_probes"] for s in sessions)) if sessions else 8
    chances = sc.hit_chances(samples, t["min_effect"], [s["answer"] for s in scored + warm_scored])
    for s, c in zip(scored + warm_scored, chances):
        s["hit_chance"] = c
    return {"truth": t, "sessions": scored, "warm_sessions": warm_scored,
            "peers": sc.peers(t, samples, profile=profile, default=PG15_DEFAULT_EIC,
                                                              budget=budget)}


def table(results: dict[str, dict[str, Any]]) -> str:
    profiles = list(results)
    rows: dict[str, list[str]] = {}
    for p in profiles:
        ss = results[p]["sessions"]
        cell = (f"{statistics.median(s['regret'] for s in ss):.1%} ({sum(s['hit'] for s in ss)}/{len(ss)})"
                if ss else "—")
        rows.setdefault("tuner (median regret, hits)", []).append(cell)
        rows.setdefault("tuner inside the sweep's plausible span", []).append(
            f"{sum(s['plausible'] for s in ss)}/{len(ss)}" if ss else "—")
        n_sweep = sum(c["n"] for c in results[p]["truth"]["cells"].values())
        rows.setdefault("tuner probes, median (sweep's)", []).append(
            f"{statistics.median(s['probes'] for s in ss):.0f} ({n_sweep})" if ss else "—")
        rows.setdefault("tuner keep/change agrees with the truth", []).append(
            f"{sum(s['decision_agrees'] for s in ss)}/{len(ss)}" if ss else "—")
        ws = results[p].get("warm_sessions") or []
        rows.setdefault("tuner warm session: regret (hit), probes", []).append(
            "; ".join(f"{s['regret']:.1%} ({'hit' if s['hit'] else 'miss'}), {s['probes']}" for s in ws) or "not run")
        rows.setdefault("tuner hits expected from the truth's own noise (bootstrap)", []).append(
            f"{sum(s['hit_chance'] for s in ss):.1f}/{len(ss)}" if ss else "—")
        for name, r in results[p]["peers"].items():
            hit = f"{r['hit']:.0%}" if isinstance(r["hit"], float) else ("hit" if r["hit"] else "miss")
            rows.setdefault(name, []).append(f"{r['regret']:.1%} ({hit})")
    head = ("| method | " + " | ".join(f"{p} (scale {results[p]['scale']})" for p in profiles) + " |\n|---|"
            + "---|" * len(profiles) + "\n")
    best = "| truth: best eic (within 5 %; plausible span) | " + " | ".join(
        f"{results[p]['truth']['best']} ({','.join(map(str, results[p]['truth']['truth_set']))}; "
        f"{min(results[p]['truth']['plausible_set'])}–{max(results[p]['truth']['plausible_set'])})" for p in profiles) + " |\n"
    return head + best + "".join(f"| {k} | " + " | ".join(v) + " |\n" for k, v in rows.items())


def summed(results: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Each method's regret summed over the profiles: tuner's as the mean of its cold sessions on each profile,
    the searching peers' as their mean over replays, the fixed rules' as scored."""
    out: dict[str, float] = {}
    for r in results.values():
        if r["sessions"]:
            out["tuner"] = out.get("tuner", 0.0) + statistics.fmean(s["regret"] for s in r["sessions"])
        for name, p in r["peers"].items():
            out[name] = out.get(name, 0.0) + p["regret"]
    return {k: round(v, 3) for k, v in out.items()}


def slug(profile: str) -> str:
    return profile.replace("=", "-").replace(",", "+")


def run_part(part: Any, specs: list[str], args: argparse.Namespace, suffix: str) -> None:
    """One part beyond the 1-D truth (devices_2d: read_ahead_kb × eic on 15; devices_pg18: io_method × eic on 18):
    every profile resumed and scored, the table printed and written to summary_<suffix>.json."""
    results = {}
    for spec in specs:
        profile, _, scale = spec.partition("@")
        results[profile] = part.run(profile, int(scale or args.scale), args.repeats, args.sessions,
                                    args.out / f"{slug(profile)}.{suffix}.json", force=args.force,
                                    parallel=args.parallel, score_only=args.score_only)
        t = results[profile]["truth"]
        print(f"{profile} ({suffix}): best ({t['best']}), {t['best_ms']:.0f} ms; truth set {t['truth_set']}",
              file=sys.stderr)
    md = part.table(results)
    (args.out / f"summary_{suffix}.json").write_text(
        json.dumps({"repeats": args.repeats, "results": results, "table": md}) + "\n")  # compact: benchmarks/ < 1 MB
    print(md)


def run_cloud(args: argparse.Namespace) -> None:
    """``--cloud``: every cloud shorthand's precise truth and cold sessions, resumed and scored; the table printed and
    written to summary_cloud.json."""
    from benchmarks import devices_cloud as dc

    out = args.out / "cloud" / ("smoke" if args.quick else "")
    out.mkdir(parents=True, exist_ok=True)
    specs = args.profiles.split(";") if args.profiles else list(dc.QUICK if args.quick else dc.default_specs())
    params = {"min_repeats": 2 if args.quick else sc.MIN_REPEATS, "max_repeats": 3 if args.quick else args.max_repeats,
              "precision": sc.PRECISION, "grid": list(sc.GRID)}
    sessions = 1 if args.quick else args.sessions
    results = {}
    for spec in specs:
        profile, _, own = spec.partition("@")
        scale = int(own) if own else sc.scale_for(dc.parts_of(profile))
        results[profile] = dc.run(profile, scale, params, sessions, out, lambda p, s, seed: session(p, s, seed),
                                  force=args.force, score_only=args.score_only)
        t = results[profile]["truth"]
        print(f"{profile}: best eic {t['best']} ({t['best_ms']:.0f} ms), truth set {t['truth_set']}", file=sys.stderr)
    md = dc.table(results)
    (out / "summary_cloud.json").write_text(json.dumps({"params": params, "sessions": sessions, "results": results,
                                                        "table": md}) + "\n")  # compact: benchmarks/ < 1 MB
    print(md)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profiles", help="profiles separated by ';', each optionally with its own scale after '@' "
                    f"(hdd@2): a slow disk needs less data for a probe of a few seconds (default: {';'.join(DEFAULT_PROFILES)})")
    ap.add_argument("--scale", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--sessions", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="smoke run: scale 1, 2 repeats, 1 session, local and latency=1ms")
    ap.add_argument("--two-d", help="2-D truth profiles separated by ';', each PROFILE@SCALE "
                    f"(default: {';'.join(TWO_D_PROFILES)}; --quick: latency=1ms@1)")
    ap.add_argument("--pg18", help="PostgreSQL 18 profiles separated by ';', each PROFILE@SCALE "
                    f"(default: {';'.join(PG18_PROFILES)}; --quick: latency=1ms@1)")
    ap.add_argument("--only", choices=("1d", "2d", "pg18"), help="measure only one part: the 1-D eic truth (PostgreSQL "
                    "15), the 2-D read_ahead_kb × eic truth (15), or io_method × eic on 18")
    ap.add_argument("--parallel", type=int, default=1, help="2-D and 18 parts: run a profile's sessions this many at "
                    "a time, each on its own sandbox (faster; they share the CPU, so times are noisier)")
    ap.add_argument("--score-only", action="store_true", help="measure nothing, score what --out holds (2-D and 18: "
                    "sessions still missing are left out; 1-D: a profile not measured at these parameters is an error)")
    ap.add_argument("--cloud", action="store_true", help="the cloud-shaped shorthands, each cell until precise "
                    "(--profiles PROFILE@SCALE;... to choose; default: every shorthand at the scale where its best probe "
                    "lasts ~1 s); into OUT/cloud/ (--quick: OUT/cloud/smoke/)")
    ap.add_argument("--max-repeats", type=int, default=sc.MAX_REPEATS,
                    help=f"--cloud: the cap on probes per cell (default {sc.MAX_REPEATS})")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "measured" / "devices")
    ap.add_argument("--force", action="store_true", help="measure again what --out already holds")
    args = ap.parse_args()
    if args.cloud:
        run_cloud(args)
        return
    if args.quick:
        args.scale, args.repeats, args.sessions = 1, 2, 1
        args.out = args.out / "smoke-scale1" if args.out == ROOT / "benchmarks" / "measured" / "devices" else args.out
    profiles = args.profiles.split(";") if args.profiles else list(QUICK_PROFILES if args.quick else DEFAULT_PROFILES)
    params = {"scale": args.scale, "repeats": args.repeats, "sessions": args.sessions, "warm": 1}
    args.out.mkdir(parents=True, exist_ok=True)
    if args.quick:  # a smoke run: the corners and the middle of each grid
        d2.Sweep2D.ra_grid, d2.Sweep2D.eic_grid, d18.Sweep18.eic_grid = (0, 128, 2048), (1, 64), (1, 64)
    if args.only in (None, "2d"):
        run_part(d2, args.two_d.split(";") if args.two_d else (["latency=1ms@1"] if args.quick else list(TWO_D_PROFILES)),
                 args, "2d")
    if args.only in (None, "pg18"):
        run_part(d18, args.pg18.split(";") if args.pg18 else (["latency=1ms@1"] if args.quick else list(PG18_PROFILES)),
                 args, "pg18")
    if args.only is not None and args.only != "1d":
        return
    results = {}
    for spec in profiles:
        profile, _, own_scale = spec.partition("@")
        params = {**params, "scale": int(own_scale) if own_scale else args.scale}
        path = args.out / f"{slug(profile)}.json"
        measured = json.loads(path.read_text()) if path.exists() and not args.force else None
        # Files from before the warm session (params without "warm") still count: their cold sessions stand.
        if args.score_only and (measured is None or {**measured["params"], "warm": 1} != params):
            raise SystemExit(f"{profile}: nothing measured at {params} in {path} (--score-only measures nothing)")
        if measured is None or {**measured["params"], "warm": 1} != params:
            print(f"{profile}: truth sweep ({len(sc.GRID)} values × {args.repeats})", file=sys.stderr, flush=True)
            truth_sweep = sweep(profile, params["scale"], args.repeats)
            sessions = sessions_of(profile, params["scale"], args.sessions)
            measured = {"profile": profile, "params": params, "truth_sweep": truth_sweep, "sessions": sessions}
            path.write_text(json.dumps(measured, indent=1) + "\n")
        results[profile] = {"scale": params["scale"], **score_profile(profile, measured)}
        t = results[profile]["truth"]
        print(f"{profile}: best eic {t['best']} ({t['best_ms']:.0f} ms), truth set {t['truth_set']}", file=sys.stderr)
    md = table(results)
    totals = summed(results)
    md += "\nSummed regret over the profiles (tuner: the mean of its cold sessions per profile): " + ", ".join(
        f"{k} {v:.2f}" for k, v in sorted(totals.items(), key=lambda kv: kv[1])) + "\n"
    summary = {"repeats": args.repeats, "sessions": args.sessions, "results": results, "summed_regret": totals,
               "table": md}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(md)


if __name__ == "__main__":
    main()
