"""What the concurrency family says about PostgreSQL 19's I/O worker pool where a policy asks for io_workers, as a
pure decision on the settings the server reported."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tuner.families.aio import pool_never_full, workers_dimension
from tuner.families.base import Endpoint, FamilyContext
from tuner.report.model import Trial
from tuner.settings.policy import load_policy
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
    dim = workers_dimension(_ctx(190000), io, None, notes)
    assert dim is not None and dim.name == "io_max_workers" and (dim.low, dim.high) == (1, 32)  # the shipped policy's
    [note] = notes
    assert note.startswith("io_workers not searched: PostgreSQL 19 has no io_workers") and "d1c01b7" in note
    assert "io_min_workers = 2 and io_max_workers = 8" in note


def test_on_18_io_workers_is_searched_without_a_note() -> None:
    notes: list[str] = []
    dim = workers_dimension(_ctx(180006), _io(io_method="worker", io_workers="3"), None, notes)
    assert dim is not None and (dim.low, dim.high) == (1, 32) and notes == []


def test_on_19_io_max_workers_is_not_searched_under_io_uring() -> None:
    notes: list[str] = []
    io = _io(io_method="io_uring", io_min_workers="2", io_max_workers="8")
    assert workers_dimension(_ctx(190000), io, None, notes) is None
    assert notes[-1] == "io_max_workers not searched: it acts only under io_method = worker, and today it is io_uring"


def _probe(running: float | None, status: str = "ok") -> Trial:
    return Trial(config={"effective_io_concurrency": 16}, value=10.0 if status == "ok" else None, status=status,  # type: ignore[arg-type]
                 phase="search", started_at=datetime(2026, 12, 6, tzinfo=UTC), duration_s=1.0,
                 metrics={} if running is None else {"io_workers_running": running})


def test_a_pool_that_never_grew_to_its_maximum_is_not_searched_and_the_note_says_how_far_it_grew() -> None:
    note = pool_never_full([_probe(2), _probe(5), _probe(None), _probe(8, status="failed")], 8)
    assert note == ("io_max_workers not searched: the I/O worker pool grew to at most 5 of io_max_workers = 8 "
                    "workers over 2 probes, so no read waited for a worker it could not start")


def test_a_pool_that_filled_or_was_not_seen_is_searched() -> None:
    assert pool_never_full([_probe(3), _probe(8)], 8) is None
    assert pool_never_full([_probe(None)], 8) is None
