"""A fifth family is one module plus one registry line: this module is the toy family, and ``REGISTRY.register``
the line. It owns a policy table and a report section, and both work — the policy file's ``[toy]`` table is read
into its model, its report keys are written flat in the JSON report and read back, the terminal table and the
HTML page render them — without a change to shared code."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import Field

from tuner.settings.config import Section
from tuner.emit.html import to_html
from tuner.emit.json import parse, to_json
from tuner.emit.svg import Figures, esc
from tuner.emit.table import to_table
from tuner.errors import ConfigError
from tuner.families import REGISTRY
from tuner.families.base import Family, FamilyContext, FamilyResult, Needs, skipped
from tuner.report.model import Report, ReportSection
from tuner.settings.policy import SHIPPED_POLICY_DIR, load_policy

FIXTURE = Path(__file__).parent.parent / "fixtures" / "reports" / "sandbox-all-families.json"


class ToyPolicy(Section):
    """The toy family's [toy] table."""

    spins: int = Field(default=3, ge=1, le=10, description="how often the toy spins per probe")


class ToyReport(ReportSection):
    """What the toy family adds to the report: one top-level key of the JSON report."""

    toy_spins_per_s: float | None = None

    def table(self) -> list[Any]:
        return [] if self.toy_spins_per_s is None else [f"toy: {self.toy_spins_per_s:.1f} spins/s"]


class Toy(Family):
    name: ClassVar[str] = "toy"
    needs: ClassVar[Needs] = Needs()
    after: ClassVar[tuple[str, ...]] = ()
    summary: ClassVar[str] = "a toy, to show what a family owns"
    policy_section: ClassVar[type[ToyPolicy]] = ToyPolicy
    report_section: ClassVar[type[ToyReport]] = ToyReport

    def applicable(self, ctx: FamilyContext) -> str | None:
        return None

    async def run(self, ctx: FamilyContext) -> FamilyResult:
        spins = ctx.policy.section(self.name).spins
        return skipped(self.name, "a toy", ToyReport(toy_spins_per_s=float(spins)))

    @staticmethod
    def html_sections(report: Report, figures: Figures) -> list[tuple[str, str, str]]:
        section = ToyReport.of(report, "toy")
        if section.toy_spins_per_s is None:
            return []
        return [("toy", "Toy", f"<p>{esc(section.toy_spins_per_s)} spins/s</p>")]


@pytest.fixture
def toy() -> Iterator[None]:
    REGISTRY.register(Toy)  # the one registry line (a shipped family's is a line in tuner/families/__init__.py)
    try:
        yield
    finally:
        REGISTRY.unregister(Toy.name)


def _policy_file(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "toy.toml"
    path.write_text((SHIPPED_POLICY_DIR / "default.toml").read_text() + "\n" + extra)
    return path


def test_the_toy_policy_table_is_read_into_the_toys_model(toy: None, tmp_path: Path) -> None:
    policy = load_policy(str(_policy_file(tmp_path, "[toy]\nspins = 7\n")))
    assert policy.section("toy") == ToyPolicy(spins=7)
    assert load_policy("default").section("toy") == ToyPolicy()  # a policy without the table has its defaults
    assert load_policy("default").section("wal").clients == 8  # the shipped families' tables are read as before


def test_a_bad_toy_table_is_one_sentence_naming_the_table_and_key(toy: None, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"\[toy\] spins: Input should be less than or equal to 10"):
        load_policy(str(_policy_file(tmp_path, "[toy]\nspins = 11\n")))
    with pytest.raises(ConfigError, match=r"\[toy\] spin: unknown key"):
        load_policy(str(_policy_file(tmp_path, "[toy]\nspin = 1\n")))


def test_without_the_registry_line_the_toy_table_is_an_unknown_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"toy: unknown key"):
        load_policy(str(_policy_file(tmp_path, "[toy]\nspins = 7\n")))


def test_the_toy_report_section_round_trips_the_json_report_as_a_top_level_key(toy: None) -> None:
    report = parse(FIXTURE.read_text())
    assert report.section("toy") is None
    assert json.loads(to_json(report))["toy_spins_per_s"] is None  # every registered family's keys are written
    mine = report.model_copy(update={"sections": {**report.sections, "toy": ToyReport(toy_spins_per_s=2.5)}})
    text = to_json(mine)
    data = json.loads(text)
    assert data["toy_spins_per_s"] == 2.5 and "sections" not in data
    assert data["wal_summary"] == json.loads(to_json(report))["wal_summary"]  # the other families' keys stay
    back = parse(text)
    assert back == mine and back.section("toy") == ToyReport(toy_spins_per_s=2.5)


def test_the_toy_report_section_renders_in_the_table_and_the_html_page(toy: None) -> None:
    report = parse(FIXTURE.read_text())
    mine = report.model_copy(update={"sections": {**report.sections, "toy": ToyReport(toy_spins_per_s=2.5)}})
    assert "toy: 2.5 spins/s" in to_table(mine)
    assert "toy:" not in to_table(report)
    assert "2.5 spins/s" in to_html(mine) and "spins/s" not in to_html(report)


def test_the_toy_familys_run_reads_its_table_and_returns_its_section(toy: None, tmp_path: Path) -> None:
    policy = load_policy(str(_policy_file(tmp_path, "[toy]\nspins = 4\n")))
    ctx = FamilyContext(cfg=None, policy=policy, target=None, writable=None, journal=None,  # type: ignore[arg-type]
                        progress=None, budget=None)  # type: ignore[arg-type]
    result = asyncio.run(REGISTRY.get("toy").run(ctx))
    assert result.section == ToyReport(toy_spins_per_s=4.0)
