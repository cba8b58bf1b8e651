from __future__ import annotations

import pytest

from tuner.probes.explain import parse
from tuner.probes.workload import Candidate, choose, parse_bounds, range_query, row_fraction_for_pages
from tuner import redact


def _bhs(read_key: str) -> list[dict]:
    return [{
        "Plan": {
            "Node Type": "Aggregate", "Shared Hit Blocks": 10, "Shared Read Blocks": 1000, read_key: 50.0,
            "Plans": [{
                "Node Type": "Bitmap Heap Scan", "Shared Hit Blocks": 10, "Shared Read Blocks": 1000, read_key: 50.0,
                "Plans": [{"Node Type": "Bitmap Index Scan", "Shared Hit Blocks": 8, "Shared Read Blocks": 30}],
            }],
        },
        "Planning Time": 0.5,
        "Execution Time": 123.4,
    }]


@pytest.mark.parametrize("key", ["I/O Read Time", "Shared I/O Read Time"])  # <= 16, >= 17
def test_explain_io_time_key_of_each_version(key: str) -> None:
    r = parse(_bhs(key))
    assert r.io_read_time_ms == 50.0
    assert r.execution_time_ms == 123.4


def test_heap_blocks_exclude_the_index_scan() -> None:
    r = parse(_bhs("I/O Read Time"))
    assert (r.heap_read, r.heap_hit) == (970, 2)
    assert r.has_bitmap_heap_scan
    assert r.heap_read_fraction == pytest.approx(970 / 972)


def test_no_io_time_without_track_io_timing() -> None:
    doc = [{"Plan": {"Node Type": "Seq Scan", "Shared Read Blocks": 5}, "Execution Time": 1.0}]
    r = parse(doc)
    assert r.io_read_time_ms is None and not r.has_bitmap_heap_scan


def test_row_fraction_gives_the_requested_page_share() -> None:
    f = row_fraction_for_pages(0.12, 61)
    assert 1 - (1 - f) ** 61 == pytest.approx(0.12)


def _cand(rel: str, col: str, corr: float, pages: int = 10_000) -> Candidate:
    return Candidate(relation=rel, relpages=pages, reltuples=pages * 61.0, index=f"{rel}_{col}_idx", column_sql=col,
                     column_type="integer", correlation=corr, histogram_bounds=tuple(float(x) for x in range(0, 10_001, 100)),
                     null_frac=0.0, mcv_frac=0.0)


def test_choose_prefers_a_range_on_an_uncorrelated_column() -> None:
    qs = choose([_cand("t", "id", 1.0), _cand("t", "balance", 0.01)], relations=1, pages_fraction=0.12)
    assert len(qs) == 1 and qs[0].kind == "range" and "balance BETWEEN" in qs[0].sql


def test_choose_samples_an_ordered_key_when_nothing_is_scattered() -> None:
    qs = choose([_cand("t", "id", 0.99)], relations=1, pages_fraction=0.12)
    assert qs[0].kind == "sample" and "= ANY" in qs[0].sql


def test_choose_takes_the_largest_relations_first() -> None:
    qs = choose([_cand("small", "a", 0.0, 100), _cand("big", "b", 0.0, 50_000)], relations=1, pages_fraction=0.1)
    assert qs[0].relation == "big"


def test_range_spans_the_right_share_of_the_histogram() -> None:
    q = range_query(_cand("t", "balance", 0.0), 0.12)
    assert q is not None
    lo, hi = (int(x) for x in q.sql.split("BETWEEN ")[1].split(" AND "))
    share = (hi - lo) / 10_000
    assert share == pytest.approx(row_fraction_for_pages(0.12, 61), rel=0.05)


def test_parse_bounds_survives_junk() -> None:
    assert parse_bounds("{1,2,3}") == (1.0, 2.0, 3.0)
    assert parse_bounds("{a,b}") == ()
    assert parse_bounds(None) == ()


@pytest.mark.parametrize(("dsn", "shown"), [
    ("postgresql://u:s3cret@h/db", "postgresql://u:***@h/db"),
    ("host=h password=s3cret dbname=x", "host=h password=*** dbname=x"),
    ("host=h password='a b' dbname=x", "host=h password=*** dbname=x"),
])
def test_passwords_never_reach_logs(dsn: str, shown: str) -> None:
    assert redact.dsn(dsn) == shown
    assert "s3cret" not in redact.dsn(dsn)


