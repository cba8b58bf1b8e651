"""benchmarks/adversary.py: the constructive check that no method reading fewer values than the sweep can
match it on every surface of the format — here on tuner's own code, against a real (simulated) surface."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from adversary import adversary, study, touched, write_surface  # noqa: E402
from optimiser import Surface  # noqa: E402

SURFACE = ROOT / "benchmarks" / "surfaces" / "seed001-ssd-s3500-bitmap.csv"


def _grid(direction: str) -> Surface:
    levels = [0, 1, 2, 4, 8]
    return Surface("toy", ["effective_io_concurrency"], [levels],
                   {(v,): 100.0 + 10 * abs(v - 2) for v in levels}, direction)


@pytest.mark.parametrize(("direction", "expected"), [("minimize", 80.0), ("maximize", 125.0)])
def test_the_adversary_changes_one_grid_point_alone(direction: str, expected: float) -> None:
    s = _grid(direction)
    hard = adversary(s, (8,), 1.25)
    best = 100.0 if direction == "minimize" else 160.0
    assert s.optimum[1] == best
    assert hard.values[(8,)] == pytest.approx(best / 1.25 if direction == "minimize" else best * 1.25)
    assert hard.values[(8,)] == pytest.approx(expected if direction == "minimize" else 200.0)
    assert {k: v for k, v in hard.values.items() if k != (8,)} == {k: v for k, v in s.values.items() if k != (8,)}
    assert hard.optimum[0] == {"effective_io_concurrency": 8}
    assert s.values[(8,)] == 160.0  # the original is untouched


def test_a_probe_touches_the_grid_points_it_is_interpolated_from() -> None:
    s = _grid("minimize")
    assert touched(s, [{"effective_io_concurrency": 2}]) == {(2,)}
    assert touched(s, [{"effective_io_concurrency": 3}]) == {(2,), (4,)}  # between two levels: both
    assert touched(s, [{"effective_io_concurrency": 500}]) == {(8,)}  # past the grid: clamped to its last level
    assert s.true({"effective_io_concurrency": 3}) == pytest.approx(
        sum(w * s.values[k] for k, w in s.weights({"effective_io_concurrency": 3}).items()))


def test_tuner_replays_every_seed_that_never_touched_v_and_so_misses_where_the_sweep_finds_it(tmp_path: Path) -> None:
    # The argument's one step about the method: on a seed that never touches v, S' gives tuner the same
    # readings as S (equal true values, common noise draws), so it probes the same values and answers the
    # same — whatever its rules. If tuner ever read every grid point, or its runs depended on anything but
    # its readings, this would fail.
    surface = Surface.load(SURFACE)
    result, hard = study(surface, seeds=4, cv=0.05, gain=1.25)
    assert result["untouched_seeds"] >= 1
    assert result["identical"] == result["untouched_seeds"]
    assert result["bound_holds"]
    assert result["success_on_s_prime"]["tuner"] <= result["v_touched_rate"]
    assert result["success_on_s_prime"]["sweep"] >= 0.75  # it reads v on every seed; 25 % better at CV 5 %
    path = tmp_path / f"{hard.name}.csv"
    write_surface(hard, path)
    again = Surface.load(path)
    assert again.values == hard.values and again.direction == hard.direction and again.levels == hard.levels


def test_bad_arguments_get_one_sentence(tmp_path: Path) -> None:
    script = [sys.executable, str(ROOT / "benchmarks" / "adversary.py")]
    for args, says in ((["--gain", "1.02"], "--gain must be more than 1.05"),
                       (["--seeds", "0"], "--seeds must be at least 1"),
                       (["--write-surfaces", str(tmp_path / "nope")], "is not a directory"),
                       (["--surface", "nothere.csv"], "no surface file at 'nothere.csv'")):
        done = subprocess.run([*script, *args], capture_output=True, text=True, timeout=120)
        assert done.returncode != 0 and says in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert done.stdout == ""
