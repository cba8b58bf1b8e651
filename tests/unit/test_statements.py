"""The pure rules of [workload] from = "pg_stat_statements": what a normalised statement is (PostgreSQL's own
parser), the values its parameters get from given statistics, the ranking, the budget and the weights."""

from __future__ import annotations

import pytest

from tuner.cli.cmd_workload import as_json, render
from tuner.probes import normalised, statements
from tuner.probes.normalised import ColumnStats, ParamUse
from tuner.probes.statements import Statement, alike, budget_spent, rank, read_path_nodes, scans, weights
from tuner.probes.workload import ProbeQuery
from tuner.settings.config import Config, WorkloadConfig
from tuner.target.privileges import missing

# -- what a statement is ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, reason", [
    ("INSERT INTO t VALUES ($1)", "writes"),
    ("UPDATE t SET a = $1 WHERE id = $2", "writes"),
    ("DELETE FROM t WHERE id = $1", "writes"),
    ("MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DELETE", "writes"),
    ("WITH d AS (DELETE FROM t WHERE id = $1 RETURNING *) SELECT count(*) FROM d", "writes (a data-modifying WITH)"),
    ("SELECT * INTO copy FROM t", "writes (SELECT INTO creates a table)"),
    ("SELECT * FROM t WHERE id = $1 FOR UPDATE", "locks rows (FOR UPDATE/SHARE), which a read-only replay cannot"),
    ("SELECT * FROM (SELECT * FROM t FOR SHARE) s", "locks rows (FOR UPDATE/SHARE), which a read-only replay cannot"),
])
def test_a_statement_that_writes_or_locks_is_refused_with_one_sentence(text: str, reason: str) -> None:
    assert normalised.analyse(text).refusal == reason


@pytest.mark.parametrize("text", ["SET work_mem = $1", "BEGIN", "EXPLAIN SELECT 1", "VACUUM t", "SHOW work_mem"])
def test_a_utility_statement_is_not_a_query(text: str) -> None:
    shape = normalised.analyse(text)
    assert shape.utility and shape.refusal is None


def test_unparsable_text_is_refused_with_the_parsers_reason() -> None:
    assert normalised.analyse("SELECT FROM WHERE (").refusal.startswith("its text could not be parsed")


def test_each_parameter_is_tied_to_the_column_it_is_compared_to() -> None:
    shape = normalised.analyse(
        "SELECT count(*) FROM accounts a JOIN branches b USING (bid) WHERE a.balance BETWEEN $1 AND $2 "
        "AND b.bid = $3::int AND a.aid IN ($4, $5) AND $6 < a.aid AND kind = ANY($7) AND $8 >= a.created LIMIT $9")
    assert shape.refusal is None and not shape.utility
    assert shape.params == tuple(range(1, 10))
    assert shape.uses == {
        1: ParamUse(1, "balance", "a", "lo"), 2: ParamUse(2, "balance", "a", "hi"), 3: ParamUse(3, "bid", "b", "eq"),
        4: ParamUse(4, "aid", "a", "in", 0), 5: ParamUse(5, "aid", "a", "in", 1),
        6: ParamUse(6, "aid", "a", "gt"),  # $6 < a.aid is a.aid > $6
        7: ParamUse(7, "kind", None, "any"), 8: ParamUse(8, "created", "a", "lt"),
    }
    assert 9 not in shape.uses  # LIMIT $9 compares to no column: the statement cannot be filled
    assert [(t.name, t.alias) for t in shape.tables] == [("accounts", "a"), ("branches", "b")]
    assert normalised.table_of(shape.uses[3], shape.tables)[0].qualified() == '"branches"'
    assert len(normalised.table_of(shape.uses[7], shape.tables)) == 2  # unqualified: either table


# -- values from the statistics -----------------------------------------------------------------------------------

HIST = ColumnStats(bounds=tuple(str(v) for v in range(0, 1001, 10)), common=("77", "5"), type="integer")


def test_an_equality_gets_the_most_common_value_else_the_histograms_middle() -> None:
    assert normalised.value_for(ParamUse(1, "c", None, "eq"), HIST, 0.01) == "77"
    assert normalised.value_for(ParamUse(1, "c", None, "eq"), ColumnStats(HIST.bounds, (), "integer"), 0.01) == "500"


def test_a_betweens_ends_are_a_span_of_the_histogram_apart_around_its_middle() -> None:
    lo, hi = ParamUse(1, "c", None, "lo"), ParamUse(2, "c", None, "hi")
    narrow = [int(normalised.value_for(u, HIST, 0.01)) for u in (lo, hi)]  # type: ignore[arg-type]
    wide = [int(normalised.value_for(u, HIST, 0.1)) for u in (lo, hi)]  # type: ignore[arg-type]
    assert narrow == [490, 510] and wide == [450, 550]


def test_an_inequality_leaves_a_spans_share_of_the_rows_on_its_side() -> None:
    assert normalised.value_for(ParamUse(1, "c", None, "gt"), HIST, 0.1) == "900"
    assert normalised.value_for(ParamUse(1, "c", None, "lt"), HIST, 0.1) == "100"


def test_in_lists_get_distinct_values_and_any_an_array() -> None:
    first, second = (normalised.value_for(ParamUse(n, "c", None, "in", n - 1), HIST, 0.01) for n in (1, 2))
    assert first != second
    values = normalised.value_for(ParamUse(1, "c", None, "any"), HIST, 0.01)
    assert isinstance(values, list) and len(values) == len(set(values)) > 1


def test_a_column_without_statistics_cannot_fill_a_parameter() -> None:
    assert normalised.value_for(ParamUse(1, "c", None, "eq"), ColumnStats((), (), "text"), 0.01) is None


def test_literals_are_quoted_and_cast() -> None:
    assert normalised.literal("O'Brien", "text") == "'O''Brien'::text"
    assert normalised.literal(['a"b', "c\\d"], "text[]") == "'{\"a\\\"b\",\"c\\\\d\"}'::text[]"


def test_fill_replaces_only_the_parameter_tokens() -> None:
    text = 'SELECT "$1", \'$2\' FROM t WHERE a = $1 AND b = $10'
    assert normalised.fill(text, {1: "'x'::text", 10: "'5'::int"}) == (
        'SELECT "$1", \'$2\' FROM t WHERE a = (\'x\'::text) AND b = (\'5\'::int)')


# -- ranking, budget, weights ---------------------------------------------------------------------------------------


def _s(queryid: int, blocks: int, time_ms: float = 0.0, calls: int = 1) -> Statement:
    return Statement(queryid, f"SELECT {queryid}", calls, blocks, time_ms)


def test_statements_are_ranked_by_read_time_where_it_was_measured() -> None:
    ranked, by_time = rank([_s(1, 900, 10.0), _s(2, 100, 90.0)], total_blocks=1000, total_time_ms=100.0)
    assert by_time and [r.statement.queryid for r in ranked] == [2, 1]
    assert [r.share for r in ranked] == [0.9, 0.1]


def test_statements_are_ranked_by_blocks_read_when_track_io_timing_was_off() -> None:
    ranked, by_time = rank([_s(1, 100), _s(2, 300), _s(3, 0)], total_blocks=500, total_time_ms=0.0)
    assert not by_time and [r.statement.queryid for r in ranked] == [2, 1, 3]
    assert [r.share for r in ranked] == [0.6, 0.2, 0.0]  # of the whole database's reads, not only these


def test_the_budget_stops_at_its_count_or_its_share() -> None:
    assert budget_spent(0, 0.0, statements=5, share=0.8) is None
    assert budget_spent(4, 0.79, statements=5, share=0.8) is None
    assert budget_spent(5, 0.1, statements=5, share=0.8) == "beyond the budget of 5 statements ([workload] statements)"
    assert budget_spent(1, 0.85, statements=5, share=0.8) == (
        "the kept statements already cover 85% of the read I/O ([workload] share = 0.8)")


def test_weights_are_the_shares_among_the_kept_statements() -> None:
    qs = [ProbeQuery(name=f"q{i}", sql="SELECT 1", relation=None, kind="statement", plan=None, queryid=i, share=s)
          for i, s in ((1, 0.6), (2, 0.2))]
    assert [q.weight for q in weights(qs)] == pytest.approx([0.75, 0.25])


def test_a_replay_is_the_originals_size_within_a_factor_of_four() -> None:
    assert alike(1000, 800.0) and alike(201, 800.0) and alike(3200, 800.0)
    assert not alike(199, 800.0) and not alike(3201, 800.0)
    assert Statement(1, "SELECT 1", 4, 300, 0.0, blocks_hit=100).blocks_per_call == 100


def test_sequential_scans_count_from_17() -> None:
    assert read_path_nodes(160000) == {"Bitmap Heap Scan"}
    assert read_path_nodes(170000) == {"Bitmap Heap Scan", "Seq Scan"}


def test_scans_of_the_system_catalogs_do_not_count() -> None:
    doc = [{"Plan": {"Node Type": "Nested Loop", "Plans": [
        {"Node Type": "Seq Scan", "Relation Name": "pg_class", "Schema": "pg_catalog"},
        {"Node Type": "Bitmap Heap Scan", "Relation Name": "orders", "Schema": "app",
         "Plans": [{"Node Type": "Bitmap Index Scan", "Index Name": "orders_k"}]}]}}]
    assert scans(doc, read_path_nodes(170000)) == [("Bitmap Heap Scan", '"app"."orders"')]


# -- configuration and privileges -------------------------------------------------------------------------------------


def test_from_is_the_key_and_generated_the_default() -> None:
    assert Config().workload.queries_from == "generated"
    w = Config.model_validate({"workload": {"from": "pg_stat_statements", "stats_dsn": "host=primary1"}}).workload
    assert w.queries_from == "pg_stat_statements" and w.statements == 5 and w.share == 0.8
    assert WorkloadConfig(statements=2).statements == 2


def test_an_unknown_source_is_refused() -> None:
    with pytest.raises(Exception, match="pg_stat_statements"):
        Config.model_validate({"workload": {"from": "pg_stat_activity"}})


def test_pg_read_all_stats_is_asked_for_only_when_statements_are_read() -> None:
    row = {"role": "tuner", "read_all_settings": True, "control_system": True, "read_tables": True,
           "set_track_io_timing": True, "read_all_stats": False}
    assert missing(row, writable=False) == []
    [grant] = missing(row, writable=False, statements=True)
    assert grant.sql == "GRANT pg_read_all_stats TO tuner;"



def test_a_stats_dsn_asyncpg_cannot_honour_is_refused_like_the_targets() -> None:
    with pytest.raises(Exception, match="keepalives"):
        Config.model_validate({"workload": {"from": "pg_stat_statements", "stats_dsn": "host=primary1 keepalives=1"}})


def _selection() -> "statements.Selection":
    ranked, by_time = rank([_s(11, 900, calls=3), _s(22, 100), Statement(None, "<insufficient privilege>", 1, 50, 0.0),
                            _s(33, 0)], total_blocks=1050, total_time_ms=0.0)
    kept = weights([ProbeQuery(name="q11", sql="SELECT 11", relation="t", kind="statement", plan=None, queryid=11,
                               share=ranked[0].share, text="SELECT $1")])
    left = [statements.LeftOut(22, "SELECT 22", "writes", ranked[1].share),
            statements.LeftOut(0, "<insufficient privilege>", "its text is hidden from this role (grant it "
                               "pg_read_all_stats)", ranked[2].share)]
    return statements.Selection(queries=kept, left_out=left, by_time=by_time, read_from="the target",
                                covered=ranked[0].share, ranking=ranked)


def test_workload_show_lists_each_statement_with_what_a_session_does_with_it() -> None:
    sel = _selection()
    cfg = Config.model_validate({"workload": {"from": "pg_stat_statements"}})
    text = render(sel, cfg, "15.18", width=60)
    assert max(len(line) for line in text.splitlines()) <= 60, text
    assert "replay: weight 1.00" in text and "left out: writes" in text and "pg_read_all_stats" in text
    assert "ranked by blocks read (track_io_timing was off)" in " ".join(text.split())
    assert "1 statement replayed, covering 86% of the read I/O; 2 left out" in " ".join(text.split())
    assert "SELECT 33" not in text  # examined, neither kept nor left out (a utility or catalog statement)
    data = as_json(sel, cfg)
    assert [(r["queryid"], r["replayed"], r["reason"]) for r in data["statements"]] == [
        (11, True, None), (22, False, "writes"), (None, False, sel.left_out[1].reason)]
    assert data["ranked_by"] == "blocks_read" and data["from"] == "pg_stat_statements"


def test_workload_show_says_when_a_session_would_not_use_the_statements() -> None:
    assert '[workload] from is "generated"' in " ".join(render(_selection(), Config(), "15.18").split())


def test_the_scan_that_touched_the_most_blocks_comes_first() -> None:
    doc = {"Plan": {"Node Type": "Hash Join", "Plans": [
        {"Node Type": "Seq Scan", "Relation Name": "small", "Schema": "public", "Shared Hit Blocks": 3},
        {"Node Type": "Seq Scan", "Relation Name": "big", "Schema": "public", "Shared Read Blocks": 900,
         "Shared Hit Blocks": 10}]}}
    assert scans(doc, read_path_nodes(170000)) == [("Seq Scan", '"public"."big"'), ("Seq Scan", '"public"."small"')]
