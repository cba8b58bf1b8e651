"""The truth on PostgreSQL 18 per emulated device: effective_io_concurrency × io_method (worker, sync), with
io_combine_limit at its default, on the concurrency family's own 17+ workload and probe (issue #46, part 2), and
cold concurrency sessions on 18 scored on it (part 3).

On 18 the family's objective is the policy's weighted sum of a cold sequential scan of the largest table (read
streams: eic sets their look-ahead from 18) and the sparse bitmap heap scans; io_method changes with ALTER SYSTEM
and a restart, journaled by the family's own ``SystemKnobs``. The sweep builds that probe with the family's own
functions (``concurrency.with_seq_scan``, ``concurrency.cold_probe``), so it measures what a session measures.
Every block visits every (io_method, eic) cell once in a fresh random order; io_method is put back at the end
(and by the session's journal in any case).
"""

from __future__ import annotations

import random
import statistics
import sys
from pathlib import Path
from typing import Any, ClassVar

from benchmarks import devices_score as sc
from benchmarks.devices_run import in_sandbox, load, md_table, recommend_json, resume, scored, scored_profile, state_dir
from tuner.families import aio
from tuner.hostfacts import iouring
from tuner.families import concurrency as cc
from tuner.families.base import Family, FamilyContext, FamilyResult, Needs, skipped
from tuner.report.model import FamilyOutcome, Trial
from tuner.probes import workload
from tuner.probes.cache import CacheControl, choose_os_method
from tuner.probes.coldprobe import SystemKnobs

ROOT = Path(__file__).resolve().parent.parent
# io_uring joins where the build offers it and nothing on the host stops it (knobs/iouring.py), as in a session.
METHODS = ("worker", "sync", "io_uring")
PG18_DEFAULT_EIC = 16  # PostgreSQL 18 raised the default from 1 to 16 (18 release notes, E.1.3.1.6)
PG18_DEFAULT_METHOD = "worker"


class Sweep18(Family):
    """Every (io_method, eic) cell, cold, in randomised blocks, with the concurrency family's 17+ probe."""

    name: ClassVar[str] = "devsweep18"
    needs: ClassVar[Needs] = Needs(local_host=True)
    after: ClassVar[tuple[str, ...]] = ()
    summary: ClassVar[str] = "io_method × effective_io_concurrency on 18, cold (benchmarks/devices_pg18.py)"
    repeats: ClassVar[int] = 5
    seed: ClassVar[int] = 46
    # The eic grid thinned (three methods × every grid value × 5 repeats would be 180 restarts): PostgreSQL 18's
    # default 16 and the values around each profile's 1-D optimum (64..256) stay.
    eic_grid: ClassVar[tuple[int, ...]] = (0, 1, 4, 16, 64, 128, 256, 1000)
    methods: ClassVar[tuple[str, ...]] = METHODS

    def applicable(self, ctx: FamilyContext) -> str | None:
        return None

    async def run(self, ctx: FamilyContext) -> FamilyResult:
        facts = ctx.facts
        if facts.server_version_num < 180000:
            return skipped(self.name, "io_method exists from PostgreSQL 18")
        if (why := aio.alter_system_refusal(ctx)) is not None or ctx.target.restart is None:
            return skipped(self.name, why or "io_method needs a restart, and this server cannot be restarted")
        local = facts.local_data_directory()
        assert local is not None
        async with ctx.connection() as conn:
            queries = await workload.plan(conn, custom=ctx.cfg.workload.queries, relations=ctx.cfg.workload.relations,
                                          pages_fraction=ctx.cfg.workload.pages_fraction)
            io = await aio.io_settings(conn)  # the family's own reading (io_method, io_combine_limit, io_uring's slots)
            queries = await cc.with_seq_scan(conn, ctx, queries)
            files = [f for q in queries if q.relation for f in await workload.relation_files(conn, local, q.relation)]
        cache = await CacheControl.plan(facts, [q.relation for q in queries], connector=ctx.target.connect,
                                        restart=ctx.target.restart, os_method=choose_os_method(local, files), files=files)
        system = SystemKnobs(
            journal=ctx.journal, contexts={cc.METHOD: io[cc.METHOD]["context"]}, connector=ctx.target.connect,
            restart=ctx.target.restart, dsn=ctx.target.dsn, data_directory=local,
            identity={"system_identifier": facts.system_identifier, "port": await cc.server_port(ctx),
                      "sandbox_dir": ctx.sandbox_dir})
        probe = cc.cold_probe(ctx, queries, cache, system)
        uring = iouring.blocker(iouring.read_facts(tuple(io[cc.METHOD]["enumvals"] or ()), local,
                                                   {k: str(io[k]["setting"]) for k in iouring.SLOT_SETTINGS if k in io}))
        methods = [m for m in self.methods if m != "io_uring" or uring is None]
        rng = random.Random(self.seed)
        trials: list[Trial] = []
        try:
            for block in range(self.repeats):
                order = [(m, e) for m in methods for e in self.eic_grid]
                rng.shuffle(order)
                for m, e in order:
                    trials.append(await probe({cc.METHOD: m, cc.KNOB: e}))
                print(f"  block {block + 1}/{self.repeats} done ({len(trials)} probes, load {load()})",
                      file=sys.stderr, flush=True)
        finally:
            await system.put_back()
        return FamilyResult(FamilyOutcome(
            family=self.name, status="done", workload=[q.sql for q in queries], cache=cache.describe(),
            reason=f"io_method ({', '.join(methods)}) × eic at io_combine_limit = {io.get(cc.ICL, {}).get('setting')} "
                   f"(its default){'; io_uring not swept: ' + uring if uring else ''}"),
            trials=trials)


def sweep18(profile: str, scale: int, repeats: int) -> dict[str, Any]:
    Sweep18.repeats = repeats
    report, run = in_sandbox(Sweep18, profile, scale, "pg18", pg_version=18)
    section = next((f for f in report.families if f.family == Sweep18.name), None)
    samples: dict[str, list[float]] = {}
    failed = 0
    for t in report.trials:
        if t.status == "ok" and t.value is not None:
            samples.setdefault(f"{t.config[cc.METHOD]},{int(t.config[cc.KNOB])}", []).append(t.value)
        else:
            failed += 1
    if not samples:
        raise SystemExit(f"{profile}: the 18 sweep measured nothing ({section.reason if section else 'no section'})")
    return {"samples": samples, "failed": failed, **run, "reason": section.reason if section else None,
            "workload": section.workload if section else None, "cache": section.cache if section else None}


def session(profile: str, scale: int, seed: int, state: str) -> dict[str, Any]:
    """One cold concurrency session on 18: its eic and io_method answers (io_workers searched too; recorded)."""
    doc, run = recommend_json(["--pg-version", "18", "--device", profile, "--scale", str(scale),
                               "--family", "concurrency"], seed, state)
    if doc is None:
        return run
    recs = {r["knob"]: {k: r.get(k) for k in ("current", "recommended", "decision", "near_optimal")}
            for r in doc["recommendations"]}  # io_combine_limit and io_workers too: the truth holds them at default
    return {"recs": recs, "probes": len(doc["trials"]), **run}


def score(samples: dict[str, list[float]], min_effect: float, sessions: list[dict[str, Any]]) -> dict[str, Any]:
    """The (io_method, eic) truth; each session's pair scored on it (an eic off the grid interpolated along its
    method's row); the fixed rules at 18's defaults."""
    t = sc.truth(samples, min_effect)  # type: ignore[arg-type]
    rows = {m: sc.truth({int(k.split(",")[1]): v for k, v in samples.items() if k.startswith(f"{m},")}, min_effect)
            for m in {k.split(",")[0] for k in samples}}

    def at(method: str, eic: float) -> dict[str, Any]:
        ms = sc.true_ms(rows[method], eic) if method in rows else float("nan")  # nan: a method the sweep did not run
        return {"answer": [method, eic], "true_ms": round(ms, 1), "regret": round(ms / t["best_ms"] - 1, 4),
                "hit": ms <= t["best_ms"] * min_effect}

    scored = []
    for s in sessions:
        if "error" in s or cc.KNOB not in s.get("recs", {}):
            scored.append(s)
            continue
        recs = s["recs"]
        today_m = str(recs.get(cc.METHOD, {}).get("current") or PG18_DEFAULT_METHOD)
        today = at(today_m, recs[cc.KNOB]["current"])
        method, eic = str(sc.applied(recs.get(cc.METHOD), today_m)), sc.applied(recs[cc.KNOB], recs[cc.KNOB]["current"])
        r = at(method, eic)
        changed = [method, eic] != today["answer"]
        best = recs.get(cc.METHOD, {}).get("recommended") or today_m
        scored.append({**s, **r, "decision_agrees": changed == (not today["hit"]),
                       "searched_best": at(str(best), recs[cc.KNOB]["recommended"])})
    rules = {"PostgreSQL 18 defaults (worker, 16)": at(PG18_DEFAULT_METHOD, PG18_DEFAULT_EIC),
             "worker, 256": at("worker", 256), "sync, 16": at("sync", PG18_DEFAULT_EIC)}
    ran = [s["probes"] for s in sessions if "probes" in s]
    return {"truth": t, "rows": {m: {"best": r["best"], "best_ms": r["best_ms"]} for m, r in rows.items()},
            "sessions": scored, "rules": rules,
            "peers": sc.replayed(samples, min_effect, budget=int(statistics.median(ran)) if ran else 20)}


def run(profile: str, scale: int, repeats: int, sessions: int, path: Path, *, force: bool = False,
        parallel: int = 1, score_only: bool = False) -> dict[str, Any]:
    """Measure (or resume) one profile's 18 truth and sessions into ``path``, and score them."""
    params = {"scale": scale, "repeats": repeats, "eic_grid": list(Sweep18.eic_grid), "methods": list(Sweep18.methods)}
    measured = resume(path, profile, params,
                      f"PostgreSQL 18 sweep ({len(Sweep18.methods)} × {len(Sweep18.eic_grid)} × {repeats})",
                      lambda: sweep18(profile, scale, repeats),
                      lambda seed: session(profile, scale, seed, state_dir(profile, f"pg18-{seed}")),
                      sessions, force=force, parallel=parallel, score_only=score_only)
    return scored_profile(measured, scale, score)


def table(results: dict[str, dict[str, Any]]) -> str:
    return md_table("PostgreSQL 18, io_method × eic", results, [
        ("best (io_method, eic): ms", lambda r: f"({r['truth']['best']}): {r['truth']['best_ms']:.0f}"),
        ("best per io_method", lambda r: "; ".join(f"{m} {v['best']}: {v['best_ms']:.0f} ms"
                                                   for m, v in sorted(r["rows"].items()))),
        ("truth set (within 5 %)", lambda r: "; ".join(f"({c})" for c in r["truth"]["truth_set"])),
        ("tuner's answers (regret)", lambda r: "; ".join(f"({s['answer'][0]},{s['answer'][1]}) {s['regret']:.1%}"
                                                         for s in scored(r)) or "—"),
        ("its search's best, before keep/change (regret)", lambda r: "; ".join(
            f"({s['searched_best']['answer'][0]},{s['searched_best']['answer'][1]}) {s['searched_best']['regret']:.1%}"
            for s in scored(r)) or "—"),
        ("io_workers (today 3; the truth holds 3) and io_combine_limit (16) it advised", lambda r: "; ".join(
            f"{sc.applied(s['recs'].get('io_workers'), 3)}, {sc.applied(s['recs'].get('io_combine_limit'), 16)}"
            for s in scored(r)) or "—"),
    ])
