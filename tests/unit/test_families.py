"""The family registry and the orchestrator's generic checks, as pure logic."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest
from pydantic import ValidationError

from tuner.report import by_family
from tuner.families import REGISTRY
from tuner.families.base import Family, FamilyContext, FamilyResult, Needs, Registry, unmet_needs
from tuner.emit.json import parse
from tuner.report.model import Report
from tuner.settings.policy import load_policy


def _family(name: str, after: tuple[str, ...] = ()) -> type[Family]:
    class F(Family):
        needs: ClassVar[Needs] = Needs()
        summary: ClassVar[str] = name

        def applicable(self, ctx: FamilyContext) -> str | None:
            return None

        async def run(self, ctx: FamilyContext) -> FamilyResult:
            raise NotImplementedError

    F.name = name
    F.after = after
    F.__qualname__ = F.__name__ = f"F_{name}"
    return F


def test_the_shipped_families_run_readahead_before_concurrency() -> None:
    order = [f.name for f in REGISTRY.ordered(["wal", "concurrency", "readahead"])]
    assert order.index("readahead") < order.index("concurrency")
    assert set(order) == {"wal", "concurrency", "readahead"}
    assert [f.name for f in REGISTRY.ordered(["concurrency"])] == ["concurrency"]


def test_the_replay_family_runs_before_the_wal_familys_gigabytes_of_wal() -> None:
    order = [f.name for f in REGISTRY.ordered(REGISTRY.names())]
    assert order.index("replay") < order.index("wal"), order


def test_every_registered_family_is_a_family_and_sets_what_has_no_default() -> None:
    for name in REGISTRY.names():
        fam = REGISTRY.get(name)
        assert isinstance(fam, Family)
        assert fam.name == name and isinstance(fam.needs, Needs) and fam.summary
        assert all(a in REGISTRY.names() for a in fam.after)


def test_the_hooks_a_family_leaves_out_have_the_base_classs_defaults() -> None:
    fam = _family("plain")()
    assert fam.objective_unit == "ms (the workload's execution time)" and fam.after == ()
    assert not fam.honours_pins and fam.object_scopes == ()
    assert fam.policy_section is None and fam.report_section is None
    assert fam.upgrade_report(report := Report.model_construct()) is report


def test_the_registry_refuses_a_class_that_is_not_a_whole_family() -> None:
    class NotAFamily:
        name: ClassVar[str] = "nope"

    class Unnamed(Family):
        needs: ClassVar[Needs] = Needs()
        summary: ClassVar[str] = "no name"

        def applicable(self, ctx: FamilyContext) -> str | None:
            return None

        async def run(self, ctx: FamilyContext) -> FamilyResult:
            raise NotImplementedError

    class Abstract(Family):  # no run
        name: ClassVar[str] = "abstract"
        needs: ClassVar[Needs] = Needs()
        summary: ClassVar[str] = "no run"

        def applicable(self, ctx: FamilyContext) -> str | None:
            return None

    reg = Registry({})
    with pytest.raises(TypeError, match="not a tuner.families.base.Family subclass"):
        reg.register(NotAFamily)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="does not set name"):
        reg.register(Unnamed)
    with pytest.raises(TypeError, match="abstract"):
        reg.register(Abstract)  # type: ignore[type-abstract]
    assert reg.names() == ()


def test_policies_and_reports_are_read_through_the_registry_passed_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """tuner.families hands its registry to tuner.report.by_family; without it, reading a policy is refused in one sentence
    (it would lose the families' tables), never done by importing a module by name."""
    assert by_family.types("policy") == REGISTRY.section_types("policy")
    monkeypatch.setattr(by_family, "_source", None)
    with pytest.raises(RuntimeError, match="import tuner.families first"):
        load_policy("default")


def test_order_follows_after_and_keeps_registry_order_otherwise() -> None:
    reg = Registry({})
    for fam in (_family("c", after=("a",)), _family("b"), _family("a")):
        reg.register(fam)
    assert [f.name for f in reg.ordered(["a", "b", "c"])] == ["b", "a", "c"]
    assert [f.name for f in reg.ordered(["c"])] == ["c"]  # an absent prerequisite does not block


def test_families_that_wait_for_each_other_are_an_error() -> None:
    reg = Registry({})
    reg.register(_family("x", after=("y",)))
    reg.register(_family("y", after=("x",)))
    with pytest.raises(ValueError, match="wait for each other"):
        reg.ordered(["x", "y"])


def test_a_report_key_or_section_no_family_owns_is_refused() -> None:
    fixture = Path(__file__).parent.parent / "fixtures" / "reports" / "sandbox-all-families.json"
    data = parse(fixture.read_text()).model_dump(mode="json")  # flat, as the JSON report has it
    assert "wal_summary" in data and "sections" not in data
    assert Report.model_validate(data).section("wal") is not None  # the flat keys go to the family that owns them
    with pytest.raises(ValidationError, match="extra"):
        Report.model_validate({**data, "wal_sumary": "s"})  # a key no family's section has
    with pytest.raises(ValidationError, match="no family 'nofamily'"):
        Report.model_validate({**data, "sections": {"nofamily": {"x": 1}}})


def test_unmet_needs_name_the_first_missing_one() -> None:
    from tuner.families.base import Endpoint
    from tuner.target.facts import TargetFacts

    facts = TargetFacts(server_version_num=150018, server_version="15.18", in_recovery=True, database="d", user="u",
                        is_superuser=False, can_read_all_settings=True, data_directory="/nonexistent",
                        system_identifier="1", staging_marker=None, marker_source=None, server_addr=None,
                        settings={}, tablespaces=())
    ctx = FamilyContext(cfg=None, policy=None, target=Endpoint("x", None, facts),  # type: ignore[arg-type]
                        writable=Endpoint("x", None, facts, refusal="it writes, and the target is a hot standby"),
                        journal=None, progress=None, budget=None)  # type: ignore[arg-type]
    assert unmet_needs(Needs(), ctx) is None
    assert "staging host" in (unmet_needs(Needs(local_host=True), ctx) or "")
    assert unmet_needs(Needs(writable=True), ctx) == "it writes, and the target is a hot standby"
    assert "superuser" in (unmet_needs(Needs(superuser=True), ctx) or "")
