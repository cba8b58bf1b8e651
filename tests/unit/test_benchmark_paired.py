"""The optimiser benchmark's paired comparison of tuner's and the sweep's success rates."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from optimiser import markdown, paired_success_difference, success_vs_sweep, verdict  # noqa: E402


def test_matches_the_published_newcombe_interval() -> None:
    # Fagerland, Lydersen & Laake, "Statistical Analysis of Contingency Tables", chapter 8: the paired table
    # 59 / 6 / 16 / 80 gives -0.0621 (95 % CI -0.1186 to -0.0046) by Newcombe's square-and-add method.
    diff, lo, hi = paired_success_difference(59, 6, 16, 80)
    assert (round(diff, 4), round(lo, 4), round(hi, 4)) == (-0.0621, -0.1186, -0.0046)


def test_swapping_the_methods_mirrors_the_interval() -> None:
    diff, lo, hi = paired_success_difference(20, 3, 7, 10)
    back = paired_success_difference(20, 7, 3, 10)
    assert back == pytest.approx((-diff, -hi, -lo))
    assert lo < diff < hi


@pytest.mark.parametrize("table", [(30, 0, 0, 0), (0, 0, 0, 30), (0, 30, 0, 0), (0, 0, 30, 0)])
def test_degenerate_tables_give_a_bounded_interval(table: tuple[int, int, int, int]) -> None:
    diff, lo, hi = paired_success_difference(*table)
    assert -1.0 <= lo <= diff <= hi <= 1.0
    assert hi - lo > 0.0  # 30 seeds never prove a difference exactly


def test_no_pairs_is_an_error() -> None:
    with pytest.raises(ValueError):
        paired_success_difference(0, 0, 0, 0)


def test_covers_the_true_difference_about_95_percent_of_the_time() -> None:
    # Correlated pairs as the benchmark makes them: both methods succeed on most seeds, and each now and then
    # where the other does not. True rates 0.80 and 0.87, 30 seeds per benchmark run.
    rng = np.random.default_rng(12345)
    probs = np.array([0.72, 0.08, 0.15, 0.05])  # both, first only, second only, neither
    true = (probs[0] + probs[1]) - (probs[0] + probs[2])
    reps, covered = 3000, 0
    for _ in range(reps):
        counts = rng.multinomial(30, probs)
        _, lo, hi = paired_success_difference(*(int(c) for c in counts))
        covered += lo <= true <= hi
    assert 0.93 <= covered / reps <= 0.985


def _run(tuner_ok: bool, sweep_ok: bool) -> dict[str, dict[str, object]]:
    return {"tuner": {"regret": 0.0 if tuner_ok else 0.2}, "sweep": {"regret": 0.01 if sweep_ok else 0.09}}


def test_a_large_gap_over_many_seeds_is_a_missed_target() -> None:
    runs = [_run(True, True)] * 50 + [_run(False, True)] * 30 + [_run(False, False)] * 20
    result: dict[str, object] = {"surfaces": [{"name": "vee", "dims": 1, "success_vs_sweep": success_vs_sweep(runs),
                                               "methods": {m: {"probes_mean": 8.0, "success_rate": 0.5, "regret_median": 0.0}
                                                           for m in ("tuner", "sweep", "random", "optuna_tpe")}}]}
    assert verdict(result)["success_target_by_interval"] == {"met": 0, "undecided": 0, "missed": ["vee"]}


def test_success_vs_sweep_counts_the_seeds_each_method_alone_got_right() -> None:
    runs = [_run(True, True)] * 20 + [_run(True, False)] * 2 + [_run(False, True)] * 5 + [_run(False, False)] * 3
    out = success_vs_sweep(runs)
    assert out["points"] == -10.0
    assert (out["tuner_only"], out["sweep_only"]) == (2, 5)
    lo, hi = out["ci95_points"]  # type: ignore[misc]
    assert lo < -10.0 < hi


def test_the_verdict_lists_surfaces_more_than_five_points_below_with_their_interval() -> None:
    def surface(name: str, runs: list[dict[str, dict[str, object]]]) -> dict[str, object]:
        rate = {m: sum(float(r[m]["regret"]) <= 0.05 for r in runs) / len(runs) for m in ("tuner", "sweep")}  # type: ignore[arg-type]
        methods = {m: {"probes_median": 7, "probes_mean": 7.0, "success_rate": rate.get(m, 1.0), "regret_median": 0.0}
                   for m in ("tuner", "sweep", "random", "optuna_tpe")}
        return {"name": name, "dims": 1, "methods": methods, "success_vs_sweep": success_vs_sweep(runs)}

    level = surface("level", [_run(True, True)] * 30)
    behind = surface("behind", [_run(True, True)] * 20 + [_run(False, True)] * 6 + [_run(True, False)] * 1
                     + [_run(False, False)] * 3)
    ahead = surface("ahead", [_run(True, True)] * 18 + [_run(True, False)] * 10 + [_run(False, False)] * 2)
    result: dict[str, object] = {"noise_cv": 0.1, "seeds": 30, "duration_s": 1.0, "surfaces": [level, behind, ahead]}
    result["verdict"] = verdict(result)
    below = result["verdict"]["success_below_sweep_minus5"]  # type: ignore[index]
    assert [b["name"] for b in below] == ["behind"]
    assert below[0]["points"] == pytest.approx(-16.7)
    # 30 seeds cannot show a level surface within 5 points (the interval is +-11 with no disagreement), nor
    # 6 of 30 lost below it; 10 seeds won and none lost clear the bar
    assert result["verdict"]["success_target_by_interval"] == {"met": 1, "undecided": 2, "missed": []}  # type: ignore[index]
    text = markdown(result)
    assert "| behind | -16.7 |" in text and "| level | +0.0 | " in text


@pytest.mark.parametrize(
    ("script", "args", "says"),
    [
        ("optimiser.py", ["--seeds", "0"], "--seeds must be at least 1"),
        ("optimiser.py", ["--noise-cv", "-0.1"], "--noise-cv is a coefficient of variation"),
        ("optimiser.py", ["--jobs", "0"], "--jobs must be at least 1"),
        ("confidence.py", ["--reps", "0"], "--reps must be at least 1"),
    ],
)
def test_bad_benchmark_arguments_get_one_sentence_not_a_traceback(script: str, args: list[str], says: str) -> None:
    import subprocess

    path = Path(__file__).resolve().parents[2] / "benchmarks" / script
    done = subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert says in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""


def test_the_trace_replays_a_result_files_seeds_and_refuses_bad_arguments_in_one_sentence() -> None:
    # trace.py is the per-seed view behind optimiser.py: with the same --policy and --range, seed N there is
    # seed N here, so its count of hits is the file's success rate (r12 over the policy's range, CV 10 %: 10 of
    # 30 in the committed file).
    import json
    import subprocess

    root = Path(__file__).resolve().parents[2]
    surface = root / "benchmarks" / "surfaces" / "random" / "r12-two-basins.csv"
    committed = json.loads((root / "benchmarks" / "results" / "policy-range-random-cv0.10.json").read_text())
    rate = next(s for s in committed["surfaces"] if s["name"] == "r12-two-basins")["methods"]["tuner"]["success_rate"]
    script = [sys.executable, str(root / "benchmarks" / "trace.py")]
    done = subprocess.run([*script, str(surface), "--noise-cv", "0.10", "--range", "policy", "--failures-only"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith(f"{round(rate * 30)}/30 within 5%")
    for args, says in ((["nothere.csv"], "no surface file at 'nothere.csv'"),
                       ([str(surface), "--policy", "nope"], "--policy: no policy named 'nope'"),
                       ([str(surface), "--seeds", "0"], "--seeds must be at least 1")):
        bad = subprocess.run([*script, *args], capture_output=True, text=True, timeout=120)
        assert bad.returncode == 2 and says in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
