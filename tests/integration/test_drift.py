"""The drift fingerprint of real servers: the writable staging clone (PostgreSQL 15, a tablespace on a loop device)
and the sandbox's hot standby. Every setting, readahead and role a test changes is put back, also when it fails."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from tuner.daemon.drift import action, changes_json, compare
from tuner.target.connection import connect
from tuner.target.fingerprint import observe

from .conftest import Clone, Running

_KEYS = {"observed_at", "data_directory", "server", "settings", "devices", "kernel", "cgroup", "size"}


def _observe(clone: Clone, dsn: str | None = None) -> dict[str, Any]:
    fp: dict[str, Any] = clone.running.run(observe(dsn or clone.dsn, timeout_s=30))
    return fp


def _sql(clone: Clone, *statements: str) -> None:
    async def go() -> None:
        conn = await connect(clone.dsn)
        try:
            for s in statements:
                await conn.execute(s)
        finally:
            await conn.close()

    clone.running.run(go())


def _reload_until(clone: Clone, name: str, value: str, timeout_s: float = 30) -> None:
    """Reload the configuration and wait until a new connection sees ``name = value`` (the postmaster reloads
    asynchronously; a connection it forks before that has the old value)."""
    async def go() -> None:
        deadline = time.monotonic() + timeout_s
        conn = await connect(clone.dsn)
        try:
            await conn.execute("SELECT pg_reload_conf()")
        finally:
            await conn.close()
        while time.monotonic() < deadline:
            conn = await connect(clone.dsn)
            try:
                if await conn.fetchval("SELECT current_setting($1)", name) == value:
                    return
            finally:
                await conn.close()
            await asyncio.sleep(0.1)
        raise AssertionError(f"{name} did not become {value} after a reload within {timeout_s} s")

    clone.running.run(go())


def test_two_observations_of_an_unchanged_clone_differ_in_nothing(clone: Clone) -> None:
    first, second = _observe(clone), _observe(clone)
    assert compare(first, second) == []
    assert set(first) == _KEYS and json.loads(json.dumps(first)) == first
    server = first["server"]
    assert server["major"] == 15 and server["timeline"] == 1 and server["in_recovery"] is False
    assert server["system_identifier"] and server["postmaster_start"] == second["server"]["postmaster_start"]
    assert first["settings"]["effective_io_concurrency"]["family"] == "concurrency"
    assert first["settings"]["wal_writer_delay"]["unit"] == "ms"
    loop = first["devices"][clone.disk.name]
    assert loop["roles"] == ["tablespace fast"] and loop["read_ahead_kb"] == clone.disk.read_ahead_kb()
    assert loop["serial"].endswith("disk.img") and loop["node"] == clone.disk.node
    assert any("data directory" in d["roles"] for d in first["devices"].values())
    assert first["kernel"] and first["size"]["band"] == 0  # tens of MB: all of it fits in shared_buffers


def test_alter_system_is_one_setting_change_with_its_new_source(clone: Clone) -> None:
    before = _observe(clone)
    try:
        _sql(clone, "ALTER SYSTEM SET effective_io_concurrency = 7")
        _reload_until(clone, "effective_io_concurrency", "7")
        changes = compare(before, _observe(clone))
    finally:
        _sql(clone, "ALTER SYSTEM RESET effective_io_concurrency")
        _reload_until(clone, "effective_io_concurrency", "1")
    assert [c.key for c in changes] == ["setting:effective_io_concurrency"], changes_json(changes)
    [c] = changes
    assert c.after["value"] == 7 and c.after["source"] == "configuration file"
    assert c.after["sourcefile"].endswith("/postgresql.auto.conf")
    assert c.sentence().startswith("effective_io_concurrency changed from 1 (default) to 7 (postgresql.auto.conf:")
    revalidate = action(changes, {"effective_io_concurrency": 32})
    assert (revalidate.kind, revalidate.knobs) == ("revalidate", ("effective_io_concurrency",))
    reprobe = action(changes, {})
    assert (reprobe.kind, reprobe.families) == ("reprobe", ("concurrency",))
    assert compare(before, _observe(clone)) == []  # put back


def test_a_readahead_change_on_the_loop_device_is_a_device_change(clone: Clone) -> None:
    before = _observe(clone)
    was = clone.disk.read_ahead_path.read_text().strip()
    new = 4096 if was != "4096" else 512
    try:
        clone.disk.read_ahead_path.write_text(f"{new}\n")
        changes = compare(before, _observe(clone))
    finally:
        clone.disk.read_ahead_path.write_text(f"{was}\n")
    key = f"device:{clone.disk.name}:read_ahead_kb"
    sentence = f"read_ahead_kb of {clone.disk.node} changed from {was} to {new}"
    assert changes_json(changes) == {key: {"kind": "device", "from": int(was), "to": new, "sentence": sentence}}
    act = action(changes, {})
    assert (act.kind, act.families) == ("reprobe", ("readahead",))
    assert action(changes, {f"read_ahead_kb:{clone.disk.node}": new}).kind == "record"  # the recommendation, applied
    assert compare(before, _observe(clone)) == []


def test_roles_without_superuser_get_a_fingerprint_without_errors(clone: Clone) -> None:
    """pg_monitor (with pg_read_all_settings) sees what a superuser sees; a plain role gets what it may read: no
    data directory, so nothing of the host, and no configuration file names."""
    superuser = _observe(clone)
    try:
        _sql(clone, "CREATE ROLE drift_monitor LOGIN IN ROLE pg_monitor", "CREATE ROLE drift_plain LOGIN")
        monitor = _observe(clone, clone.dsn.replace("postgres@", "drift_monitor@"))
        plain = _observe(clone, clone.dsn.replace("postgres@", "drift_plain@"))
    finally:
        _sql(clone, "DROP ROLE IF EXISTS drift_monitor", "DROP ROLE IF EXISTS drift_plain")
    assert compare(superuser, monitor) == []
    assert set(plain) == _KEYS and plain["devices"] is None and plain["kernel"] is None and plain["cgroup"] is None
    assert plain["server"]["major"] == 15
    assert plain["server"]["postmaster_start"] == superuser["server"]["postmaster_start"]
    assert set(plain["settings"]) == set(superuser["settings"])
    assert all(s["sourcefile"] is None for s in plain["settings"].values())
    assert plain["size"]["memory_basis"] == "effective_cache_size"
    json.dumps(plain)


def test_a_hot_standby_has_a_fingerprint_of_its_own(sandbox15: Running) -> None:
    sb = sandbox15.sandbox
    standby = sandbox15.run(observe(sb.dsn("standby"), timeout_s=30))
    primary = sandbox15.run(observe(sb.dsn("primary"), timeout_s=30))
    assert standby["server"]["in_recovery"] is True and standby["server"]["timeline"] == primary["server"]["timeline"]
    assert standby["server"]["system_identifier"] == primary["server"]["system_identifier"]
    assert standby["devices"] and standby["size"] is not None
    assert compare(standby, sandbox15.run(observe(sb.dsn("standby"), timeout_s=30))) == []
