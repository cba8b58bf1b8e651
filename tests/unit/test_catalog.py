from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tuner.errors import ConfigError
from tuner.knobs import catalog

# From reference/pg-io-facts.md §1.3, computed on a real PG 15 server.
PG13_TABLE = {1: 1, 2: 3, 3: 6, 4: 8, 5: 11, 8: 22, 10: 29, 16: 54, 20: 72, 32: 130, 64: 304, 100: 519, 128: 695,
              200: 1000, 256: 1000, 1000: 1000}


@pytest.mark.parametrize(("old", "new"), sorted(PG13_TABLE.items()))
def test_pg13_conversion_matches_the_release_notes_table(old: int, new: int) -> None:
    assert catalog.eic_pre13_to_13(old) == new


@given(st.integers(min_value=0, max_value=999))
def test_pg13_conversion_is_monotonic_and_clamped(old: int) -> None:
    a, b = catalog.eic_pre13_to_13(old), catalog.eic_pre13_to_13(old + 1)
    assert a <= b <= 1000


def test_effective_io_concurrency_default_changes_in_18() -> None:
    cat = catalog.load()
    assert cat.spec("effective_io_concurrency", 150018).default == 1
    assert cat.spec("effective_io_concurrency", 180006).default == 16


def test_maintenance_io_concurrency_does_not_exist_before_13() -> None:
    assert catalog.load().spec("maintenance_io_concurrency", 120000) is None
    assert catalog.load().spec("maintenance_io_concurrency", 130000) is not None


def test_restart_level_knobs_say_so() -> None:
    assert catalog.load().spec("io_method", 180000).requires == "restart"
    assert catalog.load().spec("effective_io_concurrency", 180000).requires == "reload"


@pytest.mark.parametrize("knob", ["fsync", "full_page_writes", "synchronous_commit", "data_sync_retry"])
def test_durability_settings_can_never_be_tuned(knob: str) -> None:
    with pytest.raises(ConfigError, match="durability"):
        catalog.require_tunable(knob)


def test_unknown_knob_is_refused_with_the_known_ones_as_hint() -> None:
    with pytest.raises(ConfigError) as err:
        catalog.require_tunable("effective_io_concurency")
    assert "effective_io_concurrency" in (err.value.hint or "")


@given(st.integers(min_value=-5000, max_value=5000))
def test_clamp_stays_in_range(v: int) -> None:
    spec = catalog.load().spec("effective_io_concurrency", 150000)
    assert 0 <= spec.clamp(v) <= 1000
