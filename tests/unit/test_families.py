"""The family registry and the orchestrator's generic checks, as pure logic."""

from __future__ import annotations

from typing import ClassVar

import pytest

from tuner.families import REGISTRY
from tuner.families.base import FamilyContext, FamilyResult, Needs, Registry, unmet_needs
from tuner.model import FamilyOutcome
from tuner.runner import _merge


def _family(name: str, after: tuple[str, ...] = ()) -> type:
    class F:
        needs: ClassVar[Needs] = Needs()
        summary: ClassVar[str] = name

        def applicable(self, ctx: FamilyContext) -> str | None:
            return None

        async def run(self, ctx: FamilyContext) -> FamilyResult:
            raise NotImplementedError

    F.name = name  # type: ignore[attr-defined]
    F.after = after  # type: ignore[attr-defined]
    F.__qualname__ = F.__name__ = f"F_{name}"
    return F


def test_the_shipped_families_run_readahead_before_concurrency() -> None:
    order = [f.name for f in REGISTRY.ordered(["wal", "concurrency", "readahead"])]
    assert order.index("readahead") < order.index("concurrency")
    assert set(order) == {"wal", "concurrency", "readahead"}
    assert [f.name for f in REGISTRY.ordered(["concurrency"])] == ["concurrency"]


def test_every_registered_family_declares_the_protocol() -> None:
    for name in REGISTRY.names():
        fam = REGISTRY.get(name)
        assert fam.name == name and isinstance(fam.needs, Needs) and fam.summary
        assert all(a in REGISTRY.names() for a in fam.after)


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


def test_a_section_that_is_not_a_report_field_is_refused() -> None:
    into: dict[str, object] = {}
    ok = FamilyResult(FamilyOutcome(family="t", status="done", reason="r"), section={"devices": [1], "wal_summary": "s"})
    _merge(into, ok)
    _merge(into, ok)
    assert into == {"devices": [1, 1], "wal_summary": "s"}
    bad = FamilyResult(FamilyOutcome(family="t", status="done", reason="r"), section={"trials": []})
    with pytest.raises(ValueError, match="unknown report section"):
        _merge(into, bad)


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
