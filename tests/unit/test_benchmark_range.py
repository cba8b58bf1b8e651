"""The optimiser benchmark's search range: the surface's grid by default, the policy's with ``--range policy``."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from optimiser import NoiseStream, Surface, run_sweep, run_tuner, tuner_optimiser  # noqa: E402

from tuner.hostfacts.blockdev import readahead_quantum_kb  # noqa: E402

SEED = ROOT / "benchmarks" / "surfaces" / "seed000-ebs-gp2-bitmap.csv"
GRID_2D = ROOT / "benchmarks" / "surfaces" / "sandbox-pg15-eic-readahead.csv"


def test_by_default_the_search_covers_the_grid_the_sweep_measures() -> None:
    (d,) = Surface.load(SEED).dims()
    assert (d.low, d.high) == (0, 256)


def test_the_policy_range_is_the_one_tuner_recommend_searches() -> None:
    surface = Surface.load(GRID_2D)
    surface.use_policy_range()
    dims = {d.name: d for d in surface.dims()}
    assert (dims["effective_io_concurrency"].low, dims["effective_io_concurrency"].high) == (0, 1000)
    assert (dims["read_ahead_kb"].low, dims["read_ahead_kb"].high) == (0, 16384)
    # whole pages, as the readahead family searches it
    assert dims["read_ahead_kb"].quantum == readahead_quantum_kb()
    # beyond the last grid level the surface is flat: the value at 1000 is the value at 256
    assert surface.true({"effective_io_concurrency": 1000, "read_ahead_kb": 128}) == surface.true(
        {"effective_io_concurrency": 256, "read_ahead_kb": 128}
    )


def test_with_the_policy_range_tuner_searches_it_and_the_sweep_still_measures_the_grid() -> None:
    # (run_tuner and run_sweep, not one_seed: that also runs Optuna, a benchmark-only dependency.)
    grid = Surface.load(SEED)
    policy = Surface.load(SEED)
    policy.use_policy_range()
    assert tuner_optimiser(policy, seed=0).dimensions[0].high == 1000
    assert run_sweep(policy, NoiseStream(0.05, 0)) == run_sweep(grid, NoiseStream(0.05, 0))  # the grid, as before
    answer, probes, _ = run_tuner(policy, NoiseStream(0.05, 0), 0)
    assert 0 <= answer["effective_io_concurrency"] <= 1000 and probes >= 5


def test_the_range_sweep_adds_the_round_values_past_the_grid_and_reads_the_grid_as_the_sweep_does() -> None:
    grid = Surface.load(SEED)
    assert grid.range_levels() == grid.levels  # with the grid's own range there is nothing to add
    policy = Surface.load(SEED)
    policy.use_policy_range()
    (levels,) = policy.range_levels()
    assert levels == grid.levels[0] + [512, 1000]
    two = Surface.load(GRID_2D)
    two.use_policy_range()
    eic, ra = two.range_levels()
    assert eic[-2:] == [512, 1000] and ra == [0, 16, 128, 512, 2048, 8192, 16384]
    # the same draws per configuration: where both sweeps measured, they read the same numbers, so the range
    # sweep's answer differs only where 512 or 1000 read lower than everything the grid sweep saw
    differ = []
    for seed in range(20):
        answer, probes, _ = run_sweep(policy, NoiseStream(0.10, seed), search_range=True)
        grid_answer, _, _ = run_sweep(grid, NoiseStream(0.10, seed))
        assert probes == 12
        if answer != grid_answer:
            assert answer["effective_io_concurrency"] in (512, 1000)
            differ.append(seed)
    assert differ  # at CV 10 % some seed reads the plateau past 256 lowest (seed 6 today)


def test_another_policy_brings_its_own_design_budget_and_range() -> None:
    # --policy: the storage-class policies are measured with the code tuner recommend runs for them.
    hdd = Surface.load(SEED)
    hdd.policy = "hdd"
    hdd.use_policy_range()
    opt = tuner_optimiser(hdd, seed=0)
    default = tuner_optimiser(Surface.load(SEED), seed=0)
    assert opt.dimensions[0].high == 256  # the hdd policy's range, not the default's 1000
    assert (opt.budget, opt.min_probes) == (10, 5) and (default.budget, default.min_probes) == (14, 5)
    # hdd probes today's value (1) first, then its starts; the default leaves today's value to the model
    assert opt.suggest() == {"effective_io_concurrency": 1}
    assert default.suggest() == {"effective_io_concurrency": 0}


def test_an_unknown_policy_is_one_sentence_naming_the_shipped_ones() -> None:
    import subprocess

    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "optimiser.py"), "--policy", "nope"],
                          capture_output=True, text=True)
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert "no policy named 'nope'" in last and "ssd" in last and "Traceback" not in done.stderr
