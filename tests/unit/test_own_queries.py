"""[workload] queries with SET statements of their own (tuner.probes.own_queries): what is kept, what is refused
at config load with one sentence and a hint, and how the report shows the query."""

from __future__ import annotations

import pytest

from tuner.errors import ConfigError
from tuner.probes import own_queries
from tuner.probes.workload import ProbeQuery
from tuner.settings.config import Config, _describe
from pydantic import ValidationError

GP2 = "SELECT count(filler) FROM pgbench_accounts WHERE aid BETWEEN 1000 AND 200000"


def test_a_query_without_sets_is_kept_as_written() -> None:
    assert own_queries.parse(f"  {GP2};  ") == own_queries.OwnQuery(sql=GP2)


def test_leading_sets_are_the_querys_own_settings_in_their_order() -> None:
    q = own_queries.parse(f"SET enable_indexscan = off; set random_page_cost TO 1.1;\nSET work_mem = '64MB'; {GP2}")
    assert q.sql == GP2
    assert q.settings == (("enable_indexscan", "off"), ("random_page_cost", "1.1"), ("work_mem", "64MB"))


def test_set_local_and_numbers_and_every_enable_switch_are_allowed() -> None:
    q = own_queries.parse("SET LOCAL max_parallel_workers_per_gather = 2; SET enable_hashjoin = false; "
                          "SET jit = on; SELECT 1")
    assert q.settings == (("max_parallel_workers_per_gather", "2"), ("enable_hashjoin", "false"), ("jit", "on"))


def test_the_query_keeps_its_text_after_multibyte_characters_in_the_sets() -> None:
    q = own_queries.parse("SET enable_seqscan = 'off'; SELECT 'é' AS \"ü\"")
    assert q.sql == "SELECT 'é' AS \"ü\""


@pytest.mark.parametrize(("entry", "says"), [
    ("SET io_combine_limit = 8; SELECT 1", "sets io_combine_limit, which is not one of the planner's settings"),
    ("SET statement_timeout = 0; SELECT 1", "sets statement_timeout, which is not"),
    ("SET search_path = a, b; SELECT 1", "sets search_path, which is not"),
    ("SET enable_seqscan = a, b; SELECT 1", "sets enable_seqscan to a list"),
    ("SET enable_seqscan TO DEFAULT; SELECT 1", "resets or defaults a setting"),
    ("RESET enable_seqscan; SELECT 1", "resets or defaults a setting"),
    ("SET SESSION AUTHORIZATION bob; SELECT 1", "sets session_authorization, which is not"),
    ("VACUUM pgbench_accounts; SELECT 1", "holds a Vacuum statement before its query"),
    ("SELECT 1; SELECT 2", "holds a Select statement before its query"),
    ("SET enable_seqscan = off;", "holds no query after its SET statements"),
    ("SELEC 1", "could not be parsed"),
])
def test_anything_else_is_refused_in_one_sentence(entry: str, says: str) -> None:
    with pytest.raises(own_queries.QueryRefused) as refused:
        own_queries.parse(entry, 2)
    assert str(refused.value).startswith("query 2 ") and says in str(refused.value)
    assert refused.value.hint


def test_the_config_refuses_a_setting_at_load_with_the_allowed_names_as_hint() -> None:
    with pytest.raises(ValidationError) as err:
        Config.model_validate({"workload": {"queries": [GP2, "SET effective_io_concurrency = 0; " + GP2]}})
    described = _describe(err.value, "tuner.toml")
    assert isinstance(described, ConfigError)
    assert str(described) == ("tuner.toml: [workload] queries: query 2 sets effective_io_concurrency, which is not "
                              "one of the planner's settings a query may set for itself")
    assert described.hint is not None and "enable_*" in described.hint and "random_page_cost" in described.hint


def test_the_config_keeps_a_query_with_planner_settings() -> None:
    entry = f"SET enable_indexscan = off; {GP2}"
    assert Config.model_validate({"workload": {"queries": [entry]}}).workload.queries == (entry,)


def test_the_report_shows_the_query_with_its_sets() -> None:
    q = ProbeQuery("custom query 1", GP2, None, "custom", plan=None,
                   settings=(("enable_indexscan", "off"), ("work_mem", "64MB")))
    assert q.as_run == f"SET enable_indexscan = off; SET work_mem = '64MB'; {GP2}"
    assert ProbeQuery("custom query 2", GP2, None, "custom", plan=None).as_run == GP2


def test_the_reports_statement_lines_name_the_query_with_its_sets() -> None:
    from tuner.families.plans import statement_lines

    q = ProbeQuery("custom query 1", "SELECT 1", None, "custom", plan=None, settings=(("enable_indexscan", "off"),))
    [line] = statement_lines([q])
    assert line.name == "custom query 1" and line.text == "SET enable_indexscan = off; SELECT 1"
