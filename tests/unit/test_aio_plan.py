"""The concurrency family's plan per version, as pure decisions: which knobs act on a sequential scan, which value a
kept knob is confirmed against, and the policy's [concurrency] table."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tuner.errors import ConfigError
from tuner.families.concurrency import _runner_up, _runner_up_value
from tuner.knobs import catalog
from tuner.report.model import Trial
from tuner.settings.policy import SHIPPED_POLICY_DIR, load_policy
from tuner.probes.workload import seq_scan_knobs

BAD = Path(__file__).parent.parent / "fixtures" / "policies" / "bad"
BOTH = ["effective_io_concurrency", "io_combine_limit"]


@pytest.mark.parametrize(("version", "acting"), [
    (150018, []),  # no read streams: kernel readahead alone serves a sequential scan
    (160004, []),
    (170002, ["io_combine_limit"]),  # read streams combine reads, but give no advice for sequential ones
    (180006, BOTH),  # AIO: effective_io_concurrency reads of io_combine_limit blocks in flight
])
def test_the_knobs_that_act_on_a_sequential_scan_follow_the_version(version: int, acting: list[str]) -> None:
    assert seq_scan_knobs(version, BOTH) == acting


def test_a_one_knob_search_adds_no_sequential_scan_on_17() -> None:
    assert seq_scan_knobs(170002, ["effective_io_concurrency"]) == []


def _trial(ms: float, **config: Any) -> Trial:
    return Trial(config=config, value=ms, status="ok", phase="search", started_at=datetime.now(UTC), duration_s=1.0)


def test_a_kept_configuration_is_confirmed_against_the_fastest_other_one_measured() -> None:
    trials = [_trial(100, eic=16, icl=16), _trial(90, eic=16, icl=16), _trial(97, eic=64, icl=16),
              _trial(99, eic=64, icl=16), _trial(120, eic=0, icl=2)]
    assert _runner_up(trials, {"eic": 16, "icl": 16}) == {"eic": 64, "icl": 16}


def test_a_kept_knob_is_confirmed_against_its_fastest_other_value() -> None:
    trials = [_trial(80, eic=64, icl=16), _trial(95, eic=16, icl=8), _trial(120, eic=0, icl=2)]
    assert _runner_up_value(trials, "icl", 16) == 8
    assert _runner_up_value([_trial(80, eic=64, icl=16)], "icl", 16) is None


def test_failed_and_confirmation_trials_do_not_name_the_runner_up() -> None:
    failed = Trial(config={"eic": 1}, value=None, status="failed", phase="search", started_at=datetime.now(UTC),
                   duration_s=1.0)
    confirm = _trial(10, eic=2).model_copy(update={"phase": "confirm"})
    assert _runner_up([failed, confirm, _trial(50, eic=4)], {"eic": 16}) == {"eic": 4}


@pytest.mark.parametrize("name", ["default", "ssd", "network", "hdd"])
def test_shipped_policies_spell_out_the_aio_knobs(name: str) -> None:
    policy = load_policy(name)
    assert {"io_combine_limit", "io_workers"} <= set(policy.search)
    assert policy.read_path.seq_scan_weight > 0 and policy.read_path.bitmap_scan_weight > 0
    assert set(policy.section("concurrency").io_method) == {"sync", "worker", "io_uring"}
    assert policy.legacy_read_path == ()  # the shipped policies set the read path's workload once


def test_an_unknown_io_method_is_refused_in_one_sentence() -> None:
    with pytest.raises(ConfigError) as err:
        load_policy(str(BAD / "unknown_io_method.toml"))
    assert "io_method values ['posix_aio'] are not PostgreSQL's" in str(err.value)


def test_io_combine_limit_reaches_1_mb_from_18() -> None:
    assert catalog.load().spec("io_combine_limit", 170002).max == 32  # type: ignore[union-attr]
    assert catalog.load().spec("io_combine_limit", 180006).max == 128  # type: ignore[union-attr]
    assert catalog.load().spec("io_combine_limit", 160004) is None


def _policy_file(tmp_path: Any, tables: str) -> str:
    path = tmp_path / "p.toml"
    path.write_text((SHIPPED_POLICY_DIR / "default.toml").read_text().split("[read_path]")[0] + tables)
    return str(path)


def test_a_policy_written_before_read_path_is_read_with_a_warning(tmp_path: Any) -> None:
    from structlog.testing import capture_logs
    with capture_logs() as logs:
        policy = load_policy(_policy_file(tmp_path, "[readahead]\nseq_scan_weight = 2.0\nbitmap_scan_weight = 0.5\n"))
    assert (policy.read_path.seq_scan_weight, policy.read_path.bitmap_scan_weight) == (2.0, 0.5)
    assert policy.legacy_read_path == ("readahead",)
    assert [e["hint"] for e in logs if e["event"] == "policy.deprecated_key"] == [
        "move them to [read_path]: one workload serves the read path's families (see docs/policies.md)"]


def test_two_read_path_workloads_that_disagree_are_refused_in_one_sentence(tmp_path: Any) -> None:
    with pytest.raises(ConfigError) as err:
        load_policy(_policy_file(tmp_path, "[readahead]\nbitmap_scan_weight = 0\n[concurrency]\nbitmap_scan_weight = 1\n"))
    assert "give the read path different weights" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ConfigError) as err:
        load_policy(_policy_file(tmp_path, "[read_path]\nseq_scan_weight = 1\n[concurrency]\nseq_scan_weight = 1\n"))
    assert "keep them in [read_path] only" in str(err.value)
