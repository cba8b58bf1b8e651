"""What tuner learns about a target before it plans anything."""

from __future__ import annotations

import struct
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import asyncpg
from pydantic import BaseModel, ConfigDict

from tuner.fs import sqlfiles
from tuner.target import loaded

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
    # Where the marker's value in force comes from (marker_origin): "configuration file"; "elsewhere" (no file line
    # sets this value: ALTER DATABASE/ROLE SET, which replicate to the primary, or the connection's options);
    # "command line" (postmaster.opts sets tuner.*); "not reloaded" (a configuration file changed after the last
    # load); "postgresql.auto.conf" (ALTER SYSTEM); "named postgresql.auto.conf" (an included file of that name
    # elsewhere); "hidden" (the role may not read what decides it); None (not set)
    marker_setting_source: str | None = None
    # What shows that the configuration files on disk are not what the server loaded (tuner.target.loaded)
    config_unloaded: str | None = None
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


def marker_origin(value: str | None, on_disk: Mapping[str, Any] | None, argv: str | None, *,
                  hidden: bool = False, unloaded: str | None = None) -> tuple[str | None, str | None]:
    """Where the marker in force comes from, as ``(marker_setting_source, "file:line")``; pure.

    ``tuner.role`` is a placeholder (no module defines it), and PostgreSQL hides placeholders from pg_settings, so
    its source cannot be read there; it is decided from what the server does show. ``value`` is the value in force
    (``current_setting``), ``on_disk`` the last pg_file_settings line that sets it (with ``changed_since_load``:
    its file was modified after the configuration was last loaded), ``argv`` the server's command line
    (postmaster.opts), ``unloaded`` what shows that the files on disk are not what the server loaded
    (:func:`tuner.target.loaded.unloaded`). "configuration file" only when that line sets the value in force, the
    command line sets no ``tuner.*`` (it outranks every file: https://www.postgresql.org/docs/current/
    config-setting.html) and the files are what was loaded — a newer modification time shows they are not, an
    older one proves nothing (``cp -p`` keeps it); otherwise "elsewhere" (no file line sets this value: the client's options
    or ALTER ROLE/DATABASE SET do), "command line" or "not reloaded". "hidden": the role may not read
    pg_file_settings, the file's status or postmaster.opts; "postgresql.auto.conf": ALTER SYSTEM (the data
    directory's, or one tuner cannot tell from it); "named postgresql.auto.conf": an included file of that name in
    another directory. A client's own
    options and role settings are checked beside this (:mod:`tuner.target.pgoptions`, pg_db_role_setting).
    """
    if value is None:
        return None, None
    if hidden or argv is None:
        return "hidden", None
    if on_disk is None or not on_disk.get("applied") or on_disk.get("setting") != value:
        return "elsewhere", None
    if "tuner." in argv.lower():
        return "command line", None
    if on_disk.get("changed_since_load") or unloaded is not None:
        return "not reloaded", None
    where = f"{on_disk['sourcefile']}:{on_disk['sourceline']}"
    if PurePosixPath(str(on_disk["sourcefile"])).name == "postgresql.auto.conf":
        data = on_disk.get("data_directory")
        if data and str(on_disk["sourcefile"]) != f"{data}/postgresql.auto.conf":
            # Some other directory's file of that name, included: ALTER SYSTEM writes only the data directory's
            # (unless this one is a link to it, which only its host can tell).
            return "named postgresql.auto.conf", where
        return "postgresql.auto.conf", where
    return "configuration file", where


async def marker_facts(conn: asyncpg.Connection, value: str | None, *,
                       whole: bool = True) -> tuple[str | None, str | None, str | None]:
    """:func:`marker_origin` for the server behind ``conn`` (read-only queries), and what shows that its files are
    not what it loaded (None: nothing does). ``whole=False`` leaves the comparison of every setting out: mid-session
    tuner's own ALTER SYSTEM and reload make them differ until each server process has read the files again."""
    if value is None:
        return None, None, None
    try:
        on_disk = await conn.fetchrow(sqlfiles.load(_SQL, "marker_in_file"))
        argv = await conn.fetchval(sqlfiles.load(_SQL, "server_argv"))
        lines = await conn.fetch(sqlfiles.load(_SQL, "config_lines")) if whole else []
    except asyncpg.InsufficientPrivilegeError:
        return (*marker_origin(value, None, None, hidden=True), None)
    differs = loaded.unloaded(lines)
    return (*marker_origin(value, dict(on_disk) if on_disk else None, argv or "", unloaded=differs), differs)


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


async def gather(conn: asyncpg.Connection, *, whole: bool = True) -> TargetFacts:
    """Read the facts with read-only queries; nothing on the server changes. ``whole``: see :func:`marker_facts`."""
    row = await conn.fetchrow(sqlfiles.load(_SQL, "server"))
    assert row is not None
    try:
        sysid = await conn.fetchval(sqlfiles.load(_SQL, "system_identifier"))
    except asyncpg.InsufficientPrivilegeError:
        sysid = None
    marker_setting_source, marker_source, unloaded = await marker_facts(conn, row["staging_marker"], whole=whole)
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
        config_unloaded=unloaded,
        settings=settings,
        tablespaces=tablespaces,
    )
