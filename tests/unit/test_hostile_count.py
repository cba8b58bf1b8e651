"""The hostile-input suite as a whole: how many inputs it throws at tuner, across the CLI, config, API, store,
journal and reports. Each module checks its own cases (exit 0/2/3 or HTTP 4xx, one sentence, nothing changed);
this only keeps the suite from shrinking below the size the trust-boundaries work set for it."""

from __future__ import annotations

from tests.unit import test_hostile_inputs, test_hostile_reports, test_hostile_service

SUITES = {"cli and config": test_hostile_inputs.CASES, "reports and exports": test_hostile_reports.CASES,
          "config, store, journal and API": test_hostile_service.CASES}


def test_the_hostile_input_suite_holds_at_least_400_distinct_inputs() -> None:
    counts = {name: len(cases) for name, cases in SUITES.items()}
    for name, cases in SUITES.items():
        names = list(cases) if isinstance(cases, dict) else [n for n, _ in cases]
        assert len(set(names)) == len(names), f"{name}: a case name is used twice"
    print(f"hostile inputs: {sum(counts.values())} ({', '.join(f'{n}: {c}' for n, c in counts.items())})")
    assert all(counts.values()), counts
    assert sum(counts.values()) >= 400, counts
