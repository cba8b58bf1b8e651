"""How a family's probes make the cache cold: the method is decided once, at plan time, and named in the report.

The decisions that need no server (the version, the role, the I/O workers) are tested here; the ones that ask the
server (is pg_buffercache installed, which functions it has) and the eviction itself are tested on real servers in
tests/integration/test_eviction.py.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg
import pytest

from tuner.probes.cache import CacheControl, Eviction
from tuner.target.facts import Setting, TargetFacts


def facts(version: int = 180006, *, superuser: bool = True, io_method: str | None = "worker") -> TargetFacts:
    settings = {}
    if io_method is not None:
        settings["io_method"] = Setting(name="io_method", setting=io_method, unit=None, context="postmaster",
                                        vartype="enum", min_val=None, max_val=None, boot_val="worker",
                                        reset_val=io_method, source="default", pending_restart=False)
    return TargetFacts(server_version_num=version, server_version=f"{version // 10000}.6", in_recovery=True,
                       database="app", user="tuner", is_superuser=superuser, can_read_all_settings=True,
                       data_directory="/srv/pg", system_identifier="1", staging_marker=None, marker_source=None,
                       server_addr=None, settings=settings, tablespaces=())


async def _no_connection() -> asyncpg.Connection:
    raise AssertionError("the method was decided without asking the server")


async def _restart() -> None:
    return None


def _plan(f: TargetFacts, *, restart: bool = True) -> CacheControl:
    return asyncio.run(CacheControl.plan(f, ["pgbench_accounts"], connector=_no_connection,
                                         restart=_restart if restart else None, os_method="drop_caches"))


def test_the_report_names_eviction_with_its_function() -> None:
    cache = CacheControl(restart=_restart, os_method="drop_caches",
                         evict=Eviction(_no_connection, "pg_buffercache_evict_relation", "public", (16392,)))
    assert cache.describe() == "shared buffers: evicted (pg_buffercache_evict_relation); OS page cache: drop_caches"


def test_the_report_text_of_a_restart_is_what_it_always_was() -> None:
    assert CacheControl(restart=_restart, os_method="drop_caches").describe() == \
        "shared buffers: restart; OS page cache: drop_caches"
    assert CacheControl(restart=None, os_method="fadvise").describe() == \
        "shared buffers: not emptied; OS page cache: fadvise"


@pytest.mark.parametrize("version", [130000, 150018, 160004])
def test_before_17_shared_buffers_are_emptied_by_a_restart(version: int) -> None:
    cache = _plan(facts(version, io_method=None))
    assert cache.evict is None and cache.buffers == "restart"


def test_a_role_that_is_not_a_superuser_cannot_evict() -> None:
    assert _plan(facts(superuser=False)).buffers == "restart"


def test_without_eviction_or_restart_nothing_empties_shared_buffers() -> None:
    assert _plan(facts(150018, io_method=None), restart=False).buffers == "not emptied"


def test_make_cold_with_neither_touches_only_the_page_cache(tmp_path: Path) -> None:
    f = tmp_path / "16392"
    f.write_bytes(b"x" * 8192)
    asyncio.run(CacheControl(restart=None, os_method="fadvise", files=[f, tmp_path / "gone"]).make_cold())
    assert f.read_bytes() == b"x" * 8192  # fadvise drops cached pages, never data; a missing file is skipped


def test_readahead_probes_restart_where_io_workers_do_the_reads() -> None:
    """A new readahead reaches a file when it is opened: a fresh connection opens its own, but 18's I/O workers
    keep theirs, so eviction alone would measure the old readahead."""
    cache = asyncio.run(CacheControl.plan(facts(), ["t"], connector=_no_connection, restart=_restart,
                                          os_method="drop_caches", fresh_files=True))
    assert cache.buffers == "restart"
