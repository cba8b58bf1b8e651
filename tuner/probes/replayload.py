"""The replay workload: a fixed WAL stream of random-page updates, made on a writable primary and replayed by its
hot standby from a cold cache; the probe times the catch-up, from the resume of replay until the standby has
replayed the whole stream.

Why each step (each one was measured on PostgreSQL 15.18 and 18.6 in the sandbox before it was written down):

* **Full-page images.** The first change of a page after a checkpoint carries the page's whole image; replay writes
  it without reading the page, and recovery prefetch skips it (``skip_fpw``). A stream made right after a checkpoint
  reads nothing. So each probe first *pre-touches* the stream's pages after a CHECKPOINT (the images), lets the
  standby replay that, and only then makes the measured stream — the same updates again — whose records carry no
  image (~140 bytes of WAL per page): replaying them reads every page, the reads recovery prefetch overlaps.
* **Cold cache without a restart.** A restarted standby resumes replay (a pause does not survive it) from its last
  restartpoint, so it would replay the pre-touch again, and then the stream, before it could be paused. Instead,
  with replay paused: a restartpoint (CHECKPOINT on the standby) writes the pre-touch's pages; an index scan of a
  filler table a few times shared_buffers pushes them out of shared buffers (clock sweep); the stream is made and
  received into the standby's pg_wal; the OS page cache is emptied (drop_caches, else posix_fadvise on the table's
  files). Then replay is resumed and timed.
* **Evidence.** The bytes the standby's startup process read from storage during the catch-up
  (``/proc/PID/io``: ``read_bytes``), against the stream's pages: a probe whose pages did not come from disk is
  rejected. A stream that carried full-page images (a checkpoint fell into it) is rejected too.
"""

from __future__ import annotations

import asyncio
import math
import random
import statistics
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import asyncpg
from pydantic import Field

from tuner.fs import sqlfiles
from tuner.actuate import Journal
from tuner.errors import ProbeError, RefusedError, TunerError
from tuner.log import get_logger
from tuner.report.model import CacheEvidence, Trial, _Frozen
from tuner.probes import walload
from tuner.probes.cache import CacheControl

log = get_logger("tuner.probe.replay")

_SQL = str(Path(__file__).parent)
SCHEMA = walload.SCHEMA
TABLE = f"{SCHEMA}.replay_heap"
FILLER = f"{SCHEMA}.replay_filler"
TOUCH = f"{SCHEMA}.replay_touch"
KNOB = "maintenance_io_concurrency"
METRIC = "replay_ms"
FIRST_CHUNK_ROWS = 50_000  # ~1,700 pages: the rows per page that the rest is sized from
MAX_CHUNK_ROWS = 1_000_000  # rows per INSERT at most
# A record without a full-page image is ~70-140 bytes; with one, a whole page. Above this per updated page, the
# stream carried images.
MAX_WAL_BYTES_PER_PAGE = 2048
Connector = Callable[..., Awaitable[asyncpg.Connection]]
# Only the planner's index scan reads the filler into shared buffers; a large sequential scan would use a small ring.
_EVICT_SETTINGS = ("enable_seqscan", "enable_bitmapscan", "enable_indexonlyscan", "enable_tidscan")


def stream_pages(table_pages: int, pages: int, seed: int) -> list[int]:
    """The heap pages the stream updates, in the order it updates them: ``pages`` distinct pages out of the first
    ``table_pages - 1`` (the last may be partly filled), in a random order fixed by ``seed``."""
    usable = max(0, table_pages - 1)
    return random.Random(seed).sample(range(usable), min(pages, usable))


def wal_problem(wal_bytes: float, pages: int) -> str | None:
    """Why a stream of ``wal_bytes`` over ``pages`` updated pages is not the one the probe means to replay."""
    if pages <= 0 or wal_bytes <= 0:
        return "the stream wrote no WAL"
    per_page = wal_bytes / pages
    if per_page > MAX_WAL_BYTES_PER_PAGE:
        return (f"the stream carried full-page images ({per_page:.0f} bytes of WAL per updated page): a checkpoint "
                "fell between the pre-touch and the stream")
    return None


def cold_problem(read_bytes: int | None, pages: int, block_size: int, min_fraction: float) -> str | None:
    """Why a catch-up that read ``read_bytes`` from storage for ``pages`` updated pages did not start cold (None:
    it did, or nothing says otherwise because the counter could not be read)."""
    if read_bytes is None:
        return None
    frac = read_bytes / (pages * block_size) if pages else 0.0
    if frac < min_fraction:
        return f"only {min(frac, 1.0):.0%} of the stream's pages came from disk (cache not cold)"
    return None


class ReplayPointOut(_Frozen):
    """The replay rate measured at one maintenance_io_concurrency value (median over its ok probes)."""

    maintenance_io_concurrency: int
    mb_per_s: float = Field(description="MB of WAL replayed per second (pg_wal_lsn_diff over the catch-up time)")
    pages_per_s: float
    n: int


def curve(trials: Iterable[Trial]) -> list[ReplayPointOut]:
    """Median replay rates per maintenance_io_concurrency value over the ok trials."""
    by: dict[int, list[Trial]] = {}
    for t in trials:
        if t.status == "ok" and "mb_per_s" in t.metrics:
            by.setdefault(int(t.config[KNOB]), []).append(t)
    return [ReplayPointOut(maintenance_io_concurrency=v,
                           mb_per_s=round(statistics.median(t.metrics["mb_per_s"] for t in ts), 3),
                           pages_per_s=round(statistics.median(t.metrics["pages_per_s"] for t in ts), 1), n=len(ts))
            for v, ts in sorted(by.items())]


@dataclass(frozen=True)
class Layout:
    """What :func:`prepare` built on the primary."""

    table_pages: int
    filler_pages: int
    rows_per_page: int
    ids: tuple[int, ...]  # one row per stream page, in the stream's order
    block_size: int

    @property
    def pages(self) -> int:
        return len(self.ids)

    @property
    def table_mb(self) -> float:
        return round(self.table_pages * self.block_size / 1e6, 1)


async def prepare(conn: asyncpg.Connection, *, table_pages: int, filler_pages: int, pages: int, seed: int,
                  on_step: Callable[[str], None] = lambda _s: None) -> Layout:
    """Create the scratch schema (tuner's own: see :mod:`tuner.probes.walload`), a heap of at least ``table_pages``
    pages, a filler of ``filler_pages`` pages, their indexes and the stream's function, over ``conn`` to the primary.
    The caller journaled the scratch schema first."""
    await walload.check_own(conn)
    async with conn.transaction():  # the schema never exists without tuner's comment
        await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        await conn.execute(f"COMMENT ON SCHEMA {SCHEMA} IS '{walload.OWN_MARK}'")
        await conn.execute(sqlfiles.load(_SQL, "replay_create"))
    block = int(await conn.fetchval("SELECT current_setting('block_size')"))
    lo, rows = 1, FIRST_CHUNK_ROWS
    while (have := int(await conn.fetchval(f"SELECT pg_relation_size('{TABLE}')")) // block) < table_pages:
        on_step(f"replay heap {have:,}/{table_pages:,} pages")
        await conn.execute(sqlfiles.load(_SQL, "replay_heap_chunk"), lo, lo + rows - 1)
        lo += rows
        # The rest, from the rows per page so far (a little over, so the last chunk lands past the size).
        filled = int(await conn.fetchval(f"SELECT pg_relation_size('{TABLE}')")) // block
        rows = min(MAX_CHUNK_ROWS, math.ceil((table_pages - filled + 1) * (lo - 1) / max(filled, 1)))
    on_step(f"replay filler {filler_pages:,} pages")
    await conn.execute(sqlfiles.load(_SQL, "replay_filler"), filler_pages)
    await conn.execute(f"CREATE UNIQUE INDEX ON {TABLE} (id)")
    await conn.execute(f"CREATE UNIQUE INDEX ON {FILLER} (id)")
    rows_per_page = int(await conn.fetchval(
        f"SELECT count(*) FROM {TABLE} WHERE ctid >= '(0,0)'::tid AND ctid < '(1,0)'::tid"))
    if rows_per_page < 1:
        raise ProbeError("the replay heap's first page is empty")
    ids = tuple(p * rows_per_page + 1 for p in stream_pages(have, pages, seed))
    distinct = await conn.fetchval(
        f"SELECT count(DISTINCT (ctid::text::point)[0]) FROM {TABLE} WHERE id = ANY($1::int[])", list(ids))
    if distinct != len(ids):
        raise ProbeError(f"the replay heap's rows are not laid out in id order ({distinct} pages hold the "
                         f"{len(ids)} rows chosen on distinct pages)")
    return Layout(table_pages=have, filler_pages=filler_pages, rows_per_page=rows_per_page, ids=ids,
                  block_size=block)


async def current_lsn(conn: asyncpg.Connection) -> str:
    return str(await conn.fetchval("SELECT pg_current_wal_lsn()::text"))


async def wait_lsn(conn: asyncpg.Connection, lsn: str, *, timeout_s: float, received: bool = False,
                   interval_s: float = 0.01) -> float:
    """Wait until the standby over ``conn`` has replayed (``received``: received) WAL up to ``lsn``; the seconds it
    took. :class:`ProbeError` after ``timeout_s``."""
    what = "pg_last_wal_receive_lsn()" if received else "pg_last_wal_replay_lsn()"
    stmt = await conn.prepare(f"SELECT coalesce({what} >= $1::text::pg_lsn, false)")
    t0 = time.perf_counter()
    deadline = t0 + timeout_s
    while not await stmt.fetchval(lsn):
        if time.perf_counter() > deadline:
            raise ProbeError(f"the standby had not {'received' if received else 'replayed'} the primary's WAL up to "
                             f"{lsn} after {timeout_s:g} s")
        await asyncio.sleep(interval_s)
    return time.perf_counter() - t0


async def wait_caught_up(conn: asyncpg.Connection, lsn: str, *, stall_s: float, interval_s: float = 0.1) -> float:
    """Wait until the standby over ``conn`` has replayed WAL up to ``lsn``, for as long as its replay keeps
    advancing: a backlog — the WAL another family just wrote, this family's own scratch tables — takes as long as
    it takes on a loaded host, and only ``stall_s`` without progress fails (:class:`ProbeError`). The seconds it
    took."""
    stmt = await conn.prepare("SELECT pg_wal_lsn_diff($1::text::pg_lsn, "
                              "coalesce(pg_last_wal_replay_lsn(), '0/0'::pg_lsn))")

    async def behind() -> float:
        return float(await stmt.fetchval(lsn))

    try:
        return await until_caught_up(behind, stall_s=stall_s, interval_s=interval_s)
    except ProbeError as exc:
        raise ProbeError(f"the standby had not replayed the primary's WAL up to {lsn}: {exc}") from None


async def until_caught_up(behind: Callable[[], Awaitable[float]], *, stall_s: float, interval_s: float,
                          clock: Callable[[], float] = time.monotonic,
                          sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep) -> float:
    """Poll ``behind()`` (bytes still to replay) until it reaches 0; :class:`ProbeError` once it has not shrunk
    for ``stall_s``. The seconds it took."""
    t0 = clock()
    least, since = math.inf, t0
    while (left := await behind()) > 0:
        now = clock()
        if left < least:
            least, since = left, now
        elif now - since > stall_s:
            raise ProbeError(f"its replay did not advance for {stall_s:g} s, {left / 1e6:.1f} MB short")
        await sleep(interval_s)
    return clock() - t0


async def pause(conn: asyncpg.Connection, *, timeout_s: float) -> None:
    """Pause the standby's replay and wait until it is paused (not just asked to)."""
    await conn.execute("SELECT pg_wal_replay_pause()")
    deadline = time.monotonic() + timeout_s
    while await conn.fetchval("SELECT pg_get_wal_replay_pause_state()") != "paused":
        if time.monotonic() > deadline:
            raise ProbeError(f"the standby's replay was not paused {timeout_s:g} s after pg_wal_replay_pause()")
        await asyncio.sleep(0.01)


def startup_read_bytes(pid: int | None) -> int | None:
    """Bytes the process ``pid`` caused to be read from storage (``/proc/PID/io``), or None if that is not known."""
    if pid is None:
        return None
    try:
        for line in Path(f"/proc/{pid}/io").read_text().splitlines():
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


class ReplayProbe:
    """``await probe(config, phase=…, arm=…) -> Trial``: set ``maintenance_io_concurrency`` on the standby (journaled
    ALTER SYSTEM + reload), make the stream, and time the standby's cold catch-up. Value: milliseconds of replay."""

    def __init__(
        self, *, primary: Connector, standby: Connector, journal: Journal, layout: Layout, cache: CacheControl,
        standby_identity: dict[str, Any], standby_dsn: str | None, statement_timeout_s: float,
        catch_up_timeout_s: float, min_cold_read_fraction: float, family: str,
    ) -> None:
        self.family = family  # the family that runs it, named in each probe's log line
        self.primary, self.standby = primary, standby  # checked connections (the session's guards)
        self.journal = journal
        self.layout = layout
        self.cache = cache  # the OS page cache only: shared buffers are evicted by the filler
        self.standby_identity, self.standby_dsn = standby_identity, standby_dsn
        self.settings = {"statement_timeout": str(int(statement_timeout_s * 1000))}
        self.catch_up_timeout_s = catch_up_timeout_s
        self.min_cold_read_fraction = min_cold_read_fraction
        self.applied: int | None = None  # the value the standby's configuration has now

    async def _apply(self, s: asyncpg.Connection, value: int) -> None:
        if self.applied == value:
            return
        await self.journal.alter_system(s, KNOB, str(value), dsn=self.standby_dsn, standby=True,
                                        **self.standby_identity)
        await s.execute("SELECT pg_reload_conf()")
        self.applied = value

    async def __call__(
        self, config: dict[str, int], *, phase: Literal["search", "confirm"] = "search",
        arm: Literal["baseline", "candidate"] | None = None,
    ) -> Trial:
        started, t0 = datetime.now(UTC), time.monotonic()
        metrics: dict[str, float] = {}

        def trial(status: Literal["ok", "failed", "rejected"], value: float | None, reason: str | None,
                  ev: CacheEvidence | None = None) -> Trial:
            t = Trial(config=dict(config), value=value, status=status, phase=phase, arm=arm, cache=ev, reason=reason,
                      started_at=started, duration_s=round(time.monotonic() - t0, 3), metrics=dict(metrics))
            log.info("probe", family=self.family, phase=phase, arm=arm, config=config, status=status,
                     replay_ms=None if value is None else round(value, 1), mb_per_s=metrics.get("mb_per_s"),
                     pages_per_s=metrics.get("pages_per_s"), read_mb=metrics.get("read_mb"), reason=reason,
                     duration_s=t.duration_s)
            return t

        try:
            p = await self.primary(server_settings=self.settings)
            try:
                s = await self.standby(server_settings=self.settings)
                try:
                    await self._apply(s, int(config[KNOB]))
                    ev = await self._cycle(p, s, metrics)
                finally:
                    await _close(s)
            finally:
                await _close(p)
        except RefusedError:
            raise  # a server is no longer what the interlock cleared: the session stops
        except (TunerError, asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:
            return trial("failed", None, f"{type(exc).__name__}: {exc}")
        read = metrics.get("read_bytes")
        problem = wal_problem(metrics["wal_bytes"], self.layout.pages) or cold_problem(
            None if read is None else int(read), self.layout.pages, self.layout.block_size,
            self.min_cold_read_fraction)
        if problem:
            return trial("rejected", None, problem, ev)
        return trial("ok", metrics[METRIC], None, ev)

    async def _cycle(self, p: asyncpg.Connection, s: asyncpg.Connection, metrics: dict[str, float]) -> CacheEvidence:
        lay, timeout = self.layout, self.catch_up_timeout_s
        ids = list(lay.ids)
        await p.execute("CHECKPOINT")  # the pre-touch's changes carry full-page images; no checkpoint comes for minutes
        await p.execute(f"SELECT {TOUCH}($1::int[])", ids)
        await wait_lsn(s, await current_lsn(p), timeout_s=timeout)
        self.journal.replay_pause(dsn=self.standby_dsn, **self.standby_identity)  # journaled before the pause
        paused = True
        try:
            await pause(s, timeout_s=timeout)
            await s.execute("CHECKPOINT")  # a restartpoint: the pre-touch's pages are written, none is left dirty
            t_evict = time.perf_counter()
            async with s.transaction(readonly=True):
                for name in _EVICT_SETTINGS:
                    await s.execute(f"SET LOCAL {name} = off")
                await s.fetchval(sqlfiles.load(_SQL, "replay_evict"))
            metrics["evict_ms"] = round((time.perf_counter() - t_evict) * 1000, 1)
            start = await current_lsn(p)
            await p.execute(f"SELECT {TOUCH}($1::int[])", ids)  # the measured stream
            end = await current_lsn(p)
            await wait_lsn(s, end, timeout_s=timeout, received=True)
            await self.cache.make_cold()
            before = await s.fetchrow(sqlfiles.load(_SQL, "replay_counters"))
            assert before is not None
            read0 = startup_read_bytes(before["startup_pid"])
            resume = await s.prepare("SELECT pg_wal_replay_resume()")
            t1 = time.perf_counter()
            await resume.fetchval()
            paused = False
            await wait_lsn(s, end, timeout_s=timeout, interval_s=0.002)
            elapsed_s = time.perf_counter() - t1
        finally:
            if paused:
                await self._resume()
        after = await s.fetchrow(sqlfiles.load(_SQL, "replay_counters"))
        assert after is not None
        read1 = startup_read_bytes(after["startup_pid"]) if after["startup_pid"] == before["startup_pid"] else None
        wal_bytes = float(await s.fetchval("SELECT pg_wal_lsn_diff($1::text::pg_lsn, $2::text::pg_lsn)", end,
                                           before["replay_lsn"]))
        stream_bytes = float(await s.fetchval("SELECT pg_wal_lsn_diff($1::text::pg_lsn, $2::text::pg_lsn)", end, start))
        read_bytes = None if read0 is None or read1 is None else read1 - read0
        metrics.update({
            METRIC: round(elapsed_s * 1000, 2), "wal_bytes": stream_bytes, "wal_replayed_bytes": wal_bytes,
            "wal_mb": round(wal_bytes / 1e6, 3), "mb_per_s": round(wal_bytes / 1e6 / elapsed_s, 3),
            "pages_per_s": round(lay.pages / elapsed_s, 1),
            "prefetch": float(after["prefetch"] - before["prefetch"]), "prefetch_hit": float(after["hit"] - before["hit"]),
            "skip_fpw": float(after["skip_fpw"] - before["skip_fpw"]),
        })
        if read_bytes is not None:
            metrics.update(read_bytes=float(read_bytes), read_mb=round(read_bytes / 1e6, 3))
        blocks = None if read_bytes is None else read_bytes // lay.block_size
        heap_read = lay.pages if blocks is None else min(blocks, lay.pages)
        return CacheEvidence(shared_read=blocks or 0, shared_hit=int(metrics["prefetch_hit"]), heap_read=heap_read,
                             heap_hit=lay.pages - heap_read, io_read_time_ms=None,
                             method=f"{self.cache.os_method}; reads: " + ("unknown" if blocks is None else "/proc"))

    async def _resume(self) -> None:
        """Resume replay over a fresh connection (the probe's own may be mid-query after a cancellation). If that
        fails too, the journal's replay_pause entry resumes it when the family or the session puts things back."""
        try:
            s = await asyncio.shield(self.standby())
            try:
                await asyncio.shield(s.execute("SELECT pg_wal_replay_resume()"))
            finally:
                await _close(s)
        except Exception as exc:  # noqa: BLE001 - logged; the journal entry stays and resumes it later
            log.warning("replay.resume_failed", error=f"{type(exc).__name__}: {exc}",
                        detail="the journal's replay_pause entry resumes it when the session puts things back")


async def _close(conn: asyncpg.Connection) -> None:
    try:
        await asyncio.wait_for(conn.close(), timeout=5)
    except Exception:  # noqa: BLE001
        conn.terminate()
