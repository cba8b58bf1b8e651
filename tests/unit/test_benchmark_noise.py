"""The optimiser benchmark's noise: common random numbers per configuration and repeat."""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from optimiser import NoiseStream  # noqa: E402

A = {"effective_io_concurrency": 4}
B = {"effective_io_concurrency": 32}


def test_the_same_measurement_of_a_configuration_reads_the_same_draw_in_every_method() -> None:
    noise = NoiseStream(0.10, seed=7)
    sweep, tuner = noise.measure(), noise.measure()
    first = [sweep(A), sweep(B)]
    # tuner measures them in the other order, and B twice: the first of each matches the sweep's
    b1, a1, b2 = tuner(B), tuner(A), tuner(B)
    assert (a1, b1) == (first[0], first[1])
    assert b2 != b1


def test_draws_differ_between_seeds_and_configurations() -> None:
    f, g = NoiseStream(0.10, seed=1).measure(), NoiseStream(0.10, seed=2).measure()
    assert f(A) != g(A)
    assert NoiseStream(0.10, seed=1).measure()(A) != NoiseStream(0.10, seed=1).measure()(B)


def test_draws_have_the_requested_mean_and_cv() -> None:
    values = [NoiseStream(0.10, seed=s).measure()(A) for s in range(4000)]
    assert abs(statistics.fmean(values) - 1) < 0.01
    assert abs(statistics.stdev(values) - 0.10) < 0.01


def test_per_probe_draws_follow_the_probe_index() -> None:
    noise = NoiseStream(0.05, seed=3, per="probe")
    f = noise.measure()
    assert [f(A), f(A), f(B)] == [noise[0], noise[1], noise[2]]
    assert math.isclose(NoiseStream(0.0, seed=3).measure()(A), 1.0)
