"""What the concurrency family says about PostgreSQL 19's I/O worker pool where a policy asks for io_workers, as a
pure decision on the settings the server reported."""

from __future__ import annotations

from typing import Any

from tuner.families.aio import workers_dimension
from tuner.families.base import Endpoint, FamilyContext
from tuner.policy import load_policy
from tuner.target.facts import TargetFacts


def _ctx(version: int) -> FamilyContext:
    facts = TargetFacts(
        server_version_num=version, server_version=str(version), in_recovery=True, database="postgres",
        user="postgres", is_superuser=True, can_read_all_settings=True, data_directory="/nonexistent",
        system_identifier="42", staging_marker=None, marker_source=None, server_addr=None, tablespaces=(), settings={})
    return FamilyContext(cfg=None, policy=load_policy("default"), target=Endpoint("standby", None, facts),  # type: ignore[arg-type]
                         writable=None, journal=None, progress=None, budget=None)  # type: ignore[arg-type]


def _io(**settings: str) -> dict[str, dict[str, Any]]:
    return {k: {"name": k, "setting": v, "context": "sighup", "enumvals": None} for k, v in settings.items()}


def test_on_19_the_policy_s_io_workers_gets_a_note_naming_the_pool_that_replaces_it() -> None:
    notes: list[str] = []
    io = _io(io_method="worker", io_min_workers="2", io_max_workers="8")
    assert workers_dimension(_ctx(190000), io, None, notes) is None
    [note] = notes
    assert note.startswith("io_workers not searched: PostgreSQL 19 has no io_workers") and "d1c01b7" in note
    assert "io_min_workers = 2 and io_max_workers = 8" in note


def test_on_18_io_workers_is_searched_without_a_note() -> None:
    notes: list[str] = []
    dim = workers_dimension(_ctx(180006), _io(io_method="worker", io_workers="3"), None, notes)
    assert dim is not None and (dim.low, dim.high) == (1, 32) and notes == []
