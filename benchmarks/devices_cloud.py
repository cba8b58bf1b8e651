"""Truths on cloud-shaped volumes, precise enough to decide (issue #54 item 2): ``devices.py --cloud``.

    sudo python benchmarks/devices.py --cloud            # gp3, gp2-100g, io2, pd-balanced, hdd, ram at their scales
    sudo python benchmarks/devices.py --cloud --quick    # smoke: gp3@1 and gp2-100g@1, 2-3 repeats, 1 session

Per profile (a cloud shorthand, tuner/sandbox/device/cloud.py; each on its own sandbox, PostgreSQL 15), as
devices.py's 1-D part but precise:

* **per cell, repeat until its 95 % interval's half-width is at most 2.5 % of its mean** (half the 5 % that defines
  a hit), at least 5 probes and at most 20 (the cap: with a second per probe plus a restart and a cache drop, 20
  repeats of 12 cells take 10-15 min a profile); a cell stopped by the cap is reported with the half-width it
  reached. Cells are probed in blocks: the first 5 visit every cell, later ones only the cells still too wide;
* **a fresh random order per profile and per block** (seeded by both, so a resumed run repeats it), not one shuffle
  seed for every profile (with one seed eic 64 always ran first: 14-31 % slow on three profiles);
* **a warm-up probe after each (re)start of the sweep's sandbox** — the first run and every resume — at a random
  cell, not scored; its time against its cell's mean is recorded, to show whether it would have biased the cell;
* **scales where a probe lasts >= 1 s** even at the best eic: ``devices_score.scale_for`` (reads per probe per unit
  of scale x the fastest a read is served on the profile); the best cell's measured mean is recorded, and a
  profile whose best cell ran under a second is flagged (``short_probes``) — ram, whose scale is capped at 150;
* **verdicts with their bootstrap probability**: each answer's share of bootstrap truths (every cell's repeats
  resampled) in which it is a hit; >= 95 % is a hit, <= 5 % a miss, anything between **unresolved** — neither a
  hit nor a miss. Sessions and fixed rules alike.
* **peers, honestly labelled, out of sample** (benchmarks/peers.py): the fixed rules as PGTune and
  timescaledb-tune emit them for the truth's major version, "256", PostgreSQL's default, and the seeds' method, Optuna
  TPE and random search at tuner's total probe budget — the searchers probe each cell's even-position repeats, and
  every method is scored on the odd-position (held-out) ones, with a bootstrap interval and a verdict.

Resumable: one JSON per profile in ``--out`` (``benchmarks/measured/devices/cloud/``; ``--quick``: its ``smoke/``),
complete once the sweep and every cold session are in; the sweep's progress is written after every probe
(``<profile>.progress.json``), so an interrupted sweep resumes where it stopped (after a new warm-up).
``summary_cloud.json`` holds the table (rows: methods; columns: profiles), printed as Markdown.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from benchmarks import devices_score as sc
from benchmarks import peers as pe
from benchmarks.devices_run import eic_sweep_probe, in_sandbox, md_table, resume, scored, scored_profile
from tuner.families.base import Family, FamilyContext, FamilyResult, Needs
from tuner.families.concurrency import KNOB
from tuner.report.model import FamilyOutcome
from tuner.sandbox.device import parse_profile
from tuner.sandbox.device.cloud import SHORTHANDS

PG15_DEFAULT_EIC = 1
QUICK = ("gp3@1", "gp2-100g@1")


def parts_of(profile: str) -> dict[str, Any]:
    """What :func:`devices_score.scale_for` needs to know of a profile."""
    p = parse_profile(profile)
    return {"hdd": p.hdd, "layered": p.layered, "read_iops": p.read_iops, "read_mbps": p.read_mbps}


def default_specs() -> list[str]:
    """Every cloud shorthand at the scale where its best probe lasts about a second."""
    return [f"{name}@{sc.scale_for(parts_of(name))}" for name in SHORTHANDS]


def _save(path: Path, doc: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc) + "\n")
    os.replace(tmp, path)


class PreciseSweep(Family):
    """The concurrency family's cold probe at every grid value until each cell is precise (or at the cap), in
    blocks of fresh random orders, after an unscored warm-up; progress kept in :attr:`progress` after every probe.
    Registered only inside this benchmark."""

    name: ClassVar[str] = "devsweepcloud"
    needs: ClassVar[Needs] = Needs(local_host=True)
    after: ClassVar[tuple[str, ...]] = ()
    summary: ClassVar[str] = "effective_io_concurrency at every grid value, cold, until precise (benchmarks/devices_cloud.py)"
    profile: ClassVar[str] = ""
    progress: ClassVar[Path] = Path("/nonexistent")
    params: ClassVar[dict[str, Any]] = {}

    def applicable(self, ctx: FamilyContext) -> str | None:
        return None

    async def run(self, ctx: FamilyContext) -> FamilyResult:
        planned = await eic_sweep_probe(ctx, self.name)
        if isinstance(planned, FamilyResult):
            return planned
        probe, queries, cache = planned
        state = load_progress(self.progress, self.params)
        p = self.params
        warm = random.Random(f"{self.profile}/warmup/{len(state['warmups'])}").choice(sc.GRID)
        t = await probe({KNOB: warm})
        state["warmups"].append({"eic": warm, "ms": t.value if t.status == "ok" else None, "block": state["blocks"]})
        _save(self.progress, state)
        samples, attempts = state["samples"], state["attempts"]

        def open_cells() -> list[int]:
            return [v for v in sc.GRID if attempts[str(v)] < 2 * p["max_repeats"]
                    and sc.needs_more(samples[str(v)], precision=p["precision"], min_n=p["min_repeats"],
                                      max_n=p["max_repeats"])]

        while state["order"] or open_cells():
            if not state["order"]:  # a new block: the cells still too wide, in this block's own order
                state["order"] = sc.block_order(open_cells(), self.profile, state["blocks"])
            while state["order"]:
                v = state["order"][0]
                t = await probe({KNOB: v})
                attempts[str(v)] += 1
                if t.status == "ok" and t.value is not None:
                    samples[str(v)].append(t.value)
                else:
                    state["failed"] += 1
                state["order"].pop(0)
                _save(self.progress, state)
            state["blocks"] += 1
            _save(self.progress, state)
            print(f"  {self.profile}: block {state['blocks']} done, {len(open_cells())} cells still open",
                  file=sys.stderr, flush=True)
        return FamilyResult(FamilyOutcome(family=self.name, status="done", reason="sweep finished",
                                          workload=[q.sql for q in queries], cache=cache.describe()), trials=[])


def load_progress(path: Path, params: dict[str, Any]) -> dict[str, Any]:
    """The sweep's progress at ``path`` if it was made with ``params``, else a fresh start."""
    try:
        state: dict[str, Any] = json.loads(path.read_text())
        if state.get("params") == params:
            return state
    except (OSError, ValueError):
        pass
    return {"params": params, "samples": {str(v): [] for v in sc.GRID}, "attempts": {str(v): 0 for v in sc.GRID},
            "blocks": 0, "order": [], "warmups": [], "failed": 0}


def sweep(profile: str, scale: int, params: dict[str, Any], progress: Path) -> dict[str, Any]:
    """The precise truth for one profile (resumed from ``progress`` where it stopped)."""
    PreciseSweep.profile, PreciseSweep.progress, PreciseSweep.params = profile, progress, params
    report, run = in_sandbox(PreciseSweep, profile, scale, "cloud")
    state = json.loads(progress.read_text())
    section = next((f for f in report.families if f.family == PreciseSweep.name), None)
    samples = {int(k): v for k, v in state["samples"].items() if v}
    if not samples or (section is not None and section.status != "done"):
        raise SystemExit(f"{profile}: the sweep did not finish ({section.reason if section else 'no section'}); "
                         f"its progress stays in {progress}")
    progress.unlink()
    return {**run, "samples": samples, "warmups": state["warmups"], "blocks": state["blocks"],
            "failed": state["failed"], "workload": section.workload if section else None,
            "cache": section.cache if section else None}


def score_cloud(samples: dict[str, list[float]], min_effect: float, sessions: list[dict[str, Any]],
                *, profile: str, warmups: list[dict[str, Any]], major: int = 15) -> dict[str, Any]:
    """The truth with each cell's precision; every session's and fixed rule's regret with its verdict (hit, miss or
    unresolved, and the bootstrap probability behind it), on all the truth's readings; and ``peers_oos``: every method,
    searching peers included, scored out of sample on the held-out half of the readings (benchmarks/peers.py)."""
    s_int = {int(k): v for k, v in samples.items()}
    t = sc.truth(s_int, min_effect)
    for v, c in t["cells"].items():
        c["half_width"] = round(sc.half_width(s_int[v]), 4)
    done = [s for s in sessions if "error" not in s and not s.get("warm")]
    out = []
    for s in done:
        today_hit = sc.score(t, s["current"])["hit"]
        out.append({**s, **sc.score(t, sc.applied(s, s["current"])),
                    "decision_agrees": (s["decision"] == "change") == (not today_hit)})
    # The fixed rules as each tool emits them for this major version (benchmarks/peers.py cites their sources).
    rules = {n: r["eic"] for n, r in pe.rules(str(parse_profile(profile)), major).items()}
    scored_rules = {n: sc.score(t, v) for n, v in rules.items()}
    answers = [s["answer"] for s in out] + list(rules.values()) + [t["best"]]
    chances = sc.hit_chances(s_int, min_effect, answers)
    for item, c in zip([*out, *scored_rules.values()], chances):
        item["hit_chance"], item["verdict"] = c, sc.verdict(c)
    by_cell = {int(k): c["mean_ms"] for k, c in t["cells"].items()}
    # The searching peers get tuner's total probe budget: the median of its sessions' probes, search and
    # confirmation alike (20, devices.py's 1-D default, where no session ran).
    budget = round(statistics.median(s["probes"] for s in out)) if out else 20
    return {"truth": t, "sessions": out, "rules": scored_rules, "truth_best_chance": chances[-1],
            "short_probes": t["best_ms"] < 1000,
            "warmups": [{**w, "vs_cell": round(w["ms"] / by_cell[w["eic"]] - 1, 3)} for w in warmups
                        if w.get("ms") is not None and w["eic"] in by_cell],
            # The in-sample replays (devices_score.replayed) are left out here: the out-of-sample table replaces them.
            "peers": {},
            "peers_oos": pe.column(s_int, min_effect, profile=str(parse_profile(profile)), major=major,
                                   tuner_answers=[s["answer"] for s in out], budget=budget)}


def run(profile: str, scale: int, params: dict[str, Any], sessions: int, out: Path,
        session: Callable[[str, int, int], dict[str, Any]], *, force: bool = False,
        score_only: bool = False) -> dict[str, Any]:
    """Measure (or resume) one profile's precise truth and cold sessions into ``out``, and score them."""
    slug = profile.replace("=", "-").replace(",", "+")
    path, progress = out / f"{slug}.json", out / f"{slug}.progress.json"
    if force and not score_only:
        progress.unlink(missing_ok=True)
    measured = resume(path, profile, {**params, "scale": scale}, f"precise truth sweep ({len(sc.GRID)} values, "
                      f"{params['min_repeats']}-{params['max_repeats']} repeats)",
                      lambda: sweep(profile, scale, params, progress),
                      lambda seed: session(profile, scale, seed), sessions, force=force, score_only=score_only)
    major = int(measured["truth_sweep"].get("server_version_num") or 150000) // 10000
    result = scored_profile(measured, scale, lambda s, m, ss: score_cloud(
        s, m, ss, profile=profile, warmups=measured["truth_sweep"].get("warmups", []), major=major))
    return {**result, "parts": parse_profile(profile).described}


def _v(x: dict[str, Any]) -> str:
    return f"{x['regret']:.1%} ({x['verdict']}, {x['hit_chance']:.2f})"


def table(results: dict[str, dict[str, Any]]) -> str:
    """Markdown: a column per profile; the truth's precision, tuner's verdicts, the fixed rules' and the peers'."""
    def cells(r: dict[str, Any]) -> list[dict[str, Any]]:
        return list(r["truth"]["cells"].values())

    rows = [
        ("profile's parts", lambda r: r["parts"]),
        ("truth: best eic (within 5 %): mean, median ms",
         lambda r: f"{r['truth']['best']} ({','.join(map(str, r['truth']['truth_set']))}): "
                   f"{r['truth']['best_ms']:.0f}, {r['truth']['cells'][r['truth']['best']]['median_ms']:.0f}"
                   + (" (under 1 s)" if r["short_probes"] else "")),
        ("cells within ±2.5 %; widest half-width; probes per cell",
         lambda r: f"{sum(c['half_width'] <= sc.PRECISION for c in cells(r))}/{len(cells(r))}; "
                   f"{max(c['half_width'] for c in cells(r)):.1%}; "
                   f"{min(c['n'] for c in cells(r))}-{max(c['n'] for c in cells(r))}"),
        ("the truth's own best is a hit in (bootstrap)", lambda r: f"{r['truth_best_chance']:.0%}"),
        ("unscored warm-up vs its cell", lambda r: "; ".join(f"eic {w['eic']}: {w['vs_cell']:+.0%}"
                                                             for w in r["warmups"]) or "—"),
        ("tuner: median regret", lambda r: f"{statistics.median(s['regret'] for s in scored(r)):.1%}"
                                           if scored(r) else "—"),
        ("tuner: each session (verdict, P(hit))", lambda r: "; ".join(f"eic {s['answer']}: {_v(s)}"
                                                                     for s in scored(r)) or "—"),
        ("tuner: hit / miss / unresolved", lambda r: "/".join(str(sum(s["verdict"] == k for s in scored(r)))
                                                              for k in ("hit", "miss", "unresolved"))),
    ]
    md = md_table("PostgreSQL 15, eic (precise truths)", {p: {**r, "rules": {}} for p, r in results.items()}, rows)
    names = list(next(iter(results.values()))["rules"])
    md += "".join(f"| {n} (all readings) | " + " | ".join(_v(r["rules"][n]) for r in results.values()) + " |\n"
                  for n in names)
    with_peers = {f"{p} · PG{r['peers_oos']['major']}": r["peers_oos"]
                  for p, r in results.items() if r.get("peers_oos")}
    if with_peers:
        md += "\n" + pe.table(with_peers)
    return md
