"""What tuner learns about a target before it plans anything."""

from __future__ import annotations

import struct
from pathlib import Path

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
    marker_source, marker_setting_source = None, None
    try:
        mrow = await conn.fetchrow(sqlfiles.load(_SQL, "marker_in_file"))
        if mrow is not None and mrow["applied"]:
            marker_source = f"{mrow['sourcefile']}:{mrow['sourceline']}"
        in_file = mrow is not None and mrow["applied"] and mrow["setting"] == row["staging_marker"]
        marker_setting_source = "configuration file" if in_file else "elsewhere"
        if in_file and str(mrow["sourcefile"]).endswith("postgresql.auto.conf"):
            marker_setting_source = "postgresql.auto.conf"
    except asyncpg.InsufficientPrivilegeError:
        marker_setting_source = "hidden"
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
        settings=settings,
        tablespaces=tablespaces,
    )
