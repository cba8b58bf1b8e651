"""Putting the cache in the declared state before a probe.

Cold means: shared buffers emptied, then the OS page cache emptied — in that order, since evicting a dirty
buffer writes it to the page cache.

* Shared buffers: evicted through ``pg_buffercache`` where the role may (superuser) and the extension is
  installed in the probed database — ``pg_buffercache_evict_relation(regclass)`` on 18,
  ``pg_buffercache_evict(bufferid)`` on 17, for each probed relation with its indexes and TOAST — else a
  restart of the staging server where that is allowed, else not at all (probes that find their blocks cached
  are then rejected). tuner never creates the extension on a target (a hot standby could not; the sandbox
  creates it on its own primary, from where it replicates).
* OS page cache: ``/proc/sys/vm/drop_caches`` as root, else ``posix_fadvise(POSIX_FADV_DONTNEED)`` on the
  probed relations' files (needs read access to them, no root).

Whatever the method, the probe's own counters say whether it worked: a probe whose heap blocks were not read
from disk is rejected (``ColdProbe``, ``min_cold_read_fraction``), so an eviction that did nothing is caught,
never assumed.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import asyncpg

from tuner.fs import sqlfiles
from tuner.log import get_logger
from tuner.target.facts import TargetFacts
from tuner.target.server import Restart

log = get_logger("tuner.cache")

_SQL = str(Path(__file__).parent)
DROP_CACHES = Path("/proc/sys/vm/drop_caches")
OsMethod = Literal["drop_caches", "fadvise", "none"]
EvictFunction = Literal["pg_buffercache_evict_relation", "pg_buffercache_evict_all", "pg_buffercache_evict"]
Connector = Callable[[], Awaitable[asyncpg.Connection]]


def can_drop_caches() -> bool:
    return os.geteuid() == 0 and os.access(DROP_CACHES, os.W_OK)


def can_fadvise(files: Sequence[Path]) -> bool:
    return bool(files) and all(os.access(f, os.R_OK) for f in files)


def choose_os_method(local_data_dir: Path | None, files: Sequence[Path]) -> OsMethod:
    """drop_caches as root on the target's host, else fadvise on readable relation files, else none."""
    if local_data_dir is None:
        return "none"
    if can_drop_caches():
        return "drop_caches"
    if can_fadvise(files):
        return "fadvise"
    return "none"


def drop_caches() -> None:
    """Empty the OS page cache (root only; see :func:`can_drop_caches`): ``sync``, then write 1 to
    /proc/sys/vm/drop_caches — clean page-cache pages only, dentries and inodes stay. What a cold probe does on
    the target's host between readings; a benchmark that times cold reads outside a session calls it too."""
    os.sync()
    DROP_CACHES.write_text("1\n")  # 1 = page cache only; dentries and inodes stay


def _fadvise(files: Sequence[Path]) -> None:
    for path in files:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            try:
                os.fdatasync(fd)  # dirty pages are not dropped; flush them first
            except OSError:
                pass
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True)
class Evicted:
    """What one eviction reported: buffers evicted (or, with 17's per-buffer function, asked to leave) and
    buffers skipped because someone had them pinned."""

    evicted: int
    skipped: int


@dataclass(frozen=True)
class Eviction:
    """Empties the probed relations' shared buffers through ``pg_buffercache``, without a restart.

    ``relations`` are OIDs (the probed relations, their indexes and TOAST); empty means every buffer (custom
    queries: tuner does not know what they read). Each call opens one connection through ``connector`` (the
    session's guard: the server is checked before anything is evicted on it) and closes it.
    """

    connector: Connector
    function: EvictFunction
    schema: str
    relations: tuple[int, ...] = ()

    async def __call__(self) -> Evicted:
        conn = await self.connector()
        try:
            if self.function == "pg_buffercache_evict_relation":
                row = await conn.fetchrow(self._sql("evict_relation"), list(self.relations))
            elif self.function == "pg_buffercache_evict_all":
                row = await conn.fetchrow(self._sql("evict_all"))
            else:
                row = await conn.fetchrow(self._sql("evict_buffers"), list(self.relations) or None)
        finally:
            await conn.close()
        assert row is not None
        return Evicted(evicted=int(row["evicted"]), skipped=int(row["skipped"]))

    def _sql(self, name: str) -> str:
        return sqlfiles.load(_SQL, name).format(schema=_ident(self.schema))


@dataclass
class CacheControl:
    """How this target is made cold: ``evict`` empties the probed relations' shared buffers (None: not possible
    here), else ``restart`` empties all of them (None: not possible, or not allowed); then the OS page cache.

    Build it with :meth:`plan`, which decides the method once, at plan time.
    """

    restart: Restart | None
    os_method: OsMethod
    files: Sequence[Path] = field(default_factory=list)
    evict: Eviction | None = None

    @property
    def buffers(self) -> str:
        """How shared buffers are emptied: ``evicted (<function>)``, ``restart`` or ``not emptied``."""
        if self.evict is not None:
            return f"evicted ({self.evict.function})"
        return "restart" if self.restart is not None else "not emptied"

    def describe(self) -> str:
        return f"shared buffers: {self.buffers}; OS page cache: {self.os_method}"

    async def make_cold(self) -> None:
        if self.evict is not None:
            done = await self.evict()
            # Skipped buffers were pinned by someone; if they held probed blocks, the probe's counters reject it.
            log.debug("evict", function=self.evict.function, evicted=done.evicted, skipped=done.skipped)
        elif self.restart is not None:
            await self.restart()
        if self.os_method == "drop_caches":
            await asyncio.to_thread(drop_caches)
        elif self.os_method == "fadvise":
            await asyncio.to_thread(_fadvise, list(self.files))

    @classmethod
    async def plan(
        cls,
        facts: TargetFacts,
        relations: Sequence[str | None],
        *,
        connector: Connector,
        restart: Restart | None,
        os_method: OsMethod,
        files: Sequence[Path] = (),
        fresh_files: bool = False,
    ) -> CacheControl:
        """Decide, once per family, how its probes empty shared buffers: evicted through ``pg_buffercache`` where
        it can be (17+, the extension installed in the probed database, a superuser), else by ``restart`` (None:
        not allowed), else not at all — and say which, and why not the better one, in the log.

        ``relations`` are what the probes read (a None: a custom query, so every buffer is evicted).
        ``fresh_files``: the probes need every file opened after a knob changed (readahead is copied into a file
        when it is opened). A fresh connection opens its own files, but PostgreSQL 18's I/O workers
        (``io_method = worker``) keep theirs open, so there eviction does not do and a restart is used.
        """
        if fresh_files and _workers_read(facts):
            evict, why_not = None, ("the I/O workers (io_method = worker) keep their files open: only a restart "
                                    "makes them see a new readahead")
        else:
            evict, why_not = await eviction(facts, relations, connector)
        cache = cls(restart=restart, os_method=os_method, files=list(files), evict=evict)
        if evict is not None:
            log.info("plan.cache", cache=cache.describe(), relations=len(evict.relations) or "all")
        elif restart is not None:
            log.info("plan.cache", cache=cache.describe(), not_evicted=why_not)
        else:
            log.warning("plan.no_restart", cache=cache.describe(), not_evicted=why_not,
                        detail="shared buffers are not emptied between probes; probes that find their blocks cached "
                               "are rejected",
                        hint="on 17+ install pg_buffercache on the primary (a superuser probes), or set [target] "
                             "restart_command (and allow_restart in the policy)")
        return cache


def _workers_read(facts: TargetFacts) -> bool:
    """Whether reads are issued by I/O worker processes rather than the probing backend (18+, io_method=worker)."""
    method = facts.settings.get("io_method")
    return facts.major >= 18 and (method is None or method.setting == "worker")


async def eviction(
    facts: TargetFacts, relations: Sequence[str | None], connector: Connector
) -> tuple[Eviction | None, str]:
    """The eviction this target allows, or None and the reason."""
    if facts.major < 17:
        return None, f"PostgreSQL {facts.major} has no pg_buffercache eviction (17+)"
    if not facts.is_superuser:
        return None, "pg_buffercache's eviction functions are for superusers only"
    conn = await connector()
    try:
        ext = await conn.fetchrow(sqlfiles.load(_SQL, "buffercache"))
        if ext is None:
            return None, f"pg_buffercache is not installed in database {facts.database}"
        if ext["evict_relation"]:
            function: EvictFunction = "pg_buffercache_evict_relation"
        elif ext["evict_buffer"]:
            function = "pg_buffercache_evict"
        else:
            return None, f"pg_buffercache {ext['version']} has no eviction function (ALTER EXTENSION … UPDATE)"
        if not relations or any(r is None for r in relations):
            if function == "pg_buffercache_evict_relation":
                function = "pg_buffercache_evict_all"
            return Eviction(connector, function, ext["schema"]), ""
        oids: set[int] = set()
        for rel in relations:
            assert rel is not None
            oids.update(int(r["oid"]) for r in await conn.fetch(sqlfiles.load(_SQL, "evict_targets"), rel))
        return Eviction(connector, function, ext["schema"], tuple(sorted(oids))), ""
    finally:
        await conn.close()
