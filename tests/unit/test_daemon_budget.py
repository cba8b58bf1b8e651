"""tuner daemon's confirmation budget: the policy's [daemon] table, Policy.for_daemon() and the test it builds."""

from __future__ import annotations

import asyncio
import math
import random
from pathlib import Path

import pytest

from tuner.core.decide import confirmation_test
from tuner.core.loops import confirm
from tuner.core.stats import SequentialTest
from tuner.errors import ConfigError
from tuner.settings.policy import SHIPPED_POLICY_DIR, Daemon, load_policy
from tests.support.synthetic import SyntheticProbe
from tuner.settings.tomlfile import read_toml

HEAD = """[policy]
name = "x"
description = "x"
storage_class = "any"
[search.effective_io_concurrency]
min = 0
max = 1000
"""


def _policy(tmp_path: Path, tables: str) -> Path:
    path = tmp_path / "p.toml"
    path.write_text(HEAD + tables)
    return path


def test_the_daemon_table_defaults_to_the_measured_design() -> None:
    d = Daemon()
    assert (d.confirm_min_pairs, d.confirm_max_pairs, d.confirm_looks) == (6, 120, (20, 48))


@pytest.mark.parametrize("path", sorted(SHIPPED_POLICY_DIR.glob("*.toml")), ids=lambda p: p.name)
def test_every_shipped_policy_writes_the_daemon_table_out(path: Path) -> None:
    # The shipped files spell every table out; a missing one would silently take the defaults.
    assert set(read_toml(path)["daemon"]) == {"confirm_min_pairs", "confirm_max_pairs", "confirm_looks"}
    assert load_policy(str(path)).daemon == Daemon()


@pytest.mark.parametrize(("tables", "expected"), [
    ("[daemon]\nconfirm_max_pairs = 121\n", "daemon: confirm_max_pairs (121) is odd"),
    ("[daemon]\nconfirm_min_pairs = 5\n", "daemon: confirm_min_pairs (5) is odd"),
    ("[daemon]\nconfirm_min_pairs = 130\n", "daemon: confirm_min_pairs (130) exceeds confirm_max_pairs (120)"),
    ("[daemon]\nconfirm_looks = [21, 48]\n", "daemon: confirm_looks [21] are odd"),
    ("[daemon]\nconfirm_looks = [48, 20]\n", "daemon: confirm_looks [48, 20] must rise strictly between"),
    ("[daemon]\nconfirm_looks = [6, 48]\n", "daemon: confirm_looks [6, 48] must rise strictly between"),
    ("[daemon]\nconfirm_looks = [20, 120]\n", "confirm_looks [20, 120] must rise strictly between"),
    ("[daemon]\nconfirm_looks = [20, 20]\n", "confirm_looks [20, 20] must rise strictly between"),
    ("[daemon]\nconfirm_max_pairs = 2000\n", "[daemon] confirm_max_pairs: Input should be less than or equal to 1000"),
    ("[daemon]\nconfirm_min_pairs = 0\n", "[daemon] confirm_min_pairs: Input should be greater than or equal to 2"),
    ("[daemon]\nconfirm_looks = [8, 10, 12, 14, 16, 18, 20, 22, 24]\n", "[daemon] confirm_looks: Tuple should have at most 8"),
    ("[daemon]\nconfirm_pairs = 100\n", "[daemon] confirm_pairs: unknown key"),
    ("[budget]\nconfirm_looks = [7]\n", "budget: confirm_looks [7] are odd"),
    ("[budget]\nconfirm_looks = [10, 30]\n", "budget: confirm_looks [10, 30] must rise strictly between"),
])
def test_a_bad_confirmation_design_is_one_sentence_naming_the_key(tmp_path: Path, tables: str, expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_policy(str(_policy(tmp_path, tables)))
    assert expected in str(err.value)
    assert "\n" not in str(err.value)


def test_for_daemon_takes_the_daemon_budget_and_leaves_the_rest(tmp_path: Path) -> None:
    policy = load_policy(str(_policy(tmp_path, "[budget]\nprobes = 9\n[daemon]\nconfirm_min_pairs = 8\n"
                                               "confirm_max_pairs = 64\nconfirm_looks = [24]\n")))
    daemon = policy.for_daemon()
    b = daemon.budget
    assert (b.confirm_min_pairs, b.confirm_max_pairs, b.confirm_looks) == (8, 64, (24,))
    assert b.probes == 9 and daemon.decision == policy.decision and daemon.search == policy.search
    assert (policy.budget.confirm_min_pairs, policy.budget.confirm_max_pairs, policy.budget.confirm_looks) == (6, 16, ())


def test_the_default_policy_still_builds_the_two_look_test() -> None:
    test = confirmation_test(load_policy("default"))
    assert test.looks == [6, 16]
    assert test.report_levels == (0.962, 0.962)


def test_the_daemon_test_has_the_designed_looks() -> None:
    test = confirmation_test(load_policy("default").for_daemon())
    assert test.looks == [6, 20, 48, 120]
    assert (test.alpha, test.min_effect) == (0.05, 1.05)
    assert test.report_levels[:3] == (0.962, 0.962, 0.962)
    # Where it runs to the end it reports the decision interval, which pays back the early stops' misses.
    assert test.report_levels[3] == test.per_look_confidence


def test_the_daemon_reports_the_decision_interval_at_its_last_look_only() -> None:
    test = confirmation_test(load_policy("default").for_daemon())
    d = _pairs(1.06, 0.10, 120, seed=1)
    for n in test.looks:
        look = test.evaluate(d[:n])
        assert look is not None
        e = look.effect
        if n == 120:
            assert (e.ci_low, e.ci_high) == (e.decision_low, e.decision_high)
        else:
            assert e.decision_low < e.ci_low < e.ci_high < e.decision_high


def _pairs(effect: float, cv: float, n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    s = math.sqrt(2) * math.sqrt(math.log1p(cv**2))
    return [math.log(effect) + rng.gauss(0, s) for _ in range(n)]


def _run(test: SequentialTest, d: list[float]) -> tuple[str, int]:
    for n in test.looks:
        look = test.evaluate(d[:n])
        if look is not None and look.verdict != "continue":
            return look.verdict, n
    raise AssertionError("the test always ends at its last look")


def test_the_daemon_finds_a_true_10pct_improvement_at_cv_10pct() -> None:
    # Seeded, so the figure is fixed; benchmarks/confidence.py measures 0.88 (10,000 replications).
    test = confirmation_test(load_policy("default").for_daemon())
    verdicts = [_run(test, _pairs(1.10, 0.10, 120, seed=s))[0] for s in range(200)]
    assert verdicts.count("change") / len(verdicts) >= 0.8


def test_the_daemon_rarely_changes_when_the_truth_is_the_minimum_effect() -> None:
    test = confirmation_test(load_policy("default").for_daemon())
    verdicts = [_run(test, _pairs(1.05, 0.10, 120, seed=s))[0] for s in range(400)]
    assert verdicts.count("change") / len(verdicts) <= 0.05


def test_the_daemon_stops_a_big_effect_at_its_first_look() -> None:
    test = confirmation_test(load_policy("default").for_daemon())
    probe = SyntheticProbe(lambda c: 1000.0 if c["effective_io_concurrency"] == 1 else 1000.0 / 1.5,
                           noise_cv=0.05, seed=7)
    out = asyncio.run(confirm({"effective_io_concurrency": 1}, {"effective_io_concurrency": 2}, probe, test))
    assert out.look is not None and out.look.verdict == "change"
    assert out.look.effect.n_pairs == 6 and len(probe.calls) == 12
