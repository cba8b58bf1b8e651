"""What each family would do on a target, found the way its ``run`` finds it but changing nothing: the
families' ``preflight`` hooks, which ``tuner check`` (:mod:`tuner.session.check`) calls for every family that would
run. Each reuses the family's own planning code (the workload plan, the OS cache method, the asynchronous-I/O
screening, the device discovery), so a check cannot say yes where a session would say no."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

from tuner.errors import ProbeError
from tuner.families import aio
from tuner.families.base import FamilyContext
from tuner.hostfacts.blockdev import discover, postgres_paths
from tuner.log import get_logger
from tuner.report.model import StatementOut
from tuner.report.preflight import Check, FamilyPlan
from tuner.report.text import shortened
from tuner.probes import statements, workload
from tuner.probes.cache import choose_os_method

log = get_logger("tuner.plans")
# A check must not hold a staging server for long: one warm run of the workload, at most this long.
TIMED_RUN_MAX_S = 60.0
NO_OS_METHOD = "cannot empty the OS page cache: run tuner as root, or as a user who can read the relation files"
SeqScan = Callable[[Any, FamilyContext, list[workload.ProbeQuery]], Awaitable[list[workload.ProbeQuery]]]


def statement_lines(queries: list[workload.ProbeQuery]) -> list[StatementOut]:
    """The workload's queries as the report names them (once each, by name): what a family's per-query lines are
    about (``FamilyOutcome.statements``)."""
    seen: dict[str, StatementOut] = {}
    for q in queries:
        seen.setdefault(q.name, StatementOut(name=q.name, queryid=q.queryid, text=shortened(q.text or q.as_run),
                                             share=q.share, weight=q.weight))
    return list(seen.values())


async def timed_run(conn: asyncpg.Connection, queries: list[workload.ProbeQuery], timeout_s: float) -> float | None:
    """Seconds one run of ``queries`` takes, in a read-only transaction (warm: nothing is evicted first); None when
    it does not finish within ``timeout_s``; a :class:`ProbeError` naming the query the server refused (your own
    query's error, or a value of its SETs out of range), which every probe of a session would meet too."""
    try:
        async with conn.transaction(readonly=True):
            await conn.execute(f"SET LOCAL statement_timeout = {int(timeout_s * 1000)}")
            t0 = time.monotonic()
            for q in queries:
                try:
                    async with workload.own_settings(conn, q):
                        await conn.fetch(q.sql)
                except asyncpg.QueryCanceledError:
                    raise
                except asyncpg.PostgresError as exc:
                    raise ProbeError(f"{q.name} fails on the target: {str(exc).splitlines()[0]}",
                                     hint="run it by hand (SETs and all) in psql on the target") from None
            return round(time.monotonic() - t0, 3)
    except (asyncpg.QueryCanceledError, asyncio.TimeoutError):
        return None


async def read_path_queries(ctx: FamilyContext, conn: asyncpg.Connection) -> list[workload.ProbeQuery]:
    """The read path's probe queries, as ``[workload]`` says: the statements of pg_stat_statements (chosen once per
    session and kept in ``ctx.selection``, left-out ones with them), your own queries, or generated scans; a
    :class:`ProbeError` says why there are none."""
    w = ctx.cfg.workload
    if w.queries_from == "pg_stat_statements":
        if ctx.selection is None:
            ctx.selection = await statements.plan(
                conn, w, server_version_num=ctx.facts.server_version_num,
                statement_timeout_s=ctx.policy.guardrails.statement_timeout_s,
                connect_timeout_s=ctx.cfg.target.connect_timeout_s)
            sel = ctx.selection
            log.info("workload.statements", read_from=sel.read_from, covered=round(sel.covered, 3),
                     replayed=[f"{q.name} (share {q.share:.3f}, weight {q.weight:.3f})" for q in sel.queries],
                     left_out=[f"q{lo.queryid}: {lo.reason}" for lo in sel.left_out])
        return list(ctx.selection.queries)
    queries = await workload.plan(conn, custom=w.queries, relations=w.relations, pages_fraction=w.pages_fraction)
    if w.queries:
        queries = [await _with_scans(conn, q, ctx.facts.server_version_num) for q in queries]
    return queries


async def _with_scans(conn: asyncpg.Connection, q: workload.ProbeQuery, server_version_num: int) -> workload.ProbeQuery:
    """Your query with what its plan says (EXPLAIN, its own SETs in force, nothing run): the scans the read-path
    settings act on and the relation of the first — so the readahead family probes it on the device that relation
    lives on, and a probe empties that relation's pages from the cache, as for a replayed statement."""
    try:
        async with workload.own_settings(conn, q):
            doc = await conn.fetchval(f"EXPLAIN (VERBOSE, FORMAT JSON) {q.sql}")
    except asyncpg.PostgresError as exc:
        # Left as it is: the probe (or tuner check's timed run) reports the server's refusal in its own words.
        log.warning("workload.explain_failed", query=q.name, error=str(exc).splitlines()[0])
        return q
    found = statements.scans(doc, statements.read_path_nodes(server_version_num))
    if not found:
        return q
    relation = await conn.fetchval("SELECT to_regclass($1)::text", found[0][1])
    return replace(q, relation=None if relation is None else str(relation), scans=tuple(sorted({k for k, _ in found})))


def own_workload(ctx: FamilyContext) -> bool:
    """Whether the operator's queries are the workload as they are (nothing generated is added to them)."""
    return bool(ctx.cfg.workload.queries) or ctx.cfg.workload.queries_from == "pg_stat_statements"


async def scans(ctx: FamilyContext, name: str, with_seq_scan: SeqScan | None) -> FamilyPlan:
    """A family that probes cold scans on the target: its workload (with a sequential scan where ``with_seq_scan``
    adds one, 17+), how the OS page cache is emptied for its files, and (17+) which asynchronous-I/O settings it
    would search or screen, and why not the others."""
    facts, local = ctx.facts, ctx.facts.local_data_directory()
    async with ctx.connection() as conn:
        try:
            queries = await read_path_queries(ctx, conn)
        except ProbeError as exc:
            return FamilyPlan(family=name, runs=False, reason=f"{exc} ({exc.hint})" if exc.hint else str(exc))
        io: dict[str, dict[str, Any]] = {}
        if with_seq_scan is not None:
            io = await aio.io_settings(conn)
            queries = await with_seq_scan(conn, ctx, queries)
        files = [f for q in queries if q.relation and local
                 for f in await workload.relation_files(conn, local, q.relation)]
        sql = [q.as_run for q in queries]
        try:
            probe_s = await timed_run(conn, queries, min(ctx.policy.guardrails.statement_timeout_s, TIMED_RUN_MAX_S))
        except ProbeError as exc:
            return FamilyPlan(family=name, runs=False, reason=f"{exc} ({exc.hint})", workload=sql)
    os_method = choose_os_method(local, files)
    if os_method == "none":
        return FamilyPlan(family=name, runs=False, reason=NO_OS_METHOD, workload=sql)
    checks = [Check(name="OS page cache", status="ok",
                    detail=f"emptied before each probe with {os_method} ({len(files)} relation files)")]
    if probe_s is None:
        checks.append(Check(name="timed run", status="warn", detail=f"one run of the workload took longer than "
                            f"{min(ctx.policy.guardrails.statement_timeout_s, TIMED_RUN_MAX_S):g} s"))
    if io:
        notes: list[str] = []
        refusal = aio.alter_system_refusal(ctx)
        workers = aio.workers_dimension(ctx, io, refusal, notes)
        methods = aio.method_alternatives(ctx, io, refusal, notes)
        if workers is not None:
            checks.append(Check(name=f"{workers.name} (18+)", status="ok",
                                detail=f"searched in {workers.low}..{workers.high} (ALTER SYSTEM + reload, journaled)"))
        if methods:
            checks.append(Check(name=f"{aio.METHOD} (18+)", status="ok",
                                detail=f"screened: {', '.join(methods)} against today's {io[aio.METHOD]['setting']}"))
        checks += [Check(name="asynchronous I/O", status="skip", detail=n) for n in notes]
    return FamilyPlan(family=name, runs=True, reason=f"{len(queries)} cold-cache "
                      f"{'query' if len(queries) == 1 else 'queries'} per probe", workload=sql,
                      checks=checks, probe_s=probe_s)


def devices(ctx: FamilyContext, name: str) -> FamilyPlan:
    """A family that writes each device's readahead: the devices under the target's directories, and whether
    tuner may write each one's ``read_ahead_kb`` (the journal's own writer decides, as in a session)."""
    facts, cfg = ctx.facts, ctx.cfg
    local = facts.local_data_directory()
    assert local is not None  # the family needs the local host: why_skipped checked it
    groups, untunable = discover(postgres_paths(local, {ts.name: ts.location for ts in facts.tablespaces}))
    checks = [Check(name=p.role, status="skip", detail=p.reason or "no block device") for p in untunable]
    if ctx.sandbox and not cfg.readahead.devices:
        groups = [g for g in groups if g.device.node in ctx.own_devices]
    if cfg.readahead.devices:
        wanted = {d if d.startswith("/dev/") else f"/dev/{d}" for d in cfg.readahead.devices}
        groups = [g for g in groups if g.device.node in wanted]
    writable = 0
    for g in groups:
        path = g.device.read_ahead_path
        if ctx.journal.writer.can_write(path):
            writable += 1
            how = "through [readahead] helper_command" if ctx.journal.writer.helper_command else "as this user"
            checks.append(Check(name=g.device.node, status="ok", detail=f"{', '.join(g.roles)}: read_ahead_kb = "
                                f"{g.device.read_ahead_kb()} today; writable {how} (journaled, put back)"))
        else:
            checks.append(Check(name=g.device.node, status="skip", detail=f"cannot write {path}",
                                fix="run tuner as root, or set [readahead] helper_command"))
    if not writable:
        return FamilyPlan(family=name, runs=False, reason="no tunable block device tuner may write under the "
                          "target's directories", checks=checks)
    return FamilyPlan(family=name, runs=True, reason=f"{writable} device(s): a cold sequential scan of the largest "
                      "table on each (with a sparse bitmap heap scan where one exists), fresh connections",
                      checks=checks)


def load(name: str, what: str, probe_s: float | None = None) -> FamilyPlan:
    """A family that generates its own load (``what``, one sentence), whose probes last ``probe_s`` by its policy
    (None: not known without running it)."""
    how_long = f", {probe_s:g} s per probe by the policy" if probe_s is not None else ""
    return FamilyPlan(family=name, runs=True, reason=f"generates its own load{how_long}", workload=[what],
                      probe_s=probe_s, cold=False)
