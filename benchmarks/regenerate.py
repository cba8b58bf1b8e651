"""Regenerate the benchmark result files that docs/results.md quotes for today's code, in one command.

usage: python benchmarks/regenerate.py [--only NAME ...] [--list] [--out DIR] [--compare DIR]

Each result file in benchmarks/results/ was written by one run of benchmarks/optimiser.py or
benchmarks/confidence.py. This script holds those commands — surfaces, seeds, noise, search range — so that a
reader can reproduce every current figure, and so that a change to the optimiser can be re-measured on all of
them at once (any change to tuner/optimiser.py makes every optimiser file stale). It runs them one after the
other and prints each command and its wall time.

Files kept as history — measured on earlier code and quoted as such in docs/results.md (gaps-100seeds-cv*,
-coverage-, -halfstep-rule-, -v-rule-, -joint-*, random-first-run-cv*) — are not regenerated: they record
what the optimiser did before a change.

The whole set of 30 takes about an hour on two cores (the sum of the duration_s fields of the files; the 25
runs re-made for the five-start design on 2026-12-05 -- all but the two-knob hold-outs and the confidence
run, which no changed line reaches -- took 56 minutes); each run takes 0.3-5.5 minutes. Before
benchmarks/optimiser.py pinned each worker to one BLAS thread it took 75-90. Needs the bench extra
(pip install -e '.[bench]': Optuna for TPE, matplotlib for the plots).

options:
  --only NAME   regenerate only this result (repeatable; names as --list prints them, e.g. random-cv0.10)
  --list        print the names and commands (with --only: just those), run nothing
  --out DIR     write the files here instead of benchmarks/results/ (to compare before replacing)
  --compare DIR run nothing: say which result files in DIR differ from benchmarks/results/ in any figure
                (wall times aside), and where — e.g. after --out DIR, to check that the committed files are
                today's code's
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
# The six one-knob surfaces still below the sweep at 30 seeds, re-run at 100 (docs/results.md, "Not reached yet").
HARDEST = ["checks/vee48", "checks/tps-peak64-maximize", "checks/bimodal-2-128",
           "random/r11-two-basins", "random/r12-two-basins", "random/r01-valley"]


@dataclass(frozen=True)
class Run:
    name: str  # result file stem in benchmarks/results/
    script: str  # benchmarks/<script>.py
    args: tuple[str, ...]
    plot: bool = False

    def command(self, out: Path) -> list[str]:
        """The command line, run from the repository's root (paths under it are written relative to it)."""
        out = out.resolve()
        base = out.relative_to(ROOT) if out.is_relative_to(ROOT) else out
        cmd = [sys.executable, f"benchmarks/{self.script}.py", *self.args,
               "--json", str(base / f"{self.name}.json"), "--markdown", str(base / f"{self.name}.md")]
        if self.plot:
            cmd += ["--plot", str(base / f"{self.name}.png")]
        return cmd


def _runs() -> list[Run]:
    runs: list[Run] = []
    for cv in ("0.05", "0.10"):
        noise: tuple[str, ...] = ("--seeds", "30", "--noise-cv", cv)
        runs += [
            Run(f"optimiser-cv{cv}", "optimiser", noise, plot=True),
            Run(f"checks-cv{cv}", "optimiser", ("--surface", f"{SURFACES}/checks/*.csv", *noise), plot=True),
            Run(f"random-cv{cv}", "optimiser", ("--surface", f"{SURFACES}/random/*.csv", *noise), plot=True),
            Run(f"holdout-2d-cv{cv}", "optimiser", ("--surface", f"{SURFACES}/holdout-2d/*.csv", *noise)),
            Run(f"policy-range-cv{cv}", "optimiser", (*noise, "--range", "policy")),
            Run(f"gaps-100seeds-flank-rule-cv{cv}", "optimiser",
                (*[a for s in HARDEST for a in ("--surface", f"{SURFACES}/{s}.csv")],
                 "--seeds", "100", "--noise-cv", cv)),
            Run(f"holdout-h2d04-100seeds-cv{cv}", "optimiser",
                ("--surface", f"{SURFACES}/holdout-2d/h2d04.csv", "--seeds", "100", "--noise-cv", cv)),
        ]
        # One-knob surfaces drawn after the 1-D search's duel (seed 2028), a second draw (seed 2029) made once
        # the first had been seen, and a third (seed 2030) held back until the five-start design was fixed;
        # each at 30 and 100 seeds.
        for draw in ("holdout-1d", "holdout-1d-b", "holdout-1d-c"):
            for seeds, infix in (("30", ""), ("100", "-100seeds")):
                runs.append(Run(f"{draw}{infix}-cv{cv}", "optimiser",
                                ("--surface", f"{SURFACES}/{draw}/*.csv", "--seeds", seeds, "--noise-cv", cv)))
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
    """Print, per run, whether ``fresh_dir`` holds the same figures as the committed file; 1 if any differ."""
    differ = 0
    for r in runs:
        new, old = fresh_dir / f"{r.name}.json", ROOT / "benchmarks" / "results" / f"{r.name}.json"
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="benchmarks/regenerate.py", description=__doc__.split("\n\n")[0],
        epilog="docs/results.md says which figures each file holds.")
    ap.add_argument("--only", action="append", metavar="NAME", help="regenerate only this result (repeatable)")
    ap.add_argument("--list", action="store_true", help="print the names and commands, run nothing")
    ap.add_argument("--compare", type=Path, metavar="DIR",
                    help="run nothing; say which result files in DIR differ from benchmarks/results/")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results",
                    help="directory for the result files (default benchmarks/results/)")
    args = ap.parse_args(argv)
    runs = _runs()
    if args.only:
        names = {r.name for r in runs}
        unknown = [n for n in args.only if n not in names]
        if unknown:
            print(f"regenerate.py: no result named {unknown[0]!r}; --list prints the names.", file=sys.stderr)
            return 2
        runs = [r for r in runs if r.name in args.only]
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
