"""``tuner history`` lists what a stored report says (each session's decisions), so a report ``tuner show`` would
refuse (tuner.report.validate) is listed with the same sentence instead of its decisions — never rendered — in text
and in JSON, and the listing still shows every other session."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.unit.test_hostile_reports import VARIANTS, _store_with
from tuner.cli import main


def _history(state: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["history", "--state-dir", str(state), *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("name", ["knob-archive-command", "schema-version-99", "udev-program", "value-newline"])
def test_a_tampered_report_is_listed_with_the_sentence_show_gives(name: str, tmp_path: Path) -> None:
    change, code, expect = VARIANTS[name]
    assert code == 2
    _store_with(change)(tmp_path / "tuner.db")
    shown = CliRunner().invoke(main, ["show", "--state-dir", str(tmp_path), "--format", "json"])
    assert shown.exit_code == 2 and expect in shown.stderr
    sentence = shown.stderr.splitlines()[0].removeprefix("tuner: error: ")

    status, out, err = _history(tmp_path)
    assert status == 0, err
    assert f"not shown: {' '.join(sentence.split())}" in " ".join(out.split())  # wrapped to the width
    assert "effective_io_concurrency" not in out and "read_ahead_kb" not in out  # no decision rendered
    status, out, err = _history(tmp_path, "--format", "json")
    [entry] = json.loads(out)
    assert status == 0 and entry["refused"] == sentence and entry["decisions"] == []


def test_a_genuine_report_is_listed_with_its_decisions(tmp_path: Path) -> None:
    change, _, _ = VARIANTS["genuine"]
    _store_with(change)(tmp_path / "tuner.db")
    status, out, err = _history(tmp_path)
    assert status == 0, err
    assert "not shown" not in out and "read_ahead_kb" in out
    [entry] = json.loads(_history(tmp_path, "--format", "json")[1])
    assert "refused" not in entry and entry["decisions"]


def test_the_listing_fits_the_terminal_and_colours_decisions_when_asked(tmp_path: Path) -> None:
    change, _, _ = VARIANTS["genuine"]
    _store_with(change)(tmp_path / "tuner.db")
    result = CliRunner().invoke(main, ["history", "--state-dir", str(tmp_path), "--color", "always"],
                                env={"COLUMNS": "50"})
    assert result.exit_code == 0, result.stderr
    plain = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout)
    assert max(len(line) for line in plain.splitlines()) <= 50
    assert "\x1b[36m" in result.stdout or "\x1b[1;32m" in result.stdout  # a keep or a change, coloured
    assert "\x1b[" not in _history(tmp_path)[1]  # not a terminal, not asked: plain
