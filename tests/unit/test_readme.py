"""Issue #58 item 7: the README agrees with the program. Its sample of what a run prints is a rendering of the
example report (tests/fixtures/reports/example-report.json) at report.txt's width, cut with "…" — each part must
appear, line for line, in that rendering; and what it says is measured is not, lower down, listed as not done yet."""

from __future__ import annotations

import re
from pathlib import Path

from tuner.report import file as report_file
from tuner.emit.table import to_table

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def _sample() -> list[list[str]]:
    """The README's sample output under "What a run prints", as its parts between "…" lines."""
    section = README.split("## What a run prints", 1)[1]
    block = re.search(r"```\n(tuner session .*?)```", section, re.S)
    assert block is not None, "the README's sample output is gone"
    parts: list[list[str]] = [[]]
    for line in block.group(1).splitlines():
        if line == "…":
            parts.append([])
        else:
            parts[-1].append(line)
    return [p for p in parts if p]


def test_the_readmes_sample_table_is_the_example_reports_rendering() -> None:
    rendered = to_table(report_file.read(ROOT / "tests" / "fixtures" / "reports" / "example-report.json")).splitlines()
    for part in _sample():
        starts = [i for i, line in enumerate(rendered) if line == part[0]]
        assert any(rendered[i:i + len(part)] == part for i in starts), \
            f"the README's sample differs from the example report's rendering from: {part[0]!r}"
    assert "improvement (95% CI)" in _sample()[0][3]  # the header row: one column, as the program prints it


def test_what_the_readme_says_was_measured_quietly_is_not_also_listed_as_not_done() -> None:
    assert "on a quiet machine" in README.split("## Does it find the right value?", 1)[1].split("##", 1)[0]
    not_yet = README.split("## Status", 1)[1].split("Not yet:", 1)[1]
    assert not re.search(r"ground truth measured on a quiet machine\s+—", not_yet)
