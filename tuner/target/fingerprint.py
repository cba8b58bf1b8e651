"""A target's fingerprint: what it is at one moment, in the two forms tuner keeps — read in one module, so that both
name the server, the host and the catalogued settings the same way.

* :func:`fingerprint`: what a session ran against, stored with it. Warm starts match on it (the same system
  identifier, else the same device model + file system + PostgreSQL major); a conf.d export reads which file set
  each setting.
* :func:`observe`: the daemon's drift check (one connection, a few catalogue reads, sysfs and /proc; no probe,
  nothing written); :mod:`tuner.daemon.drift` compares two of them and says what a change calls for.

Host facts (devices, kernel, cgroup, memory) come from :mod:`tuner.knobs` only when the data directory is on this
host (its pg_control carries the server's system identifier); whatever the role may not read is None.
"""

from __future__ import annotations

import math
import platform
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg

from tuner.fs import sqlfiles
from tuner.knobs import catalog
from tuner.hostfacts import limits
from tuner.hostfacts.blockdev import device_facts, discover, place, postgres_paths, read_fact
from tuner.target.connection import connect
from tuner.target.facts import TargetFacts, gather

_SQL = str(Path(__file__).parent)
# The size bands, by what the caches hold: all of it in PostgreSQL's buffers, all of it in memory, then up to 2, 4
# and 8 times memory — with uniform access at least 1/2, 3/4 and 7/8 of reads go to the device. Crossing a band
# upward changes the mix of cached and device reads the recommendations were measured under; past 8x nearly every
# read is a device read and further growth changes little. (Powers of two in GiB would fire for 1 -> 2 GiB on a
# 64 GiB host, where nothing changes.)
# The drift check's view of the workload: this many statements by read I/O (tuner.daemon.workload_shift).
TOP_STATEMENTS = 5
BANDS = ("fits in shared_buffers", "fits in memory", "up to 2x memory", "up to 4x memory", "up to 8x memory",
         "more than 8x memory")


def recommendation_key(knob: str, object: str | None = None) -> str:
    """How a setting is named in a drift fingerprint and among the accepted recommendations: ``knob`` for the
    server's, ``knob:object`` otherwise (``effective_io_concurrency:fast`` for a tablespace)."""
    return f"{knob}:{object}" if object else knob


def size_band(database_bytes: int, shared_buffers_bytes: int, memory_bytes: int) -> int:
    """Index into :data:`BANDS` of ``database_bytes`` of data."""
    if database_bytes <= shared_buffers_bytes:
        return 0
    ratio = database_bytes / max(memory_bytes, shared_buffers_bytes, 1)
    return 1 if ratio <= 1 else min(len(BANDS) - 1, 1 + math.ceil(math.log2(ratio)))


def kernel_release() -> str:
    """This host's kernel release (``uname -r``)."""
    return platform.release()


# -- a session's fingerprint --------------------------------------------------------------------------------------

def data_device(facts: TargetFacts) -> dict[str, Any] | None:
    """The block device under the data directory, when the target runs on this host."""
    local = facts.local_data_directory()
    if local is None:
        return None
    p = place("data directory", local)
    if p.device is None:
        return {"name": None, "model": None, "rotational": None, "fstype": p.fstype}
    d = p.device
    return {
        "name": d.name,
        "kind": d.kind,
        "model": read_fact(d.sys_dir / "device" / "model"),
        "vendor": read_fact(d.sys_dir / "device" / "vendor"),
        "rotational": read_fact(d.sys_dir / "queue" / "rotational"),
        "fstype": p.fstype,
    }


def fingerprint(facts: TargetFacts, *, label: str) -> dict[str, Any]:
    """What a session ran against (JSON-serialisable), from the facts it gathered."""
    device = data_device(facts)
    device_key = None
    if device is not None and device.get("fstype"):
        # The model when the device reports one; else its kind (loop, dm, md …): devices of one kind and file
        # system behave alike more often than not, and a re-measured baseline calibrates the rest.
        what = device.get("model") or device.get("kind") or "unknown"
        device_key = f"{what}|rotational={device.get('rotational')}|{device['fstype']}"
    cat = catalog.load()
    # [value, source] and, where the role may see it, the file that sets it (a conf.d export says whether
    # postgresql.auto.conf would override it).
    settings = {name: [s.setting, s.source] + ([f"{s.sourcefile}:{s.sourceline}"] if s.sourcefile else [])
                for name, s in sorted(facts.settings.items()) if cat.knows(name)}
    return {
        "label": label,
        "system_identifier": facts.system_identifier,
        "data_directory": facts.data_directory,
        "server_version_num": facts.server_version_num,
        "major": facts.major,
        "host": socket.gethostname(),
        "kernel": kernel_release(),
        "data_device": device,
        "device_key": device_key,
        "settings": settings,
    }


# -- the drift check's fingerprint --------------------------------------------------------------------------------

async def observe(dsn: str | None, *, timeout_s: float, statements: bool = False) -> dict[str, Any]:
    """The drift fingerprint of the server ``dsn`` leads to, JSON-serialisable. ``timeout_s`` bounds the connection
    and each statement. Raises :class:`~tuner.errors.TargetError` when the server cannot be reached. With
    ``statements`` (``[workload] from = "pg_stat_statements"``) it has the top statements by read I/O too
    (:func:`top_statements`)."""
    conn = await connect(dsn, timeout_s=timeout_s,
                         server_settings={"statement_timeout": str(max(1, int(timeout_s * 1000)))})
    try:
        facts = await gather(conn, whole=False)  # (the marker is not compared: only what tuning depends on)
        cat = catalog.load()
        rows = await conn.fetch(sqlfiles.load(_SQL, "settings"), cat.names())
        extra = await conn.fetchrow(sqlfiles.load(_SQL, "drift"))
        try:
            timeline = await conn.fetchval(sqlfiles.load(_SQL, "timeline"))
        except asyncpg.InsufficientPrivilegeError:
            timeline = None
        top = await top_statements(conn, facts.server_version_num) if statements else None
    finally:
        await conn.close()
    assert extra is not None
    settings: dict[str, dict[str, Any]] = {}
    for r in sorted(rows, key=lambda r: r["name"]):
        spec = cat.spec(r["name"], facts.server_version_num)
        if spec is not None:  # value in pg_settings' unit (the catalogue's); sourcefile NULL unless the role may see it
            value = int(r["setting"]) if r["vartype"] == "integer" else r["setting"]
            settings[r["name"]] = {"value": value, "unit": r["unit"],
                                   "source": r["source"], "sourcefile": r["sourcefile"],
                                   "sourceline": r["sourceline"], "family": spec.family}
    for ts in facts.tablespaces:  # ALTER TABLESPACE … SET (effective_io_concurrency = …)
        for option in ts.options:
            name, _, value = option.partition("=")
            spec = cat.spec(name, facts.server_version_num)
            if spec is not None and "tablespace" in spec.scopes:
                settings[recommendation_key(name, ts.name)] = {
                    "value": int(value) if value.lstrip("-").isdigit() else value, "unit": None,
                    "source": f"tablespace {ts.name}", "sourcefile": None, "sourceline": None, "family": spec.family}
    local = facts.local_data_directory()
    devices, kernel, cgroup = None, None, None
    if local is not None:
        groups, _ = discover(postgres_paths(local, {t.name: t.location for t in facts.tablespaces}))
        devices = {g.device.name: device_facts(g.device, g.roles)
                   for g in sorted(groups, key=lambda g: g.device.name)}
        kernel, cgroup = kernel_release(), limits.cgroup(local)
    memory, basis = limits.memory(cgroup) if local is not None else (None, "")
    if memory is None:  # a remote server's memory: what its planner is told
        memory, basis = extra["effective_cache_size_bytes"], "effective_cache_size"
    size = None
    if extra["database_bytes"] is not None:
        band = size_band(extra["database_bytes"], extra["shared_buffers_bytes"], memory)
        size = {"band": band, "label": BANDS[band], "database_bytes": extra["database_bytes"],
                "memory_bytes": memory, "memory_basis": basis, "shared_buffers_bytes": extra["shared_buffers_bytes"]}
    return {
        "observed_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "data_directory": facts.data_directory,  # identity with the system identifier (not compared: see server)
        "server": {"major": facts.major, "server_version_num": facts.server_version_num,
                   "system_identifier": facts.system_identifier, "timeline": timeline,
                   "postmaster_start": extra["postmaster_start"].astimezone(UTC).isoformat(),
                   "in_recovery": facts.in_recovery},
        "settings": settings, "devices": devices, "kernel": kernel, "cgroup": cgroup, "size": size,
        **({"statements": top} if statements else {}),
    }


async def top_statements(conn: asyncpg.Connection, server_version_num: int) -> dict[str, Any] | None:
    """The :data:`TOP_STATEMENTS` statements that read the most blocks (pg_stat_statements ``shared_blks_read``
    since its last reset), as ``{"top": {queryid: share of every statement's blocks read}, "blocks_read": total}``;
    None where pg_stat_statements is not installed, not loaded (``shared_preload_libraries``) or not readable — the
    drift check then compares no workload. Queryids are strings: JSON object keys."""
    schema = await conn.fetchval(sqlfiles.load(_SQL, "stat_statements_schema"))
    if schema is None:
        return None
    names = (["top_statements_140000"] if server_version_num >= 140000 else []) + ["top_statements"]
    for name in names:  # an extension not updated since 13 (no toplevel column): the plain one
        try:
            async with conn.transaction(readonly=True):
                await conn.execute("SELECT set_config('search_path', $1, true)", f"{schema}, pg_catalog")
                rows = await conn.fetch(sqlfiles.load(_SQL, name), TOP_STATEMENTS)
        except asyncpg.UndefinedColumnError:
            continue
        except asyncpg.PostgresError:  # not in shared_preload_libraries, or no privilege: no workload to compare
            return None
        total = int(rows[0]["total"]) if rows else 0
        return {"top": {str(r["queryid"]): round(int(r["blks"]) / total, 4) for r in rows} if total else {},
                "blocks_read": total}
    return None
