"""The I/O evidence a trial carries beside its time: EXPLAIN (IO)'s read streams (19+) combined over a probe's
scans, pg_stat_io's figures (16+), and the report's table of them per configuration."""

from __future__ import annotations

from datetime import UTC, datetime

from tuner.emit.html import to_html
from tuner.families.concurrency_figures import io_rows
from tuner.report.model import CacheEvidence, FamilyOutcome, Report, SessionOut, TargetOut, Trial
from tuner.probes import explain
from tuner.probes.statio import StatIo

T0 = datetime(2026, 12, 6, 15, 0, tzinfo=UTC)
# The shape 19rc1 gives for EXPLAIN (ANALYZE, BUFFERS, IO, FORMAT JSON) of a cold bitmap heap scan (seen live)
BITMAP_19 = [{"Plan": {"Node Type": "Aggregate", "Shared Read Blocks": 1700, "Plans": [
    {"Node Type": "Bitmap Heap Scan", "Shared Read Blocks": 1700, "Shared Hit Blocks": 0,
     "Average Prefetch Distance": 76.374, "Max Prefetch Distance": 89, "Prefetch Capacity": 94, "I/O Count": 108,
     "I/O Waits": 9, "Average I/O Size": 15.435, "Average I/Os In Progress": 4.611,
     "Plans": [{"Node Type": "Bitmap Index Scan", "Shared Read Blocks": 0}]}]}, "Execution Time": 41.5}]


def test_explain_io_s_read_stream_is_read_from_the_scan_node() -> None:
    rs = explain.parse(BITMAP_19).read_stream
    assert rs == {"io_count": 108, "io_waits": 9, "prefetch_distance_max": 89, "prefetch_distance_avg": 76.374,
                  "io_size_avg_blocks": 15.435}


def test_before_19_a_plan_has_no_read_stream() -> None:
    plan = [{"Plan": {"Node Type": "Seq Scan", "Shared Read Blocks": 5}, "Execution Time": 1.0}]
    assert explain.parse(plan).read_stream == {}


def test_read_streams_add_counts_keep_the_largest_distance_and_weight_averages_by_io_count() -> None:
    streams = explain.ReadStreams()
    streams.add("bitmap", {"io_count": 100, "io_waits": 10, "prefetch_distance_max": 40, "prefetch_distance_avg": 20,
                           "io_size_avg_blocks": 16})
    streams.add("bitmap", {"io_count": 300, "io_waits": 5, "prefetch_distance_max": 90, "prefetch_distance_avg": 60,
                           "io_size_avg_blocks": 8})
    streams.add("seq", {})  # a scan without EXPLAIN (IO) figures adds nothing
    assert streams.metrics() == {"bitmap_io_count": 400, "bitmap_io_waits": 15, "bitmap_prefetch_distance_max": 90,
                                 "bitmap_prefetch_distance_avg": 50.0, "bitmap_io_size_avg_blocks": 10.0}


def test_pg_stat_io_is_asked_from_16_and_its_bytes_from_18() -> None:
    assert StatIo(150018).query is None and StatIo(150018).metrics() == {}
    assert "read_bytes" not in StatIo(170012).query.split("AS read_bytes")[0].split("NULL")[-1]  # type: ignore[union-attr]
    assert "sum(read_bytes)" in (StatIo(180006).query or "")
    on17 = StatIo(170012)
    on17.reads, on17.hits = 120.0, 3.0
    assert on17.metrics() == {"stat_io_reads": 120.0, "stat_io_hits": 3.0}  # no bytes per read before 18
    on18 = StatIo(180006)
    on18.reads, on18.hits, on18.read_bytes = 10.0, 0.0, 10 * 131072.0
    assert on18.metrics()["stat_io_bytes_per_read"] == 131072.0


def _trial(eic: int, ms: float, **metrics: float) -> Trial:
    return Trial(config={"effective_io_concurrency": eic}, value=ms, status="ok", phase="confirm", arm="baseline",
                 family="concurrency", started_at=T0, duration_s=1.0, metrics=metrics,
                 cache=CacheEvidence(shared_read=1, shared_hit=0, heap_read=1, heap_hit=0, io_read_time_ms=None,
                                     method="drop_caches"))


def _report(trials: list[Trial]) -> Report:
    return Report(target=TargetOut(server_version_num=190000, server_version="19rc1", in_recovery=True,
                                   system_identifier="7", mode="hot_standby", dsn="sandbox (removed)", sandbox=True),
                  session=SessionOut(id="abc", started_at=T0, duration_s=1.0, probes=len(trials), policy="default",
                                     seed=1, cache="cold", host="h", kernel="6.18"),
                  families=[FamilyOutcome(family="concurrency", status="done", reason="ok")], recommendations=[],
                  trials=trials)


def test_the_report_shows_each_configuration_s_median_evidence_fastest_first() -> None:
    trials = [_trial(1, 300.0, stat_io_bytes_per_read=8192.0, bitmap_prefetch_distance_max=2.0),
              _trial(1, 320.0, stat_io_bytes_per_read=8192.0, bitmap_prefetch_distance_max=4.0),
              _trial(64, 100.0, stat_io_bytes_per_read=65536.0, bitmap_prefetch_distance_max=64.0),
              _trial(16, 150.0)]  # no evidence: not a row
    rows = io_rows(trials)
    assert [r.config for r in rows] == ["effective_io_concurrency = 64", "effective_io_concurrency = 1"]
    assert rows[1].trials == 2 and rows[1].median_ms == 310.0 and rows[1].medians["bitmap_prefetch_distance_max"] == 3.0
    page = to_html(_report(trials))
    assert "Read I/O evidence" in page and "bytes per read (pg_stat_io)" in page and "65536" in page
    assert "seq scan: max prefetch distance" not in page  # no trial carries it


def test_a_report_without_evidence_has_no_such_section() -> None:
    assert "Read I/O evidence" not in to_html(_report([_trial(1, 300.0)]))
