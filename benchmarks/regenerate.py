"""Run every benchmark docs/results.md reports, for today's code, in one command, and rewrite its figures.

usage: python benchmarks/regenerate.py [--only NAME ...] [--kept] [--list] [--out DIR] [--compare DIR] [--summary [DIR]]

Each run is one command of benchmarks/optimiser.py, confidence.py or adversary.py; this script holds them all —
surfaces, seeds, noise, search range, policy — so that a change to the optimiser can be re-measured on every
set at once (any change to tuner/optimiser/ makes every optimiser figure stale). It runs them one after the
other, prints each command and its wall time, writes each run's NAME.json, NAME.md (and for some NAME.png) into
--out, and, once that directory holds every run's JSON, rewrites the summary block of docs/results.md (between
its "<!-- summary" markers) from them: one row per run. That block is the one committed record of every run's
figures; `git diff docs/results.md` after a run shows what changed.

Result files are not committed, except the ten in KEPT below — the files docs/results.md's headline figures
come from, which the unit tests check its rows against. benchmarks/results/ (the default --out) ignores every
other file (its .gitignore lists the same ten).

The surfaces: the shipped ones, checks/, random/ and dev/ (the spent hold-out draws) are development sets; the
runs named holdout-* read surfaces/holdout/, the sealed hold-out set — run only to judge a change, never to
tune against (its README).

All 69 runs take about two and a half hours on two cores (157 minutes: the sum of the result files' duration_s
on 2026-12-05); each takes 0.3-6.1 minutes. Needs the bench extra (pip install -e '.[bench]': Optuna for TPE,
matplotlib for the plots).

options:
  --only NAME   run only this one (repeatable; names as --list prints them, e.g. random-cv0.10)
  --kept        only the runs whose result files are committed (KEPT; with --only, those too): about 21 minutes
  --list        print the names and commands (with --only or --kept: just those), run nothing
  --out DIR     write the result files here (default benchmarks/results/, unversioned but for KEPT)
  --compare DIR run nothing: say which of the committed (KEPT) result files differ from the ones in DIR in any
                figure (wall times aside), and where — e.g. after --out DIR, before replacing them
  --summary [DIR]
                run nothing: print the summary block (a Markdown table of the figures the issue judges, a row
                per run, and a line per confidence and adversary run) from the files in DIR (default
                benchmarks/results/)
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SURFACES = "benchmarks/surfaces"
RESULTS = ROOT / "benchmarks" / "results"
DOC = ROOT / "docs" / "results.md"
SUMMARY_START, SUMMARY_END = "<!-- summary: python benchmarks/regenerate.py --summary -->\n", "<!-- /summary -->"
# The committed result files (JSON only): the ones docs/results.md's headline figures come from — the shipped,
# check and random sets, the random set over the policy's range, the confirmation, the adversary's construction,
# and the established misses of a spent draw and of both sealed draws. Every other run's figures are its row
# in docs/results.md. benchmarks/results/.gitignore lists the same files.
KEPT = ("optimiser-cv0.05", "optimiser-cv0.10", "checks-cv0.10", "random-cv0.10", "policy-range-random-cv0.10",
        "confidence", "adversary-cv0.10", "dev-h1f-100seeds-cv0.10", "holdout-h1i-100seeds-cv0.10",
        "holdout-hb2d-100seeds-cv0.10")
# The six one-knob surfaces still below the sweep at 30 seeds when the flank rule landed, re-run at 100.
HARDEST = ["checks/vee48", "checks/tps-peak64-maximize", "checks/bimodal-2-128",
           "random/r11-two-basins", "random/r12-two-basins", "random/r01-valley"]
# Draws of surfaces/random/generate.py by file prefix, in the order they were made: five spent ones, now in
# surfaces/dev/, and the sealed one in surfaces/holdout/ (run only to judge a change, never to tune).
ONE_KNOB_DRAWS = [("dev", "h1d"), ("dev", "h1e"), ("dev", "h1f"), ("dev", "h1g"), ("dev", "h1h"), ("holdout", "h1i")]


@dataclass(frozen=True)
class Run:
    name: str  # result file stem
    script: str  # benchmarks/<script>.py
    args: tuple[str, ...]
    plot: bool = False
    draw: str = ""  # the generator draw it runs (a file prefix in surfaces/dev/ or surfaces/holdout/), if any

    @property
    def seeds(self) -> int:
        return int(self.args[self.args.index("--seeds") + 1]) if "--seeds" in self.args else 0

    def command(self, out: Path) -> list[str]:
        """The command line, run from the repository's root (paths under it are written relative to it)."""
        out = out.resolve()
        base = out.relative_to(ROOT) if out.is_relative_to(ROOT) else out
        cmd = [sys.executable, f"benchmarks/{self.script}.py", *self.args,
               "--json", str(base / f"{self.name}.json"), "--markdown", str(base / f"{self.name}.md")]
        if self.plot:
            cmd += ["--plot", str(base / f"{self.name}.png")]
        return cmd


def _draw(folder: str, draw: str, seeds: str, cv: str, only: tuple[str, ...] = ()) -> Run:
    """A run on one draw in surfaces/FOLDER/ (its files DRAW*.csv, or just ONLY): named FOLDER-DRAW-…, or
    FOLDER-ONLY-… for a single surface."""
    infix = "" if seeds == "30" else f"-{seeds}seeds"
    label = only[0] if len(only) == 1 else draw
    patterns = [f"{SURFACES}/{folder}/{s}.csv" for s in only] or [f"{SURFACES}/{folder}/{draw}*.csv"]
    return Run(f"{folder}-{label}{infix}-cv{cv}", "optimiser",
               (*[a for p in patterns for a in ("--surface", p)], "--seeds", seeds, "--noise-cv", cv), draw=draw)


def _runs() -> list[Run]:
    runs: list[Run] = []
    for cv in ("0.05", "0.10"):
        noise: tuple[str, ...] = ("--seeds", "30", "--noise-cv", cv)
        runs += [
            Run(f"optimiser-cv{cv}", "optimiser", noise, plot=True),
            Run(f"checks-cv{cv}", "optimiser", ("--surface", f"{SURFACES}/checks/*.csv", *noise), plot=True),
            Run(f"random-cv{cv}", "optimiser", ("--surface", f"{SURFACES}/random/*.csv", *noise), plot=True),
            _draw("dev", "h2d", "30", cv),
            _draw("holdout", "hb2d", "30", cv),
            Run(f"policy-range-cv{cv}", "optimiser", (*noise, "--range", "policy")),
            Run(f"gaps-100seeds-flank-rule-cv{cv}", "optimiser",
                (*[a for s in HARDEST for a in ("--surface", f"{SURFACES}/{s}.csv")],
                 "--seeds", "100", "--noise-cv", cv)),
            # The closest two-knob surfaces at 30 seeds, at 100: h2d04 (spent), hb2d01 and hb2d04 (sealed).
            _draw("dev", "h2d", "100", cv, ("h2d04",)),
            _draw("holdout", "hb2d", "100", cv, ("hb2d01", "hb2d04")),
        ]
        # The one-knob draws in the order they were made (surfaces/dev/README.md, surfaces/holdout/README.md),
        # each at 30 and 100 seeds.
        runs += [_draw(folder, draw, seeds, cv) for folder, draw in ONE_KNOB_DRAWS for seeds in ("30", "100")]
    policy = ("--seeds", "30", "--noise-cv", "0.10", "--range", "policy")
    runs += [
        Run("policy-range-checks-cv0.10", "optimiser", ("--surface", f"{SURFACES}/checks/*.csv", *policy)),
        Run("policy-range-random-cv0.10", "optimiser", ("--surface", f"{SURFACES}/random/*.csv", *policy)),
        # The same six at 100 seeds over the policy's range, with the sweep of that range for reference.
        Run("gaps-100seeds-policy-range-cv0.10", "optimiser",
            (*[a for s in HARDEST for a in ("--surface", f"{SURFACES}/{s}.csv")],
             "--seeds", "100", "--noise-cv", "0.10", "--range", "policy")),
        Run("confidence", "confidence", ("--reps", "1000")),
    ]
    # The constructive check that "every surface" cannot be met at 0.8 of the sweep's probes (adversary.py): the
    # shipped surfaces at both noise levels, and the random set at CV 10 %.
    for cv in ("0.05", "0.10"):
        runs.append(Run(f"adversary-cv{cv}", "adversary", ("--seeds", "30", "--noise-cv", cv)))
    runs.append(Run("adversary-random-cv0.10", "adversary",
                    ("--surface", f"{SURFACES}/random/*.csv", "--seeds", "30", "--noise-cv", "0.10")))
    # The storage-class policies (their own starts, budgets and stopping settings; today's value first) on the
    # shipped, check and random surfaces, at CV 5 and 10 %, on the grid; and on the random surfaces over the
    # policy's own range where that is wider than the grid (hdd's 0..256 is the grid's).
    for cv in ("0.05", "0.10"):
        for policy in ("ssd", "hdd", "network"):
            flags = ("--seeds", "30", "--noise-cv", cv, "--policy", policy)
            runs += [
                Run(f"optimiser-{policy}-cv{cv}", "optimiser", flags),
                Run(f"checks-{policy}-cv{cv}", "optimiser", ("--surface", f"{SURFACES}/checks/*.csv", *flags)),
                Run(f"random-{policy}-cv{cv}", "optimiser", ("--surface", f"{SURFACES}/random/*.csv", *flags)),
            ]
    for policy in ("ssd", "network"):
        runs.append(Run(f"policy-range-random-{policy}-cv0.10", "optimiser",
                        ("--surface", f"{SURFACES}/random/*.csv", "--seeds", "30", "--noise-cv", "0.10",
                         "--policy", policy, "--range", "policy")))
    return runs


def first_difference(committed: object, fresh: object, path: str = "") -> str | None:
    """Where two result documents first differ (a JSON path), ignoring wall times; None if they agree."""
    if isinstance(committed, dict) and isinstance(fresh, dict):
        for key in sorted(set(committed) | set(fresh)):
            if key == "duration_s":
                continue
            if key not in committed or key not in fresh:
                return f"{path}.{key} (only in {'the new file' if key in fresh else 'the committed file'})"
            where = first_difference(committed[key], fresh[key], f"{path}.{key}")
            if where:
                return where
        return None
    if isinstance(committed, list) and isinstance(fresh, list):
        if len(committed) != len(fresh):
            return f"{path} ({len(committed)} items, now {len(fresh)})"
        for i, (a, b) in enumerate(zip(committed, fresh)):
            where = first_difference(a, b, f"{path}[{i}]")
            if where:
                return where
        return None
    return None if committed == fresh else f"{path}: {committed!r} -> {fresh!r}"


def compare(runs: list[Run], fresh_dir: Path) -> int:
    """Print, per run, whether ``fresh_dir`` holds the same figures as the committed file; 1 if any differ.
    Runs whose file is not committed are named as such (their figures are their row in docs/results.md)."""
    differ = 0
    for r in runs:
        new, old = fresh_dir / f"{r.name}.json", RESULTS / f"{r.name}.json"
        if r.name not in KEPT:
            print(f"{r.name}: no committed file (its figures are its row in docs/results.md)")
            continue
        if not new.is_file():
            print(f"{r.name}: not in {fresh_dir}")
            continue
        try:
            where = first_difference(json.loads(old.read_text()), json.loads(new.read_text()))
        except (OSError, ValueError) as exc:
            print(f"{r.name}: cannot be compared ({exc})")
            differ += 1
            continue
        differ += where is not None
        print(f"{r.name}: {'same figures' if where is None else 'differs at ' + where}")
    return 1 if differ else 0


def _optimiser_row(name: str, r: dict) -> str:  # type: ignore[type-arg]
    """One summary row: what the issue's targets read in one optimiser result file."""
    v, surfaces = r["verdict"], r["surfaces"]
    one = [s for s in surfaces if s["dims"] == 1]
    two = [s for s in surfaces if s["dims"] == 2]
    ratio = " / ".join(f"{v[k]:.3f}" if k in v else "–" for k in ("probes_ratio_1d", "probes_ratio_2d"))
    tuner = sum(s["methods"]["tuner"]["success_rate"] for s in surfaces)
    sweep = sum(s["methods"]["sweep"]["success_rate"] for s in surfaces)
    by = v["success_target_by_interval"]
    missed = ", ".join(by["missed"]) or "none"
    gaps = sorted(v["success_below_sweep_minus5"], key=lambda g: g["points"])
    worst = f"{gaps[0]['points']:+.0f} ({gaps[0]['name']})" if gaps else f"{v['success_vs_sweep_min_points']:+.0f}"
    regret = " / ".join(f"{v[f'regret_sum_tuner_vs_{m}'][i]:.3f}"
                        for m, i in (("random", 0), ("random", 1), ("optuna_tpe", 1)))
    size = f"{len(one)}" + (f" + {len(two)} 2-D" if two else "")
    versus_range = "–"
    if "success_vs_sweep_range_by_interval" in v:
        # --range policy: tuner's one-knob probes against a sweep of the range it searched, and the misses then.
        t = sum(s["methods"]["tuner"]["probes_mean"] for s in one)
        w = sum(s["methods"]["sweep_range"]["probes_mean"] for s in one)
        versus_range = f"{t / w:.3f}; {', '.join(v['success_vs_sweep_range_by_interval']['missed']) or 'none'}"
    return (f"| {name} | {r['noise_cv']:.2f} | {r['seeds']} | {r.get('search_range', 'grid')} | {size} | {ratio} | "
            f"{tuner:.2f} / {sweep:.2f} | {by['met']} / {by['undecided']} / {len(by['missed'])} | {missed} | "
            f"{worst} | {regret} | {versus_range} | {r['duration_s']:.0f} s |")


def _adversary_line(name: str, r: dict) -> str:  # type: ignore[type-arg]
    """One summary line for an adversary.py file: how rarely tuner touches its least-touched grid point, and
    what that does on S'."""
    s, v = r["surfaces"], r["verdict"]
    rates = [x["v_touched_rate"] for x in s]
    tuner = sum(x["success_on_s_prime"]["tuner"] for x in s)
    sweep = sum(x["success_on_s_prime"]["sweep"] for x in s)
    return (f"{name}: on each of {len(s)} surfaces (CV {r['noise_cv']:.2f}, {r['seeds']} seeds) tuner touched "
            f"its least-touched grid point on {min(rates):.2f}–{max(rates):.2f} of the seeds; with that point made "
            f"{r['gain']} times better (S'), success summed {tuner:.2f} against the sweep's {sweep:.2f}, "
            f"{len(v['s_prime_missed'])} of {len(s)} an established miss; {v['identical_runs'][0]} of "
            f"{v['identical_runs'][1]} untouched seeds replayed identically; {r['duration_s']:.0f} s.")


def _holdout_lines(runs: list[Run], results: Path) -> list[str]:
    """The per-surface target read as a rate over the generator's draws (docs/results.md, "Not reached yet"):
    how many surfaces of its draws — spent (surfaces/dev/) and sealed (surfaces/holdout/) — are established
    misses, one-knob draws at 100 seeds, two-knob draws at 30 (and 100 where re-run), at either noise level,
    with a Wilson 95 % interval for the share; and how many of them are in the sealed draw."""
    from optimiser import _wilson

    lines = []
    one_knob = ("one-knob hold-out draws, 100 seeds", lambda r: r.draw.startswith("h1") and r.seeds == 100)
    two_knob = ("two-knob hold-out draws, 30 seeds (100 for the closest surfaces)",
                lambda r: r.draw != "" and not r.draw.startswith("h1"))
    for label, pick in (one_knob, two_knob):
        picked = [r for r in runs if r.script == "optimiser" and pick(r)]
        if not picked:
            continue
        surfaces: set[str] = set()
        sealed: set[str] = set()
        missed: dict[str, list[str]] = {}
        for run in picked:
            r = json.loads((results / f"{run.name}.json").read_text())
            names = {s["name"] for s in r["surfaces"]}
            surfaces |= names
            if run.name.startswith("holdout-"):
                sealed |= names
            for m in r["verdict"]["success_target_by_interval"]["missed"]:
                missed.setdefault(m, []).append(f"CV {r['noise_cv']:.2f}, {r['seeds']} seeds")
        lo, hi = _wilson(len(missed), len(surfaces), 1.959964)
        which = "; ".join(f"{m} ({', '.join(cvs)})" for m, cvs in sorted(missed.items())) or "none"
        lines.append(f"{label}: established misses at CV 0.05 or 0.10 on {len(missed)} of {len(surfaces)} surfaces "
                     f"in {len({r.draw for r in picked})} draws ({100 * len(missed) / len(surfaces):.1f} %, 95 % "
                     f"interval {100 * lo:.1f}–{100 * hi:.1f} %), {len(sealed & set(missed))} of {len(sealed)} "
                     f"in the sealed draw: {which}.")
    return lines


def summary(runs: list[Run], results: Path) -> str:
    """The Markdown table of the issue's figures, one row per optimiser result file, and the confidence line.

    Every figure is read or summed from the files: probes are tuner's mean over the sweep's, summed per
    dimensionality; success is the sum of per-surface success rates; a surface is met, undecided or missed by
    the 95 % interval of its paired gap against -5 points; regret is the sum of per-surface medians. Files
    run over the policy's range (``--range policy``) also compare tuner with a sweep of that range."""
    lines = ["| result file | CV | seeds | range | surfaces | probes / sweep's, 1-D / 2-D | success summed: tuner / "
             "sweep | surfaces ≥ sweep − 5: met / undecided / missed | missed (interval below −5) | worst gap "
             "(points) | median regret summed: tuner / random / TPE | against a sweep of the policy's range: 1-D "
             "probes; missed | wall time |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    tail = []
    for run in runs:
        path = results / f"{run.name}.json"
        r = json.loads(path.read_text())
        if run.script == "optimiser":
            lines.append(_optimiser_row(run.name, r))
        elif run.script == "adversary":
            tail.append(_adversary_line(run.name, r))
        else:
            c = r["summary"]
            tail.append(f"{run.name}: coverage of the 95 % interval {c['coverage_min']:.3f}–{c['coverage_max']:.3f} "
                        f"over {len(r['cases'])} cases of {r['cases'][0]['reps']} replications; 'change' with the "
                        f"truth at or below the minimum effect at most {c['change_rate_below_min_effect_max']:.3f} "
                        f"of the time; power for a 10 % effect at CV 5 % {r['power_10pct']:.3f}; "
                        f"{r['duration_s']:.0f} s.")
    tail += _holdout_lines(runs, results)
    return "\n".join(lines + ([""] + tail if tail else [])) + "\n"


def rewrite_summary(text: str, doc: Path = DOC) -> None:
    """Put ``text`` between the summary markers of ``doc`` (docs/results.md), leaving the rest as it is."""
    page = doc.read_text()
    if SUMMARY_START not in page or SUMMARY_END not in page:
        raise ValueError(f"{doc} has no summary markers")
    head, rest = page.split(SUMMARY_START, 1)
    doc.write_text(head + SUMMARY_START + text + SUMMARY_END + rest.split(SUMMARY_END, 1)[1])


def _missing(runs: list[Run], results: Path) -> list[str]:
    return [r.name for r in runs if not (results / f"{r.name}.json").is_file()]


def _refresh_docs(out: Path, doc: Path = DOC) -> None:
    """After runs: rewrite the summary block of ``doc`` (docs/results.md) from ``out`` if it holds every run's
    file."""
    missing = _missing(_runs(), out)
    if missing:
        print(f"docs/results.md left as it is: {out} lacks {len(missing)} of the result files (e.g. "
              f"{missing[0]}.json); run without --only to make them all.")
        return
    try:
        rewrite_summary(summary(_runs(), out), doc)
    except (OSError, ValueError, KeyError) as exc:
        print(f"regenerate.py: docs/results.md not rewritten ({exc}).", file=sys.stderr)
        return
    print(f"docs/results.md: summary block rewritten from {out} (git diff docs/results.md shows what changed)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="benchmarks/regenerate.py", description=__doc__.split("\n\n")[0],
        epilog="docs/results.md shows today's figures (its summary block).")
    ap.add_argument("--only", action="append", metavar="NAME", help="run only this one (repeatable)")
    ap.add_argument("--kept", action="store_true",
                    help="only the runs whose result files are committed (the ten in KEPT; about 21 minutes)")
    ap.add_argument("--list", action="store_true", help="print the names and commands, run nothing")
    ap.add_argument("--compare", type=Path, metavar="DIR",
                    help="run nothing; say which committed result files differ from the ones in DIR")
    ap.add_argument("--out", type=Path, default=RESULTS,
                    help="directory for the result files (default benchmarks/results/, unversioned but for the "
                         "ten committed ones); docs/results.md is rewritten once it holds every run's file")
    ap.add_argument("--summary", nargs="?", type=Path, const=RESULTS, metavar="DIR",
                    help="run nothing; print the summary block from the result files in DIR "
                         "(default benchmarks/results/)")
    args = ap.parse_args(argv)
    runs = _runs()
    if args.only:
        names = {r.name for r in runs}
        unknown = [n for n in args.only if n not in names]
        if unknown:
            print(f"regenerate.py: no result named {unknown[0]!r}; --list prints the names.", file=sys.stderr)
            return 2
    if args.only or args.kept:
        runs = [r for r in runs if r.name in (args.only or []) or (args.kept and r.name in KEPT)]
    if args.summary:
        missing = _missing(runs, args.summary)
        if missing:
            print(f"regenerate.py: {args.summary} has no {missing[0]}.json; give the --out DIR of a whole run, "
                  f"or name the files with --only.", file=sys.stderr)
            return 2
        try:
            print(summary(runs, args.summary), end="")
        except (OSError, ValueError, KeyError) as exc:
            print(f"regenerate.py: cannot read the result files in {args.summary} ({exc}); regenerate them.",
                  file=sys.stderr)
            return 2
        return 0
    if args.compare:
        if not args.compare.is_dir():
            print(f"regenerate.py: {args.compare} is not a directory; give the --out DIR of an earlier run.",
                  file=sys.stderr)
            return 2
        return compare(runs, args.compare)
    if args.list:
        for r in runs:
            print(f"{r.name}:\n  {shlex.join(r.command(args.out))}")
        return 0
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"regenerate.py: cannot write result files under {args.out} ({exc.strerror}); give a writable "
              f"--out DIR.", file=sys.stderr)
        return 2
    started = time.monotonic()
    for i, r in enumerate(runs, 1):
        cmd = r.command(args.out)
        print(f"[{i}/{len(runs)}] {r.name}: {shlex.join(cmd)}", flush=True)
        t0 = time.monotonic()
        try:
            done = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL)
        except KeyboardInterrupt:
            print(f"\nregenerate.py: interrupted during {r.name}; the files before it are written. Rerun from "
                  f"there with --only.", file=sys.stderr)
            return 130
        if done.returncode:
            print(f"regenerate.py: {r.name} failed (exit {done.returncode}); the files before it are written, "
                  f"the rest are not. Rerun with --only {r.name} once the cause is fixed.", file=sys.stderr)
            return done.returncode
        print(f"    {time.monotonic() - t0:.0f} s", flush=True)
    print(f"{len(runs)} result files regenerated in {(time.monotonic() - started) / 60:.1f} min under {args.out}")
    _refresh_docs(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
