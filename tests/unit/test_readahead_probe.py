"""The readahead family's probe carries the I/O evidence the concurrency family's does: it is given the server's
version, which selects pg_stat_io's counters (16+, bytes per read 18+) and EXPLAIN (IO) (19+). Pure construction:
nothing here connects."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tuner.families.readahead import DevicePlan, cold_probe
from tuner.settings.policy import load_policy
from tuner.probes.cache import CacheControl
from tuner.probes.statio import StatIo


def _ctx(version: int) -> SimpleNamespace:
    facts = SimpleNamespace(server_version_num=version, settings={})
    target = SimpleNamespace(dsn="host=/nonexistent", connect=None, check=None, facts=facts)
    return SimpleNamespace(policy=load_policy("default"), facts=facts, target=target,
                           cfg=SimpleNamespace(target=SimpleNamespace(connect_timeout_s=5.0)))


@pytest.mark.parametrize("version", [150018, 160010, 180001, 190000])
def test_the_readahead_probe_is_given_the_server_version(version: int) -> None:
    plan = DevicePlan(group=None, queries=[], joint=False, why_not_joint=None, files=[], heap_files=[])  # type: ignore[arg-type]
    probe = cold_probe(_ctx(version), plan, CacheControl(restart=None, os_method="none"),  # type: ignore[arg-type]
                        lambda kb: None)
    assert probe.server_version_num == version
    assert (StatIo(probe.server_version_num).query is not None) == (version >= 160000)  # pg_stat_io from 16
    assert ("IO" in probe._explain.split(", ")) == (version >= 190000)  # EXPLAIN (IO) from 19
