"""Probe workloads for the concurrency family: bitmap heap scans over the target's largest relations, and from
PostgreSQL 17 a cold sequential scan of the largest table (read streams serve it: :func:`seq_scan_knobs`).

Queries are generated from catalog statistics (``pg_class`` sizes, ``pg_stats`` correlation and
histograms), so nothing is assumed about the schema:

* **range** — on an index column uncorrelated with the physical row order, a ``BETWEEN`` range sized so
  that the scan visits about ``pages_fraction`` of the heap, scattered: a sparse bitmap heap scan, the
  access pattern where prefetching (``effective_io_concurrency``) matters;
* **sample** — when every indexed column follows the physical order (a serial key), a deterministic
  pseudo-random sample of key values (``= ANY(…)``) with the same sparse footprint.

Your own queries can replace them ([workload] queries in tuner.toml); they should plan as bitmap
heap scans, since before PostgreSQL 18 ``effective_io_concurrency`` affects nothing else (no sequential scan is
added to them: they are the workload). Each may begin with ``SET`` statements of planner settings that apply to it
alone (:mod:`tuner.probes.own_queries`).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import asyncpg

from tuner.fs import sqlfiles
from tuner.errors import ProbeError
from tuner.probes import own_queries

_SQL = str(Path(__file__).parent)
UNCORRELATED = 0.3  # |correlation| below this counts as scattered
MIN_PAGES = 64


@dataclass(frozen=True)
class ProbeQuery:
    name: str
    sql: str
    relation: str | None
    kind: Literal["range", "sample", "custom", "seq", "statement"]
    # The plan the query must run as: generated queries switch the other scan types off, and a probe whose
    # plan has no such node is rejected. None: the planner decides (custom queries).
    plan: Literal["bitmap", "seq"] | None = "bitmap"
    weight: float = 1.0  # its share of the probe's value: sum of weight x execution time
    # A statement of pg_stat_statements (tuner.probes.statements): its fingerprint, its share of the read I/O of
    # every statement there (time where track_io_timing was on, else blocks), and its normalised text ($1, $2).
    queryid: int | None = None
    share: float | None = None
    text: str | None = None
    scans: tuple[str, ...] = ()  # a statement's: the plan nodes the read-path settings act on (Bitmap Heap Scan…)
    # Your own query's planner settings (SET name = value before it in [workload] queries): set right before it
    # runs and put back after it, so the next query does not inherit them (tuner.probes.own_queries).
    settings: tuple[tuple[str, str], ...] = ()

    @property
    def as_run(self) -> str:
        """The query as the probe runs it, its own SETs first (what the report shows)."""
        return own_queries.shown(self.settings, self.sql)


@dataclass(frozen=True)
class Candidate:
    relation: str
    relpages: int
    reltuples: float
    index: str
    column_sql: str
    column_type: str
    correlation: float | None
    histogram_bounds: tuple[float, ...]
    null_frac: float
    mcv_frac: float


def parse_bounds(text: str | None) -> tuple[float, ...]:
    if not text:
        return ()
    try:
        return tuple(float(x) for x in text.strip("{}").split(",") if x)
    except ValueError:
        return ()


def row_fraction_for_pages(pages_fraction: float, rows_per_page: float) -> float:
    """Share of rows to select at random so that about ``pages_fraction`` of the pages hold one or more."""
    rows_per_page = max(1.0, rows_per_page)
    return 1 - (1 - pages_fraction) ** (1 / rows_per_page)


def _literal(value: float, column_type: str) -> str:
    if column_type in ("smallint", "integer", "bigint"):
        return str(int(round(value)))
    return repr(float(value))


def range_query(c: Candidate, pages_fraction: float) -> ProbeQuery | None:
    """A BETWEEN range over the middle of the histogram that touches ~pages_fraction of the heap."""
    b = c.histogram_bounds
    if len(b) < 3 or c.relpages <= 0:
        return None
    rows_per_page = c.reltuples / c.relpages if c.reltuples > 0 else 1.0
    f = row_fraction_for_pages(pages_fraction, rows_per_page)
    buckets = len(b) - 1
    per_bucket = max(1e-9, (1 - c.null_frac - c.mcv_frac) / buckets)
    need = f / per_bucket  # buckets to span
    start = buckets // 2
    if start + need > buckets:
        start = max(0, int(buckets - math.ceil(need)))
    whole, frac = int(need), need - int(need)
    lo = b[start]
    end = min(buckets, start + whole)
    hi = b[end] if frac == 0 or end >= buckets else b[end] + (b[end + 1] - b[end]) * frac
    if hi <= lo:
        return None
    sql = (
        f"SELECT count(ctid) FROM {c.relation} "
        f"WHERE {c.column_sql} BETWEEN {_literal(lo, c.column_type)} AND {_literal(hi, c.column_type)}"
    )
    return _bitmap_query(c, "range", sql)


def sample_query(c: Candidate, pages_fraction: float) -> ProbeQuery | None:
    """A deterministic, sparse sample of key values on an ordered key (e.g. a serial primary key)."""
    b = c.histogram_bounds
    if len(b) < 2 or c.column_type not in ("smallint", "integer", "bigint"):
        return None
    lo, hi = int(b[0]), int(b[-1])
    span = hi - lo + 1
    if span <= 1:
        return None
    n = max(1, int(round(-c.relpages * math.log(1 - min(pages_fraction, 0.95)))))
    sql = (
        f"SELECT count(ctid) FROM {c.relation} WHERE {c.column_sql} = ANY (ARRAY("
        f"SELECT {lo} + (hashint8(g) & 9223372036854775807) % {span} FROM generate_series(1, {n}) AS g))"
    )
    return _bitmap_query(c, "sample", sql)


def _bitmap_query(c: Candidate, kind: Literal["range", "sample"], sql: str) -> ProbeQuery:
    return ProbeQuery(name=f"{c.relation}.{c.column_sql} {kind}", sql=sql, relation=c.relation, kind=kind)


async def candidates(conn: asyncpg.Connection, min_pages: int = MIN_PAGES) -> list[Candidate]:
    rows = await conn.fetch(sqlfiles.load(_SQL, "bitmap_candidates"), min_pages)
    return [
        Candidate(
            relation=r["relation"],
            relpages=r["relpages"],
            reltuples=r["reltuples"],
            index=r["index"],
            column_sql=r["column_sql"],
            column_type=r["column_type"],
            correlation=r["correlation"],
            histogram_bounds=parse_bounds(r["histogram_bounds"]),
            null_frac=r["null_frac"],
            mcv_frac=r["mcv_frac"],
        )
        for r in rows
    ]


def choose(cands: list[Candidate], *, relations: int, pages_fraction: float) -> list[ProbeQuery]:
    """One query for each of the ``relations`` largest relations: a range scan if an uncorrelated
    indexed column exists, else a sample on an ordered key. Pure, so it is tested without a server."""
    by_rel: dict[str, list[Candidate]] = {}
    for c in cands:
        by_rel.setdefault(c.relation, []).append(c)
    out: list[ProbeQuery] = []
    for rel in sorted(by_rel, key=lambda r: -by_rel[r][0].relpages):
        options = by_rel[rel]
        scattered = [c for c in options if c.correlation is not None and abs(c.correlation) < UNCORRELATED]
        query = None
        for c in scattered:
            query = range_query(c, pages_fraction)
            if query:
                break
        if query is None:
            for c in options:
                query = sample_query(c, pages_fraction)
                if query:
                    break
        if query is not None:
            out.append(query)
        if len(out) >= relations:
            break
    return out


async def plan(
    conn: asyncpg.Connection, *, custom: tuple[str, ...], relations: int, pages_fraction: float
) -> list[ProbeQuery]:
    """The probe queries for this target, or a :class:`ProbeError` that says why there are none."""
    if custom:
        own = [own_queries.parse(q, i + 1) for i, q in enumerate(custom)]  # checked when the config was loaded
        return [
            ProbeQuery(name=f"custom query {i + 1}", sql=q.sql, relation=None, kind="custom", plan=None,
                       settings=q.settings)
            for i, q in enumerate(own)
        ]
    queries = choose(await candidates(conn), relations=relations, pages_fraction=pages_fraction)
    if not queries:
        raise ProbeError(
            f"found no table of at least {MIN_PAGES} pages with an analysed btree index on a numeric column "
            "to drive bitmap heap scans",
            hint="run ANALYZE on the primary, or give your own queries in [workload] queries",
        )
    return queries


# Where read streams serve sequential scans, by the first version each knob acts on them: 17 combines their reads
# up to io_combine_limit (postgres commit b7b0f3f272, sequential scans on the read stream API) but read_stream.c
# gives no advice for a sequential stream, so effective_io_concurrency changes nothing there; 18's asynchronous
# I/O keeps up to effective_io_concurrency reads of io_combine_limit blocks in flight (PostgreSQL 18 docs,
# effective_io_concurrency: it "also controls the prefetch distance").
_SEQ_SCAN_FROM = {"io_combine_limit": 170000, "effective_io_concurrency": 180000}


def seq_scan_knobs(server_version_num: int, knobs: Iterable[str]) -> list[str]:
    """Those of ``knobs`` that act on a sequential scan on this server version (none up to 16)."""
    return [k for k in knobs if server_version_num >= _SEQ_SCAN_FROM.get(k, 10**9)]


async def largest_table(conn: asyncpg.Connection, *, skip_tablespaces: Iterable[str] = ()) -> tuple[str, int] | None:
    """The largest table of at least ``MIN_PAGES`` pages (name, pages) outside ``skip_tablespaces``, or None."""
    skip = set(skip_tablespaces)
    for r in await conn.fetch(sqlfiles.load(_SQL, "relations_by_tablespace"), MIN_PAGES):
        if r["tablespace"] not in skip:
            return str(r["relation"]), int(r["relpages"])
    return None


def seq_query(relation: str) -> ProbeQuery:
    """A full sequential scan of ``relation``: the access pattern kernel readahead serves."""
    return ProbeQuery(
        name=f"{relation} seq scan", sql=f"SELECT count(*) FROM {relation}", relation=relation, kind="seq", plan="seq",
    )


async def relation_files(conn: asyncpg.Connection, data_dir: Path, relation: str) -> list[Path]:
    """Every segment file of a relation and its indexes (for posix_fadvise eviction)."""
    out: list[Path] = []
    for r in await conn.fetch(sqlfiles.load(_SQL, "relation_files"), relation):
        first = data_dir / r["path"]
        segments = [p for p in first.parent.glob(first.name + ".*") if p.name[len(first.name) + 1 :].isdigit()]
        out.append(first)
        out.extend(sorted(segments, key=lambda p: int(p.name.rsplit(".", 1)[1])))
    return out


@contextlib.asynccontextmanager
async def own_settings(conn: asyncpg.Connection, query: ProbeQuery) -> AsyncIterator[None]:
    """``query``'s own planner settings in force for the block, then each put back as it was before (the probe's
    own ``jit = off`` included), so the next query plans without them. Not put back when the block fails: its
    transaction is then aborted and the session is closed."""
    before = [(name, str(await conn.fetchval(sqlfiles.load(_SQL, "setting_get"), name)))
              for name, _ in query.settings]
    for name, value in query.settings:
        await conn.execute(sqlfiles.load(_SQL, "setting_set"), name, value)
    yield
    for name, value in reversed(before):
        await conn.execute(sqlfiles.load(_SQL, "setting_set"), name, value)
