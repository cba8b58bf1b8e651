"""What tuner learns about a target before it plans anything."""

from __future__ import annotations

import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import asyncpg
from pydantic import BaseModel, ConfigDict

from tuner import sqlfiles

_SQL = str(Path(__file__).parent)


class Setting(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    setting: str
    unit: str | None
    context: str
    vartype: str
    min_val: str | None
    max_val: str | None
    boot_val: str | None
    reset_val: str | None
    source: str
    pending_restart: bool
    # The file and line today's value comes from (NULL unless the role is a superuser or has pg_read_all_settings).
    sourcefile: str | None = None
    sourceline: int | None = None


class Tablespace(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    location: str
    options: tuple[str, ...]


class TargetFacts(BaseModel):
    model_config = ConfigDict(frozen=True)

    server_version_num: int
    server_version: str
    in_recovery: bool
    database: str
    user: str
    is_superuser: bool
    can_read_all_settings: bool
    data_directory: str | None
    system_identifier: str | None
    staging_marker: str | None
    marker_source: str | None  # "file:line" when the marker was found in a configuration file
    # Whether the marker's value in force is the one a configuration file sets (pg_file_settings): "configuration
    # file"; "elsewhere" (no file sets it, or a file sets another value: it comes from ALTER DATABASE/ROLE SET,
    # which replicate to the primary, or from the connection's options); "hidden" (the role may not read
    # pg_file_settings); None (not checked)
    marker_setting_source: str | None = None
    marker_pg_source: str | None = None  # pg_settings.source of the marker in force ("client", "command line", …)
    replicas: int = 0  # standbys streaming from this server (pg_stat_replication)
    marker_in_role_settings: bool = False  # ALTER DATABASE/ROLE … SET tuner.role (pg_db_role_setting)
    server_addr: str | None
    settings: dict[str, Setting]
    tablespaces: tuple[Tablespace, ...]

    @property
    def major(self) -> int:
        return self.server_version_num // 10000

    def local_data_directory(self) -> Path | None:
        """The data directory if it is on this host: its pg_control carries the server's system identifier."""
        if not self.data_directory or not self.system_identifier:
            return None
        control = Path(self.data_directory) / "global" / "pg_control"
        try:
            with control.open("rb") as fh:
                (sysid,) = struct.unpack("<Q", fh.read(8))
        except OSError:
            return None
        return Path(self.data_directory) if str(sysid) == self.system_identifier else None


def marker_origin(in_force: Mapping[str, Any] | None, on_disk: Mapping[str, Any] | None, *,
                  hidden: bool = False) -> tuple[str | None, str | None]:
    """Where the marker in force comes from, as ``(marker_setting_source, "file:line")``; pure.

    ``in_force`` is its pg_settings row (setting, source, sourcefile, sourceline), ``on_disk`` the last
    pg_file_settings line that sets it. It is "configuration file" only when pg_settings says the value in force
    came from a configuration file *and* names the very line that sets it on disk now, with that value: a value the
    client, ``-c`` on the server's command line or ALTER ROLE/DATABASE SET put in force is "elsewhere", and so is
    one whose line was changed or overridden on disk but not reloaded is "not reloaded". "hidden": the role may not see the file and
    line (sourcefile is NULL, or pg_file_settings is refused); "postgresql.auto.conf": ALTER SYSTEM.
    """
    if in_force is None or in_force.get("setting") is None:
        return None, None
    if in_force.get("source") != "configuration file":
        return "elsewhere", None
    if hidden or in_force.get("sourcefile") is None:
        return "hidden", None
    where = f"{in_force['sourcefile']}:{in_force['sourceline']}"
    if (on_disk is None or not on_disk.get("applied") or on_disk.get("sourcefile") != in_force["sourcefile"]
            or on_disk.get("sourceline") != in_force["sourceline"] or on_disk.get("setting") != in_force["setting"]):
        return "not reloaded", None
    if str(in_force["sourcefile"]).endswith("postgresql.auto.conf"):
        return "postgresql.auto.conf", where
    return "configuration file", where


FACT_SETTINGS = (
    "effective_io_concurrency",
    "maintenance_io_concurrency",
    "io_combine_limit",
    "io_method",
    "io_workers",
    "shared_buffers",
    "track_io_timing",
    "max_parallel_workers_per_gather",
    "block_size",
    "data_checksums",
    "hot_standby",
)


async def gather(conn: asyncpg.Connection) -> TargetFacts:
    """Read the facts with read-only queries; nothing on the server changes."""
    row = await conn.fetchrow(sqlfiles.load(_SQL, "server"))
    assert row is not None
    try:
        sysid = await conn.fetchval(sqlfiles.load(_SQL, "system_identifier"))
    except asyncpg.InsufficientPrivilegeError:
        sysid = None
    in_force = await conn.fetchrow(sqlfiles.load(_SQL, "marker_setting"))
    try:
        on_disk = await conn.fetchrow(sqlfiles.load(_SQL, "marker_in_file"))
        hidden = False
    except asyncpg.InsufficientPrivilegeError:
        on_disk, hidden = None, True
    marker_setting_source, marker_source = marker_origin(
        dict(in_force) if in_force else None, dict(on_disk) if on_disk else None, hidden=hidden)
    settings = {
        r["name"]: Setting(**dict(r)) for r in await conn.fetch(sqlfiles.load(_SQL, "settings"), list(FACT_SETTINGS))
    }
    tablespaces = tuple(
        Tablespace(name=r["name"], location=r["location"] or "", options=tuple(r["options"]))
        for r in await conn.fetch(sqlfiles.load(_SQL, "tablespaces"))
    )
    return TargetFacts(
        **{k: row[k] for k in row.keys()},
        system_identifier=sysid,
        marker_source=marker_source,
        marker_setting_source=marker_setting_source,
        marker_pg_source=in_force["source"] if in_force else None,
        settings=settings,
        tablespaces=tablespaces,
    )
