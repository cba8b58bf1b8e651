"""The terminal table fits the terminal: its width (COLUMNS, else the terminal's), decisions coloured only where
colour is wanted, never cut short; files and JSON stay plain."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.cells import cell_len

from tests.unit.test_emitters import plateau_report, report
from tests.unit.test_store import make_report, save
from tuner.report import file as report_file
from tuner.emit import text as emit_text
from tuner.emit.table import to_table
from tuner.emit.terminal import FILE_WIDTH, MIN_WIDTH, Terminal, detect, wrap

REPO = Path(__file__).resolve().parents[2]
# Reports real sessions wrote: the documentation's example and the all-families sandbox fixture.
REPORTS = REPO / "tests" / "fixtures" / "reports"
REAL = [REPORTS / "example-report.json", REPORTS / "sandbox-all-families.json"]
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def reports() -> list[object]:
    return [report_file.read(p) for p in REAL] + [report("change"), report("keep"), plateau_report()]


@pytest.mark.parametrize("width", [40, 57, 64, 72, 80, 90, 100, 120, 160, 200])
def test_no_line_is_wider_than_the_terminal(width: int) -> None:
    for r in reports():
        out = to_table(r, Terminal(width=width))  # type: ignore[arg-type]
        wide = [line for line in out.splitlines() if cell_len(line) > width]
        assert not wide, wide


@pytest.mark.parametrize("width", [40, 64, 80, 100, 120])
def test_nothing_is_cut_short_and_every_decision_is_there(width: int) -> None:
    for r in reports():
        out = to_table(r, Terminal(width=width))  # type: ignore[arg-type]
        assert "…" not in out
        flat = " ".join(out.split())
        for rec in r.recommendations:  # type: ignore[attr-defined]
            assert rec.knob in out.replace("\n", " ") or rec.knob in flat
        assert flat.count("CHANGE") == sum(rec.decision == "change" for rec in r.recommendations)  # type: ignore[attr-defined]


def test_a_terminal_too_narrow_for_the_table_gets_a_stanza_per_recommendation() -> None:
    r = report_file.read(REAL[0])
    wide, narrow = to_table(r, Terminal(width=120)), to_table(r, Terminal(width=80))
    assert "┃ knob" in wide and "┃ knob" not in narrow
    assert "effective_io_concurrency: CHANGE 1 -> 1000 (edge)" in narrow
    assert "wal_writer_delay: keep 200 (searched 4096)" in narrow
    assert "  3.47x, 95% CI [2.67, 4.50], 6 pairs; near-optimal 8..1000" in narrow


def test_the_example_fits_100_columns_as_a_table() -> None:
    out = to_table(report_file.read(REAL[0]), Terminal(width=100))
    assert "┃ knob" in out and max(cell_len(line) for line in out.splitlines()) <= 100


def test_decisions_are_coloured_only_on_a_colour_terminal() -> None:
    r = report_file.read(REAL[0])
    plain, coloured = to_table(r, Terminal(width=120)), to_table(r, Terminal(width=120, color=True))
    assert not ANSI.search(plain)
    assert "\x1b[1;32mCHANGE" in coloured and "\x1b[36mkeep" in coloured
    assert ANSI.sub("", coloured) == plain  # colour adds nothing but colour
    stanzas = to_table(r, Terminal(width=60, color=True))
    assert "\x1b[1;32mCHANGE\x1b[0m 1 -> 1000" in stanzas and "\x1b[36mkeep\x1b[0m 200" in stanzas


def test_a_skipped_family_is_coloured_as_a_warning() -> None:
    r = report("keep")
    r = r.model_copy(update={"families": [r.families[0].model_copy(update={"status": "skipped", "reason": "no"})]})
    assert "family concurrency: \x1b[33mskipped\x1b[0m — no" in to_table(r, Terminal(color=True))


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("choice", "env", "tty", "color"), [
    ("auto", {}, True, True),
    ("auto", {}, False, False),
    ("auto", {"NO_COLOR": "1"}, True, False),
    ("auto", {"NO_COLOR": ""}, True, True),  # no-color.org: set and not empty
    ("auto", {"FORCE_COLOR": "1"}, False, True),
    ("auto", {"NO_COLOR": "1", "FORCE_COLOR": "1"}, True, False),
    ("auto", {"TERM": "dumb"}, True, False),
    ("always", {"NO_COLOR": "1"}, False, True),  # an explicit option wins over the variable
    ("never", {"FORCE_COLOR": "1"}, True, False),
])
def test_colour_follows_the_option_then_the_conventions(choice: str, env: dict[str, str], tty: bool,
                                                        color: bool) -> None:
    assert detect(choice, _Tty() if tty else io.StringIO(), env).color is color


def test_width_is_columns_else_the_file_width_for_a_pipe() -> None:
    assert detect("auto", io.StringIO(), {"COLUMNS": "100"}).width == 100
    assert detect("auto", io.StringIO(), {}).width == FILE_WIDTH
    assert detect("auto", io.StringIO(), {"COLUMNS": "nonsense"}).width == FILE_WIDTH
    assert detect("auto", io.StringIO(), {"COLUMNS": "10"}).width == MIN_WIDTH


@pytest.mark.parametrize("text", ["  apply:    ALTER SYSTEM SET effective_io_concurrency = 256;",
                                  "x" * 130, "漢字" * 50, "a  b   c " * 20, "/dev/" + "é" * 90])
def test_wrap_keeps_every_character_and_fits(text: str) -> None:
    for width in (40, 41, 60):
        lines = wrap(text, width)
        assert all(cell_len(line) <= width for line in lines)
        assert "".join(text.split()) == "".join("".join(lines).split())
        assert all(line.startswith(" " * 2) for line in lines[1:])


def _cli(state: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(state), "TUNER_TUNER__STATE_DIR": str(state)}
    return subprocess.run([sys.executable, "-m", "tuner", *args], capture_output=True, text=True, cwd=state,
                          timeout=120, env={**base, **(env or {})})


@pytest.fixture
def stored(tmp_path: Path) -> Path:
    """A state directory whose store holds the example report (a real session's) as its newest session."""
    state = tmp_path / "state"
    state.mkdir()
    example = report_file.read(REAL[0])
    fp = make_report("a1aaaaaaaaaa").target.fingerprint
    save(state / "tuner.db", example.model_copy(update={"target": example.target.model_copy(
        update={"fingerprint": fp})}))
    return state


def test_show_latest_fits_columns_100_and_colours_only_when_asked(stored: Path) -> None:
    proc = _cli(stored, "show", "latest", env={"COLUMNS": "100"})
    assert proc.returncode == 0, proc.stderr
    assert max(cell_len(line) for line in proc.stdout.splitlines()) <= 100 and "CHANGE" in proc.stdout
    assert not ANSI.search(proc.stdout)  # a pipe, colour not asked for
    forced = _cli(stored, "show", "latest", "--color", "always", env={"COLUMNS": "100", "NO_COLOR": "1"})
    assert "\x1b[1;32mCHANGE" in forced.stdout and ANSI.sub("", forced.stdout) == proc.stdout
    assert "\x1b[1;32m" in _cli(stored, "show", "latest", env={"FORCE_COLOR": "1"}).stdout


def test_json_sql_and_files_are_never_coloured(stored: Path, tmp_path: Path) -> None:
    for fmt in ("json", "sql"):
        proc = _cli(stored, "show", "latest", "--format", fmt, "--color", "always", "--output", str(tmp_path / fmt))
        assert proc.returncode == 0, proc.stderr
        assert not ANSI.search(proc.stdout)
    report_txt = (tmp_path / "json" / "report.txt").read_text()
    assert not ANSI.search(report_txt) and max(cell_len(line) for line in report_txt.splitlines()) == FILE_WIDTH
    exported = _cli(stored, "export", "--format", "conf", "--color", "always")
    assert exported.returncode == 0 and not ANSI.search(exported.stdout)
    table = _cli(stored, "export", "--format", "table", "--color", "always", env={"COLUMNS": "72"})
    assert "\x1b[1;32mCHANGE" in table.stdout and max(cell_len(ANSI.sub("", ln)) for ln in table.stdout.splitlines()) <= 72


def test_emit_text_on_a_terminal_is_the_file_for_every_other_format() -> None:
    r = report("change")
    assert emit_text(r, "sql", terminal=Terminal(width=40, color=True)) == emit_text(r, "sql")
    assert os.linesep == "\n"
