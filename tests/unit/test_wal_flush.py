"""The WAL report's slow-flush sentence (issue #55 item 4), from synthetic measured points."""

from __future__ import annotations

import pytest

from tuner.families.wal import _summary
from tuner.families.wal_flush import flush_ms_per_commit, flush_sentence
from tuner.families.wal_sections import WalContentionOut, WalScalingOut


def point(clients: int, tps: float, sync: float, fsyncs: float | None, rows: int = 10) -> WalContentionOut:
    return WalContentionOut(clients=clients, rows_per_tx=rows, tps=tps, wal_insert_wait_share=0.0,
                            wal_write_wait_share=0.05, wal_sync_wait_share=sync, wal_fsyncs_per_tx=fsyncs)


def test_a_commits_flush_wait_is_its_sync_share_of_a_clients_time_per_transaction() -> None:
    # one client at 160 TPS: 6.25 ms per transaction, 80 % of it in WALSync -> 5.0 ms
    assert flush_ms_per_commit(point(1, 160, 0.8, 1.0)) == pytest.approx(5.0)
    # 16 clients at 800 TPS: each client's transaction lasts 20 ms, half of it waiting for a flush
    assert flush_ms_per_commit(point(16, 800, 0.5, 0.25)) == pytest.approx(10.0)
    assert flush_ms_per_commit(point(1, 0, 0.8, 1.0)) is None


def test_the_sentence_names_the_flush_cost_and_what_grouping_recovered() -> None:
    contention = [point(1, 160, 0.8, 1.0), point(16, 800, 0.6, 0.5), point(1, 150, 0.7, 1.0, rows=1000)]
    scaling = [WalScalingOut(clients=16, rows_per_tx=10, tps_current=800, tps_recommended=1200,
                             fsyncs_per_tx_recommended=0.2)]
    text = flush_sentence(contention, scaling)
    assert text is not None
    assert "each commit waited 5.0 ms for its flush at 1 client (10 rows per transaction, 80% of its 6.2 ms)" in text
    assert "at 16 clients 2.0 commits shared each flush with today's settings and 5.0 with the recommended ones " \
           "(+50% TPS)" in text
    assert "faster flushes" in text


def test_without_a_recommendation_it_says_todays_grouping_only() -> None:
    contention = [point(1, 160, 0.8, 1.0), point(64, 2000, 0.5, 0.1)]
    scaling = [WalScalingOut(clients=64, rows_per_tx=10, tps_current=2000, tps_recommended=None)]
    text = flush_sentence(contention, scaling)
    assert text is not None and "10.0 commits shared each flush with today's settings" in text
    assert "recommended" not in text


def test_a_fast_flush_or_no_measurement_says_nothing() -> None:
    assert flush_sentence([point(1, 2000, 0.5, 1.0)], []) is None  # 0.25 ms: not slow
    assert flush_sentence([WalContentionOut(clients=1, rows_per_tx=10, tps=100, wal_insert_wait_share=0.0,
                                            wal_write_wait_share=None, wal_sync_wait_share=None)], []) is None
    assert flush_sentence([], []) is None


def test_the_summary_carries_the_flush_sentence_after_the_insertion_lock_verdict() -> None:
    contention = [point(1, 160, 0.8, 1.0), point(4, 400, 0.7, 0.5)]
    text = _summary(contention, [], 15)
    assert text is not None and text.index("fixed at 8") < text.index("Slow WAL flush: each commit waited 5.0 ms")
    assert "Slow WAL flush" not in (_summary([point(1, 3000, 0.2, 1.0)], [], 15) or "")
