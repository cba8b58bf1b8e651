"""A "keep" reads as a keep in every emitter: never "1 -> 256", which reads as a change with a footnote."""

from __future__ import annotations

import re

import pglast
import pytest

from tests.unit.test_emitters import report
from tuner.emit import EMITTERS, render, wording


@pytest.mark.parametrize("fmt", list(EMITTERS))
def test_no_emitter_words_a_keep_as_old_to_new(fmt: str) -> None:
    text = "\n".join(render(report("keep"), fmt).values())
    assert not re.search(r"\b1 (->|→|&rarr;) 256\b", text), fmt


def test_the_sql_comment_says_keep_today_and_what_was_searched() -> None:
    text = render(report("keep"), "sql")["recommendation.sql"]
    assert "-- effective_io_concurrency: keep 1 (searched 256; not shown better by the minimum effect)" in text
    # PostgreSQL's parser finds no statement in a keep-only file: the wording lives in comments only.
    assert pglast.parse_sql(text) == ()


def test_a_change_still_reads_old_to_new() -> None:
    text = render(report("change"), "sql")["recommendation.sql"]
    assert "-- effective_io_concurrency: 1 -> 256 (change)" in text


def test_a_keep_of_today_s_value_does_not_name_a_search_it_did_not_lose() -> None:
    rec = report("keep").recommendations[0].model_copy(update={"recommended": 1})
    assert wording.kept(rec) == "keep 1 (no value searched measured better)"
    assert wording.decided(rec, "effective_io_concurrency") == (
        "effective_io_concurrency: keep 1 (no value searched measured better)")
