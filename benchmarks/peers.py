"""Peers, honestly labelled, for ``devices.py --cloud``'s table (issue #54 item 5; pure: no PostgreSQL).

Rows are methods, columns are profiles × PostgreSQL versions measured, and a cell is a regret with its 95 %
interval and its hit verdict:

* **fixed rules**, as each tool emits them for the truth's PostgreSQL major version: PostgreSQL's own default,
  PGTune (by the storage type an operator would pick: ``devices_score.storage_type``), timescaledb-tune, and the
  folklore "256";
* **searching peers** at tuner's total probe budget (the median of its sessions' ``probes``): the seed thread's
  method (every grid value once, in ascending order, the fastest reading: /work/shared/seeds/000, a shell loop over
  eic 0..256), Optuna's TPE, and random search;
* **tuner**, its cold sessions' answers as applied (``devices_score.applied``).

**Out of sample.** A searching peer must not be scored on the very readings it searched on (its noise would be
scored as signal). Each cell's repeats, in the order they were measured, are split in two halves: the readings at
even positions (0, 2, 4, …: the *search half*) are the only ones a searching peer's probe may draw, and the readings
at odd positions (1, 3, 5, …: the *held-out half*) define the cell means every method — rule, searcher and tuner —
is scored on. Alternating positions, rather than first half / second half, puts early and late blocks on both sides
of the split, so drift over the sweep does not separate them. tuner's sessions ran on sandboxes of their own, so
they are out of sample already; scoring them on the same held-out half keeps one truth per column.

**Interval and verdict** (as ``devices_score``): the held-out repeats of every cell are resampled with replacement
(``BOOT`` times); in each bootstrap truth the regret is found again and whether the answer is within min_effect of
the best. The interval is the 2.5–97.5 % percentiles of the regret; the verdict is hit (≥ 95 % of bootstrap truths),
miss (≤ 5 %) or unresolved. A searching peer's regret is its mean over ``REPLAYS`` seeded replays, and its verdict
the shares of its replays whose answer is a hit, a miss or unresolved. A column whose held-out half has a cell with
fewer than two readings has no interval: every verdict there is unresolved (``--quick``'s 2-3 repeats).
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from benchmarks import devices_score as sc

BOOT = 400
REPLAYS = 100
SEED = 54

# PostgreSQL's own defaults: effective_io_concurrency 1 up to 17, 16 from 18 (with io_method = worker, io_workers 3).
PG_DEFAULT_EIC = {15: 1, 16: 1, 17: 1, 18: 16, 19: 16}

# PGTune, le0pard/pgtune at commit 7caef27c204d304623eda21f23e7d56c1ad78d36,
# src/features/configuration/configurationSlice.js: selectEffectiveIoConcurrency gives, on Linux only (null
# elsewhere), hdd 2, ssd 200, san 300, nvme 1000 — the same for every PostgreSQL version; selectIoMethod gives
# nothing below 18 and "io_uring" on Linux from 18 ("worker" on Windows and macOS); selectIoWorkers gives nothing
# when io_method is io_uring (and below 18; otherwise min(32, max(3, cpus // 4)) when that exceeds 3).
PGTUNE_EIC = {"hdd": 2, "ssd": 200, "san": 300, "nvme": 1000}

# timescaledb-tune, timescale/timescaledb-tune at commit c7a642bd4e16d48a51c060a43dc6dff864cb42d7,
# pkg/pgtune/misc.go: getEffectiveIOConcurrency / MiscRecommender.Recommend(EffectiveIOKey) gives 200 for
# PostgreSQL 9.6-12 and 256 from 13 on (since d8fa43c2, "Update effective_io_concurrency value for v13"), whatever
# the disk, on Linux only; it emits no io_method or io_workers.
def timescaledb_tune_eic(major: int) -> int:
    return 200 if major <= 12 else 256


FOLKLORE = 256


def rules(profile: str, major: int) -> dict[str, dict[str, Any]]:
    """Every fixed rule for ``profile`` on PostgreSQL ``major``: the label the table shows (the settings the tool
    emits) and the eic it is scored at."""
    storage = sc.storage_type(profile)
    pgtune_eic = PGTUNE_EIC[storage]
    pgtune_io = ", io_method io_uring, no io_workers" if major >= 18 else ""
    default = PG_DEFAULT_EIC.get(major, 16 if major >= 18 else 1)
    return {
        "postgresql_default": {"label": f"PostgreSQL's default (eic {default}"
                                        + (", io_method worker, io_workers 3)" if major >= 18 else ")"),
                               "eic": default, "io_method": "worker" if major >= 18 else None},
        "pgtune": {"label": f"PGTune ({storage}: eic {pgtune_eic}{pgtune_io})", "eic": pgtune_eic,
                   "io_method": "io_uring" if major >= 18 else None},
        "timescaledb_tune": {"label": f"timescaledb-tune (eic {timescaledb_tune_eic(major)})",
                             "eic": timescaledb_tune_eic(major), "io_method": None},
        "folklore_256": {"label": f'folklore "256" (eic {FOLKLORE})', "eic": FOLKLORE, "io_method": None},
    }


def split(samples: Mapping[int, Sequence[float]]) -> tuple[dict[int, list[float]], dict[int, list[float]]]:
    """Each cell's repeats (in measured order) split: even positions to search on, odd positions held out."""
    search = {v: list(xs[0::2]) for v, xs in samples.items() if xs}
    held = {v: list(xs[1::2]) for v, xs in samples.items() if xs}
    return search, held


# --- the searching peers: each returns the grid value it would set ---------------------------------------------


def seeds_method(search: Mapping[int, Sequence[float]], rng: random.Random) -> int:
    """The seed thread's loop: each grid value once, in ascending order, one reading each; the fastest."""
    readings = [(rng.choice(list(search[v])), v) for v in sorted(search)]
    return min(readings)[1]


def random_search(search: Mapping[int, Sequence[float]], budget: int, rng: random.Random) -> int:
    """``budget`` probes at grid values drawn without replacement (a grid smaller than the budget is visited whole,
    then values drawn again); the value with the lowest mean of its readings."""
    grid = sorted(search)
    order = rng.sample(grid, len(grid))
    seen: dict[int, list[float]] = {}
    for i in range(budget):
        v = order[i] if i < len(order) else rng.choice(grid)
        seen.setdefault(v, []).append(rng.choice(list(search[v])))
    return min(seen, key=lambda v: statistics.fmean(seen[v]))


def optuna_tpe(search: Mapping[int, Sequence[float]], budget: int, seed: int) -> int:
    """Optuna's TPE sampler over the grid (a categorical), ``budget`` trials, each a reading drawn from the search
    half; its best trial's value."""
    import optuna  # a benchmark-only dependency (the [bench] extra)

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rng = random.Random(seed)
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed, n_startup_trials=min(5, budget)))
    grid = sorted(search)
    study.optimize(lambda trial: rng.choice(list(search[trial.suggest_categorical("eic", grid)])), n_trials=budget)
    return int(study.best_params["eic"])


def have_optuna() -> bool:
    try:
        import optuna  # noqa: F401
    except ImportError:
        return False
    return True


def searchers(budget: int) -> dict[str, Callable[[Mapping[int, Sequence[float]], random.Random, int], int]]:
    """The searching peers by name, each ``(search half, rng, seed) -> answer``. TPE only where Optuna imports; the
    table says so where it does not."""
    out: dict[str, Callable[[Mapping[int, Sequence[float]], random.Random, int], int]] = {
        "seeds_method": lambda s, rng, seed: seeds_method(s, rng),
        "random_search": lambda s, rng, seed: random_search(s, budget, rng),
    }
    if have_optuna():
        out["optuna_tpe"] = lambda s, rng, seed: optuna_tpe(s, budget, seed)
    return out


# --- scoring on the held-out half -------------------------------------------------------------------------------


def _pct(xs: Sequence[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def _scorer(held: Mapping[int, Sequence[float]], min_effect: float, answers: Sequence[float], *,
            boot: int, seed: int) -> tuple[dict[float, float], dict[float, list[float]], dict[float, str], bool]:
    """For every distinct answer: its regret on the held-out means, its regrets in ``boot`` bootstrap truths, and
    its verdict; and whether the held-out half can give an interval at all (every cell with two readings)."""
    distinct = sorted(set(answers))
    t = sc.truth(held, min_effect)
    point = {a: sc.score(t, a)["regret"] for a in distinct}
    resolvable = min(len(xs) for xs in held.values()) >= 2
    boots: dict[float, list[float]] = {a: [] for a in distinct}
    hits = dict.fromkeys(distinct, 0)
    rng = random.Random(seed)
    for _ in range(boot if resolvable else 0):
        bt = sc.truth({v: [rng.choice(list(xs)) for _ in xs] for v, xs in held.items()}, min_effect)
        for a in distinct:
            s = sc.score(bt, a)
            boots[a].append(s["regret"])
            hits[a] += bool(s["hit"])
    verdicts = {a: sc.verdict(hits[a] / boot) if resolvable else "unresolved" for a in distinct}
    return point, boots, verdicts, resolvable


def _cell(point: float, boot: list[float], verdict: str | dict[str, float]) -> dict[str, Any]:
    return {"regret": round(point, 4),
            "interval": [round(_pct(boot, 0.025), 4), round(_pct(boot, 0.975), 4)] if boot else None,
            "verdict": verdict}


def column(samples: Mapping[int, Sequence[float]], min_effect: float, *, profile: str, major: int,
           tuner_answers: Sequence[float], budget: int, replays: int = REPLAYS, boot: int = BOOT,
           seed: int = SEED) -> dict[str, Any]:
    """One column of the table: every method's regret, interval and verdict on the held-out half of ``samples``
    (grid value -> readings in measured order)."""
    search, held = split(samples)
    fixed = rules(profile, major)
    runs: dict[str, list[int]] = {}
    for name, method in searchers(budget).items():
        runs[name] = [method(search, random.Random(f"{seed}/{name}/{i}"), seed + i) for i in range(replays)]
    answers = [r["eic"] for r in fixed.values()] + list(tuner_answers) + [a for rs in runs.values() for a in rs]
    point, boots, verdicts, resolvable = _scorer(held, min_effect, answers, boot=boot, seed=seed)
    nboot = len(next(iter(boots.values()))) if boots else 0

    def mean_over(ans: Sequence[float], agg: Callable[[Sequence[float]], float]) -> dict[str, Any]:
        boot_vals = [agg([boots[a][b] for a in ans]) for b in range(nboot)]
        return _cell(agg([point[a] for a in ans]), boot_vals, "")

    out: dict[str, Any] = {}
    for name, r in fixed.items():
        out[name] = {**_cell(point[r["eic"]], boots[r["eic"]], verdicts[r["eic"]]), "label": r["label"],
                     "answer": r["eic"]}
    for name, rs in runs.items():
        shares = {k: round(sum(verdicts[a] == k for a in rs) / len(rs), 3) for k in ("hit", "miss", "unresolved")}
        out[name] = {**mean_over(rs, statistics.fmean), "verdict": shares, "runs": len(rs),
                     "probes": len(search) if name == "seeds_method" else budget,
                     "answers": dict(sorted({a: rs.count(a) for a in set(rs)}.items()))}
    if tuner_answers:
        out["tuner"] = {**mean_over(tuner_answers, statistics.median),
                        "verdict": {k: sum(verdicts[a] == k for a in tuner_answers)
                                    for k in ("hit", "miss", "unresolved")},
                        "answers": list(tuner_answers)}
    held_n = [len(xs) for xs in held.values()]
    return {"profile": profile, "major": major, "budget": budget, "resolvable": resolvable, "optuna": have_optuna(),
            "split": {"search": [len(xs) for xs in search.values()], "held_out": held_n},
            "held_out_best": min(held, key=lambda v: statistics.fmean(held[v])), "methods": out}


LABELS = {"seeds_method": "the seeds' method (each eic once, in order; the fastest)",
          "random_search": "random search", "optuna_tpe": "Optuna TPE", "tuner": "tuner (median of its sessions)"}


def _fmt(c: dict[str, Any]) -> str:
    iv = f" [{c['interval'][0]:.1%}, {c['interval'][1]:.1%}]" if c.get("interval") else " [no interval]"
    v = c["verdict"]
    if isinstance(v, str):
        said = v
    elif "runs" in c:  # shares of a searcher's replays
        said = " ".join(f"{k} {v[k]:.0%}" for k in ("hit", "miss", "unresolved") if v[k])
    else:  # tuner's sessions, counted
        said = "/".join(str(v[k]) for k in ("hit", "miss", "unresolved")) + " h/m/u"
    return f"{c['regret']:.1%}{iv} {said}"


def table(columns: Mapping[str, Mapping[str, Any]]) -> str:
    """Markdown: rows methods, columns profiles × versions, then the summed regret per method (point estimates)."""
    cols = list(columns.values())
    names = list(dict.fromkeys(n for c in cols for n in c["methods"]))
    head = "| out of sample: regret [95 % interval] verdict | " + " | ".join(
        f"{k} (budget {c['budget']})" for k, c in columns.items()) + " | summed regret |"
    lines = [head, "|---|" + "---|" * (len(cols) + 1)]
    for n in names:
        label = next((c["methods"][n].get("label") for c in cols if n in c["methods"]), None) or LABELS.get(n, n)
        cells = [_fmt(c["methods"][n]) if n in c["methods"] else "—" for c in cols]
        total = sum(c["methods"][n]["regret"] for c in cols if n in c["methods"])
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {total:.3f} |")
    if not all(c["optuna"] for c in cols):
        lines.append("| Optuna TPE | not run: optuna does not import here (random search stands in) |"
                     + " |" * len(cols))
    split_note = "; ".join(f"{k}: search {sum(c['split']['search'])}, held out {sum(c['split']['held_out'])}"
                           + ("" if c["resolvable"] else " (a held-out cell has < 2 readings: no interval)")
                           for k, c in columns.items())
    return "\n".join(lines) + f"\n\nReadings per half (even positions searched, odd held out): {split_note}.\n"
