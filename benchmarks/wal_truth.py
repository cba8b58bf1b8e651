"""The WAL truth (issue #55 items 2 and 3): which WAL settings matter on which disk, and tuner's answers scored on it.

    sudo .venv/bin/python benchmarks/wal_truth.py [--profiles 'local;flush=2ms;wmbps=125,wiops=3000;hdd']
                                                  [--sessions 3] [--max-repeats 20] [--out DIR] [--force]
    sudo .venv/bin/python benchmarks/wal_truth.py --quick     # smoke: local, 2 cells x 2 loads, 1 short session

Per profile (profiles separated by ';'; each on its own sandbox, PostgreSQL 15, scale 1: the loads write into
tuner's scratch table, not the pgbench tables):

* **the standby's flushes kept off the measured device**: the sandbox's hot standby is detached from the primary
  (``primary_conninfo`` emptied, reloaded; its WAL receiver exits) before anything is measured, in the sweep and in
  every session — on a ``flush=`` profile the loop driver serves flushes one at a time and the standby's receiver
  flushed the same WAL on the same device (~2 flushes per commit; docs/devices.md, "Who issues the writes");
* **the loads are the WAL family's own** (``tuner.probes.walload`` through the family's probe,
  ``wal.probe_for``): 10-row and 1,000-row INSERT transactions at 1, 4, 16 and 64 clients;
* **the grid** (:func:`grid`): every ``commit_delay`` × ``commit_siblings`` pair (0 needs no siblings), then each
  other WAL setting at a few levels with the rest at today's: ``wal_writer_delay``, ``wal_writer_flush_after``,
  ``wal_compression`` (what the build offers), ``wal_buffers`` (a restart per change);
* **the precise stopping rule** of devices_cloud.py (``devices_score.needs_more``): every (cell, load) until its
  95 % half-width is ≤ 2.5 % of its mean, at least 5 and at most ``--max-repeats`` probes, in blocks of a fresh
  random order per profile and block; one unscored warm-up probe after each (re)start;
* **scored** per load on ms per transaction (1000 / TPS, what the family minimises): an answer's regret
  = best TPS / TPS at the answer − 1 (:func:`nearest_cell` maps an off-grid answer to the closest cell), hit when
  within the policy's ``min_effect``, with the bootstrap probability behind the verdict (hit / miss / unresolved).
  ``--sessions`` cold in-process sessions of the shipped WAL family (default policy) and the fixed rules
  (:func:`peers`: PostgreSQL's default, PGTune, the folklore ``commit_delay = 1000``) in one table.

Resumable: the sweep's progress is written after every probe (``<profile>.progress.json``), a profile's result
(``<profile>.json``) after the sweep and after each session; ``summary_wal.json`` and ``wal_truth.md`` hold the
table. Results in ``benchmarks/measured/wal/`` (``--quick``: its ``smoke/``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import devices_score as sc  # noqa: E402
from benchmarks.devices_run import in_sandbox, resume  # noqa: E402
from tuner.families import wal  # noqa: E402
from tuner.families.base import Family, FamilyContext, FamilyResult, Needs  # noqa: E402
from tuner.families.wal_flush import flush_sentence  # noqa: E402
from tuner.families.wal_sections import Report as WalSection  # noqa: E402
from tuner.knobs import catalog  # noqa: E402
from tuner.probes import walload  # noqa: E402
from tuner.report.model import FamilyOutcome  # noqa: E402
from tuner.settings.policy import Policy, load_policy  # noqa: E402

PROFILES = ("local", "flush=2ms", "wmbps=125,wiops=3000", "hdd")
LOADS = tuple((rows, clients) for rows in (10, 1000) for clients in (1, 4, 16, 64))
# The loads the table spells out per answer: the family's own (the default policy's 8 clients x 10 rows) and many
# small commits, where group commit is expected to matter.
HEADLINES = ((10, 8), (10, 16))
KNOBS = ("commit_delay", "commit_siblings", "wal_writer_delay", "wal_writer_flush_after", "wal_compression",
         "wal_buffers")
DELAYS = (100, 1000, 5000)  # µs, beside 0
SIBLINGS = (1, 5, 20)
AXES: dict[str, tuple[Any, ...]] = {"wal_writer_delay": (10, 1000), "wal_writer_flush_after": (0, 1024),
                                     "wal_compression": ("lz4", "pglz"), "wal_buffers": (2048, 8192)}
FOLKLORE_DELAY = 1000
# One probe's wall time beyond its warm-up and measured seconds: TRUNCATE + CHECKPOINT, connecting the clients, the
# statistics read after they exit. Measured once: 64 clients on flush=2ms, 2.5 s probes, median 3.71 s a probe.
OVERHEAD_S = 1.2


def grid(today: dict[str, Any], *, quick: bool = False, offered: tuple[str, ...] = ("lz4", "pglz")) -> list[dict[str, Any]]:
    """The cells: full configurations of :data:`KNOBS`. Every commit_delay × commit_siblings pair (commit_delay 0
    once: siblings then change nothing), then each other setting at :data:`AXES`'s levels with the rest at
    ``today``'s; duplicates of today's cell dropped. ``quick``: today and the folklore commit_delay only."""
    cells = [dict(today)]
    if quick:
        return [*cells, {**today, "commit_delay": FOLKLORE_DELAY}]
    cells += [{**today, "commit_delay": d, "commit_siblings": s} for d in DELAYS for s in SIBLINGS]
    for knob, levels in AXES.items():
        cells += [{**today, knob: v} for v in levels if knob != "wal_compression" or v in offered]
    out: list[dict[str, Any]] = []
    for c in cells:
        if c not in out:
            out.append(c)
    return out


def parse_loads(text: str) -> tuple[tuple[int, int], ...]:
    """``"10x1,10x16,1000x8"`` as (rows per transaction, clients) pairs."""
    try:
        loads = tuple((int(r), int(c)) for r, c in (part.strip().split("x") for part in text.split(",") if part.strip()))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give loads as ROWSxCLIENTS separated by commas, e.g. 10x1,10x16")
    if not loads or any(r < 1 or c < 1 for r, c in loads):
        raise argparse.ArgumentTypeError(f"{text!r}: every load needs at least 1 row and 1 client")
    return loads


def label(cell: dict[str, Any], today: dict[str, Any]) -> str:
    """A cell's name: the settings it changes from today's ("today" for none)."""
    diff = [f"{k}={cell[k]}" for k in KNOBS if k in cell and cell[k] != today.get(k)]
    return ",".join(diff) or "today"


def key(cell_label: str, load: tuple[int, int]) -> str:
    return f"{load[0]}x{load[1]}|{cell_label}"


def estimate_s(cells: int, loads: int, *, probe_s: float, repeats: int, overhead_s: float = OVERHEAD_S) -> float:
    """A sweep's wall time in seconds at ``repeats`` probes per (cell, load)."""
    return cells * loads * repeats * (probe_s + overhead_s)


def _distance(a: Any, b: Any, knob: str) -> float:
    if isinstance(a, str) or isinstance(b, str):
        return 0.0 if str(a) == str(b) else 1.0
    if knob == "wal_buffers":  # -1 = 1/32 of shared_buffers: compare as given, on the log axis
        a, b = max(a, 0), max(b, 0)
    return abs(math.log2(1 + float(a)) - math.log2(1 + float(b)))


def nearest_cell(answer: dict[str, Any], cells: list[dict[str, Any]]) -> dict[str, Any]:
    """The grid cell closest to ``answer`` (knobs it does not name count as today's): summed distance on log2(1 + x)
    per numeric setting, 1 per differing enum; ties go to the cell listed first (today's)."""
    def dist(c: dict[str, Any]) -> float:
        return sum(_distance(answer.get(k, c[k]), c[k], k) for k in c)

    return min(cells, key=dist)


def pgtune_wal_buffers(shared_buffers_kb: int) -> int:
    """PGTune's wal_buffers (kB) for a shared_buffers (kB): 3 %, at most 16 MB, 16 MB from above 14 MB, at least
    32 kB (le0pard/pgtune, src/features/configuration/configurationSlice.js, selectWalBuffers)."""
    v = 3 * shared_buffers_kb // 100
    v = min(v, 16 * 1024)
    if 14 * 1024 < v < 16 * 1024:
        v = 16 * 1024
    return max(v, 32)


def peers(today: dict[str, Any], shared_buffers_kb: int, major: int) -> dict[str, dict[str, Any]]:
    """The fixed rules as configurations: PostgreSQL's default (today's, on a fresh sandbox); PGTune's WAL lines
    (wal_buffers by its rule, in 8 kB pages; wal_compression lz4 on 15+, ``on`` before: selectWalCompression) for the
    sandbox's shared_buffers; the folklore commit_delay = 1000 µs (commit_siblings left at today's)."""
    return {"postgresql_default": dict(today),
            "pgtune": {**today, "wal_buffers": pgtune_wal_buffers(shared_buffers_kb) // 8,
                       "wal_compression": "lz4" if major >= 15 else "on"},
            "folklore_commit_delay_1000": {**today, "commit_delay": FOLKLORE_DELAY}}


def _scorer(t: dict[str, Any], answer: str) -> dict[str, Any]:
    ms = t["cells"][answer]["mean_ms"]
    return {"regret": round(ms / t["best_ms"] - 1, 4), "hit": ms <= t["best_ms"] * t["min_effect"]}


def score_answers(samples: dict[str, list[float]], min_effect: float, cells: list[dict[str, Any]],
                  today: dict[str, Any], answers: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per load: the truth (``devices_score.truth`` over the cells' ms per transaction) and each named answer's
    cell, regret, hit and bootstrap hit probability with its verdict; and per answer its worst regret and hits
    over the loads."""
    labels = {label(c, today) for c in cells}
    loads = sorted({k.split("|")[0] for k in samples}, key=lambda s: tuple(int(x) for x in s.split("x")))
    cell_of = {n: label(nearest_cell(a, cells), today) for n, a in answers.items()}
    per_load: dict[str, Any] = {}
    for ld in loads:
        s = {k.split("|", 1)[1]: v for k, v in samples.items() if k.startswith(f"{ld}|") and v}
        if not s or not labels & set(s):
            continue
        t = sc.truth(s, min_effect)  # type: ignore[arg-type]  (labels as keys; truth() only groups them)
        names = [n for n in answers if cell_of[n] in s]
        chances = sc.hit_chances(s, min_effect, [cell_of[n] for n in names], scorer=_scorer,
                                 make_truth=sc.truth)  # type: ignore[arg-type]
        default_ms = t["cells"].get(label(today, today), {}).get("mean_ms")
        per_load[ld] = {"best": t["best"], "best_tps": round(1000 / t["best_ms"], 1),
                        "gain_over_today": round(default_ms / t["best_ms"] - 1, 4) if default_ms else None,
                        "truth_set": t["truth_set"], "widest_half_width": round(max(sc.half_width(v) for v in s.values()), 4),
                        "answers": {n: {"cell": cell_of[n], **_scorer(t, cell_of[n]), "hit_chance": c,
                                        "verdict": sc.verdict(c)} for n, c in zip(names, chances)}}
    overall = {n: {"cell": cell_of[n],
                   "worst_regret": max((p["answers"][n]["regret"] for p in per_load.values() if n in p["answers"]),
                                       default=None),
                   "hits": sum(p["answers"][n]["verdict"] == "hit" for p in per_load.values() if n in p["answers"]),
                   "loads": sum(n in p["answers"] for p in per_load.values())} for n in answers}
    return {"per_load": per_load, "overall": overall}


def session_answer(recommendations: list[dict[str, Any]], today: dict[str, Any]) -> dict[str, Any]:
    """What a session tells the operator to run: each recommended WAL setting (``devices_score.applied``: its value
    where it decided "change", today's where "keep"), the rest today's."""
    out = dict(today)
    for r in recommendations:
        if r["knob"] in today:
            v = sc.applied(r, today[r["knob"]])
            out[r["knob"]] = v if isinstance(today[r["knob"]], str) else int(v)
    return out


# --- on a sandbox ---------------------------------------------------------------------------------------------


async def detach_standby(ctx: FamilyContext) -> str:
    """Empty the hot standby's primary_conninfo and reload: its WAL receiver exits, so its flushes of the primary's
    WAL stop queueing behind the primary's on the sandbox's loop device. The sandbox is removed after the session."""
    async with ctx.connection(ctx.target) as conn:
        before = await conn.fetchval("SHOW primary_conninfo")
        await conn.execute("ALTER SYSTEM SET primary_conninfo = ''")
        await conn.execute("SELECT pg_reload_conf()")
        for _ in range(100):
            if not await conn.fetchval("SELECT count(*) FROM pg_stat_wal_receiver"):
                return f"standby detached (primary_conninfo was {'set' if before else 'empty'}; WAL receiver gone)"
            await conn.execute("SELECT pg_sleep(0.1)")
    raise SystemExit("the standby's WAL receiver did not exit after primary_conninfo was emptied")


def _save(path: Path, doc: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    os.replace(tmp, path)


class WalSweep(Family):
    """Every (cell, load) through the WAL family's own probe until precise, in randomised blocks, after an unscored
    warm-up; progress in :attr:`progress` after every probe. Registered only inside this benchmark."""

    name: ClassVar[str] = "walsweep"
    needs: ClassVar[Needs] = Needs(writable=True, superuser=True, local_host=True)
    after: ClassVar[tuple[str, ...]] = ()
    summary: ClassVar[str] = "the WAL truth: every WAL cell at every load until precise (benchmarks/wal_truth.py)"
    profile: ClassVar[str] = ""
    progress: ClassVar[Path] = Path("/nonexistent")
    params: ClassVar[dict[str, Any]] = {}
    cells: ClassVar[list[dict[str, Any]] | None] = None  # the answers' sweep: these cells instead of the grid

    def applicable(self, ctx: FamilyContext) -> str | None:
        return None

    async def run(self, ctx: FamilyContext) -> FamilyResult:
        where = ctx.writable
        assert where is not None
        detached = await detach_standby(ctx)
        async with ctx.connection(where) as conn:
            rows = await conn.fetch("SELECT name, setting, context, vartype, enumvals, source FROM pg_settings "
                                    "WHERE name = ANY($1::text[])", [*catalog.load().names("wal"), wal.COMPRESSION])
            settings = {r["name"]: dict(r) for r in rows}
            shared_kb = int(await conn.fetchval("SELECT setting::bigint * 8 FROM pg_settings WHERE name = 'shared_buffers'"))
            identity: dict[str, Any] = {"system_identifier": where.facts.system_identifier,
                                        "port": int(await conn.fetchval("SHOW port")), "sandbox_dir": ctx.sandbox_dir}
            ctx.journal.scratch_schema(dsn=where.dsn, **identity)
            await walload.prepare(conn)
        today = {k: (settings[k]["setting"] if k == wal.COMPRESSION else int(settings[k]["setting"])) for k in KNOBS}
        offered = tuple(settings[wal.COMPRESSION]["enumvals"] or ())
        p = self.params
        cells = self.cells or grid(today, quick=p["quick"], offered=offered)
        loads = [tuple(x) for x in p["loads"]]
        keys = {key(label(c, today), ld): (c, ld) for c in cells for ld in loads}
        state = _progress(self.progress, p, list(keys))
        state.update(today=today, shared_buffers_kb=shared_kb, major=where.facts.major, cells=cells, standby=detached)
        probe = wal.probe_for(ctx, where, settings, identity)
        try:
            cell, ld = keys[random.Random(f"{self.profile}/warmup/{len(state['warmups'])}").choice(sorted(keys))]
            t = await probe(cell, clients=ld[1], rows_per_tx=ld[0])
            state["warmups"].append({"key": key(label(cell, today), ld), "ms": t.value if t.status == "ok" else None})
            _save(self.progress, state)
            samples, attempts = state["samples"], state["attempts"]

            def open_keys() -> list[str]:
                return [k for k in keys if attempts[k] < 2 * p["max_repeats"] and sc.needs_more(
                    samples[k], precision=sc.PRECISION, min_n=p["min_repeats"], max_n=p["max_repeats"])]

            while state["order"] or open_keys():
                if not state["order"]:
                    state["order"] = sc.block_order(open_keys(), self.profile, state["blocks"])
                while state["order"]:
                    k = state["order"][0]
                    cell, ld = keys[k]
                    t = await probe(cell, clients=ld[1], rows_per_tx=ld[0])
                    attempts[k] += 1
                    if t.status == "ok" and t.value is not None:
                        samples[k].append(round(t.value, 4))
                        state["seconds"].append(t.duration_s)
                    else:
                        state["failed"] += 1
                    state["order"].pop(0)
                    _save(self.progress, state)
                state["blocks"] += 1
                _save(self.progress, state)
                print(f"  {self.profile}: block {state['blocks']} done, {len(open_keys())} of {len(keys)} still open",
                      file=sys.stderr, flush=True)
        finally:
            restored = await wal.put_back(probe, ctx.journal, where.restart)
        return FamilyResult(FamilyOutcome(family=self.name, status="done", reason="sweep finished",
                                          workload=[f"{len(cells)} cells x {len(loads)} loads"]), trials=[],
                            restored=restored)


def _progress(path: Path, params: dict[str, Any], keys: list[str]) -> dict[str, Any]:
    try:
        state: dict[str, Any] = json.loads(path.read_text())
        if state.get("params") == params:
            return state
    except (OSError, ValueError):
        pass
    return {"params": params, "samples": {k: [] for k in keys}, "attempts": {k: 0 for k in keys}, "blocks": 0,
            "order": [], "warmups": [], "failed": 0, "seconds": []}


class ColdWal(wal.Wal):
    """The shipped WAL family, run after the standby is detached (as in the sweep). Registered only here."""

    name: ClassVar[str] = "walcold"
    policy_section = None  # its table is the WAL family's ([wal])

    async def run(self, ctx: FamilyContext) -> FamilyResult:
        await detach_standby(ctx)
        return await super().run(ctx)


def policy_for(params: dict[str, Any]) -> Policy:
    """The default policy, with the WAL load's probe length set to the sweep's (the quick smoke: shorter, and a
    smaller search budget)."""
    policy = load_policy("default")
    section = policy.sections["wal"].model_copy(
        update={"duration_s": params["duration_s"], "warmup_s": params["warmup_s"],
                **({"scaling_clients": (1, 4), "scaling_rows_per_tx": (10,), "wal_buffers": ()} if params["quick"] else {})})
    update: dict[str, Any] = {"sections": {**policy.sections, "wal": section}}
    if params["quick"]:
        update["budget"] = type(policy.budget)(**{**policy.budget.model_dump(), "probes": 4, "joint_probes": 4,
                                                  "min_probes": 3, "confirm_min_pairs": 2, "confirm_max_pairs": 4})
    return policy.model_copy(update=update)


def sweep(profile: str, params: dict[str, Any], progress: Path) -> dict[str, Any]:
    WalSweep.profile, WalSweep.progress, WalSweep.params = profile, progress, params
    report, run = in_sandbox(WalSweep, profile, 1, "wal", policy=policy_for(params))
    state = json.loads(progress.read_text())
    section = next((f for f in report.families if f.family == WalSweep.name), None)
    if section is None or section.status != "done":
        raise SystemExit(f"{profile}: the sweep did not finish ({section.reason if section else 'no section'}); "
                         f"its progress stays in {progress}")
    progress.unlink()
    return {**run, **{k: state[k] for k in ("samples", "warmups", "blocks", "failed", "today", "shared_buffers_kb",
                                            "major", "cells", "standby")},
            "probe_wall_s": round(statistics.median(state["seconds"]), 2) if state["seconds"] else None}


def session(profile: str, params: dict[str, Any], seed: int) -> dict[str, Any]:
    """One cold session of the shipped WAL family (default policy) on a fresh sandbox, its standby detached — in a
    process of its own (``--one-session``): a session installs its signal handlers, which only a main thread may."""
    proc = subprocess.run([sys.executable, __file__, "--one-session", profile, "--seed", str(seed),
                           "--params", json.dumps(params)], capture_output=True, text=True, cwd=ROOT, timeout=7200)
    if proc.returncode != 0 or not proc.stdout.strip():
        return {"seed": seed, "error": f"exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def one_session(profile: str, params: dict[str, Any], seed: int) -> dict[str, Any]:
    report, run = in_sandbox(ColdWal, profile, 1, f"wal-{seed}", policy=policy_for(params), seed=seed)
    fam = next((f for f in report.families if f.family in (wal.FAMILY, ColdWal.name)), None)  # the outcome says "wal"
    if fam is None or fam.status != "done":
        return {"seed": seed, "error": fam.reason if fam else "no family outcome"}
    recs = [{"knob": r.knob, "decision": r.decision, "current": r.current, "recommended": r.recommended}
            for r in report.recommendations]
    probes = sum(1 for t in report.trials if t.phase in ("search", "confirm"))
    section = next((s for n in (ColdWal.name, wal.FAMILY) if isinstance(s := report.sections.get(n), WalSection)),
                   WalSection())
    scaling = [{"clients": p.clients, "rows_per_tx": p.rows_per_tx, "tps_today": p.tps_current,
                "tps_recommended": p.tps_recommended} for p in section.wal_scaling]
    return {"seed": seed, **run, "recommendations": recs, "probes": probes, "scaling": scaling,
            "flush": flush_sentence(section.wal_contention, section.wal_scaling), "summary": section.wal_summary}


def answers_of(measured: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every answer to score: each finished session's, then the fixed rules'."""
    ts = measured["truth_sweep"]
    today = ts["today"]
    return {**{f"tuner {s['seed']}": session_answer(s["recommendations"], today)
               for s in measured["sessions"] if "error" not in s},
            **peers(today, ts["shared_buffers_kb"], ts["major"])}


def answer_cells(measured: dict[str, Any]) -> list[dict[str, Any]]:
    """The cells of the answers' sweep: today's, the grid truth's best cell at each load, and every answer as it
    was given (an off-grid value too: 256 µs is not scored as its nearest grid cell, 100 µs, but measured) —
    once each, in that order."""
    ts = measured["truth_sweep"]
    today, grid_cells = ts["today"], ts["cells"]
    by_label = {label(c, today): c for c in grid_cells}
    scored = score_answers(ts["samples"], ts["min_effect"], grid_cells, today, {})
    out: list[dict[str, Any]] = []
    for c in [dict(today), *(by_label[p["best"]] for p in scored["per_load"].values()), *answers_of(measured).values()]:
        c = {k: c[k] for k in KNOBS if k in c}
        if c not in out:
            out.append(c)
    return out


def score_profile(measured: dict[str, Any]) -> dict[str, Any]:
    """The grid truth's verdicts (off-grid answers at their nearest cell) and, where the answers were measured in a
    sweep of their own beside today's and each load's best cell (``answer_sweep``), the verdicts of that sweep: the
    answers exactly as given, against the best re-measured on the same sandbox."""
    ts = measured["truth_sweep"]
    today, cells = ts["today"], ts["cells"]
    answers = answers_of(measured)
    out = {"profile": measured["profile"], "wall_s": ts["wall_s"], "load": ts["load"], "probe_wall_s": ts["probe_wall_s"],
           "standby": ts["standby"], "cells": len(cells), **score_answers(ts["samples"], ts["min_effect"], cells, today, answers)}
    asw = measured.get("answer_sweep")
    if asw:
        out["same_sweep"] = {"wall_s": asw["wall_s"], "load": asw["load"], "cells": len(asw["cells"]),
                             **score_answers(asw["samples"], ts["min_effect"], asw["cells"], today, answers)}
    return out


def answer_sweep(profile: str, params: dict[str, Any], cells: list[dict[str, Any]], progress: Path) -> dict[str, Any]:
    """The answers' sweep over ``cells`` (:func:`answer_cells`) on a fresh sandbox, with the truth's stopping rule."""
    WalSweep.cells = cells
    try:
        return sweep(profile, {**params, "answer_cells": cells}, progress)
    finally:
        WalSweep.cells = None


def table(results: dict[str, dict[str, Any]]) -> str:
    """Markdown: a column per profile; the truth per load, then each answer's worst regret and verdicts."""
    profs = list(results)
    loads = sorted({ld for r in results.values() for ld in r["per_load"]}, key=lambda s: tuple(int(x) for x in s.split("x")))
    lines = ["| rows x clients | " + " | ".join(profs) + " |", "|---|" + "---|" * len(profs)]
    for ld in loads:
        def cell(r: dict[str, Any]) -> str:
            p = r["per_load"].get(ld)
            return "—" if p is None else (f"{p['best']}: {p['best_tps']:.0f} TPS, today {p['gain_over_today']:+.1%} "
                                          f"slower; ±{p['widest_half_width']:.1%}")
        lines.append(f"| truth {ld}: best cell, its TPS | " + " | ".join(cell(results[p]) for p in profs) + " |")
    names = sorted({n for r in results.values() for n in r["overall"]})
    for n in names:
        def ans(r: dict[str, Any]) -> str:
            o = r["overall"].get(n)
            if o is None or o["worst_regret"] is None:
                return "—"
            h = "".join(f"; {rows}x{clients}: {head['regret']:.1%} ({head['verdict']}, {head['hit_chance']:.2f})"
                        for rows, clients in HEADLINES
                        if (head := r["per_load"].get(f"{rows}x{clients}", {}).get("answers", {}).get(n)))
            return f"{o['cell']}: worst {o['worst_regret']:.1%}, hit at {o['hits']}/{o['loads']} loads{h}"
        lines.append(f"| {n} | " + " | ".join(ans(results[p]) for p in profs) + " |")
    if any("same_sweep" in r for r in results.values()):
        lines.append("| **the answers measured as given, beside today's and each load's best cell, in one sweep** | "
                     + " | ".join(f"{r['same_sweep']['cells']} cells" if "same_sweep" in r else "—"
                                  for r in results.values()) + " |")
        for n in names:
            lines.append(f"| {n} (as given) | " + " | ".join(ans(r["same_sweep"]) if "same_sweep" in r else "—"
                                                             for r in results.values()) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profiles", default=";".join(PROFILES), help="device profiles separated by ';'")
    ap.add_argument("--sessions", type=int, default=3)
    ap.add_argument("--max-repeats", type=int, default=sc.MAX_REPEATS)
    ap.add_argument("--loads", type=parse_loads, default=LOADS, metavar="ROWSxCLIENTS,...",
                    help="the loads to measure (default: 10 and 1000 rows at 1, 4, 16, 64 clients); include the "
                         "family's own (10x8 by default) to score its answer where it searched")
    ap.add_argument("--quick", action="store_true", help="smoke: local, 2 cells x 2 loads, 2-3 repeats, 1 session")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "measured" / "wal")
    ap.add_argument("--force", action="store_true", help="measure again what --out already holds")
    ap.add_argument("--one-session", metavar="PROFILE", help=argparse.SUPPRESS)  # session(): one, printed as JSON
    ap.add_argument("--seed", type=int, default=4600, help=argparse.SUPPRESS)
    ap.add_argument("--params", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one_session:
        print(json.dumps(one_session(args.one_session, json.loads(args.params), args.seed), default=str))
        return
    if os.geteuid() != 0:
        raise SystemExit("wal_truth.py needs root (the sandboxes' loop devices and device profiles): run it with sudo")
    quick = args.quick
    profiles = ["local"] if quick else [p for p in args.profiles.split(";") if p]
    out = args.out / "smoke" if quick else args.out
    out.mkdir(parents=True, exist_ok=True)
    params = {"quick": quick, "loads": [list(x) for x in ([(10, 1), (10, 4)] if quick else args.loads)],
              "duration_s": 0.5 if quick else 2.0, "warmup_s": 0.2 if quick else 0.5,
              "min_repeats": 2 if quick else sc.MIN_REPEATS, "max_repeats": 3 if quick else args.max_repeats}
    results = {}
    for profile in profiles:
        slug = profile.replace("=", "-").replace(",", "+")
        path, progress = out / f"{slug}.json", out / f"{slug}.progress.json"
        if args.force:
            progress.unlink(missing_ok=True)
        measured = resume(path, profile, params, "WAL truth sweep", lambda: sweep(profile, params, progress),
                          lambda seed: session(profile, params, seed), 1 if quick else args.sessions, force=args.force)
        cells = answer_cells(measured) if measured["sessions"] else []
        if cells and measured.get("answer_sweep", {}).get("cells") != cells:
            print(f"{profile}: the answers' sweep ({len(cells)} cells)", file=sys.stderr, flush=True)
            measured["answer_sweep"] = answer_sweep(profile, params, cells, out / f"{slug}.answers.progress.json")
            path.write_text(json.dumps(measured, indent=1) + "\n")
        results[profile] = score_profile(measured)
    md = table(results)
    (out / "summary_wal.json").write_text(json.dumps(results, separators=(",", ":")) + "\n")
    (out / "wal_truth.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
