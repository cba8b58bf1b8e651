"""Issue #58 item 2: "1.73x" of what, and applied where. The table (at COLUMNS 80 and 120), report.json and the HTML
report each say, in one line, which workload an improvement was measured on (tuner's generated scans or the
operator's [workload] queries) and that ALTER SYSTEM is local: apply on the primary and on every replica."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from tuner.report import file as report_file
from tuner.emit import wording
from tuner.emit.html import to_html
from tuner.emit.json import parse, to_json
from tuner.emit.svg import esc
from tuner.emit.table import to_table
from tuner.emit.terminal import detect
from tuner.report.model import Report

EXAMPLE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "reports" / "example-report.json"


def _example(**update: object) -> Report:
    return report_file.read(EXAMPLE).model_copy(update=update)


def _unwrapped(text: str) -> str:
    """The table's lines with their hanging-indent continuations joined back."""
    return re.sub(r"\n  (?=\S)", " ", text)


@pytest.mark.parametrize("columns", ["80", "120"])
def test_the_table_says_what_the_improvement_is_of_and_where_to_apply_at_80_and_120_columns(columns: str) -> None:
    text = to_table(_example(), detect("never", io.StringIO(), {"COLUMNS": columns}))
    assert max(len(line) for line in text.splitlines()) <= int(columns)
    flat = _unwrapped(text)
    assert "improvement: of scans tuner generated on your largest tables, from a cold cache" in flat
    assert "not of your application's queries" in flat
    assert ("apply on the primary and on every replica: ALTER SYSTEM is local to one server (this is a standby), "
            "not replicated") in flat


def test_your_own_queries_are_named_as_yours() -> None:
    line = wording.improvement_of(_example(workload="yours"))
    assert line is not None and "your [workload] queries" in line and "generated" not in line


def test_a_clone_is_not_called_a_standby_and_a_report_of_keeps_needs_no_apply_line() -> None:
    clone = _example(target=_example().target.model_copy(update={"mode": "staging_clone"}))
    assert "standby" not in (wording.apply_where(clone) or "standby")
    keeps = _example(recommendations=[r.model_copy(update={"decision": "keep"})
                                      for r in _example().recommendations])
    assert wording.apply_where(keeps) is None


def test_report_json_and_the_html_report_carry_the_same_two_lines() -> None:
    report = _example()
    data = json.loads(to_json(report))
    assert data["improvement_of"] == wording.improvement_of(report)
    assert data["apply_where"] == wording.apply_where(report)
    assert data["workload"] == "generated"
    assert parse(to_json(report)) == report  # the rendered lines are not data: read back, they are dropped
    page = to_html(report)
    for line in wording.scope_lines(report):
        assert f'<p class="scope">{esc(line)}</p>' in page
