"""The operator's own workload (``[workload] from = "pg_stat_statements"``): the statements that read the most,
made replayable, as the read path's probe queries.

1. **Rank.** ``pg_stat_statements`` of the target's database (on the target, or on ``stats_dsn``: a primary read
   read-only) is ranked by the read I/O each statement cost: ``shared_blk_read_time`` (17+; ``blk_read_time``
   before) where ``track_io_timing`` was on, else ``shared_blks_read``. A statement's **share** is its part of the
   read I/O of every statement of the database.
2. **Keep.** From the top, a statement is kept if it only reads (PostgreSQL's parser says so: a SELECT without
   FOR UPDATE/SHARE, no data-modifying WITH), read something, and can be replayed faithfully: its parameters are
   filled from the statistics of the column each is compared to (:mod:`tuner.probes.normalised`), typed as the
   server infers them (``PREPARE``; by their column where it cannot), and the filled statement must plan with the
   scans the read-path settings act on — a bitmap heap scan, from 17 a sequential scan (read streams:
   :func:`tuner.probes.workload.seq_scan_knobs`) — the same ones as the statement's generic plan on 16+
   (``EXPLAIN (GENERIC_PLAN)``; where that plan has none of them, the replay must touch the original's blocks
   per call within :data:`BLOCKS_FACTOR`), and finish once, read-only, within the statement timeout. Up to
   ``statements`` of them, until they cover ``share`` of the read I/O.
3. **Weigh.** Each kept statement's weight is its share over the kept ones' shares: the probe's value is the
   weighted sum of their cold times, the objective every read-path family searches.

Every statement not kept (and not a utility statement or one of the system catalogs') is a :class:`LeftOut` with
one sentence saying why. Nothing is written: ``PREPARE`` lives in this session only, every run is read-only.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import asyncpg

from tuner import redact
from tuner.errors import ProbeError
from tuner.fs import sqlfiles
from tuner.probes import explain, normalised, workload
from tuner.probes.normalised import ColumnStats, Shape
from tuner.target.connection import connect

_SQL = str(Path(__file__).parent)
EXAMINED = 100  # statements read from the top of the ranking: the rest read less than all of these
GENERIC_PLAN = 160000  # EXPLAIN (GENERIC_PLAN): PostgreSQL 16 release notes
_CATALOGS = ("pg_catalog", "information_schema")
_PREPARED = "tuner_statement"
NOT_INSTALLED_HINT = ("add pg_stat_statements to shared_preload_libraries on the primary and the standby (a "
                      "restart), run CREATE EXTENSION pg_stat_statements on the primary (it replicates), and turn "
                      "track_io_timing on")


@dataclass(frozen=True)
class Statement:
    """One row of ``pg_stat_statements`` (summed over its users); ``queryid`` None: hidden from this role."""

    queryid: int | None
    text: str
    calls: int
    blocks_read: int
    read_time_ms: float
    blocks_hit: int = 0

    @property
    def blocks_per_call(self) -> float:
        """Shared blocks one call touched on average (read or found in shared buffers)."""
        return (self.blocks_read + self.blocks_hit) / self.calls if self.calls else 0.0


@dataclass(frozen=True)
class Ranked:
    statement: Statement
    share: float  # of the read I/O of every statement of the database


@dataclass(frozen=True)
class LeftOut:
    """A statement that is not replayed, and why (one sentence)."""

    queryid: int
    text: str
    reason: str
    share: float


@dataclass(frozen=True)
class Selection:
    """What ``[workload] from = "pg_stat_statements"`` probes: ``queries`` in rank order (their ``weight`` sums to
    1), what was ``left_out``, and how the ranking was made."""

    queries: list[workload.ProbeQuery]
    left_out: list[LeftOut]
    by_time: bool  # ranked by read time (track_io_timing was on), else by blocks read
    read_from: str  # where pg_stat_statements was read: "the target", or the redacted stats_dsn
    covered: float = 0.0  # the kept statements' share of the read I/O
    notes: list[str] = field(default_factory=list)
    ranking: list[Ranked] = field(default_factory=list)  # every statement examined, most read I/O first


def rank(rows: list[Statement], *, total_blocks: int, total_time_ms: float) -> tuple[list[Ranked], bool]:
    """``rows`` ranked by read time where any was measured (track_io_timing on), else by blocks read, each with its
    share of the database's totals; and whether time was the measure."""
    by_time = total_time_ms > 0
    total = total_time_ms if by_time else float(total_blocks)

    def cost(s: Statement) -> float:
        return s.read_time_ms if by_time else float(s.blocks_read)

    ordered = sorted(rows, key=lambda s: (-cost(s), -s.blocks_read, -s.calls))
    return [Ranked(s, cost(s) / total if total > 0 else 0.0) for s in ordered], by_time


def budget_spent(kept: int, covered: float, *, statements: int, share: float) -> str | None:
    """Why no further statement is kept — the budget's count reached, or the share covered — else None."""
    if kept >= statements:
        return f"beyond the budget of {statements} statement{'s' if statements != 1 else ''} ([workload] statements)"
    if covered >= share:
        return f"the kept statements already cover {covered:.0%} of the read I/O ([workload] share = {share:g})"
    return None


def weights(queries: list[workload.ProbeQuery]) -> list[workload.ProbeQuery]:
    """Each query weighted by its share over the kept queries' shares (the weights sum to 1)."""
    total = sum(q.share or 0.0 for q in queries)
    return [replace(q, weight=(q.share or 0.0) / total if total > 0 else 1.0 / len(queries)) for q in queries]


# How far a replay's blocks may be from the original's per call (either way) when the generic plan cannot vouch for
# its shape (it has none of the read-path scans: a range at the planner's default selectivity plans as an index scan).
BLOCKS_FACTOR = 4.0


def alike(replayed_blocks: int, per_call: float, factor: float = BLOCKS_FACTOR) -> bool:
    """Whether a replay touching ``replayed_blocks`` is the original's size, which touched ``per_call`` on average."""
    if per_call <= 0:
        return replayed_blocks == 0
    return per_call / factor <= replayed_blocks <= per_call * factor


def read_path_nodes(server_version_num: int) -> frozenset[str]:
    """The plan nodes the read-path settings act on, on this version: bitmap heap scans, and sequential scans where
    read streams serve them (17+)."""
    seq = workload.seq_scan_knobs(server_version_num, ("io_combine_limit", "effective_io_concurrency"))
    return frozenset({"Bitmap Heap Scan", *(("Seq Scan",) if seq else ())})


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _nodes(plan: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    out = [plan]
    for child in plan.get("Plans", ()):
        out.extend(_nodes(child))
    return out


def scans(doc: Any, wanted: frozenset[str]) -> list[tuple[str, str]]:
    """The (node type, "schema"."relation") of each scan in an EXPLAIN (VERBOSE, FORMAT JSON) document that the
    read-path settings act on (``wanted``), system catalogs left out; with BUFFERS, the one that touched the most
    blocks first (the relation a probe's cache control empties)."""
    if isinstance(doc, str):
        doc = json.loads(doc)
    if isinstance(doc, list):
        doc = doc[0]
    nodes = [n for n in _nodes(doc["Plan"])
             if n.get("Node Type") in wanted and "Relation Name" in n and n.get("Schema") not in _CATALOGS]
    nodes.sort(key=lambda n: -(int(n.get("Shared Read Blocks", 0)) + int(n.get("Shared Hit Blocks", 0))))
    return [(str(n["Node Type"]), f"{_ident(str(n.get('Schema', 'public')))}.{_ident(str(n['Relation Name']))}")
            for n in nodes]


async def _read(conn: asyncpg.Connection, database: str) -> tuple[list[Statement], int, float]:
    ext = await conn.fetchrow(sqlfiles.load(_SQL, "statements_extension"))
    if ext is None:
        raise ProbeError(f"pg_stat_statements is not installed in database {database}", hint=NOT_INSTALLED_HINT)
    try:
        rows = await conn.fetch(sqlfiles.load(_SQL, "statements_top").format(schema=_ident(ext["schema"])),
                                database, EXAMINED)
    except asyncpg.ObjectNotInPrerequisiteStateError:
        raise ProbeError("pg_stat_statements is installed but not loaded: it is not in shared_preload_libraries "
                         "of the server read", hint=NOT_INSTALLED_HINT) from None
    except asyncpg.InsufficientPrivilegeError as exc:
        raise ProbeError(f"cannot read pg_stat_statements: {exc}",
                         hint="GRANT pg_read_all_stats TO the role tuner connects as") from None
    if not rows:
        return [], 0, 0.0
    stmts = [Statement(r["queryid"], r["query"] or "", int(r["calls"]), int(r["blocks_read"] or 0),
                       float(r["read_time_ms"] or 0.0), int(r["blocks_hit"] or 0)) for r in rows]
    return stmts, int(rows[0]["total_blocks_read"] or 0), float(rows[0]["total_read_time_ms"] or 0.0)


async def read_ranking(conn: asyncpg.Connection, cfg: Any, *, connect_timeout_s: float = 10.0
                       ) -> tuple[list[Ranked], bool, str]:
    """The target database's statements ranked (:func:`rank`), whether by time, and where they were read: on the
    target (``conn``), or on ``cfg.stats_dsn`` (a read-only session)."""
    database = str(await conn.fetchval("SELECT current_database()"))
    if cfg.stats_dsn:
        other = await connect(cfg.stats_dsn, timeout_s=connect_timeout_s,
                              server_settings={"default_transaction_read_only": "on"})
        try:
            rows, blocks, time_ms = await _read(other, database)
        finally:
            await other.close()
        where = redact.dsn(cfg.stats_dsn)
    else:
        rows, blocks, time_ms = await _read(conn, database)
        where = "the target"
    ranked, by_time = rank(rows, total_blocks=blocks, total_time_ms=time_ms)
    return ranked, by_time, where


class _Replay:
    """Makes one normalised statement replayable on the target, or says why it cannot be."""

    def __init__(self, conn: asyncpg.Connection, server_version_num: int, timeout_s: float) -> None:
        self.conn, self.version, self.timeout_s = conn, server_version_num, timeout_s
        self.wanted = read_path_nodes(server_version_num)

    async def _column(self, use: normalised.ParamUse, shape: Shape) -> ColumnStats | None:
        for table in normalised.table_of(use, shape.tables):
            row = await self.conn.fetchrow(sqlfiles.load(_SQL, "statements_column"), table.qualified(), use.column)
            if row is not None:
                return ColumnStats(tuple(row["bounds"] or ()), tuple(row["common"] or ()), str(row["type"]))
        return None

    async def _types(self, text: str) -> list[str] | None:
        """The parameter types the server infers for ``text`` (None where it cannot)."""
        try:
            await self.conn.execute(f"PREPARE {_PREPARED} AS {text}")
        except asyncpg.IndeterminateDatatypeError:
            return None
        try:
            types = await self.conn.fetchval(sqlfiles.load(_SQL, "statements_parameter_types"), _PREPARED)
        finally:
            await self.conn.execute(f"DEALLOCATE {_PREPARED}")
        return list(types or [])

    async def _explain(self, options: str, sql: str, params: int = 0) -> Any:
        # A generic plan's $n are the extended protocol's parameters too: bound as NULLs, which it does not read.
        raw = await self.conn.fetchval(f"EXPLAIN ({options}, VERBOSE, FORMAT JSON) {sql}", *([None] * params))
        return json.loads(raw) if isinstance(raw, str) else raw

    async def __call__(self, text: str, shape: Shape, per_call: float) -> tuple[str, list[tuple[str, str]]] | str:
        """The filled statement and its read-path scans, or one sentence saying why it cannot be replayed
        (``per_call``: the shared blocks one call of the original touched on average)."""
        try:
            types = await self._types(text)
        except asyncpg.PostgresError as exc:
            return f"does not plan on the target ({_first_line(exc)})"
        stats: dict[int, ColumnStats] = {}
        for n in shape.params:
            use = shape.uses.get(n)
            col = await self._column(use, shape) if use is not None else None
            if col is None:
                return f"parameter ${n} could not be filled: it is not compared to a column of a table"
            stats[n] = col
        generic: set[str] | None = None
        if self.version >= GENERIC_PLAN and shape.params:
            try:
                generic = {kind for kind, _ in scans(await self._explain("GENERIC_PLAN", text, max(shape.params)),
                                                      self.wanted)}
            except asyncpg.PostgresError as exc:
                return f"its generic plan could not be made ({_first_line(exc)})"
        found: list[tuple[str, str]] = []
        for span in normalised.SPANS:
            literals: dict[int, str] = {}
            for n in shape.params:
                use = shape.uses[n]
                value = normalised.value_for(use, stats[n], span)
                if value is None:
                    return f"parameter ${n} could not be filled: {use.column} has no statistics (ANALYZE on the primary)"
                base = stats[n].type
                typ = types[n - 1] if types and n - 1 < len(types) and types[n - 1] != "unknown" else (
                    base + "[]" if use.use == "any" else base)
                literals[n] = normalised.literal(value, typ)
            sql = normalised.fill(text, literals)
            try:
                found = scans(await self._explain("COSTS OFF", sql), self.wanted)
            except asyncpg.PostgresError as exc:
                return f"parameter values from the statistics do not fit it ({_first_line(exc)})"
            kinds = {kind for kind, _ in found}
            if kinds and (not generic or kinds == generic):
                break
        else:
            if not found:
                return "its plan has no scan the read-path settings act on (" + " or ".join(sorted(self.wanted)) + ")"
            return (f"plans differently once filled ({', '.join(sorted({k for k, _ in found}))} against its generic "
                    f"plan's {', '.join(sorted(generic or ()))})")
        run = await self._run(sql)
        if isinstance(run, str):
            return run
        ran, found = run
        if generic is not None and not generic and not alike(ran, per_call):
            # Its generic plan has none of the scans (a range at the default selectivity plans as an index scan), so
            # the filled statement's size is what says it is the statement that ran.
            return (f"plans differently once filled: it touches {ran} blocks against {per_call:.0f} per call of "
                    "the original, and its generic plan has no scan the read-path settings act on")
        return sql, found

    async def _run(self, sql: str) -> tuple[int, list[tuple[str, str]]] | str:
        """The shared blocks one read-only run of the filled statement touched, within the statement timeout, and
        its read-path scans, the one that touched the most blocks first."""
        try:
            async with self.conn.transaction(readonly=True):
                await self.conn.execute(f"SET LOCAL statement_timeout = {int(self.timeout_s * 1000)}")
                raw = await self.conn.fetchval(f"EXPLAIN (ANALYZE, BUFFERS, VERBOSE, FORMAT JSON) {sql}")
        except (asyncpg.QueryCanceledError, asyncio.TimeoutError):
            return f"too slow for the statement timeout ({self.timeout_s:g} s)"
        except asyncpg.PostgresError as exc:
            return f"fails when replayed read-only ({_first_line(exc)})"
        doc = json.loads(raw) if isinstance(raw, str) else raw
        res = explain.parse(doc)
        return res.shared_read + res.shared_hit, scans(doc, self.wanted)


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _catalog_only(shape: Shape) -> bool:
    return bool(shape.tables) and all(t.schema in _CATALOGS or (t.schema is None and t.name.startswith("pg_"))
                                      for t in shape.tables)


async def select(conn: asyncpg.Connection, cfg: Any, *, server_version_num: int, statement_timeout_s: float,
                 connect_timeout_s: float = 10.0) -> Selection:
    """The statements to replay (``cfg``: the ``[workload]`` table) and those left out, from ``conn`` — a
    connection to the target, where every replay is checked read-only. A :class:`ProbeError` when
    pg_stat_statements cannot be read."""
    ranked, by_time, where = await read_ranking(conn, cfg, connect_timeout_s=connect_timeout_s)
    replay = _Replay(conn, server_version_num, statement_timeout_s)
    kept: list[workload.ProbeQuery] = []
    left: list[LeftOut] = []
    covered = 0.0
    skipped = 0
    for r in ranked:
        s = r.statement
        if s.queryid is None:
            left.append(LeftOut(0, s.text, "its text is hidden from this role (grant it pg_read_all_stats)", r.share))
            continue
        shape = normalised.analyse(s.text)
        if shape.utility or _catalog_only(shape):
            skipped += 1
            continue
        reason: str | None = shape.refusal
        if reason is None and s.blocks_read == 0 and s.read_time_ms == 0:
            reason = "no read I/O: its blocks came from shared buffers"
        if reason is None:
            reason = budget_spent(len(kept), covered, statements=cfg.statements, share=cfg.share)
        if reason is None:
            done = await replay(s.text, shape, s.blocks_per_call)
            if isinstance(done, str):
                reason = done
            else:
                sql, found = done
                # The relation its most-read scan reads: the one a probe's cache control empties (found by the run,
                # so never empty; a join's other tables are not evicted on 17+, which the cold check then sees).
                main = await _regclass(conn, found[0][1]) if found else None
                kept.append(workload.ProbeQuery(
                    name=f"q{s.queryid}", sql=sql, relation=main, kind="statement", plan=None, queryid=s.queryid,
                    share=r.share, text=s.text, scans=tuple(sorted({k for k, _ in found}))))
                covered += r.share
                continue
        left.append(LeftOut(s.queryid, s.text, reason, r.share))
    notes = [f"{skipped} utility or system-catalog statement(s) not considered"] if skipped else []
    return Selection(queries=weights(kept) if kept else [], left_out=left, by_time=by_time, read_from=where,
                     covered=covered, notes=notes, ranking=ranked)


async def _regclass(conn: asyncpg.Connection, qualified: str) -> str | None:
    """The relation as ``regclass::text`` names it (as the workload's other queries name theirs)."""
    value = await conn.fetchval("SELECT to_regclass($1)::text", qualified)
    return None if value is None else str(value)


async def plan(conn: asyncpg.Connection, cfg: Any, *, server_version_num: int, statement_timeout_s: float,
               connect_timeout_s: float = 10.0) -> Selection:
    """:func:`select`, or a :class:`ProbeError` that says why no statement can be replayed."""
    sel = await select(conn, cfg, server_version_num=server_version_num, statement_timeout_s=statement_timeout_s,
                       connect_timeout_s=connect_timeout_s)
    if not sel.queries:
        why = "; ".join(sorted({lo.reason for lo in sel.left_out})[:3]) or "it holds no statement of this database"
        raise ProbeError(f"no statement of pg_stat_statements can be replayed ({why})",
                         hint="tuner workload show lists each statement and why it is left out")
    return sel
