"""The hostile-input suite as a whole: how many DISTINCT inputs it throws at tuner, across the CLI, config, API,
store, journal, reports, output directories and the build cache. Each module checks its own cases (exit 0/2/3 or
HTTP 4xx, one sentence, nothing changed) and lists its inputs (tests/unit/hostile.py: an input run in twelve
formats, or through four commands, is one); this counts them, checks that no two are the same input under two
names, and that every finding of issue #59 has an input of its own."""

from __future__ import annotations

from collections import Counter

from tests.integration import test_interlock_bypass
from tests.unit import (
    test_daemon_requests,
    test_hostile_inputs,
    test_hostile_reports,
    test_hostile_rows,
    test_hostile_service,
    test_hostile_trust,
    test_io_regime,
    test_true_sentences,
)
from tests.unit.hostile import FINDINGS_59, Input

MODULES = [test_hostile_inputs, test_hostile_reports, test_hostile_service, test_hostile_trust, test_hostile_rows,
           test_true_sentences, test_daemon_requests, test_io_regime, test_interlock_bypass]


def _inputs() -> list[Input]:
    return [i for m in MODULES for i in m.INPUTS]


def test_no_input_is_registered_twice() -> None:
    inputs = _inputs()
    names = Counter(i.name for i in inputs)
    assert not [n for n, c in names.items() if c > 1], "an input name is used twice"
    by_material: dict[tuple[str, str], str] = {}
    for i in inputs:
        other = by_material.setdefault((i.surface, i.material), i.name)
        assert other == i.name, f"{i.name} is the input {other} again"


def test_the_hostile_input_suite_holds_at_least_500_distinct_inputs() -> None:
    inputs = _inputs()
    per_module = {m.__name__.rsplit(".", 1)[1]: len(m.INPUTS) for m in MODULES}
    print(f"distinct hostile inputs: {len(inputs)} ({', '.join(f'{n}: {c}' for n, c in per_module.items())}); "
          f"by surface: {dict(Counter(i.surface for i in inputs))}")
    assert all(per_module.values()), per_module
    assert len(inputs) >= 500, per_module


def test_every_finding_of_issue_59_has_an_input() -> None:
    covered = {f for i in _inputs() for f in i.findings}
    assert FINDINGS_59 <= covered, FINDINGS_59 - covered
